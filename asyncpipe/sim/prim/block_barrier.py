"""``__syncthreads`` (``bar.sync 0``) and its counting forms: every non-exited thread of the CTA
arrives, then all of them leave with the join of their vector clocks (each sees all others' work)."""

from __future__ import annotations

import numpy as np

from ..where import site
from .common import enter

_KEEP = 4          # results of the last few generations (a woken thread reads its own)


def syncthreads(value=0, api="cuda.syncthreads"):
    th = enter(api)
    cta = th.cta
    gen = cta.bar_gen
    cta.bar_arrived.append(th)
    cta.bar_values.append(value)
    th.sim.sched.progress += 1
    if len(cta.bar_arrived) >= cta.live:
        complete(cta)
    else:
        s = site()

        def what():
            return (f"__syncthreads: {len(cta.bar_arrived)} of the block's {cta.live} live threads have arrived")

        while cta.bar_gen == gen:
            th.sim.sched.block(th, cta.bar_queue, what, s)
    return cta.bar_result[gen]


def complete(cta):
    sim = cta.sim
    arrived = cta.bar_arrived
    if sim.clocks_on:
        rows = np.fromiter((t.vci for t in arrived), np.int64, len(arrived))
        joined = sim.vc[rows].max(axis=0)
        sim.vc[rows] = joined
        sim.vc[rows, rows] += 1
    values = cta.bar_values
    nonzero = sum(1 for v in values if v)
    cta.bar_result[cta.bar_gen] = (nonzero, int(nonzero == len(values)), int(nonzero > 0))
    cta.bar_result.pop(cta.bar_gen - _KEEP, None)
    cta.bar_gen += 1
    cta.bar_arrived = []
    cta.bar_values = []
    sim.sched.wake_all(cta.bar_queue)
