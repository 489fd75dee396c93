"""The producer/consumer protocol of a ring of shared-memory stages, over two arrays of mbarriers.

``full_bars[i]`` says "slot i holds data" (the producer arrives, TMA copies complete their bytes);
``empty_bars[i]`` says "slot i may be overwritten" (every consumer arrives once it has finished
reading). Both arrays are ``cuda.shared.array(stages, np.uint64)``. A fresh mbarrier is in phase 0, and
a wait on parity 1 (the phase "before" it) returns at once: so the producer waits on ``empty`` with
``phase ^ 1`` and finds every slot free in its first round, while the consumer waits on ``full`` with
``phase`` and blocks until the first data lands.

=====================  =======================  ==================================================
verb                   who                      what it does to slot ``state.stage``
=====================  =======================  ==================================================
``pipeline_init``      one thread, once         ``full`` expects ``full_arrivals`` arrivals per
                                                phase, ``empty`` ``empty_arrivals``; fence so TMA
                                                and the cluster see the inits (then a block or
                                                cluster barrier)
``producer_acquire``   the producer thread      wait ``empty`` (parity ``phase ^ 1``): the consumers
                                                released the slot's previous contents
``producer_commit``    the producer thread      ``arrive.expect_tx(full, tx_bytes)``: one arrival
                                                plus the bytes its copies deliver; the phase
                                                completes when they all land (``tx_bytes`` 0: a plain
                                                arrival that releases the thread's ordinary stores)
``consumer_wait``      every consumer thread    wait ``full`` (parity ``phase``): the data is there
``consumer_release``   one thread per consumer  arrive on ``empty`` of every CTA of the cluster
                       unit (e.g. each warp)    (``cluster_size`` 1: this CTA's only)
=====================  =======================  ==================================================

Every verb then ``advance``\\ s its side's ``PipelineState``. Copies for the slot go between
``producer_acquire`` and ``producer_commit`` (or after it: the phase cannot complete before the
producer's own arrival). With multicast, each CTA's ``empty`` counts the releases of the consumers of
every CTA its producer writes into, which is what ``consumer_release(..., cluster_size)`` provides.

All functions are inlined into the calling kernel; they only call ``asyncpipe.ptx``.
"""

from __future__ import annotations

from numba import cuda, uint32

from .. import ptx


@cuda.jit(device=True, inline="always")
def pipeline_init(full_bars, empty_bars, stages, full_arrivals, empty_arrivals):
    """One thread: initialise ``stages`` full and empty barriers and publish the inits to the async
    proxy (TMA) and to the cluster (``fence.mbarrier_init.release.cluster``). The block (or cluster,
    for multicast and remote releases) must pass a barrier before anyone uses the ring."""
    for i in range(stages):
        ptx.mbarrier_init(ptx.addr(full_bars, i), full_arrivals)
        ptx.mbarrier_init(ptx.addr(empty_bars, i), empty_arrivals)
    ptx.fence_mbarrier_init_release_cluster()


@cuda.jit(device=True, inline="always")
def producer_acquire(empty_bars, state):
    """Block until slot ``state.stage`` is free: its ``empty`` barrier completed the phase before the
    one ``state.phase`` names (the first round passes at once)."""
    ptx.mbarrier_wait_parity(ptx.addr(empty_bars, state.stage), uint32(state.phase ^ uint32(1)))


@cuda.jit(device=True, inline="always")
def producer_commit(full_bars, state, tx_bytes):
    """Arrive on slot ``state.stage``'s ``full`` barrier, announcing ``tx_bytes`` bytes of
    asynchronous copies (TMA) that complete the phase when they land; 0 for data written with
    ordinary stores before this call (the arrival releases them)."""
    ptx.mbarrier_arrive_expect_tx(ptx.addr(full_bars, state.stage), tx_bytes)


@cuda.jit(device=True, inline="always")
def consumer_wait(full_bars, state):
    """Block until slot ``state.stage`` holds this round's data (its ``full`` phase completed);
    acquires what the producer and the copies released."""
    ptx.mbarrier_wait_parity(ptx.addr(full_bars, state.stage), state.phase)


@cuda.jit(device=True, inline="always")
def consumer_release(empty_bars, state, cluster_size):
    """Hand slot ``state.stage`` back: one arrival on its ``empty`` barrier in every CTA of the cluster
    (ranks 0 .. ``cluster_size`` - 1, through ``.shared::cluster`` addresses), or on this CTA's alone
    when ``cluster_size`` is 1. Call it once per consumer unit that ``empty_arrivals`` counts, after
    that unit's reads of the slot are complete (for wgmma: after ``wgmma_wait_group``).

    Remote arrivals use the default (CTA-scope release) ``mbarrier_arrive_shared_cluster``: a slot
    that was only read has nothing to publish, and the cluster-scope release would put a
    ``MEMBAR.ALL.GPU`` before every arrival (waiting, in a GEMM, for every outstanding store of C)."""
    if cluster_size == 1:
        ptx.mbarrier_arrive(ptx.addr(empty_bars, state.stage))
    else:
        for rank in range(cluster_size):
            ptx.mbarrier_arrive_shared_cluster(ptx.mapa_shared_cluster(ptx.addr(empty_bars, state.stage), rank))
