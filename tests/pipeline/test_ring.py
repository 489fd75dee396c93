"""The full/empty ring protocol: a small ring kernel offline (SASS) and on the GPU, in one CTA and in a
2-CTA cluster whose consumers release every CTA's slots."""

import numpy as np
import pytest
from numba import cuda, float32, types, uint64

from asyncpipe import ptx
from asyncpipe.pipeline import (advance, consumer_release, consumer_wait, pipeline_init, pipeline_state,
                                producer_acquire, producer_commit)
from tests.sass import assert_sass

STAGES = 3
ROUNDS = 10                 # > STAGES: every slot is reused and the phases flip
SLOT = 128                  # floats per slot: one per consumer thread
CONSUMERS = 128             # warps 1..4: one thread per float of a slot
THREADS = 32 + CONSUMERS    # warp 0 produces (its thread 0), warps 1..4 consume


def make_ring_kernel(cluster_size):
    def ring_kernel(src, dst):
        slots = cuda.shared.array((STAGES, SLOT), float32)
        full = cuda.shared.array(STAGES, uint64)
        empty = cuda.shared.array(STAGES, uint64)
        t = cuda.threadIdx.x
        base = (cuda.blockIdx.x * ROUNDS) * SLOT
        if t == 0:
            # full: the producer's one arrival; empty: one release per consumer thread of every CTA
            pipeline_init(full, empty, STAGES, 1, CONSUMERS * cluster_size)
        if cluster_size == 1:
            cuda.syncthreads()
        else:   # peers release into this CTA's empty barriers: their inits must be visible cluster-wide
            ptx.barrier_cluster_arrive()
            ptx.barrier_cluster_wait()

        if t == 0:                                        # ---- producer: one thread -------------
            st = pipeline_state(0, 0)
            for k in range(ROUNDS):
                producer_acquire(empty, st)
                for i in range(SLOT):                     # ordinary stores ...
                    slots[st.stage, i] = src[base + k * SLOT + i]
                producer_commit(full, st, 0)              # ... released by the arrival (no bytes owed)
                st = advance(st, STAGES)
        elif t >= 32:                                     # ---- consumers: warps 1..4 ------------
            c = t - 32
            st = pipeline_state(0, 0)
            for k in range(ROUNDS):
                consumer_wait(full, st)
                dst[base + k * SLOT + c] = slots[st.stage, c] * float32(2)
                consumer_release(empty, st, cluster_size)   # each thread hands back what it read
                st = advance(st, STAGES)
        if cluster_size > 1:   # no CTA exits while a peer may still release into its barriers
            ptx.barrier_cluster_arrive()
            ptx.barrier_cluster_wait()

    return ring_kernel


ARGS = (types.float32[::1], types.float32[::1])


@pytest.mark.sass
def test_ring_sass():
    cubin = assert_sass(make_ring_kernel(1), ARGS, has=("SYNCS.EXCH.64", "SYNCS.PHASECHK.TRANS64.TRYWAIT",
                                                       "SYNCS.ARRIVE.TRANS64", "FENCE.VIEW.ASYNC.S"))
    print(cubin.resources)


@pytest.mark.sass
def test_cluster_ring_sass():
    """cluster_size 2: each consumer thread releases through .shared::cluster addresses (remote arrives)."""
    assert_sass(make_ring_kernel(2), ARGS, has=("SYNCS.ARRIVE.TRANS64.RED.A1T0", "UCGABAR_ARV", "UCGABAR_WAIT",
                                               "SYNCS.PHASECHK.TRANS64.TRYWAIT"))


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("cluster_size", [1, 2])
def test_ring_gpu(cluster_size, rng):
    from asyncpipe.host import launch

    blocks = 4
    src = rng.standard_normal(blocks * ROUNDS * SLOT).astype(np.float32)
    dst = cuda.to_device(np.full(src.size, np.nan, np.float32))
    kernel = cuda.jit(make_ring_kernel(cluster_size))
    launch(kernel, blocks, THREADS, cuda.to_device(src), dst, cluster=cluster_size if cluster_size > 1 else None)
    cuda.synchronize()
    np.testing.assert_array_equal(dst.copy_to_host(), src * np.float32(2))
