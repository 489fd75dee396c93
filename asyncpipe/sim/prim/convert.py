"""Conversions in the simulator: the host's bfloat16 rounding (``asyncpipe.bf16``), which is the GPU's,
except that the GPU turns every NaN into the canonical bfloat16 NaN (measured on the H200)."""

from __future__ import annotations

import numpy as np

from ...bf16 import bf16_bits


CANONICAL_NAN = 0x7FFF


def cvt_rn_bf16x2_f32(a, b):
    x = np.array([a, b], np.float32)
    hi, lo = np.where(np.isnan(x), CANONICAL_NAN, bf16_bits(x))
    return np.uint32((int(hi) << 16) | int(lo))
