"""``numba.cuda.bf16`` conversions in the simulator, where numba's simulator has none (its
``bf16`` module defines only a ``bfloat16 = None`` placeholder): enough for kernels that round fp32
results to bfloat16 and store the bits. Installed by ``numba_patch``.

A bfloat16 value is a ``BFloat16`` holding its 16-bit pattern, rounded as the GPU rounds
(``asyncpipe.bf16.gpu_bf16_bits``: to nearest even, every NaN to 0x7FFF)."""

from __future__ import annotations

import numpy as np

from ..bf16 import gpu_bf16_bits


class BFloat16:
    __slots__ = ("bits",)

    def __init__(self, bits: int):
        self.bits = bits

    def __float__(self):
        return float(np.array([self.bits << 16], np.uint32).view(np.float32)[0])

    def __repr__(self):
        return f"bfloat16({float(self)!r})"


def float32_to_bfloat16_rn(x) -> BFloat16:
    return BFloat16(int(gpu_bf16_bits(np.array([x], np.float32))[0]))


def bfloat16_as_ushort(b: BFloat16):
    return np.uint16(b.bits)


def install(module) -> None:
    """Give numba's simulator ``bf16`` module the conversions it lacks (only those it lacks)."""
    for name, fn in (("float32_to_bfloat16_rn", float32_to_bfloat16_rn), ("bfloat16_as_ushort", bfloat16_as_ushort)):
        if not hasattr(module, name):
            setattr(module, name, fn)
