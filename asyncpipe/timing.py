"""Timing on the GPU: CUDA events around each call after warm-up, the median of many calls."""

from __future__ import annotations

import functools
import statistics
import warnings
from typing import Callable

from numba import cuda

HOLD_NS_PER_CALL = 200_000      # the host time one call may take to enqueue (plan lookup, marshalling): generous
SLEEP_NS = 1_000                # one nanosleep of the hold kernel


@functools.cache
def _hold_kernel():
    @cuda.jit
    def hold(sleeps):
        """Keeps the stream busy while the host enqueues the timed calls (one thread sleeping)."""
        for _ in range(sleeps):
            cuda.nanosleep(SLEEP_NS)

    return hold


def time_ms(fn: Callable[[], object], *, warmup: int = 3, reps: int = 20, stream=0) -> float:
    """Median milliseconds of ``fn()`` over ``reps`` calls, each between its own pair of events.

    The calls are queued behind a kernel that only sleeps (about ``HOLD_NS_PER_CALL`` per call), so
    the GPU runs them back to back once it wakes: each event pair measures the GPU's time for one
    call and not Python's launch overhead, even for a kernel of a few microseconds whose host work
    (plan lookup, argument marshalling) is longer than its GPU work. If the hold ended before the last
    call was queued, the hold doubles and the timing is taken again (a warning says so)."""
    for _ in range(warmup):
        fn()
    cuda.synchronize()
    events = [(cuda.event(), cuda.event()) for _ in range(reps)]
    held = cuda.event()
    hold_ns = HOLD_NS_PER_CALL * reps
    for _ in range(4):
        _hold_kernel()[1, 1, stream](hold_ns // SLEEP_NS)
        held.record(stream)
        for start, stop in events:
            start.record(stream)
            fn()
            stop.record(stream)
        queued_in_time = not held.query()
        events[-1][1].synchronize()
        if queued_in_time:
            break
        hold_ns *= 2
        warnings.warn(f"time_ms: the host queued {reps} calls slower than the hold; holding "
                      f"{hold_ns / 1e6:.1f} ms and timing again", RuntimeWarning, stacklevel=2)
    return statistics.median(cuda.event_elapsed_time(start, stop) for start, stop in events)


def time_rounds(calls: dict[str, Callable[[], object]], *, rounds: int = 5, reps: int = 20,
                stream=0) -> dict[str, list[float]]:
    """Each call's ``time_ms`` in each of ``rounds`` rounds, round-robin, the round's first call moving on by one
    each round: {name: [ms of round 0, round 1, ...]}. A GPU's clocks drift by several percent from one moment to
    the next (boost, power, heat), so two kernels timed one after the other are not timed alike; in rounds they
    meet the same drift, and no call always goes first (on the coolest GPU) or last. Compare the medians of the
    rounds, or the rounds' own ratios."""
    if not calls or rounds < 1:
        raise ValueError(f"time_rounds needs at least one call and one round, got {len(calls)} call(s), "
                         f"rounds={rounds!r}")
    names = list(calls)
    out: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for i in range(len(names)):
            name = names[(r + i) % len(names)]
            out[name].append(time_ms(calls[name], reps=reps, stream=stream))
    return out


def tflops(flop: float, ms: float) -> float:
    return flop / (ms * 1e-3) / 1e12


def gbps(nbytes: float, ms: float) -> float:
    return nbytes / (ms * 1e-3) / 1e9
