"""Fences in the simulator: each one is recorded at the thread's current clock (then the clock
ticks), so that a later check can ask "did the writer fence after this write, and does the reader
know about that fence?" (see ``common.fenced``)."""

from __future__ import annotations

from ...constants import TENSOR_MAP_BYTES
from ..arrays import GLOBAL, TMAP, Ptr, check_global
from ..errors import SimUsageError
from ..where import here
from .common import clock, enter, tick


def proxy_async(api):
    """fence.proxy.async[.shared::cta]: generic <-> async proxy, both ways, for this thread."""
    th = enter(api)
    th.fences_async.append(clock(th))
    tick(th)


def mbarrier_init_release_cluster(api):
    """Publishes this thread's earlier mbarrier inits to the cluster and to the async proxy."""
    th = enter(api)
    c = clock(th)
    th.fences_cluster.append(c)
    th.fences_async.append(c)
    tick(th)


def acq_rel_cluster(api):
    """A cluster-scope acquire-release fence: orders, among other things, earlier mbarrier inits."""
    th = enter(api)
    th.fences_cluster.append(clock(th))
    tick(th)


def acq_rel_gpu(api):
    """A GPU-scope acquire-release fence. The simulator keeps global memory sequentially consistent, so it
    orders nothing more; it costs the thread a step like any instruction."""
    th = enter(api)
    tick(th)


def tensormap_acquire(tmap_ptr, api):
    """Acquires a tensor map for TMA: remembered per thread (the TMA issue checks it). A generic
    pointer to 128 bytes of global memory is accepted too (the fence reads nothing)."""
    th = enter(api)
    if isinstance(tmap_ptr, Ptr) and tmap_ptr.space == TMAP:
        th.tmaps.add(id(tmap_ptr.obj))
        return
    if isinstance(tmap_ptr, Ptr) and tmap_ptr.space == GLOBAL:
        check_global(th, api, tmap_ptr, TENSOR_MAP_BYTES)
        return
    got = tmap_ptr.space if isinstance(tmap_ptr, Ptr) else type(tmap_ptr).__name__
    raise SimUsageError(api, "the operand must be addr(tmap, 0) of a TensorMap (or of 128 bytes of global memory)",
                        got, "PTX ISA, fence.proxy.tensormap", where=here(th), seed=th.sim.seed)
