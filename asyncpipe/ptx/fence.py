"""Fences: order memory accesses across *proxies* and across the CTAs of a cluster.

Threads' ``ld``/``st`` go through the generic proxy; TMA and bulk copies (``cp.async.bulk*``) read
and write through the async proxy, and TMA reads its tensor map through the tensormap proxy. Nothing
orders accesses of different proxies to the same bytes unless a proxy fence says so:

- threads write shared memory that a TMA store (or any bulk copy) will read:
  ``fence_proxy_async_shared_cta`` by the writers, then a block barrier, then the copy;
- a tensor map in global memory was written (by the host or a kernel) before TMA uses it:
  ``fence_proxy_tensormap_generic_acquire_gpu`` on it before the first copy;
- barriers just initialised will be signalled by TMA or used by other CTAs of the cluster (remote
  arrives, multicast TMA): ``fence_mbarrier_init_release_cluster`` by the initialising thread, then a
  block barrier (a cluster barrier for other CTAs). Within one CTA, ``fence_proxy_async_shared_cta``
  also publishes the init to TMA, as the CUDA programming guide's TMA example does.
"""

from ..sim.prim import fence as _sim
from ._registry import primitive

_VOID = "void()"
_EACH = "each thread whose accesses must be ordered"


@primitive(_VOID, ptx="fence.proxy.async.shared::cta;", isa=80, sm=90, who=_EACH,
           sass=("MEMBAR.ALL.CTA", "FENCE.VIEW.ASYNC.S"))
def fence_proxy_async_shared_cta():
    """Orders this thread's generic-proxy accesses to this CTA's shared memory with async-proxy
    accesses (both ways). Run it after writing shared memory that a TMA store or bulk copy will read,
    before the block barrier that precedes the copy, and after TMA wrote what threads will then
    overwrite."""
    _sim.proxy_async("fence_proxy_async_shared_cta")


@primitive(_VOID, ptx="fence.proxy.async;", isa=80, sm=90, who=_EACH, sass=("MEMBAR.ALL.GPU", "FENCE.VIEW.ASYNC.S"))
def fence_proxy_async():
    """As ``fence_proxy_async_shared_cta`` but for every state space (shared and global): the generic
    and async proxies are ordered both ways for all of this thread's accesses (a GPU-scope membar, so
    dearer than the shared::cta form)."""
    _sim.proxy_async("fence_proxy_async")


@primitive("void(voidptr)", ptx="fence.proxy.tensormap::generic.acquire.gpu [addr], 128;", isa=83, sm=90,
           who="each thread that issues TMA with the tensor map (one thread per CTA, before its first copy)",
           sass=("UTMACCTL.IV",), tensor_maps=("tmap_addr",))
def fence_proxy_tensormap_generic_acquire_gpu(tmap_addr):
    """Makes the 128-byte tensor map at ``tmap_addr`` (``addr(tmap, 0)``: a generic pointer into
    global memory, 64-byte aligned), as written through the generic proxy, visible to the tensormap
    proxy that TMA reads it with, at GPU scope: it drops the map from TMA's descriptor cache. Costly
    (one per CTA slowed a copy-bound kernel about 5x on an H200): run it once per CTA, before its
    first copy, and only for a map in global memory that was written through the generic proxy."""
    _sim.tensormap_acquire(tmap_addr, "fence_proxy_tensormap_generic_acquire_gpu")


@primitive("void(voidptr)", ptx="fence.proxy.tensormap::generic.acquire.sys [addr], 128;", isa=83, sm=90,
           who="each thread that issues TMA with the tensor map (one thread per CTA, before its first copy)",
           sass=("UTMACCTL.IV",), tensor_maps=("tmap_addr",))
def fence_proxy_tensormap_generic_acquire_sys(tmap_addr):
    """As ``fence_proxy_tensormap_generic_acquire_gpu`` at system scope: the form the CUDA programming
    guide asks for when the map in global memory was written by the host (``cudaMemcpy``), which is
    how ``asyncpipe.host.TensorMap`` writes it."""
    _sim.tensormap_acquire(tmap_addr, "fence_proxy_tensormap_generic_acquire_sys")


@primitive(_VOID, ptx="fence.acq_rel.cluster;", isa=78, sm=90, who=_EACH,
           sass=("MEMBAR.ALL.GPU", "CGAERRBAR", "CCTL.IVALL"))
def fence_acq_rel_cluster():
    """A lightweight acquire-release fence at cluster scope: together with a flag written after it
    (release) or read before it (acquire), it orders this thread's memory accesses for every thread
    of the cluster, shared memory of other CTAs (DSMEM) included."""
    _sim.acq_rel_cluster("fence_acq_rel_cluster")


@primitive(_VOID, ptx="fence.acq_rel.gpu;", isa=60, sm=70, who="the one thread that publishes or reads a flag",
           sass=("MEMBAR.ALL.GPU",))
def fence_acq_rel_gpu():
    """An acquire-release fence at GPU scope: before a relaxed atomic or flag write it releases this thread's
    accesses, and the ones a block barrier made this thread observe, to every thread of the GPU; after an atomic or
    flag read it acquires what the writer released. A lighter fence than ``cuda.threadfence()`` (``fence.sc.gpu``,
    MEMBAR.SC.GPU; this one is MEMBAR.ALL.GPU; the difference not timed) for the "last CTA to arrive" pattern: every
    thread stores, a block barrier, then one thread fences, counts (``cuda.atomic.add``) and fences again, and a
    block barrier hands the count (and what it acquired) to the others."""
    _sim.acq_rel_gpu("fence_acq_rel_gpu")


@primitive(_VOID, ptx="fence.mbarrier_init.release.cluster;", isa=80, sm=90,
           who="each thread that ran mbarrier_init (usually one), before the barrier that publishes them",
           sass=("NOP",))
def fence_mbarrier_init_release_cluster():
    """Releases, at cluster scope, only this thread's earlier ``mbarrier_init`` (on ``.shared::cta``
    barriers), for the other CTAs of the cluster and for TMA: the barriers may be signalled once a
    following barrier is passed (for other CTAs a cluster barrier; ``barrier_cluster_arrive_relaxed``
    then ``barrier_cluster_wait`` suffices). Much cheaper than a full fence: on sm_90 it is a ``NOP``
    that only keeps the compiler from moving accesses across it."""
    _sim.mbarrier_init_release_cluster("fence_mbarrier_init_release_cluster")
