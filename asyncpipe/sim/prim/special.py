"""The special function unit in the simulator: the exact result rounded to float32, with the GPU's flushes."""

from __future__ import annotations

import numpy as np

TINY = np.float32(2.0**-126)     # the smallest normal float32


def ftz(x: np.float32) -> np.float32:
    """``x`` with a subnormal flushed to zero of its sign (``.ftz``)."""
    return np.float32(np.copysign(0.0, x)) if abs(x) < TINY else x


def ex2_approx_ftz_f32(a):
    a = ftz(np.float32(a))
    with np.errstate(over="ignore", under="ignore"):
        r = np.float32(np.exp2(np.float64(a)))
    return ftz(r)
