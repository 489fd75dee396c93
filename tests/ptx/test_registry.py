"""The registry, the shims and the tests agree one to one; each primitive's docstring opens with its
call line; the SASS opcodes the registry names are the ones its SASS test asserts."""

import functools
import importlib
import inspect
import itertools
import re
from pathlib import Path

import pytest

from asyncpipe import ptx
from asyncpipe.ptx._registry import DEBUG_SHIM

ROOT = Path(__file__).resolve().parents[2]
SHIM_DEF = re.compile(r'extern "C" __device__ [\w\s\*]+?\bap_(\w+)\s*\(')


def shim_symbols():
    found = {}
    for cu in sorted((ROOT / "ptx_shims").glob("*.cu")):
        if cu.name == DEBUG_SHIM:       # the bounded forms of primitives declared elsewhere (test_debug.py)
            continue
        for name in SHIM_DEF.findall(cu.read_text()):
            assert name not in found, f"ap_{name} defined in {found.get(name)} and {cu.stem}"
            found[name] = cu.stem
    return found


def test_every_shim_has_one_primitive_and_back():
    shims = shim_symbols()
    registered = {name: p.stem for name, p in ptx.REGISTRY.items()}
    assert shims == registered


def test_stems_match_files():
    for stem in ptx.MODULES:
        assert (ROOT / "ptx_shims" / f"{stem}.cu").exists(), stem
        assert (ROOT / "asyncpipe" / "ptx" / f"{stem}.py").exists(), stem
        assert (ROOT / "tests" / "ptx" / f"test_{stem}.py").exists(), stem


@pytest.mark.parametrize("name", sorted(ptx.REGISTRY))
def test_primitive_is_documented_and_tested(name):
    p = ptx.REGISTRY[name]
    fn = getattr(ptx, name)
    call, blank, ptx_line, *_ = fn.__doc__.splitlines()
    assert call == p.call, "the docstring must open with the call line"
    assert blank == "" and ptx_line == f"``{p.ptx}``", "the PTX line must follow the call line"
    assert f"{p.arch}." in fn.__doc__ and "PTX ISA" in fn.__doc__ and "Executed by" in fn.__doc__
    assert p.sass, f"{name} names no SASS opcode for its codegen test"
    # the shim's comment carries the same PTX line
    shim_text = p.shim_path.read_text()
    opcode = p.ptx.split()[0]
    assert opcode in shim_text
    # its test file uses it (a SASS test and a GPU test live there)
    test_text = (ROOT / "tests" / "ptx" / f"test_{p.stem}.py").read_text()
    assert f"ptx.{name}" in test_text, f"tests/ptx/test_{p.stem}.py never calls ptx.{name}"


def test_one_asm_statement_per_shim():
    """A shim is one inline-asm statement; a switch over immediates or a wait loop may repeat it."""
    for cu in (ROOT / "ptx_shims").glob("*.cu"):
        if cu.name == DEBUG_SHIM:       # software barriers and bounded loops, not one instruction each
            continue
        for body in re.split(r'extern "C" __device__', cu.read_text())[1:]:
            n = len(re.findall(r"\basm\s*(?:volatile\s*)?\(", body))   # plain asm: pure (a conversion)
            assert n >= 1, f"{cu.name}: a shim without inline asm:\n{body[:200]}"
            if n > 1:
                assert "switch" in body or "while" in body or "for" in body, f"{cu.name}: {body[:300]}"


# ---------------------------------------------------------------------------------------------
# The call line: names from the simulator body, types from the numba signature, spaces from the PTX
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, call", [
    ("cp_async_cg_shared_global_16", "cp_async_cg_shared_global_16(dst: ptr shared, src: ptr global)"),
    ("cp_async_bulk_global_shared",
     "cp_async_bulk_global_shared(dst: ptr global, src: ptr shared::cta, size: uint32)"),
    ("cp_async_bulk_tensor_2d_shared_global_multicast",
     "cp_async_bulk_tensor_2d_shared_global_multicast(dst: ptr shared::cluster, tmap: ptr global, c0: int32, "
     "c1: int32, bar: ptr mbarrier, cta_mask: uint16)"),
    ("mbarrier_try_wait_parity", "mbarrier_try_wait_parity(addr: ptr shared::cta, phase_parity: uint32) -> uint32"),
    ("fence_proxy_tensormap_generic_acquire_gpu", "fence_proxy_tensormap_generic_acquire_gpu(tmap_addr: ptr)"),
    ("ld_shared_cluster_f64", "ld_shared_cluster_f64(a: uint32 shared::cluster) -> float64"),
    ("cvt_rn_bf16x2_f32", "cvt_rn_bf16x2_f32(a: float32, b: float32) -> uint32"),
    ("wgmma_fence_sync_aligned", "wgmma_fence_sync_aligned()"),
])
def test_call_line(name, call):
    assert ptx.REGISTRY[name].call == call


@pytest.mark.parametrize("name", sorted(ptx.REGISTRY))
def test_call_line_reads_the_declarations(name):
    p = ptx.REGISTRY[name]
    sig = re.fullmatch(r"(\w+)\((.*)\)", p.signature.replace(" ", ""))
    types = [t for t in sig.group(2).split(",") if t]
    assert [a.name for a in p.params] == list(inspect.signature(p.sim).parameters)
    assert [a.type for a in p.params] == [{"voidptr": "ptr"}.get(t, t) for t in types]
    assert p.returns == sig.group(1)
    quals = p.ptx.split()[0].rstrip(";").split(".")
    for a in p.params:   # a state space is a qualifier of the opcode (".mbarrier::complete_tx": mbarrier)
        assert not a.space or a.space in quals or a.space == "mbarrier" and any(
            q.startswith("mbarrier::") for q in quals), a


def test_addr_is_listed_as_an_intrinsic():
    """``ptx.addr`` is no shim: not in the registry (which mirrors the shims), in ``INTRINSICS``, its
    docstring opening with its call line, its argument names its simulator body's."""
    assert "addr" not in ptx.REGISTRY and ptx.INTRINSICS["addr"].name == "addr"
    a = ptx.INTRINSICS["addr"]
    assert a.call == "addr(arr: array, idx: int | tuple) -> ptr"
    assert ptx.addr.__doc__.splitlines()[0] == a.call
    assert [p.name for p in a.params] == list(inspect.signature(a.sim).parameters) == ["arr", "idx"]
    assert a.sass == () and a.arch == "any"


# ---------------------------------------------------------------------------------------------
# The registry's sass field is what the SASS tests assert
# ---------------------------------------------------------------------------------------------
class _Compiling(Exception):
    """Raised by the recording ``assert_sass``: the test body reached its first compile."""


def _parametrizations(fn):
    """Every keyword set ``fn``'s ``parametrize`` marks call it with ([{}] without marks)."""
    axes = []
    for mark in getattr(fn, "pytestmark", []):
        if mark.name != "parametrize":
            continue
        names = [n.strip() for n in mark.args[0].split(",")] if isinstance(mark.args[0], str) else list(mark.args[0])
        rows = [getattr(v, "values", v) for v in mark.args[1]]
        axes.append([dict(zip(names, row if len(names) > 1 else (row,))) for row in rows])
    return [functools.reduce(lambda a, b: {**a, **b}, combo, {}) for combo in itertools.product(*axes)]


def _called_primitives(kernel) -> set:
    """The primitives a kernel's Python source calls: ``ptx.NAME``, or a primitive reached through a
    global or closure variable (``copy = COPIES[kind, size]``, ``SS`` of an unrolled kernel)."""
    fn = getattr(kernel, "py_func", kernel)
    by_id = {id(getattr(ptx, name)): name for name in ptx.REGISTRY}
    found, codes = set(), [fn.__code__]
    while codes:
        code = codes.pop()
        codes += [c for c in code.co_consts if inspect.iscode(c)]
        found |= {n for n in code.co_names if n in ptx.REGISTRY}
        found |= {by_id[id(fn.__globals__[n])] for n in code.co_names if id(fn.__globals__.get(n)) in by_id}
    found |= {by_id[id(c.cell_contents)] for c in fn.__closure__ or () if id(c.cell_contents) in by_id}
    return found


def _sass_claims(monkeypatch) -> dict:
    """``{primitive: [test ids]}``: every ``sass`` test of tests/ptx, each parametrization, run with
    ``assert_sass`` replaced by a recorder that stops it at its first compile (nothing is compiled);
    a test claims the primitives its kernel calls whose registry opcodes are all in that call's ``has``."""
    claims: dict = {}
    for path in sorted((ROOT / "tests" / "ptx").glob("test_*.py")):
        module = importlib.import_module(f"tests.ptx.{path.stem}")
        for test_name, fn in vars(module).items():
            marks = {m.name for m in getattr(fn, "pytestmark", [])}
            if not test_name.startswith("test_") or "sass" not in marks or "assert_sass" not in fn.__code__.co_names:
                continue
            for kwargs in _parametrizations(fn):
                seen = []

                def record(kernel, argtypes, has=(), *args, **options):
                    seen.append((kernel, tuple(has)))
                    raise _Compiling

                monkeypatch.setattr(module, "assert_sass", record)
                with pytest.raises(_Compiling):
                    fn(**kwargs)
                kernel, has = seen[0]
                for name in _called_primitives(kernel):
                    if set(ptx.REGISTRY[name].sass) <= set(has):
                        claims.setdefault(name, []).append(f"{path.stem}::{test_name}{kwargs or ''}")
    return claims


def test_every_sass_entry_is_asserted_by_its_sass_test(monkeypatch):
    """For each primitive, a SASS test in tests/ptx/test_<stem>.py compiles a kernel that calls it and
    asserts every opcode of its registry ``sass`` field: the opcode ``python -m asyncpipe primitives``
    shows is the one a test checks."""
    claims = _sass_claims(monkeypatch)
    unclaimed = [name for name, p in ptx.REGISTRY.items()
                 if not any(t.startswith(f"test_{p.stem}::") for t in claims.get(name, []))]
    assert not unclaimed, f"no SASS test asserts the registry's sass of: {unclaimed}"
