"""warpgroup_index() and warp_index(): threadIdx.x // 128 and // 32, broadcast from lane 0 so that ptxas knows
they are warp-uniform."""

import numpy as np
import pytest
from numba import cuda, types

from asyncpipe.pipeline import warp_index, warpgroup_index
from tests.sass import assert_sass


def roles_kernel(out, base):
    wg = warpgroup_index()
    out[cuda.threadIdx.x] = wg
    if wg == 1:                       # a warpgroup's address from it: uniform (no R2UR before the store's address)
        out[cuda.blockDim.x + cuda.threadIdx.x % 32] = base + wg * 128


@pytest.mark.gpu
@pytest.mark.simulator_too
def test_warpgroup_index_gpu():
    out = cuda.to_device(np.full(384 + 32, -1, np.int32))
    cuda.jit(roles_kernel)[1, 384](out, 7)
    got = out.copy_to_host()
    np.testing.assert_array_equal(got[:384], np.arange(384) // 128)
    np.testing.assert_array_equal(got[384:], np.full(32, 7 + 128))


@pytest.mark.sass
def test_warpgroup_index_sass_is_one_shuffle():
    """threadIdx.x // 128 through one SHFL.IDX from lane 0, inlined (no CALL)."""
    cubin = assert_sass(roles_kernel, (types.int32[::1], types.int32), has=("SHFL.IDX",), lacks=("CALL", "LDL"))
    assert cubin.opcodes.count("SHFL.IDX") == 1


def warp_kernel(out):
    out[cuda.threadIdx.x] = warp_index()


@pytest.mark.gpu
@pytest.mark.simulator_too
def test_warp_index_gpu():
    out = cuda.to_device(np.full(384, -1, np.int32))
    cuda.jit(warp_kernel)[1, 384](out)
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(384) // 32)


@pytest.mark.sass
def test_warp_index_sass_is_one_shuffle():
    cubin = assert_sass(warp_kernel, (types.int32[::1],), has=("SHFL.IDX",), lacks=("CALL", "LDL"))
    assert cubin.opcodes.count("SHFL.IDX") == 1
