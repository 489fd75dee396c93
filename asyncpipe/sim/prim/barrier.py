"""Named barriers (``bar.sync a, b`` / ``bar.arrive a, b``) in the simulator.

Each CTA keeps one ``NamedBarrier`` per id. A phase completes when ``b`` threads have arrived; the
threads that ``bar.sync``-ed learn the join of every arrival's vector clock *as it was at the
arrival* (``bar.arrive`` releases what its thread did before it, not after, and acquires nothing):
each arrival is folded into the phase's clock at once and its thread's clock ticks, so a write
after a ``bar.arrive`` is unordered with the consumer's reads whatever the interleaving. Checked:
the id (1..15: 0 is ``__syncthreads``'), the count (a positive multiple of 32, at most the block
size) and that every arrival of a phase names the same count. A phase that never fills is a deadlock (reported with the arrivals so far).
"""

from __future__ import annotations

import numpy as np

from ..errors import SimUsageError
from ..where import here, site
from .common import enter, release_into, zeros

BARRIERS = 16            # named barriers per CTA (ids 0..15)
FIRST_ID = 1             # id 0 is __syncthreads' (cuda.syncthreads)
WARP = 32                # the hardware counts arrivals by whole warps
_SRC = "PTX ISA, bar.sync / bar.arrive"


class NamedBarrier:
    """The current phase of one barrier id: who arrived, with which count."""

    def __init__(self, ident: int):
        self.id = ident
        self.gen = 0
        self.count = None
        self.arrived: list = []        # (thread, waits)
        self.acc = None                # the join of this phase's arrivals' clocks, taken at each arrival
        self.queue: list = []


def _barrier(th, a, b, api):
    a, b = int(a), int(b)
    cta = th.cta
    if not FIRST_ID <= a < BARRIERS:
        raise SimUsageError(api, f"the barrier id must be in {FIRST_ID}..{BARRIERS - 1} (id 0 is cuda.syncthreads')",
                            a, _SRC, where=here(th), seed=th.sim.seed)
    size = th.sim.launch.threads_per_cta
    if not (b > 0 and b % WARP == 0 and b <= size):
        raise SimUsageError(api, f"the thread count must be a positive multiple of {WARP}, at most the block's "
                            f"{size} threads", b, _SRC, where=here(th), seed=th.sim.seed)
    bars = cta.__dict__.setdefault("named_barriers", {})
    bar = bars.get(a)
    if bar is None:
        bar = bars[a] = NamedBarrier(a)
    if bar.count is not None and bar.count != b:
        raise SimUsageError(api, f"every thread arriving at barrier {a} in one phase must give the same count",
                            f"{b} after {len(bar.arrived)} arrivals with {bar.count}", _SRC, where=here(th),
                            seed=th.sim.seed)
    return bar, b


def _arrive(th, bar, b, waits):
    bar.count = b
    bar.arrived.append((th, waits))
    sim = th.sim
    sim.sched.progress += 1
    if sim.clocks_on:
        if bar.acc is None:
            bar.acc = zeros(th)
        release_into(bar.acc, th)          # what th did up to here; th's later work is a new clock
    if len(bar.arrived) < b:
        return False
    if sim.clocks_on:
        takers = np.fromiter((t.vci for t, w in bar.arrived if w), np.int64)
        sim.vc[takers] = np.maximum(sim.vc[takers], bar.acc)
        bar.acc = None
    bar.gen += 1
    bar.count = None
    bar.arrived = []
    sim.sched.wake_all(bar.queue)
    return True


def bar_sync(a, b, api="bar_sync"):
    th = enter(api)
    bar, b = _barrier(th, a, b, api)
    gen = bar.gen
    if _arrive(th, bar, b, True):
        return
    s = site()

    def what():
        return f"bar.sync {bar.id}, {b}: {len(bar.arrived)} of {b} threads have arrived"

    while bar.gen == gen:
        th.sim.sched.block(th, bar.queue, what, s)


def bar_arrive(a, b, api="bar_arrive"):
    th = enter(api)
    bar, b = _barrier(th, a, b, api)
    _arrive(th, bar, b, False)
