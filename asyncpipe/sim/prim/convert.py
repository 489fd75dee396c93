"""Conversions in the simulator: the GPU's bfloat16 rounding (``asyncpipe.bf16.gpu_bf16_bits``)."""

from __future__ import annotations

import numpy as np

from ...bf16 import gpu_bf16_bits


def cvt_rn_bf16x2_f32(a, b):
    hi, lo = gpu_bf16_bits(np.array([a, b], np.float32))
    return np.uint32((int(hi) << 16) | int(lo))
