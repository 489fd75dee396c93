"""``resident_blocks`` and ``persistent_grid`` in the simulator: one block per simulated SM, in whole clusters, after
a launch's checks."""

import numpy as np
import pytest
from numba import cuda

from asyncpipe.errors import AsyncpipeError
from asyncpipe.host import device_info, persistent_grid, resident_blocks

pytestmark = pytest.mark.sim


@cuda.jit
def kernel(out):
    out[cuda.blockIdx.x] = 1


@pytest.mark.parametrize("threads, shared_mem, cluster", [(384, 200 * 1024, None), (128, 0, None), (32, 0, None),
                                                      (384, 100 * 1024, 2)])
def test_resident_blocks_are_one_a_simulated_sm(threads, shared_mem, cluster):
    sms = device_info().sm_count
    size = cluster or 1
    assert resident_blocks(kernel, threads, np.zeros(1), cluster=cluster, shared_mem=shared_mem) == sms // size * size


def test_clusters_are_whole():
    sms = device_info().sm_count                    # 4 by default: 4 blocks of 200 KB, one cluster of 3
    assert resident_blocks(kernel, 128, np.zeros(1), cluster=3, shared_mem=200 * 1024) == sms // 3 * 3


def test_persistent_grid_is_the_units_or_the_resident_clusters():
    sms = device_info().sm_count
    assert persistent_grid(kernel, 10**6, 384, np.zeros(1), cluster=2, shared_mem=200 * 1024) == sms // 2 * 2
    assert persistent_grid(kernel, 1, 384, np.zeros(1), cluster=2, shared_mem=200 * 1024) == 2
    assert persistent_grid(kernel, 10**6, 384, np.zeros(1), shared_mem=200 * 1024) == sms


@pytest.mark.parametrize("call, message", [
    (lambda: resident_blocks(lambda x: x, 128, np.zeros(1)), "kernel must be a numba @cuda.jit kernel"),
    (lambda: resident_blocks(kernel, 2048, np.zeros(1)),
     r"block must be at most \(1024, 1024, 64\).*got \(2048, 1, 1\)"),
    (lambda: resident_blocks(kernel, 128, np.zeros(1), shared_mem=300 * 1024), r"at most 232448 bytes.*307200 dynamic"),
    (lambda: resident_blocks(kernel, 128, np.zeros(1), cluster=9), r"a cluster holds at most 8 CTAs.*= 9 CTAs"),
])
def test_bad_input_is_refused_before_anything_runs(call, message):
    with pytest.raises(AsyncpipeError, match=message):
        call()
