"""``resident_blocks`` and ``persistent_grid`` against the GPU itself: a grid of exactly the resident blocks runs
all at once (every block sees every other arrive), and one cluster more does not (some block gives up waiting,
because the last cluster only starts when a first one exits). With 200 KB of shared memory a block fills an SM, so
clusters of 4 are bound by the GPCs, not by ``sm_count // 4``."""

import numpy as np
import pytest
from numba import cuda

from asyncpipe.host import device_info, launch, persistent_grid, resident_blocks

pytestmark = [pytest.mark.gpu, pytest.mark.hopper]
SPINS = 3000            # x 1 us: how long a block waits for the others before it gives up
THREADS = 128


@cuda.jit
def gather(counter, seen, spins):
    """Each block arrives, then waits (at most ``spins`` sleeps) for the whole grid; ``seen``: arrivals it saw."""
    cuda.shared.array(0, np.uint8)
    if cuda.threadIdx.x == 0:
        total = cuda.gridDim.x
        cuda.atomic.add(counter, 0, 1)
        n = cuda.atomic.add(counter, 0, 0)
        i = 0
        while n < total and i < spins:
            cuda.nanosleep(1000)
            n = cuda.atomic.add(counter, 0, 0)
            i += 1
        seen[cuda.blockIdx.x] = n


def run(blocks, cluster, shared_mem):
    counter = cuda.to_device(np.zeros(1, np.uint32))
    seen = cuda.to_device(np.zeros(blocks, np.uint32))
    launch(gather, blocks, THREADS, counter, seen, np.int32(SPINS), cluster=cluster, shared_mem=shared_mem)
    return seen.copy_to_host()


@pytest.mark.parametrize("cluster, shared_mem", [(None, 200 * 1024), (None, 40 * 1024), (2, 200 * 1024),
                                                 (4, 200 * 1024), (8, 100 * 1024)])
def test_resident_blocks_all_run_at_once_and_one_cluster_more_does_not(cluster, shared_mem):
    size = cluster or 1
    args = (cuda.to_device(np.zeros(1, np.uint32)), cuda.to_device(np.zeros(1, np.uint32)), np.int32(SPINS))
    resident = resident_blocks(gather, THREADS, *args, cluster=cluster, shared_mem=shared_mem)
    sms = device_info().sm_count
    print(f"cluster {size}, {shared_mem} B: {resident} resident blocks ({sms} SMs)")
    assert resident % size == 0 and 0 < resident
    assert persistent_grid(gather, 10**6, THREADS, *args, cluster=cluster, shared_mem=shared_mem) == resident
    assert persistent_grid(gather, 3, THREADS, *args, cluster=cluster, shared_mem=shared_mem) == 3 * size
    assert (run(resident, cluster, shared_mem) == resident).all()
    over = run(resident + size, cluster, shared_mem)
    assert (over < resident + size).any(), "one cluster more than resident_blocks ran at once: the bound is not tight"
