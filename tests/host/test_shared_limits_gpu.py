"""On the GPU, the shared-memory launch limits the simulator enforces before a launch (issue 18, hole 6;
``asyncpipe/sim/host.py``): numba's own ``kernel[grid, block, stream, shared]`` sets no opt-in, so the
driver refuses more than 48 KB of static plus dynamic shared memory; ``asyncpipe.host.launch`` opts in.
Measured on the H200 on 2026-12-02: numba 0.30.4 launches through cuda.core, whose ``CUDAError`` carries
the driver's refusal (not numba's ``CudaAPIError``); both are accepted."""

import numpy as np
import pytest
from numba import cuda

from asyncpipe.host import launch

pytestmark = [pytest.mark.gpu, pytest.mark.hopper]
W = 32


def make_kernel(static_floats):
    @cuda.jit
    def kernel(out):
        dyn = cuda.shared.array(0, np.float32)
        st = cuda.shared.array(static_floats, np.float32)
        t = cuda.threadIdx.x
        st[t] = t
        dyn[t] = 2 * t
        cuda.syncthreads()
        out[t] = st[(t + 1) % W] + dyn[(t + 3) % W]
    return kernel


def expected():
    t = np.arange(W)
    return ((t + 1) % W + 2 * ((t + 3) % W)).astype(np.float32)


def launch_errors():
    """The exception types a refused numba launch raises: numba's own, and cuda.core's (numba-cuda 0.30 launches
    through cuda.core, whose error class is not public API)."""
    from numba.cuda.cudadrv.driver import CudaAPIError

    try:
        from cuda.core._utils.cuda_utils import CUDAError
    except ImportError:
        return (CudaAPIError,)
    return (CudaAPIError, CUDAError)


def test_numba_launch_over_48kb_is_refused_by_the_driver():
    out = cuda.to_device(np.zeros(W, np.float32))
    with pytest.raises(launch_errors(), match="CUDA_ERROR_INVALID_VALUE"):
        make_kernel(8192)[1, W, 0, 32768](out)              # 32 KB static + 32 KB dynamic
        cuda.synchronize()


def test_numba_launch_of_48kb_runs():
    out = cuda.to_device(np.zeros(W, np.float32))
    make_kernel(8192)[1, W, 0, 16384](out)                  # 32 KB + 16 KB
    np.testing.assert_array_equal(out.copy_to_host(), expected())


def test_host_launch_opts_in_above_48kb():
    out = cuda.to_device(np.zeros(W, np.float32))
    launch(make_kernel(8192), 1, W, out, shared_mem=32768)
    np.testing.assert_array_equal(out.copy_to_host(), expected())
