"""Warps: the 32 lanes that warp-synchronous instructions (``elect.sync``, shuffles, votes,
``__syncwarp``) bring together. Lanes run independently (sm_70+ independent thread scheduling); a
collective completes when every lane of its member mask has reached it, and every lane leaves with
the result computed from all of their operands."""

from __future__ import annotations

import numpy as np

from .errors import SimUsageError
from .prim.common import enter
from .where import describe_thread, here, site

FULL = 0xFFFFFFFF


class Warp:
    def __init__(self, cta, index):
        self.cta, self.index = cta, index
        self.lanes: list = [None] * 32
        self.open: dict = {}

    @property
    def existing(self) -> int:
        return sum(1 << i for i, t in enumerate(self.lanes) if t is not None)

    @property
    def active(self) -> int:
        return sum(1 << i for i, t in enumerate(self.lanes) if t is not None and t.state != "exited")


class _Collective:
    __slots__ = ("kind", "values", "results", "done", "queue")

    def __init__(self, kind):
        self.kind, self.values, self.results, self.done, self.queue = kind, {}, None, False, []


def collective(kind: str, mask, value, compute, api: str):
    """Lane-wise result of ``compute(values, mask)`` once every lane of ``mask`` has called."""
    th = enter(api)
    warp = th.cta.warps[th.warp_id]
    mask = int(mask) & FULL
    lane = th.lane
    if not (mask >> lane) & 1:
        raise SimUsageError(api, "the executing lane must be in membermask", f"lane {lane}, mask {mask:#010x}",
                            "PTX ISA, warp-synchronous instructions", where=here(th), seed=th.sim.seed)
    mask &= warp.existing
    gone = mask & ~warp.active
    if gone:
        raise SimUsageError(api, "every lane in membermask must execute the instruction (a lane has exited)",
                            f"lanes {[i for i in range(32) if (gone >> i) & 1]} of warp {warp.index} exited, mask "
                            f"{mask:#010x}", "PTX ISA, warp-synchronous instructions", where=here(th), seed=th.sim.seed)
    rec = warp.open.get(mask)
    if rec is None:
        rec = warp.open[mask] = _Collective(kind)
    elif rec.kind != kind:
        raise SimUsageError(api, "all lanes in membermask must reach the same warp-synchronous instruction "
                            "(divergent lanes)", f"{describe_thread(th)} is at {kind}, other lanes at {rec.kind}",
                            "PTX ISA, warp-synchronous instructions", where=here(th), seed=th.sim.seed)
    rec.values[lane] = value
    th.sim.sched.progress += 1
    if len(rec.values) == bin(mask).count("1"):
        rec.results = compute(rec.values, mask)
        rec.done = True
        del warp.open[mask]
        th.sim.sched.wake_all(rec.queue)
    else:
        s = site()

        def what():
            missing = [i for i in range(32) if (mask >> i) & 1 and i not in rec.values]
            return f"{kind} of warp {warp.index} (mask {mask:#010x}): lanes {missing} have not arrived"

        while not rec.done:
            th.sim.sched.block(th, rec.queue, what, s)
    return rec.results[lane]


def _lanes(mask):
    return [i for i in range(32) if (mask >> i) & 1]


def elect(values, mask):
    leader = _lanes(mask)[0]
    return {i: np.uint32(1 if i == leader else 0) for i in values}


def shfl(src_of):
    def compute(values, mask):
        out = {}
        for i, v in values.items():
            j = src_of(i, v[1])
            out[i] = values[j][0] if j is not None and j in values else v[0]
        return out
    return compute


def syncwarp_join(warp):
    def compute(values, mask):
        sim = warp.cta.sim
        if sim.clocks_on:
            rows = np.array([warp.lanes[i].vci for i in values], np.int64)
            joined = sim.vc[rows].max(axis=0)
            sim.vc[rows] = joined
            sim.vc[rows, rows] += 1
        return {i: None for i in values}
    return compute
