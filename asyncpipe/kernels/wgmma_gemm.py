"""Placeholder: bf16 host helpers (the kernel follows)."""

from __future__ import annotations

import numpy as np

BF16_ROUND_BIAS = 0x7FFF      # round to nearest even: add 0x7FFF + the lowest kept bit, then truncate


def bf16_bits(x) -> np.ndarray:
    """float32 values -> their bfloat16 bit patterns (uint16), rounded to nearest even; NaN stays NaN."""
    f = np.ascontiguousarray(x, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    rounded = ((u + BF16_ROUND_BIAS + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    return np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), rounded)


def bf16_to_float32(bits) -> np.ndarray:
    """bfloat16 bit patterns (uint16) -> float32 values (exact)."""
    b = np.ascontiguousarray(bits, dtype=np.uint16)
    return (b.astype(np.uint32) << 16).view(np.float32)
