"""``addr(arr, i)``: the address of an array element, as the shims take it (C's ``&arr[i]``).

Every pointer operand of a primitive is a generic ``void*``. Shims that need a shared-memory
address convert it themselves (``__cvta_generic_to_shared``), so the same ``addr`` serves global,
shared and local arrays, and a tensor map (``addr(tmap, 0)``). The address is typed by what it points
into (``tensor_map_type``): ``tensormap_ptr`` for a ``TensorMap`` argument, ``ElementPointer(dtype)``
otherwise; both are a ``void*`` to every primitive, and only the first is accepted as a tensor map.
"""

from __future__ import annotations

from numba.cuda import cgutils, types
from numba.cuda.extending import intrinsic

from ._registry import Intrinsic, simulating
from .tensor_map_type import ElementPointer, TensorMapType, tensormap_ptr, typing_error

ADDR_INDEX_RULE = ("idx must be one integer for a 1-D array and a tuple of one integer per dimension otherwise "
                   "(a TensorMap kernel argument is 1-D: addr(tmap, 0))")


@intrinsic
def _addr(typingctx, arr, idx):
    if not isinstance(arr, types.Array):
        return None
    if isinstance(idx, types.Integer) and arr.ndim == 1:
        indices = (idx,)
    elif isinstance(idx, types.BaseTuple) and len(idx) == arr.ndim and all(
        isinstance(t, types.Integer) for t in idx
    ):
        indices = tuple(idx)
    else:
        raise typing_error("addr", ADDR_INDEX_RULE, f"idx of type {idx} for a {arr.ndim}-D array ({arr})",
                           "asyncpipe.ptx.addr")
    ptr_type = tensormap_ptr if isinstance(arr, TensorMapType) else ElementPointer(arr.dtype)
    sig = ptr_type(arr, idx)

    def codegen(context, builder, sig, args):
        aryty, idxty = sig.args
        ary = context.make_array(aryty)(context, builder, args[0])
        if isinstance(idxty, types.BaseTuple):
            raw = cgutils.unpack_tuple(builder, args[1], len(idxty))
        else:
            raw = [args[1]]
        ind = [context.cast(builder, v, t, types.intp) for v, t in zip(raw, indices)]
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, ind, wraparound=False)
        return builder.bitcast(ptr, context.get_value_type(ptr_type))   # i8*, as a voidptr

    return sig, codegen


def _addr_sim(arr, idx):
    from ..sim.arrays import addr as sim_addr

    return sim_addr(arr, idx)


ADDR = Intrinsic(
    "addr", "asyncpipe/ptx/address.py", {"arr": "array", "idx": "int | tuple"}, "ptr",
    ptx="none of its own: a numba @intrinsic, &arr[idx] as LLVM computes it (a getelementptr)",
    who="any thread", sim=_addr_sim)

addr = _addr_sim if simulating() else _addr
addr.__doc__ = ADDR.call + """

Address of ``arr[idx]`` (``idx`` an integer for 1-D arrays, a tuple otherwise), as ``void*``: the
pointer operand every primitive takes. Of a ``TensorMap`` kernel argument, ``addr(tmap, 0)`` is the
one value a tensor-map operand accepts (``ptx.tensor_map_type``: a data array there fails to compile).
Not a shim and no instruction of its own: the address arithmetic folds into the instructions that
use it. Any array (global, shared, local) on any SM.

No bounds check: like ``&arr[i]`` in CUDA C++."""
