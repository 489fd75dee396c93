"""``__syncthreads`` (``bar.sync 0``) and its counting forms: every thread of the CTA arrives, then all
of them leave with the join of their vector clocks (each sees all others' work).

``bar.sync 0`` is ``.aligned``: every thread of the block must execute the same instruction. A
generation completes only when every thread of the block has arrived at the same ``__syncthreads``
(the same line, reached through the same calls): arrivals at different ones, or threads that exit
instead, leave it incomplete, and once nothing else can run the simulator reports a
``DivergentBarrierError`` naming the barrier, the threads that reached it and what the others did
(exited, or wait at another ``__syncthreads`` or elsewhere). It is decided from who arrived where,
so it does not depend on the interleaving.
"""

from __future__ import annotations

import numpy as np

from ..errors import DivergentBarrierError
from ..where import describe_site, describe_thread, site
from .common import enter

_KEEP = 4          # results of the last few generations (a woken thread reads its own)
_SRC = "CUDA programming guide, __syncthreads(); PTX ISA, bar.sync (.aligned)"
_RULE = ("every thread of the block must reach the same __syncthreads (one in a branch that not every thread "
         "takes is undefined behaviour on the GPU)")


def syncthreads(value=0, api="cuda.syncthreads"):
    th = enter(api)
    cta = th.cta
    gen = cta.bar_gen
    s = site()
    if not cta.bar_arrived:
        cta.bar_site = s
    elif s != cta.bar_site:
        cta.bar_mixed = True
    cta.bar_arrived.append(th)
    cta.bar_sites.append(s)
    cta.bar_values.append(value)
    th.sim.sched.progress += 1
    if len(cta.bar_arrived) == len(cta.threads):
        if cta.bar_mixed:
            raise divergence_error(cta)
        complete(cta)
    else:
        def what():
            return (f"__syncthreads: {len(cta.bar_arrived)} of the block's {len(cta.threads)} threads have arrived")

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
    cta.bar_sites = []
    cta.bar_values = []
    sim.sched.wake_all(cta.bar_queue)


# ---- divergence ------------------------------------------------------------------------------------
def divergent(cta) -> bool:
    """Threads wait at a ``__syncthreads`` of ``cta`` that can never complete (others exited, or
    wait at a different one)."""
    return bool(cta.bar_arrived) and (cta.bar_mixed or cta.live < len(cta.threads))


def divergence_error(cta) -> DivergentBarrierError:
    from ..engine import describe_threads

    by_site: dict = {}
    for t, s in zip(cta.bar_arrived, cta.bar_sites):
        by_site.setdefault(s, []).append(t)
    first = cta.bar_site
    parts = [f"the __syncthreads at {describe_site(first)} reached by {describe_threads(by_site.pop(first))}"]
    for s, ts in by_site.items():
        parts.append(f"{describe_threads(ts)} at a different __syncthreads, {describe_site(s)}")
    arrived = set(map(id, cta.bar_arrived))
    gone = [t for t in cta.threads if t.state == "exited"]
    if gone:
        parts.append(f"{describe_threads(gone)} exited without reaching it")
    elsewhere: dict = {}
    for t in cta.threads:
        if id(t) not in arrived and t.state != "exited":
            elsewhere.setdefault(t.wait_site, []).append(t)
    for s, ts in elsewhere.items():
        parts.append(f"{describe_threads(ts)} wait at {describe_site(s)}")
    th = cta.bar_arrived[0]
    return DivergentBarrierError("cuda.syncthreads", _RULE, "; ".join(parts), _SRC,
                                 where=f"at {describe_site(first)}\n{describe_thread(th)}", seed=cta.sim.seed)
