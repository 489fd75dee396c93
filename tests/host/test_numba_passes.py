"""asyncpipe.backend.numba_liveness, numba_lowering and numba_ssa: numba-cuda's live-variable map, its
singly-assigned variables and its SSA reconstruction, computed in linear time, equal to numba-cuda's own: on
random control-flow graphs (loops, nests, unreachable blocks) and on every call made while compiling real kernels
(the chapter's SGEMM edge kernel, a small attention kernel). Offline (numba's compiler, no GPU)."""

import copy
import random

import pytest

from asyncpipe.backend import numba_liveness, numba_lowering, numba_ssa


@pytest.fixture(scope="module")
def numba_originals():
    import asyncpipe.ptx  # noqa: F401 - installs both
    from numba.cuda import lowering
    from numba.cuda.core import analysis, ir_utils, ssa

    assert analysis.compute_live_map is numba_liveness.compute_live_map is ir_utils.compute_live_map
    assert lowering.Lower._find_singly_assigned_variable is numba_lowering.find_singly_assigned_variable
    assert ssa._run_ssa is numba_ssa.run_ssa
    return analysis._numba_compute_live_map, lowering.Lower._numba_find_singly_assigned_variable, ssa._numba_run_ssa


def random_cfg(rng, n):
    """A CFG of ``n`` blocks: a chain with forward branches, back edges (loops, nested) and dead blocks."""
    from numba.cuda.core.controlflow import CFGraph

    g = CFGraph()
    for b in range(n):
        g.add_node(b)
    for b in range(n - 1):
        if rng.random() < 0.1 and b > 2:
            continue                                       # a block that ends the function (return)
        g.add_edge(b, b + 1)
        if rng.random() < 0.3:
            g.add_edge(b, rng.randrange(b + 1, n))         # a branch forward
        if rng.random() < 0.2:
            g.add_edge(b, rng.randrange(0, b + 1))         # a loop back (or onto itself)
    g.set_entry_point(0)
    g.process()
    return g


def test_components_are_tarjans():
    succs = {0: [1], 1: [2, 4], 2: [3], 3: [1], 4: [5], 5: [4, 6], 6: []}
    comps = [sorted(c) for c in numba_liveness._components(list(succs), succs)]
    assert comps == [[6], [4, 5], [1, 2, 3], [0]]                  # sinks first
    assert numba_liveness._components([0], {0: [0]}) == [[0]]


@pytest.mark.parametrize("seed", range(40))
def test_live_map_equals_numbas_on_random_graphs(numba_originals, seed):
    original = numba_originals[0]
    rng = random.Random(seed)
    n = rng.randrange(1, 60)
    cfg = random_cfg(rng, n)
    names = [f"v{i}" for i in range(rng.randrange(1, 40))]
    use = {b: set(rng.sample(names, rng.randrange(0, min(6, len(names)) + 1))) for b in range(n)}
    dfn = {b: set(rng.sample(names, rng.randrange(0, min(6, len(names)) + 1))) - use[b] for b in range(n)}
    blocks = {b: None for b in range(n)}
    ours = numba_liveness.compute_live_map(cfg, blocks, use, dfn)
    assert ours == original(cfg, blocks, use, dfn)
    assert any(ours.values()) or not any(use.values())             # the case is not empty


def _ir_text(blocks) -> list:
    """What an IR says, block by block (phi nodes with their incoming values and blocks), and its scope's names."""
    scope = next(iter(blocks.values())).scope
    text = [(label, [str(stmt) for stmt in blk.body]) for label, blk in blocks.items()]
    return text + [list(scope.localvars._con)]


def _compile_checking(kernel, argtypes, options, numba_originals, monkeypatch):
    """Compile with every live map, singly-assigned set and SSA reconstruction computed both ways and compared
    (numba-cuda's SSA on a deep copy of the IR, its scope with it); returns the counts."""
    from numba.cuda import lowering
    from numba.cuda.core import analysis, ir_utils, ssa

    from asyncpipe.codegen import compile_kernel

    original_live, original_sav, original_ssa = numba_originals
    calls = {"live": 0, "sav": 0, "ssa": 0, "phis": 0}

    def live(*args):
        ours = numba_liveness.compute_live_map(*args)
        assert ours == original_live(*args)
        calls["live"] += 1
        return ours

    def sav(self):
        original_sav(self)
        theirs = self._singly_assigned_vars
        numba_lowering.find_singly_assigned_variable(self)
        assert self._singly_assigned_vars == theirs
        calls["sav"] += 1

    def run_ssa(blocks):
        theirs = original_ssa(copy.deepcopy(blocks))
        ours = numba_ssa.run_ssa(blocks)
        assert _ir_text(ours) == _ir_text(theirs)
        calls["ssa"] += 1
        calls["phis"] += sum(str(stmt).find("phi(") >= 0 for blk in ours.values() for stmt in blk.body)
        return ours

    monkeypatch.setattr(ssa, "_run_ssa", run_ssa)
    monkeypatch.setattr(analysis, "compute_live_map", live)
    monkeypatch.setattr(ir_utils, "compute_live_map", live)
    monkeypatch.setattr(lowering.Lower, "_find_singly_assigned_variable", sav)
    compile_kernel(kernel, argtypes, **options)
    return calls


@pytest.mark.sass
def test_equal_to_numbas_while_compiling_the_chapters_edge_kernel(numba_originals, monkeypatch):
    from asyncpipe.kernels import sgemm as S
    from tests.kernels.test_sgemm import SIG

    calls = _compile_checking(S.kernel_source("cp_async", 3, 4, 4, True), SIG,
                              dict(launch_bounds=S.launch_bounds(True)), numba_originals, monkeypatch)
    assert calls["live"] > 10 and calls["sav"] >= 1 and calls["ssa"] >= 1 and calls["phis"] > 0


@pytest.mark.sass
@pytest.mark.slow
def test_equal_to_numbas_while_compiling_attention(numba_originals, monkeypatch):
    from asyncpipe.kernels import attention_kernel as AK

    calls = _compile_checking(AK.make_kernel(head_dim=64, causal=True), AK.kernel_argtypes(),
                              dict(launch_bounds=AK.LAUNCH_BOUNDS), numba_originals, monkeypatch)
    # every live map of the compile compared (82 at 5c7d31b: the count follows the kernel's device functions, and
    # fell below the 100 this floor first asked for as the kernel changed)
    assert calls["live"] > 50 and calls["sav"] >= 1 and calls["ssa"] >= 1 and calls["phis"] > 0
