"""load_x4 / store_x4 on the simulator: the values, and the alignment the GPU would fault on, named."""

import numpy as np
import pytest
from numba import cuda

from asyncpipe import sim
from asyncpipe.kernels.vector import load_x4, store_x4

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
