"""Conversions in the simulator: the host's bfloat16 rounding (``asyncpipe.bf16``), which is the GPU's."""

from __future__ import annotations

import numpy as np

from ...bf16 import bf16_bits


def cvt_rn_bf16x2_f32(a, b):
    hi, lo = bf16_bits(np.array([a, b], np.float32))
    return np.uint32((int(hi) << 16) | int(lo))
