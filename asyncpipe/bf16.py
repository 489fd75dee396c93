"""bfloat16 on the host: numpy has no bfloat16, so asyncpipe carries its values as bit patterns in uint16.

The rounding is the GPU's ``cvt.rn.bf16.f32``: to nearest, ties to even; a NaN stays a (quiet) NaN.
"""

from __future__ import annotations

import numpy as np

ROUND_BIAS = 0x7FFF      # round to nearest even: add 0x7FFF + the lowest kept bit, then truncate
QUIET_BIT = 0x40         # a NaN keeps a mantissa bit set after truncation
CANONICAL_NAN = 0x7FFF   # what the GPU's conversions write for any NaN (seen on the H200)


def bf16_bits(x) -> np.ndarray:
    """float32 values -> their bfloat16 bit patterns (uint16), rounded to nearest even; NaN stays NaN."""
    f = np.ascontiguousarray(x, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    rounded = ((u + ROUND_BIAS + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(f), ((u >> 16) | QUIET_BIT).astype(np.uint16), rounded)


def bf16_to_float32(bits) -> np.ndarray:
    """bfloat16 bit patterns (uint16) -> float32 values (exact)."""
    b = np.ascontiguousarray(bits, dtype=np.uint16)
    return (b.astype(np.uint32) << 16).view(np.float32)


def gpu_bf16_bits(x) -> np.ndarray:
    """``bf16_bits`` as the GPU's ``cvt.rn.bf16`` writes them: every NaN becomes ``CANONICAL_NAN``."""
    f = np.ascontiguousarray(x, dtype=np.float32)
    return np.where(np.isnan(f), np.uint16(CANONICAL_NAN), bf16_bits(f))
