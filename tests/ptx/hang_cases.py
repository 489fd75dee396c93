"""Kernels that hang on the GPU, and correct twins, for ``ASYNCPIPE_DEBUG=1`` (tests/ptx/test_debug.py).

Run as a script in a process started with ``ASYNCPIPE_DEBUG=1``: it runs every case (or those named on
the command line) in order and prints one JSON line per case: the error's type and message, the record
the wait that gave up left, or whether a correct kernel's answer equals numpy's. Hang cases and correct
ones alternate, so each correct one also shows the GPU is fine after a hang.
"""

from __future__ import annotations

import json
import sys

import numpy as np
from numba import cuda, float32, uint32, uint64

from asyncpipe import ptx
from asyncpipe.pipeline import (advance, consumer_release, consumer_wait, pipeline_init, pipeline_state,
                                producer_acquire, producer_commit)

W = 64                      # threads per block in the small cases
STAGES, ROUNDS, SLOT = 3, 8, 128
RING_THREADS = 32 + SLOT    # warp 0 produces (thread 0), warps 1..4 consume one float each


@cuda.jit(device=True)
def stuck(bar):
    """A warp that never arrives where it should: it sleeps a little (so that the other threads' wait
    starts first and is the one to give up first), then waits on ``bar``, which nobody arrives on."""
    for _ in range(100):
        cuda.nanosleep(1000)
    ptx.mbarrier_wait_parity(ptx.addr(bar, 0), 0)


@cuda.jit(device=True)
def init_stuck_barrier(bar):
    if cuda.threadIdx.x == 0:
        ptx.mbarrier_init(ptx.addr(bar, 0), 1)
    cuda.syncthreads()


# ---------------------------------------------------------------------------------------------
# mbarrier
# ---------------------------------------------------------------------------------------------
@cuda.jit
def arrivals_short(out):
    """init asks for W + 1 arrivals per phase; only W threads arrive."""
    bar = cuda.shared.array(1, uint64)
    t = cuda.threadIdx.x
    if t == 0:
        ptx.mbarrier_init(ptx.addr(bar, 0), W + 1)
    cuda.syncthreads()
    ptx.mbarrier_arrive(ptx.addr(bar, 0))
    ptx.mbarrier_wait_parity(ptx.addr(bar, 0), 0)
    out[t] = 1


@cuda.jit
def arrivals_short_try_wait(out):
    """The same mistake, waited for with the user's own try_wait loop."""
    bar = cuda.shared.array(1, uint64)
    t = cuda.threadIdx.x
    if t == 0:
        ptx.mbarrier_init(ptx.addr(bar, 0), W + 1)
    cuda.syncthreads()
    ptx.mbarrier_arrive(ptx.addr(bar, 0))
    while not ptx.mbarrier_try_wait_parity(ptx.addr(bar, 0), 0):
        pass
    out[t] = 1


@cuda.jit
def arrivals_short_test_wait(out):
    """The same mistake, polled with test_wait while the thread counts its polls."""
    bar = cuda.shared.array(1, uint64)
    t = cuda.threadIdx.x
    if t == 0:
        ptx.mbarrier_init(ptx.addr(bar, 0), W + 1)
    cuda.syncthreads()
    ptx.mbarrier_arrive(ptx.addr(bar, 0))
    polls = 0
    while not ptx.mbarrier_test_wait_parity(ptx.addr(bar, 0), 0):
        polls += 1
    out[t] = polls


@cuda.jit
def polls_that_succeed(out):
    """Correct polling: phase 0 polled once before its arrivals (answer 0), then polled to completion with
    try_wait; then eight more phases, each polled to completion with test_wait (the same parities again
    and again: each success ends the streak)."""
    bar = cuda.shared.array(1, uint64)
    t = cuda.threadIdx.x
    if t == 0:
        ptx.mbarrier_init(ptx.addr(bar, 0), W)
    cuda.syncthreads()
    early = ptx.mbarrier_test_wait_parity(ptx.addr(bar, 0), 0)
    ptx.mbarrier_arrive(ptx.addr(bar, 0))
    while not ptx.mbarrier_try_wait_parity(ptx.addr(bar, 0), 0):
        pass
    for phase in range(1, 9):
        cuda.syncthreads()
        ptx.mbarrier_arrive(ptx.addr(bar, 0))
        while not ptx.mbarrier_test_wait_parity(ptx.addr(bar, 0), phase & 1):
            pass
    out[t] = early + 1


@cuda.jit
def expect_tx_over(src, out):
    """Thread 0 announces 2 KB on the barrier; its bulk copy brings 1 KB."""
    tile = cuda.shared.array(256, float32)
    bar = cuda.shared.array(1, uint64)
    t = cuda.threadIdx.x
    if t == 0:
        ptx.mbarrier_init(ptx.addr(bar, 0), 1)
        ptx.fence_proxy_async_shared_cta()
    cuda.syncthreads()
    if t == 0:
        ptx.mbarrier_arrive_expect_tx(ptx.addr(bar, 0), 2048)
        ptx.cp_async_bulk_shared_global(ptx.addr(tile, 0), ptx.addr(src, 0), 1024, ptx.addr(bar, 0))
    ptx.mbarrier_wait_parity(ptx.addr(bar, 0), 0)
    out[t] = tile[t]


def make_ring(release=True, tx_bytes=0, cluster_size=1):
    """tests/pipeline/test_ring.py's ring: the producer stores a slot, the consumers double it.
    ``release=False``: the consumers never hand a slot back (the producer waits forever at round
    STAGES); ``tx_bytes`` > 0: the producer announces bytes no copy brings (the consumers wait forever)."""

    @cuda.jit
    def ring(src, dst):
        slots = cuda.shared.array((STAGES, SLOT), float32)
        full = cuda.shared.array(STAGES, uint64)
        empty = cuda.shared.array(STAGES, uint64)
        t = cuda.threadIdx.x
        base = cuda.blockIdx.x * ROUNDS * SLOT
        if t == 0:
            pipeline_init(full, empty, STAGES, 1, SLOT * cluster_size)
        if cluster_size == 1:
            cuda.syncthreads()
        else:
            ptx.barrier_cluster_arrive()
            ptx.barrier_cluster_wait()
        if t == 0:
            st = pipeline_state(0, 0)
            for k in range(ROUNDS):
                producer_acquire(empty, st)
                for i in range(SLOT):
                    slots[st.stage, i] = src[base + k * SLOT + i]
                producer_commit(full, st, tx_bytes)
                st = advance(st, STAGES)
        elif t >= 32:
            c = t - 32
            st = pipeline_state(0, 0)
            for k in range(ROUNDS):
                consumer_wait(full, st)
                dst[base + k * SLOT + c] = slots[st.stage, c] * float32(2)
                if release:
                    consumer_release(empty, st, cluster_size)
                st = advance(st, STAGES)
        if cluster_size > 1:
            ptx.barrier_cluster_arrive()
            ptx.barrier_cluster_wait()

    return ring


# ---------------------------------------------------------------------------------------------
# Named barriers
# ---------------------------------------------------------------------------------------------
@cuda.jit
def named_short(out):
    """Warps 0 and 1 meet at named barrier 1 counted for 128 threads; warps 2 and 3 never come."""
    bar = cuda.shared.array(1, uint64)
    init_stuck_barrier(bar)
    t = cuda.threadIdx.x
    if t < 64:
        ptx.bar_sync(1, 128)
    else:
        stuck(bar)
    out[t] = 1


@cuda.jit
def named_handover(src, dst):
    """Warps 0-1 write a tile and bar_arrive(1, 128); warps 2-3 bar_sync(1, 128) and read it; then the
    other way round on barrier 2 (the writers wait for the readers before the next round)."""
    tile = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    for k in range(ROUNDS):
        if t < 64:
            if k > 0:
                ptx.bar_sync(2, 128)             # the readers are done with the last round
            tile[t] = src[k * 64 + t]
            ptx.bar_arrive(1, 128)
        else:
            ptx.bar_sync(1, 128)
            dst[k * 64 + t - 64] = tile[t - 64] + float32(1)
            if k < ROUNDS - 1:
                ptx.bar_arrive(2, 128)


# ---------------------------------------------------------------------------------------------
# The cluster barrier
# ---------------------------------------------------------------------------------------------
@cuda.jit
def cluster_short(out):
    """Every thread of a 2-CTA cluster meets at the cluster barrier but warp 1 of CTA rank 1. (A warp that
    exited instead would count as arrived on the GPU: it is stuck elsewhere.)"""
    bar = cuda.shared.array(1, uint64)
    init_stuck_barrier(bar)
    t = cuda.threadIdx.x
    if ptx.cluster_ctarank() == 1 and t >= 32:
        stuck(bar)
    else:
        ptx.barrier_cluster_arrive()
        ptx.barrier_cluster_wait()
    out[cuda.blockIdx.x * W + t] = 1


@cuda.jit
def cluster_exchange(src, dst):
    """Each CTA of a 2-CTA cluster writes its slice, passes two cluster barriers, reads its peer's
    slice through DSMEM (arrive.relaxed + wait first: both CTAs have started)."""
    mine = cuda.shared.array(W, float32)
    t = cuda.threadIdx.x
    rank = ptx.cluster_ctarank()
    ptx.barrier_cluster_arrive_relaxed()
    ptx.barrier_cluster_wait()
    mine[t] = src[cuda.blockIdx.x * W + t]
    ptx.barrier_cluster_arrive()
    ptx.barrier_cluster_wait()
    peer = ptx.mapa_shared_cluster(ptx.addr(mine, t), rank ^ 1)
    dst[cuda.blockIdx.x * W + t] = ptx.ld_shared_cluster_f32(peer)
    ptx.barrier_cluster_arrive()
    ptx.barrier_cluster_wait()


# ---------------------------------------------------------------------------------------------
# Running them
# ---------------------------------------------------------------------------------------------
def _run(case: str):
    """Launch ``case``; returns the correct kernels' ``ok`` (answer equal to numpy's)."""
    from asyncpipe.host import launch

    rng = np.random.default_rng(7)
    out = cuda.to_device(np.zeros(2 * W, np.uint32))
    if case == "arrivals_short":
        arrivals_short[1, W](out)
    elif case == "arrivals_short_try_wait":
        arrivals_short_try_wait[1, W](out)
    elif case == "arrivals_short_test_wait":
        arrivals_short_test_wait[1, W](out)
    elif case == "polls_that_succeed":
        polls_that_succeed[1, W](out)
        cuda.synchronize()
        return bool((out.copy_to_host()[:W] == 1).all())
    elif case == "expect_tx_over":
        expect_tx_over[1, W](cuda.to_device(rng.standard_normal(256).astype(np.float32)), out)
    elif case.startswith("ring"):
        cluster = 2 if case.endswith("cluster") else None
        kernel = make_ring(release="never_released" not in case, tx_bytes=4 if case == "ring_bytes_owed" else 0,
                           cluster_size=cluster or 1)
        src = rng.standard_normal(4 * ROUNDS * SLOT).astype(np.float32)
        dst = cuda.to_device(np.full(src.size, np.nan, np.float32))
        launch(kernel, 4, RING_THREADS, cuda.to_device(src), dst, cluster=cluster)
        return bool(np.array_equal(dst.copy_to_host(), src * np.float32(2)))
    elif case == "named_short":
        named_short[1, 128](out)
    elif case == "named_handover":
        src = rng.standard_normal(ROUNDS * 64).astype(np.float32)
        dst = cuda.to_device(np.full(src.size, np.nan, np.float32))
        named_handover[1, 128](cuda.to_device(src), dst)
        return bool(np.array_equal(dst.copy_to_host(), src + np.float32(1)))
    elif case == "cluster_short":
        launch(cluster_short, 2, W, out, cluster=2)
    elif case == "cluster_exchange":
        src = rng.standard_normal(4 * W).astype(np.float32)
        dst = cuda.to_device(np.full(src.size, np.nan, np.float32))
        launch(cluster_exchange, 4, W, cuda.to_device(src), dst, cluster=2)
        return bool(np.array_equal(dst.copy_to_host(), src.reshape(2, 2, W)[:, ::-1].reshape(-1)))
    else:
        raise KeyError(case)
    cuda.synchronize()
    return None


CASES = ("arrivals_short", "ring", "arrivals_short_try_wait", "named_handover", "expect_tx_over", "ring_cluster",
         "ring_never_released", "cluster_exchange", "ring_bytes_owed", "ring", "named_short", "named_handover",
         "cluster_short", "cluster_exchange", "ring_never_released_cluster", "ring_cluster", "arrivals_short_test_wait",
         "polls_that_succeed")


def main(cases) -> None:
    for case in cases:
        row = {"case": case}
        try:
            row["ok"] = _run(case)
        except Exception as exc:   # noqa: BLE001 - reported, the test decides
            row["error"], row["message"] = type(exc).__name__, str(exc)
            record = getattr(exc, "record", None)
            if record is not None:
                row["record"] = {k: record[k].tolist() for k in record.dtype.names}
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or CASES)
