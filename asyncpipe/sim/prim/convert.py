"""Conversions in the simulator: the GPU's bfloat16 rounding (``asyncpipe.bf16.gpu_bf16_bits``), numpy's float16."""

from __future__ import annotations

import numpy as np

from ...bf16 import gpu_bf16_bits
from ...formats.minifloat import E4M3, encode


def cvt_rn_bf16x2_f32(a, b):
    hi, lo = gpu_bf16_bits(np.array([a, b], np.float32))
    return np.uint32((int(hi) << 16) | int(lo))


F16_NAN = 0x7FFF


def f16_bits(x) -> np.ndarray:
    """float16 bits of ``x`` rounded to nearest even (numpy's cast), NaN as 0x7FFF."""
    x = np.asarray(x, np.float32)
    return np.where(np.isnan(x), np.uint16(F16_NAN), x.astype(np.float16).view(np.uint16))


def cvt_rn_f16x2_f32(a, b):
    with np.errstate(over="ignore"):
        hi, lo = f16_bits(np.array([a, b], np.float32))
    return np.uint32((int(hi) << 16) | int(lo))


def cvt_rn_satfinite_e4m3x2_f32(a, b):
    hi, lo = encode(np.array([a, b], np.float32), E4M3, saturate=True)    # NaN -> 0x7F (E4M3's NaN code)
    return np.uint32((int(hi) << 8) | int(lo))


def cvt_rn_satfinite_e5m2x2_f32(a, b):
    from ...formats.minifloat import E5M2

    hi, lo = encode(np.array([a, b], np.float32), E5M2, saturate=True)    # NaN -> 0x7F, inf -> +-57344 (0x7B)
    return np.uint32((int(hi) << 8) | int(lo))
