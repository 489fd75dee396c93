"""Timing on the GPU: CUDA events around each call after warm-up, the median of many calls."""

from __future__ import annotations

import statistics
from typing import Callable

from numba import cuda


def time_ms(fn: Callable[[], object], *, warmup: int = 3, reps: int = 20, stream=0) -> float:
    """Median milliseconds of ``fn()`` over ``reps`` calls, each between its own pair of events.

    All calls are queued before the one synchronisation at the end, so while the GPU runs call i the
    host is already enqueueing call i + 1: each event pair measures the GPU's time for one call, not
    Python's launch overhead (which would otherwise sit between ``start`` and the kernel on an idle
    GPU). That holds while a call's host work is shorter than its GPU work: true for every kernel in
    the bench (milliseconds of GPU time, tens of microseconds of Python)."""
    for _ in range(warmup):
        fn()
    cuda.synchronize()
    events = [(cuda.event(), cuda.event()) for _ in range(reps)]
    for start, stop in events:
        start.record(stream)
        fn()
        stop.record(stream)
    events[-1][1].synchronize()
    return statistics.median(cuda.event_elapsed_time(start, stop) for start, stop in events)


def tflops(flop: float, ms: float) -> float:
    return flop / (ms * 1e-3) / 1e12


def gbps(nbytes: float, ms: float) -> float:
    return nbytes / (ms * 1e-3) / 1e9
