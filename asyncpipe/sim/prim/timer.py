"""The cycle counter in the simulator: the host's monotonic clock, in nanoseconds (it has no cycles of its own)."""

from __future__ import annotations

import time

import numpy as np


def clock64():
    return np.uint64(time.perf_counter_ns())
