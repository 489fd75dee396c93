"""Test tiers: offline SASS (no GPU), GPU (skipped with a reason when there is none), simulator.

Two pytest runs make the suite (``.ci/run``):

- ``python3 -m pytest``: offline SASS and host tests; GPU tests skip without a GPU; ``tests/sim`` is
  not collected (it needs the simulator mode, which must be chosen before numba is imported).
- ``NUMBA_ENABLE_CUDASIM=1 python3 -m pytest``: the simulator run. It runs ``tests/sim``, the GPU
  tests of ``tests/ptx`` (every primitive's test body, on asyncpipe's CPU simulator) and the GPU tests
  marked ``simulator_too`` (the kernel functions' bad-input checks); everything else
  is deselected (SASS needs the real compiler; the kernels' GPU tests use GPU-sized problems, and
  ``tests/sim/test_programs.py`` runs the same programs at simulator sizes).
"""

import functools
import os
from pathlib import Path

import numpy as np
import pytest

SIMULATING = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
HERE = Path(__file__).resolve().parent

collect_ignore = [] if SIMULATING else ["sim"]


def pytest_configure(config):
    config.addinivalue_line("markers", "sim: runs only in the simulator run (NUMBA_ENABLE_CUDASIM=1)")
    config.addinivalue_line("markers", "simulator_too: a GPU test that the simulator run runs as well (host-side "
                            "checks of the kernel functions: their messages, before anything runs)")


@functools.cache
def gpu_cc():
    """The current GPU's compute capability, or None with no usable GPU (or under the simulator)."""
    if SIMULATING:
        return None
    from numba import cuda

    try:
        if not cuda.is_available():
            return None
        return cuda.get_current_device().compute_capability
    except Exception:  # no driver at all
        return None


def _runs_in_simulator(item) -> bool:
    path = Path(str(item.fspath)).resolve()
    if HERE / "sim" in path.parents or "simulator_too" in item.keywords:
        return True
    return HERE / "ptx" in path.parents and ("gpu" in item.keywords or "hopper" in item.keywords)


def _stems_without_simulator_bodies() -> dict:
    """``{stem: [primitives]}`` for primitive families some of whose members have no simulator body."""
    from asyncpipe import ptx
    from asyncpipe.ptx._registry import _empty

    missing: dict = {}
    for name, p in ptx.REGISTRY.items():
        if p.sim is not None and p.sim.__code__.co_code == _empty.__code__.co_code:
            missing.setdefault(p.stem, []).append(name)
    return missing


def pytest_collection_modifyitems(config, items):
    if SIMULATING:
        keep = [i for i in items if _runs_in_simulator(i)]
        dropped = [i for i in items if not _runs_in_simulator(i)]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = keep
        missing = _stems_without_simulator_bodies()
        for item in items:
            stem = Path(str(item.fspath)).stem.removeprefix("test_")
            if HERE / "ptx" in Path(str(item.fspath)).resolve().parents and stem in missing:
                names = ", ".join(missing[stem][:3]) + (", ..." if len(missing[stem]) > 3 else "")
                item.add_marker(pytest.mark.skip(reason=f"no simulator body yet for ptx.{names}"))
        return
    # the longest compiles first: pytest -n hands tests out in collection order, and these (1-2.5 minutes each
    # on CI's two cores) left one worker finishing them alone at the end
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    cc = gpu_cc()
    no_gpu = pytest.mark.skip(reason="needs a CUDA GPU: none is visible here (run scripts/gpu_check.sh on one)")
    old_gpu = pytest.mark.skip(reason=f"needs compute capability 9.0 (Hopper); this GPU is {cc}")
    for item in items:
        if "gpu" in item.keywords and cc is None:
            item.add_marker(no_gpu)
        elif "hopper" in item.keywords and (cc is None or cc < (9, 0)):
            item.add_marker(no_gpu if cc is None else old_gpu)


@pytest.fixture
def rng(request):
    """Fresh random data every run; the seed is printed so that a failure can be replayed."""
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"rng seed {seed} for {request.node.nodeid}")
    return np.random.default_rng(seed)


@pytest.fixture
def no_gpu(monkeypatch):
    """Host code sees no GPU (numba.cuda.is_available() is False), even on a machine that has one."""
    from numba import cuda

    monkeypatch.setattr(cuda, "is_available", lambda: False)
