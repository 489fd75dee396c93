"""The numba types of a tensor map in a kernel, and of the addresses ``addr`` makes.

A ``TensorMap`` kernel argument (``asyncpipe.host.TensorMap.tiled``, any ``EncodedTensorMap``) is typed
``tensormap``: an ``Array(uint64, 1, "C")`` of a class of its own, so numba marshals it as the 16-word
array it is (same data model, same launch arguments), yet a kernel can tell it from a data array.
``addr`` of it is a ``tensormap_ptr``; ``addr`` of any other array is an ``ElementPointer`` that
remembers the element type. Both convert to ``voidptr`` at no cost (the same ``i8*`` value, no
instruction), so every primitive still takes them where it takes a ``voidptr``. The operands that
must be a tensor map (the ``tmap`` of ``cp_async_bulk_tensor_*``, ``prefetch_tensormap``, the
tensormap acquire fences) take a ``tensormap_ptr`` only: anything else is a ``TypingError`` at compile
time that names the primitive, the operand and what it got (``check_tensor_map_operand``).

In a signature (``asyncpipe.codegen.compile_kernel``, ``cuda.jit(sig)``) write ``tensormap`` where
the kernel receives a ``TensorMap``, not ``types.uint64[::1]``.

One hole stays: a kernel compiled from an explicit signature with a ``tensormap`` parameter accepts a
plain ``uint64`` 1-D device array at launch, since numba lets any C-contiguous ``uint64`` array convert
to a subclass of its array type (``Array.can_convert_to``). Kernels typed from their arguments (the
usual ``kernel[grid, block](tmap, ...)``) have no such conversion.
"""

from __future__ import annotations

from numba.cuda import types
from numba.cuda.datamodel.models import ArrayModel, OpaqueModel
from numba.cuda.extending import lower_cast, register_model, typeof_impl
from numba.cuda.typeconv import Conversion

from ..errors import AsyncpipeError
from ..spec.tensor_map import EncodedTensorMap

TENSOR_MAP_OPERAND_RULE = ("must be ptx.addr(tmap, 0) of a kernel argument that is an asyncpipe TensorMap "
                           "(asyncpipe.host.TensorMap.tiled; in a compile signature, ptx.tensor_map_type.tensormap), "
                           "not the address of a data array")
TENSOR_MAP_OPERAND_SOURCE = "PTX ISA: the operand is the address of a 128-byte CUtensorMap"


class TensorMapType(types.Array):
    """A ``TensorMap`` kernel argument: its 16 encoded ``uint64`` words, marshalled as such an array."""

    def __init__(self):
        super().__init__(types.uint64, 1, "C", name="tensormap")

    def __repr__(self) -> str:
        return "TensorMapType()"


class _FreeVoidPointer(types.RawPointer):
    """A ``void*`` that knows where it came from; converts to ``voidptr`` (and unifies to it) for free."""

    def can_convert_to(self, typingctx, other):
        if other == types.voidptr:
            return Conversion.safe
        return None

    def unify(self, typingctx, other):
        if isinstance(other, types.RawPointer):     # voidptr or another address: the plain void*
            return types.voidptr
        return None


class TensorMapPointer(_FreeVoidPointer):
    """``addr(tmap, i)`` of a ``tensormap``: the only type a tensor-map operand accepts."""

    def __init__(self):
        super().__init__("tensormap_ptr")


class ElementPointer(_FreeVoidPointer):
    """``addr(arr, i)`` of a data array of element type ``dtype``."""

    def __init__(self, dtype):
        self.dtype = dtype
        super().__init__(f"addr({dtype})")


tensormap = TensorMapType()
tensormap_ptr = TensorMapPointer()

register_model(TensorMapType)(ArrayModel)
register_model(TensorMapPointer)(OpaqueModel)    # the i8* of voidptr
register_model(ElementPointer)(OpaqueModel)


@lower_cast(TensorMapPointer, types.voidptr)
@lower_cast(ElementPointer, types.voidptr)
def _same_pointer(context, builder, fromty, toty, val):
    return val                                   # one LLVM type (i8*): nothing to emit


@typeof_impl.register(EncodedTensorMap)
def _typeof_tensor_map(val, c):
    return tensormap


def describe(ty) -> str:
    """What a kernel passed, in words: ``ptx.addr of a float32 array`` rather than ``addr(float32)``."""
    if isinstance(ty, ElementPointer):
        return f"ptx.addr of a {ty.dtype} array"
    if ty == types.voidptr:
        return "a voidptr (an address of unknown origin)"
    return f"a value of type {ty}"


def typing_error(api: str, rule: str, got, source: str):
    """numba's ``TypingError`` carrying an ``asyncpipe.errors`` message: a kernel refused at compile time."""
    from numba.cuda.core.errors import TypingError

    return TypingError(str(AsyncpipeError(api, rule, got, source)))


def check_tensor_map_operand(api: str, operand: str, ty) -> None:
    """Raise ``typing_error`` naming ``api``'s ``operand`` unless ``ty`` is a ``tensormap_ptr``."""
    if not isinstance(ty, TensorMapPointer):
        raise typing_error(api, f"{operand} {TENSOR_MAP_OPERAND_RULE}", describe(ty), TENSOR_MAP_OPERAND_SOURCE)
