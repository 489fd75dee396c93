"""``addr(arr, i)``: the address of an array element, as the shims take it (C's ``&arr[i]``).

Every pointer operand of a primitive is a generic ``void*``. Shims that need a shared-memory
address convert it themselves (``__cvta_generic_to_shared``), so the same ``addr`` serves global,
shared and local arrays, and a tensor map (``addr(tmap, 0)``).
"""

from __future__ import annotations

from numba.cuda import cgutils, types
from numba.cuda.extending import intrinsic

from ._registry import Intrinsic, simulating


@intrinsic
def _addr(typingctx, arr, idx):
    if not isinstance(arr, types.Array):
        return None
    if isinstance(idx, types.Integer):
        if arr.ndim != 1:
            return None
        indices = (idx,)
    elif isinstance(idx, types.BaseTuple) and len(idx) == arr.ndim and all(
        isinstance(t, types.Integer) for t in idx
    ):
        indices = tuple(idx)
    else:
        return None
    sig = types.voidptr(arr, idx)

    def codegen(context, builder, sig, args):
        aryty, idxty = sig.args
        ary = context.make_array(aryty)(context, builder, args[0])
        if isinstance(idxty, types.BaseTuple):
            raw = cgutils.unpack_tuple(builder, args[1], len(idxty))
        else:
            raw = [args[1]]
        ind = [context.cast(builder, v, t, types.intp) for v, t in zip(raw, indices)]
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, ind, wraparound=False)
        return builder.bitcast(ptr, context.get_value_type(types.voidptr))

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
pointer operand every primitive takes. Not a shim and no instruction of its own: the address
arithmetic folds into the instructions that use it. Any array (global, shared, local) on any SM.

No bounds check: like ``&arr[i]`` in CUDA C++."""
