"""A TensorMap kernel argument has a numba type of its own (``ptx.tensor_map_type``), offline (no GPU):

- a kernel given a data array where a tensor map is expected fails to compile, with a message that names
  the primitive, the operand and what it got; every tensor-map operand of every primitive is checked;
- ``ptx.addr(tmap, 0)`` costs what it cost before: each TMA kernel of tests/ptx/test_bulk_tensor.py,
  the tensormap fences of test_fence.py, the shipped TMA add-one kernels and the TMA guide page's kernel
  compile, with the ``tensormap`` type, to the same SASS instruction for instruction (operands included)
  as through the untyped path (``addr`` typed ``voidptr``, each primitive's ``unchecked`` shim), which is
  what they compiled to before the type existed;
- the type is an ``Array(uint64, 1, "C")`` to numba's data model and launch, is what ``typeof`` gives a
  TensorMap, and pickles (numba's disk cache keys kernels by their argument types).
"""

from __future__ import annotations

import pickle
import types as pytypes

import numpy as np
import pytest
from numba import cuda
from numba.cuda import types
from numba.cuda.extending import intrinsic
from numba.cuda.np import numpy_support

from asyncpipe import ptx
from asyncpipe.codegen import compile_kernel
from asyncpipe.ptx.tensor_map_type import (TENSOR_MAP_OPERAND_RULE, TENSOR_MAP_OPERAND_SOURCE, ElementPointer,
                                           TensorMapType, tensormap, tensormap_ptr)
from asyncpipe.spec.tensor_map import EncodedTensorMap

TMAP = tensormap
I32, U32, F32 = types.int32, types.uint32, types.float32
CHECKED = {name: p.tensor_maps for name, p in ptx.REGISTRY.items() if p.tensor_maps}


def message(name, operand, got):
    return f"{name}: {operand} {TENSOR_MAP_OPERAND_RULE} [{TENSOR_MAP_OPERAND_SOURCE}], got {got}"


def compile_error(kernel, argtypes) -> str:
    with pytest.raises(Exception) as info:      # numba's TypingError (numba.core's class, wrapping ours)
        compile_kernel(kernel, argtypes)
    assert "TypingError" in type(info.value).__name__, info.value
    return str(info.value)


# ---------------------------------------------------------------------------------------------
# The type
# ---------------------------------------------------------------------------------------------
def test_every_tensor_map_operand_is_declared():
    assert CHECKED == {**{f"cp_async_bulk_tensor_{r}d_{form}": ("tmap",) for r in range(1, 6)
                          for form in ("shared_global", "shared_global_multicast", "global_shared")},
                       "prefetch_tensormap": ("tmap",),
                       "fence_proxy_tensormap_generic_acquire_gpu": ("tmap_addr",),
                       "fence_proxy_tensormap_generic_acquire_sys": ("tmap_addr",)}


def test_a_tensor_map_is_typed_tensormap():
    from numba.cuda.typing.typeof import typeof

    from asyncpipe.host.tensor_map import TensorMap

    for cls in (EncodedTensorMap, TensorMap):
        tmap = cls(None, None, None)            # typeof reads the class only (no device memory here)
        assert typeof(tmap) is tensormap
        assert cuda.jit(lambda t: None).typeof_pyval(tmap) is tensormap


def test_the_type_is_the_16_word_array_to_numba():
    from numba.cuda.descriptor import cuda_target

    ctx = cuda_target.target_context
    plain = types.uint64[::1]
    assert isinstance(tensormap, types.Array) and (tensormap.dtype, tensormap.ndim, tensormap.layout) == (
        types.uint64, 1, "C")
    assert tensormap != plain and isinstance(TMAP, TensorMapType)
    assert ctx.get_value_type(tensormap) == ctx.get_value_type(plain)          # same struct: same launch arguments
    assert ctx.get_value_type(tensormap_ptr) == ctx.get_value_type(types.voidptr)
    assert ctx.get_value_type(ElementPointer(types.float32)) == ctx.get_value_type(types.voidptr)
    tctx = cuda_target.typing_context
    assert tctx.can_convert(tensormap, plain) is not None                     # a device function of uint64[::1]
    assert tctx.can_convert(tensormap_ptr, types.voidptr) is not None
    assert tctx.can_convert(ElementPointer(types.float32), tensormap_ptr) is None
    assert tctx.unify_pairs(ElementPointer(types.float32), ElementPointer(types.int32)) == types.voidptr


@pytest.mark.sass
def test_a_tensor_map_argument_reads_as_its_16_words():
    """Indexing the map (tests/host/test_tensor_map.py reads its words back on the GPU) compiles as for the
    plain array it is marshalled as."""
    def read_words(tm, out):
        i = cuda.threadIdx.x
        out[i] = tm[i]

    typed = _instructions(read_words, (TMAP, types.uint64[::1]))
    assert typed == _instructions(read_words, (types.uint64[::1], types.uint64[::1]))
    assert any(op.startswith("LDG") for _, op, _ in typed)


def test_the_type_pickles_as_itself():
    from numba.cuda import serialize

    for ty in (tensormap, tensormap_ptr, ElementPointer(types.float32), (tensormap, types.int32)):
        assert pickle.loads(pickle.dumps(ty)) == ty
        assert serialize._numba_unpickle(id(ty), serialize.dumps(ty), hash(serialize.dumps(ty))) == ty
    assert pickle.loads(pickle.dumps(tensormap)) is tensormap                 # interned, as numba's types are


# ---------------------------------------------------------------------------------------------
# A data array where a tensor map is expected: refused at compile time, naming the operand
# ---------------------------------------------------------------------------------------------
def _kernel_calling(name: str, make_tmap: str):
    """A kernel ``(tmap, data)`` that calls ``ptx.<name>`` once, its tensor-map operand ``make_tmap`` (source
    text), every other pointer ``addr`` of a shared array, every integer 0."""
    p = ptx.REGISTRY[name]
    args = [make_tmap if param.name in p.tensor_maps else "ptx.addr(smem, 0)" if param.type == "ptr" else "0"
            for param in p.params]
    src = (f"def kernel(tmap, data):\n"
           f"    smem = cuda.shared.array(256, np.uint64, alignment=128)\n"
           f"    ptx.{name}({', '.join(args)})\n")
    scope = {"cuda": cuda, "np": np, "ptx": ptx}
    exec(compile(src, f"<{name}>", "exec"), scope)
    return scope["kernel"]


@pytest.mark.sass
@pytest.mark.parametrize("name", sorted(CHECKED))
def test_data_array_as_tensor_map_fails_to_compile(name):
    operand, = CHECKED[name]
    text = compile_error(_kernel_calling(name, "ptx.addr(tmap, 0)"), (F32[::1], F32[::1]))
    assert message(name, operand, "ptx.addr of a float32 array") in text


@pytest.mark.sass
@pytest.mark.parametrize("tmap_type, make, got", [
    (types.uint64[::1], "ptx.addr(tmap, 0)", "ptx.addr of a uint64 array"),    # the old signature's uint64[16]
    (TMAP, "ptx.addr(data, 0)", "ptx.addr of a float32 array"),
    (TMAP, "tmap", "a value of type tensormap"),                                 # the map, not its address
    (TMAP, "ptx.addr(tmap, 0) if data[0] > 0 else ptx.addr(data, 0)", "a voidptr (an address of unknown origin)"),
])
def test_what_was_passed_is_named(tmap_type, make, got):
    name = "cp_async_bulk_tensor_2d_shared_global"
    text = compile_error(_kernel_calling(name, make), (tmap_type, F32[::1]))
    assert message(name, "tmap", got) in text


@pytest.mark.sass
def test_a_2d_data_array_where_a_map_is_expected_is_named_by_addr():
    from asyncpipe.ptx.address import ADDR_INDEX_RULE

    text = compile_error(_kernel_calling("prefetch_tensormap", "ptx.addr(tmap, 0)"), (F32[:, ::1], F32[::1]))
    assert (f"addr: {ADDR_INDEX_RULE} [asyncpipe.ptx.addr], got idx of type int64 for a 2-D array "
            "(array(float32, 2d, C))") in text


@pytest.mark.sass
def test_every_primitive_still_takes_addresses_of_data_arrays():
    """Addresses of data arrays of different element types, one variable for both, still reach a ``voidptr``
    operand (cp.async), and a TensorMap argument compiles through its acquire fence and a load."""
    def kernel(tmap, a, b, flag):
        tile = cuda.shared.array(256, np.int32, alignment=128)
        bar = cuda.shared.array(1, np.uint64)
        src = ptx.addr(a, 0) if flag[0] else ptx.addr(b, 0)     # float32 or int32: unified to voidptr
        ptx.cp_async_cg_shared_global_16(ptx.addr(tile, 0), src)
        ptx.cp_async_commit_group()
        ptx.cp_async_wait_group(0)
        ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tmap, 0))
        ptx.cp_async_bulk_tensor_1d_shared_global(ptx.addr(tile, 0), ptx.addr(tmap, 0), 0, ptx.addr(bar, 0))
        b[0] = tile[1]

    ops = compile_kernel(kernel, (TMAP, F32[::1], I32[::1], I32[::1])).opcodes
    assert {"LDGSTS.E.BYPASS.128", "UTMACCTL.IV", "UTMALDG.1D"} <= set(ops) and "CALL" not in " ".join(ops)


# ---------------------------------------------------------------------------------------------
# SASS unchanged: each kernel through the tensormap type and through the untyped path
# ---------------------------------------------------------------------------------------------
@intrinsic
def _addr_untyped(typingctx, arr, idx):
    """``ptx.addr`` as it was typed before ``tensor_map_type``: the same code, a ``voidptr``."""
    sig, codegen = ptx.addr._defn(typingctx, arr, idx)
    return types.voidptr(*sig.args), codegen


UNTYPED_PTX = pytypes.ModuleType("untyped_ptx")     # a module: numba types ``ptx.NAME`` through its attributes
UNTYPED_PTX.__dict__.update({n: getattr(getattr(ptx, n), "unchecked", getattr(ptx, n)) for n in ptx.REGISTRY})
UNTYPED_PTX.addr = _addr_untyped


def untyped(fn):
    """``fn`` with its ``ptx`` the untyped path (its closure, defaults and other globals kept)."""
    fn = getattr(fn, "py_func", fn)
    return pytypes.FunctionType(fn.__code__, {**fn.__globals__, "ptx": UNTYPED_PTX}, fn.__name__,
                                fn.__defaults__, fn.__closure__)


def _bulk_tensor_kernels():
    import tests.ptx.test_bulk_tensor as B

    out = {f"probe_{r}d": (B.make_probe(r), (TMAP, I32[::1], I32[::1])) for r in range(1, 6)}
    for r, (shape, box, dtype) in B.RANKS.items():
        elems = int(np.prod(box))
        kernel = B.make_load(r, dtype, elems, elems * np.dtype(dtype).itemsize, dtype(7))
        out[f"load_{r}d"] = (kernel, (TMAP, I32[:, ::1], types.Array(numpy_support.from_dtype(np.dtype(dtype)), 2, "C"),
                                      I32[::1]))
    out["add_one"] = (B.add_one_kernel, (TMAP, I32[::1]))
    out["clipped_store"] = (B.clipped_store_kernel, (TMAP, I32[:, ::1]))
    out["swizzle"] = (B.swizzle_kernel, (TMAP, F32[::1], I32[::1]))
    for every in (False, True):
        out[f"multicast_every_{every}"] = (B.make_multicast(4, every), (TMAP, I32[:, :, :, ::1], I32[::1]))
    return out


def _other_kernels():
    import tests.ptx.test_fence as F
    from asyncpipe.kernels import tma_add_one as T
    from asyncpipe.kernels.unroll import unrolled

    return {"fence_acquire_gpu": (F.sass_proxy_tensormap_generic_acquire_gpu, (U32[::1], TMAP)),
            "fence_acquire_sys": (F.sass_proxy_tensormap_generic_acquire_sys, (U32[::1], TMAP)),
            "tma_add_one": (unrolled(T.add_one_tma), (TMAP,)),
            "tma_add_one_pipelined": (unrolled(T.add_one_pipelined), (TMAP, I32, I32))}


KERNELS = {**_bulk_tensor_kernels(), **_other_kernels()}


def _instructions(kernel, argtypes):
    return [(i.predicate, i.opcode, i.operands) for i in compile_kernel(kernel, argtypes).instructions]


@pytest.mark.sass
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_sass_is_unchanged(name):
    kernel, argtypes = KERNELS[name]
    typed = _instructions(kernel, argtypes)
    before = _instructions(untyped(kernel), tuple(types.uint64[::1] if t is TMAP else t for t in argtypes))
    assert typed == before
    assert any(op.startswith(("UTMA", "UTMACCTL")) for _, op, _ in typed)


@pytest.mark.sass
def test_guide_kernel_sass_is_unchanged(tmp_path):
    from tests.guide.test_guide import GUIDE, load_page

    page = load_page(GUIDE / "02_tma.md", tmp_path)
    rest = (F32[:, :], F32, F32)
    typed = _instructions(page.scale_transpose, (TMAP, TMAP, *rest))
    assert typed == _instructions(untyped(page.scale_transpose), (types.uint64[::1], types.uint64[::1], *rest))
