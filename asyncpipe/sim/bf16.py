"""``numba.cuda.bf16`` conversions in the simulator, where numba's simulator has none (its
``bf16`` module defines only a ``bfloat16 = None`` placeholder): enough for kernels that round fp32
results to bfloat16 and store the bits (the wgmma GEMM's epilogue). Installed by ``numba_patch``.

A bfloat16 value is a ``BFloat16`` holding its 16-bit pattern; rounding is to nearest even, and a
NaN becomes 0x7FFF, as ``__float2bfloat16_rn`` in ``cuda_bf16.hpp`` does."""

from __future__ import annotations

import numpy as np

NAN_BITS = 0x7FFF
ROUND_BIAS = 0x7FFF


class BFloat16:
    __slots__ = ("bits",)

    def __init__(self, bits: int):
        self.bits = bits

    def __float__(self):
        return float(np.array([self.bits << 16], np.uint32).view(np.float32)[0])

    def __repr__(self):
        return f"bfloat16({float(self)!r})"


def float32_to_bfloat16_rn(x) -> BFloat16:
    u = int(np.array([x], np.float32).view(np.uint32)[0])
    if (u & 0x7FFFFFFF) > 0x7F800000:
        return BFloat16(NAN_BITS)
    return BFloat16(((u + ROUND_BIAS + ((u >> 16) & 1)) >> 16) & 0xFFFF)


def bfloat16_as_ushort(b: BFloat16):
    return np.uint16(b.bits)


def install(module) -> None:
    """Give numba's simulator ``bf16`` module the conversions it lacks (only those it lacks)."""
    for name, fn in (("float32_to_bfloat16_rn", float32_to_bfloat16_rn), ("bfloat16_as_ushort", bfloat16_as_ushort)):
        if not hasattr(module, name):
            setattr(module, name, fn)
