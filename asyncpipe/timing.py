"""Timing on the GPU: CUDA events around each call after warm-up, the median of many calls."""

from __future__ import annotations

import statistics
from typing import Callable

from numba import cuda


def time_ms(fn: Callable[[], object], *, warmup: int = 3, reps: int = 20, stream=0) -> float:
    """Median milliseconds of ``fn()`` over ``reps`` calls, each timed with its own event pair."""
    for _ in range(warmup):
        fn()
    cuda.synchronize()
    times = []
    for _ in range(reps):
        start, stop = cuda.event(), cuda.event()
        start.record(stream)
        fn()
        stop.record(stream)
        stop.synchronize()
        times.append(cuda.event_elapsed_time(start, stop))
    return statistics.median(times)


def tflops(flop: float, ms: float) -> float:
    return flop / (ms * 1e-3) / 1e12


def gbps(nbytes: float, ms: float) -> float:
    return nbytes / (ms * 1e-3) / 1e9
