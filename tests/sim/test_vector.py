"""load_x4 / store_x4 / load_shared_x2 on the simulator: the values, and the alignment (and memory) the GPU would
fault on, named."""

import numpy as np
import pytest
from numba import cuda

from asyncpipe import sim
from asyncpipe.kernels.vector import load_shared_x2, load_x4, store_x4

pytestmark = pytest.mark.sim


def make_copy(shift):
    @cuda.jit
    def kernel(src, dst):
        tile = cuda.shared.array(256, np.float32, alignment=16)
        i = cuda.threadIdx.x * 4
        v = load_x4(src, i + shift)
        store_x4(tile, i, v[0], v[1], v[2], v[3])
        cuda.syncthreads()
        w = load_x4(tile, i)
        store_x4(dst, i, w[1], w[0], w[3], w[2])
    return kernel


def test_sixteen_byte_moves():
    src = np.arange(260, dtype=np.float32)
    dst = np.full(256, np.nan, np.float32)
    make_copy(0)[1, 64](src, dst)
    np.testing.assert_array_equal(dst, src[:256].reshape(-1, 2, 2)[:, :, ::-1].reshape(-1))


def test_misaligned_address_is_named():
    src = np.arange(260, dtype=np.float32)
    dst = np.full(256, np.nan, np.float32)
    with pytest.raises(sim.SimUsageError, match=r"load_x4: &a\[i\] must be 16-byte aligned.*4 bytes past"):
        make_copy(1)[1, 64](src, dst)


def make_pairs(shift, from_global=False):
    @cuda.jit
    def kernel(src, dst):
        tile = cuda.shared.array(128, np.float32, alignment=16)
        i = cuda.threadIdx.x * 2
        tile[i], tile[i + 1] = src[i], src[i + 1]
        cuda.syncthreads()
        v = load_shared_x2(src if from_global else tile, i + shift)
        dst[i], dst[i + 1] = v[1], v[0]
    return kernel


def test_eight_byte_shared_loads():
    src = np.arange(128, dtype=np.float32) * 1.5 - 7
    dst = np.full(128, np.nan, np.float32)
    make_pairs(0)[1, 64](src, dst)
    np.testing.assert_array_equal(dst, src.reshape(-1, 2)[:, ::-1].reshape(-1))


def test_load_shared_x2_misaligned_is_named():
    src, dst = np.arange(130, dtype=np.float32), np.full(128, np.nan, np.float32)
    with pytest.raises(sim.SimUsageError, match=r"load_shared_x2: &a\[i\] must be 8-byte aligned.*4 bytes past"):
        make_pairs(1)[1, 32](src, dst)


def test_load_shared_x2_of_global_memory_is_named():
    src, dst = np.arange(128, dtype=np.float32), np.full(128, np.nan, np.float32)
    with pytest.raises(sim.SimUsageError, match=r"load_shared_x2: smem must be a shared-memory array.*a global array"):
        make_pairs(0, from_global=True)[1, 64](src, dst)
