"""Clusters in the simulator: the cluster barrier, the special registers, ``mapa`` and DSMEM.

A ``.shared::cluster`` address is ``rank << 24 | offset`` (as ``mapa`` builds it on sm_90: the target
rank in bits 24..31 of the shared window offset), so kernels can do arithmetic on it.
"""

from __future__ import annotations

import numpy as np

from ..arrays import shared_operand
from ..errors import DsmemLifetimeError, SimUsageError
from ..where import describe_thread, here, site
from . import mbarrier_state
from .common import acquire, clock, enter, release_into, zeros

RANK_SHIFT = 24
OFFSET_MASK = (1 << RANK_SHIFT) - 1
_SRC = "PTX ISA, barrier.cluster / mapa / shared::cluster"


class ClusterBarrier:
    def __init__(self, sim, th):
        self.sim = sim
        self.phase = 0
        self.count = 0
        self.acc = zeros(th) if sim.clocks_on else None
        self.done: dict = {}
        self.queue: list = []
        self.arrived: dict = {}        # thread vci -> phase it arrived in (not yet waited)

    def maybe_complete(self):
        if self.count and self.count >= self.sim.live:
            self.done[self.phase] = self.acc
            self.done.pop(self.phase - 4, None)
            self.acc = np.zeros_like(self.acc) if self.acc is not None else None
            self.phase += 1
            self.count = 0
            self.sim.sched.wake_all(self.queue)


def _state(th) -> ClusterBarrier:
    sim = th.sim
    if sim.cluster_state is None:
        sim.cluster_state = ClusterBarrier(sim, th)
    return sim.cluster_state


def arrive(release: bool, api: str):
    th = enter(api)
    cb = _state(th)
    if th.vci in cb.arrived:
        raise SimUsageError(api, "a thread arrives at the cluster barrier once per phase, then waits",
                            f"a second arrive in phase {cb.phase} without barrier_cluster_wait", _SRC,
                            where=here(th), seed=th.sim.seed)
    cb.arrived[th.vci] = cb.phase
    if cb.acc is not None:
        if release:
            release_into(cb.acc, th)
        elif th.fences_cluster:
            # a relaxed arrive releases what an earlier cluster-scope release fence (fence.acq_rel.cluster,
            # fence.mbarrier_init.release.cluster) published: this thread's work up to that fence
            known = th.vc.copy()
            known[th.vci] = th.fences_cluster[-1]
            np.maximum(cb.acc, known, out=cb.acc)
    cb.count += 1
    th.sim.sched.progress += 1
    cb.maybe_complete()


def wait(api: str):
    th = enter(api)
    cb = _state(th)
    if th.vci not in cb.arrived:
        raise SimUsageError(api, "a thread must arrive (barrier_cluster_arrive) before it waits",
                            "a wait with no arrival in this phase", _SRC, where=here(th), seed=th.sim.seed)
    ph = cb.arrived.pop(th.vci)
    s = site()

    def what():
        return f"barrier.cluster phase {ph}: {cb.count} of the cluster's {th.sim.live} live threads have arrived"

    while cb.phase <= ph:
        th.sim.sched.block(th, cb.queue, what, s)
    acquire(th, cb.done.get(ph))


def thread_exited(sim):
    if sim.cluster_state is not None:
        sim.cluster_state.maybe_complete()


# ---- special registers ---------------------------------------------------------------------------
def sreg(name: str):
    th = enter(name)
    sim, cta = th.sim, th.cta
    launch = sim.launch
    value = {
        "cluster_ctarank": cta.rank,
        "cluster_nctarank": len(sim.ctas),
        "clusterid": sim.cluster_pos,
        "nclusterid": launch.nclusters,
        "cluster_ctaid": cta.local,
        "cluster_nctaid": launch.cluster,
    }
    key, _, axis = name.rpartition("_") if name[-2:] in ("_x", "_y", "_z") else (name, "", "")
    v = value[key]
    return np.uint32(v["xyz".index(axis)] if axis else v)


# ---- DSMEM -------------------------------------------------------------------------------------------
def mapa(p, target, api="mapa_shared_cluster"):
    th = enter(api)
    p = shared_operand(th, api, p, "addr")
    target = int(target)
    if not 0 <= target < len(th.sim.ctas):
        raise SimUsageError(api, f"target_cta must be a rank of this cluster, 0..{len(th.sim.ctas) - 1}", target, _SRC,
                            where=here(th), seed=th.sim.seed)
    return np.uint32((target << RANK_SHIFT) | p.off)


def _peer(th, a, nbytes, api):
    a = int(a)
    rank, off = a >> RANK_SHIFT, a & OFFSET_MASK
    sim = th.sim
    if not 0 <= rank < len(sim.ctas):
        raise SimUsageError(api, "the address must come from mapa_shared_cluster", f"{a:#x}", _SRC,
                            where=here(th), seed=sim.seed)
    cta = sim.ctas[rank]
    if off % nbytes:
        raise SimUsageError(api, f"the address must be {nbytes}-byte aligned", f"offset {off:#x}", _SRC,
                            where=here(th), seed=sim.seed)
    mem = cta.smem
    if not mem.alive and sim.check_dsmem:
        raise DsmemLifetimeError(api, "a CTA's shared memory exists only while the CTA runs: no DSMEM access after it "
                                 "exits (a cluster barrier must keep it alive)", f"block {tuple(cta.blockIdx)} "
                                 f"(rank {rank}) has exited", _SRC, where=here(th), seed=sim.seed)
    mem.check_range(th, api, off, nbytes, nbytes, "the address")
    if cta is not th.cta and sim.clocks_on:
        mem.remote[th.vci] = (clock(th), site())
    return mem, off


def load_own(a, dtype, api):
    """``ld.shared`` at a ``.shared::cta`` address (``cvta_to_shared_u32``'s: the offset into this CTA's own shared
    memory, whatever cluster it is in)."""
    th = enter(api)
    dt = np.dtype(dtype)
    off = int(a)
    if off % dt.itemsize:
        raise SimUsageError(api, f"the address must be {dt.itemsize}-byte aligned", f"offset {off:#x}",
                            "PTX ISA, ld: the address aligned to the access size", where=here(th), seed=th.sim.seed)
    mem = th.cta.smem
    mem.check_range(th, api, off, dt.itemsize, dt.itemsize, "the address")
    mem.load(th, off, dt.itemsize, site())
    return np.frombuffer(mem.buf, dt, 1, off)[0]


def load(a, dtype, api):
    th = enter(api)
    dt = np.dtype(dtype)
    mem, off = _peer(th, a, dt.itemsize, api)
    mem.load(th, off, dt.itemsize, site())
    return np.frombuffer(mem.buf, dt, 1, off)[0]


def store(a, v, dtype, api):
    th = enter(api)
    dt = np.dtype(dtype)
    mem, off = _peer(th, a, dt.itemsize, api)
    mem.store(th, off, dt.itemsize, site())
    mem.buf[off:off + dt.itemsize] = np.array([v], dt).view(np.uint8)


def arrive_remote(a, api="mbarrier_arrive_shared_cluster"):
    th = enter(api)
    mem, off = _peer(th, a, 8, api)
    from ..arrays import SHARED, Ptr

    bar = mbarrier_state.use(th, Ptr(SHARED, mem, off), api, remote=True)
    mbarrier_state.arrive(th, bar, 1, api)


def check_cta_exit(cta):
    """The last thread of ``cta`` exits: every DSMEM access to its shared memory by a peer must be ordered
    before that (a cluster barrier between the access and the exit)."""
    sim = cta.sim
    mem = cta.smem
    mem.alive = False
    if not (sim.check_dsmem and mem.remote):
        return
    rows = np.array([t.vci for t in cta.threads], np.int64)
    exit_vc = sim.vc[rows].max(axis=0)
    for tid, (clk, s) in mem.remote.items():
        if clk > exit_vc[tid]:
            from ..where import describe_site

            reader = sim.thread_by_vci(tid)
            raise DsmemLifetimeError(
                "CTA exit", "a CTA must not exit while a peer may still access its shared memory: a cluster barrier "
                "must order the peer's last DSMEM access before the exit", f"block {tuple(cta.blockIdx)} (rank "
                f"{cta.rank}) exits, but {describe_thread(reader)} accessed its shared memory at {describe_site(s)} "
                "with no cluster barrier in between", _SRC,
                where=f"when the last thread of block {tuple(cta.blockIdx)} exits", seed=sim.seed)
