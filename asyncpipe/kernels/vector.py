"""16-byte loads and stores for kernels: what CUDA C++ writes as ``*reinterpret_cast<float4*>(&a[i])``.

numba knows nothing of an array's alignment, so four loads of ``a[i] .. a[i + 3]`` stay four 4-byte
instructions. ``load_x4(a, i)`` is one 16-byte load (``LDG.E.128`` / ``LDS.128``) returning four
values; ``store_x4(a, i, v0, v1, v2, v3)`` one 16-byte store; ``load_x2(a, i)`` one 8-byte load (``LDG.E.64``, ``&a[i]``
8-byte aligned). The caller promises what the C++ cast
promises: ``&a[i]`` is 16-byte aligned (4-byte elements, ``i`` a multiple of 4, the array's base and
row pitch 16-byte aligned; shared arrays declared with ``alignment=16``). Nothing checks it on the
GPU: a misaligned address is a misaligned-address fault.

``load_shared_x2(smem, i)`` is one 8-byte shared-memory load (``LDS.64``) of ``smem[i], smem[i + 1]``
that LLVM cannot merge with its neighbours: two of them at ``i`` and ``i + 2`` stay two ``LDS.64``,
where plain reads of four consecutive elements become one ``LDS.128`` whenever LLVM can prove the
alignment (it does for a kernel's dynamic shared array). A register-tiled loop uses it to decide how
many k-steps a fragment load covers, not the vectorizer: fewer values in flight, fewer registers. It
is an ``ld.shared.v2.f32`` written as inline PTX with side effects, so LLVM keeps it in order with
barriers and other side effects (ptxas schedules it as any shared load). ``smem`` must be a shared
array and ``&smem[i]`` 8-byte aligned (``i`` even for 4-byte elements).

``opaque_f32(x)`` is ``x`` through a ``mov.b32`` LLVM cannot see through: a loop that LLVM is to unroll
tests ``opaque_f32(beta) == 0`` per element, as an unrolled epilogue does, instead of being unswitched
into two copies of the loop (one per outcome), which gives ptxas a different register allocation.
"""

from __future__ import annotations

from llvmlite import ir
from numba.cuda import cgutils, types
from numba.cuda.extending import intrinsic

from ..ptx._registry import simulating


def _vector_pointer(context, builder, aryty, ary, idx, idxty, width=4):
    index = context.cast(builder, idx, idxty, types.intp)
    ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [index], wraparound=False)
    vec = ir.VectorType(context.get_value_type(aryty.dtype), width)
    return builder.bitcast(ptr, vec.as_pointer(ptr.type.addrspace)), vec


def _fits(arr, idx) -> bool:
    return (isinstance(arr, types.Array) and arr.ndim == 1 and isinstance(idx, types.Integer)
            and arr.dtype in (types.float32, types.int32, types.uint32))


def _vector_load(width: int):
    """The intrinsic of one ``width``-element vector load (``width`` x 4 bytes, aligned to it)."""
    @intrinsic
    def load(typingctx, arr, idx):
        if not _fits(arr, idx):
            return None
        sig = types.UniTuple(arr.dtype, width)(arr, idx)

        def codegen(context, builder, sig, args):
            aryty, idxty = sig.args
            ary = context.make_array(aryty)(context, builder, args[0])
            vptr, _ = _vector_pointer(context, builder, aryty, ary, args[1], idxty, width)
            vec = builder.load(vptr, align=4 * width)
            values = [builder.extract_element(vec, ir.Constant(ir.IntType(32), k)) for k in range(width)]
            return context.make_tuple(builder, sig.return_type, values)

        return sig, codegen

    return load


_load_x4 = _vector_load(4)
_load_x2 = _vector_load(2)


@intrinsic
def _store_x4(typingctx, arr, idx, v0, v1, v2, v3):
    if not _fits(arr, idx):
        return None
    sig = types.void(arr, idx, arr.dtype, arr.dtype, arr.dtype, arr.dtype)

    def codegen(context, builder, sig, args):
        aryty, idxty = sig.args[:2]
        ary = context.make_array(aryty)(context, builder, args[0])
        vptr, vec_type = _vector_pointer(context, builder, aryty, ary, args[1], idxty)
        vec = ir.Constant(vec_type, ir.Undefined)
        for k, v in enumerate(args[2:]):
            vec = builder.insert_element(vec, v, ir.Constant(ir.IntType(32), k))
        builder.store(vec, vptr, align=16)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _load_shared_x2(typingctx, arr, idx):
    if not (_fits(arr, idx) and arr.dtype == types.float32):
        return None
    sig = types.UniTuple(types.float32, 2)(arr, idx)

    def codegen(context, builder, sig, args):
        aryty, idxty = sig.args
        ary = context.make_array(aryty)(context, builder, args[0])
        index = context.cast(builder, args[1], idxty, types.intp)
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [index], wraparound=False)
        shared = builder.addrspacecast(ptr, ir.PointerType(ir.FloatType(), 3))   # generic -> .shared window
        offset = builder.ptrtoint(shared, ir.IntType(32))
        pair = ir.LiteralStructType([ir.FloatType(), ir.FloatType()])
        asm = ir.InlineAsm(ir.FunctionType(pair, [ir.IntType(32)]), "ld.shared.v2.f32 {$0, $1}, [$2];", "=f,=f,r",
                           side_effect=True)
        res = builder.call(asm, [offset])
        values = [builder.extract_value(res, k) for k in range(2)]
        return context.make_tuple(builder, sig.return_type, values)

    return sig, codegen


@intrinsic
def _opaque_f32(typingctx, x):
    if x != types.float32:
        return None

    def codegen(context, builder, sig, args):
        asm = ir.InlineAsm(ir.FunctionType(ir.FloatType(), [ir.FloatType()]), "mov.b32 $0, $1;", "=f,f",
                           side_effect=True)
        return builder.call(asm, [args[0]])

    return types.float32(x), codegen


def _check_aligned_sim(api, arr, idx, nbytes=16):
    """What the GPU would fault on, named: ``&a[i]`` not ``nbytes``-byte aligned."""
    from threading import current_thread

    from ..sim.arrays import addr
    from ..sim.errors import SimUsageError
    from ..sim.where import here

    off = addr(arr, idx).off
    if off % nbytes:
        raise SimUsageError(api, f"&a[i] must be {nbytes}-byte aligned (a {nbytes}-byte vector access)",
                            f"i = {idx}, {off % nbytes} bytes past a {nbytes}-byte boundary",
                            "asyncpipe.kernels.vector",
                            where=here(current_thread()) if hasattr(current_thread(), "run") else "")


def _load_x4_sim(arr, idx):
    _check_aligned_sim("load_x4", arr, idx)
    return arr[idx], arr[idx + 1], arr[idx + 2], arr[idx + 3]


def _load_x2_sim(arr, idx):
    _check_aligned_sim("load_x2", arr, idx, 8)
    return arr[idx], arr[idx + 1]


def _load_shared_x2_sim(arr, idx):
    from threading import current_thread

    from ..sim.arrays import SHARED, addr
    from ..sim.errors import SimUsageError
    from ..sim.where import here

    p = addr(arr, idx)
    if p.space != SHARED:
        raise SimUsageError("load_shared_x2", "smem must be a shared-memory array (ld.shared)",
                            f"a {p.space} array", "asyncpipe.kernels.vector",
                            where=here(current_thread()) if hasattr(current_thread(), "run") else "")
    _check_aligned_sim("load_shared_x2", arr, idx, 8)
    return arr[idx], arr[idx + 1]


def _store_x4_sim(arr, idx, v0, v1, v2, v3):
    _check_aligned_sim("store_x4", arr, idx)
    arr[idx], arr[idx + 1], arr[idx + 2], arr[idx + 3] = v0, v1, v2, v3


opaque_f32 = (lambda x: x) if simulating() else _opaque_f32
load_x4 = _load_x4_sim if simulating() else _load_x4
load_x2 = _load_x2_sim if simulating() else _load_x2
store_x4 = _store_x4_sim if simulating() else _store_x4
load_shared_x2 = _load_shared_x2_sim if simulating() else _load_shared_x2
opaque_f32.__doc__ = ("``x`` (float32) through an inline-PTX ``mov.b32`` with side effects: LLVM can neither hoist it nor "
                      "a test of it out of a loop, so it does not unswitch the loop on that test; ptxas sees a plain move.")
load_x4.__doc__ = "``(a[i], a[i+1], a[i+2], a[i+3])`` in one 16-byte load; ``&a[i]`` must be 16-byte aligned."
store_x4.__doc__ = "``a[i:i+4] = v0, v1, v2, v3`` in one 16-byte store; ``&a[i]`` must be 16-byte aligned."
load_shared_x2.__doc__ = ("``(smem[i], smem[i+1])`` of a float32 shared array in one 8-byte load LLVM does not merge with "
                          "others (see the module doc); ``&smem[i]`` must be 8-byte aligned.")
