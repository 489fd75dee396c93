"""What every primitive body does first, and the vector-clock helpers the checks share.

A thread's clock (its own entry of its vector clock) ticks at every release (barrier arrival,
mbarrier arrive, fence), so that "before the fence" and "after the fence" are different clocks.
"""

from __future__ import annotations

from bisect import bisect_left
from threading import current_thread

import numpy as np

from ..errors import SimUsageError


def me(api: str):
    """The simulated thread running this primitive (refusing calls from outside a kernel)."""
    th = current_thread()
    if not hasattr(th, "sim"):
        raise SimUsageError(api, "a primitive runs only inside a kernel launched in the simulator",
                            "a call from host code", "asyncpipe.sim")
    return th


def enter(api: str):
    """A switch point: maybe another thread runs first, maybe an in-flight copy lands."""
    th = me(api)
    sim = th.sim
    sim.sched.switch_point(th)
    sim.maybe_land()
    return th


def clock(th) -> int:
    return int(th.vc[th.vci])


def tick(th) -> None:
    if th.sim.clocks_on:
        th.vc[th.vci] += 1


def release_into(acc, th) -> None:
    """``acc`` (a phase's accumulated clock) learns everything ``th`` has done; then ``th`` ticks."""
    if th.sim.clocks_on:
        np.maximum(acc, th.vc, out=acc)
        th.vc[th.vci] += 1


def acquire(th, vc) -> None:
    """``th`` learns what ``vc`` (a completed phase) released."""
    if vc is not None and th.sim.clocks_on:
        np.maximum(th.vc, vc, out=th.vc)


def fenced(fences: list, write_clk: int, known: int) -> bool:
    """Some fence in ``fences`` (a thread's fence clocks, increasing) came after a write at
    ``write_clk`` and is known to the reader (its clock for that thread is ``known``)."""
    i = bisect_left(fences, write_clk)
    return i < len(fences) and fences[i] <= known


def zeros(th):
    return np.zeros(th.sim.vc.shape[1], np.int64)
