"""elect.sync: SASS offline, then exactly one elected lane per warp and mask on the GPU."""

import numpy as np
import pytest
from numba import cuda
from numba.cuda import types

from asyncpipe import ptx
from tests.sass import assert_sass

u32 = types.uint32[::1]
i32_2d = types.int32[:, ::1]

WARP = 32
THREADS = 128
BLOCKS = 2
FULL = 0xFFFFFFFF
LOW_HALF = 0x0000FFFF        # lanes 0..15
ODD = 0xAAAAAAAA             # lanes 1, 3, ..., 31
POISON = -1


def sass_elect(masks, out):
    out[cuda.threadIdx.x] = ptx.elect_sync(masks[0])


@pytest.mark.sass
def test_elect_sass():
    assert_sass(sass_elect, (u32, u32), has=ptx.REGISTRY["elect_sync"].sass)


def elect_kernel(out):
    """Column 0 and 1: the whole warp elects twice; column 2: lanes 0..15 only; column 3: odd lanes
    only. A lane outside a mask does not execute that elect and leaves its poison in place."""
    t = cuda.threadIdx.x
    g = cuda.blockIdx.x * THREADS + t
    lane = t % WARP
    out[g, 0] = ptx.elect_sync(FULL)          # all 32 lanes are here: the warp is converged
    out[g, 1] = ptx.elect_sync(FULL)          # the same mask elects the same lane again
    if lane < 16:
        out[g, 2] = ptx.elect_sync(LOW_HALF)  # every lane of the mask takes this branch, no other
    if lane % 2 == 1:
        out[g, 3] = ptx.elect_sync(ODD)


@pytest.mark.sass
def test_gpu_kernel_compiles():
    cubin = assert_sass(elect_kernel, (i32_2d,), has=("ELECT",))
    assert cubin.count("ELECT") >= 4, cubin.sass


@pytest.mark.gpu
@pytest.mark.hopper
def test_one_lane_per_warp_gpu():
    out = cuda.to_device(np.full((BLOCKS * THREADS, 4), POISON, np.int32))
    cuda.jit(elect_kernel)[BLOCKS, THREADS](out)
    got = out.copy_to_host().reshape(BLOCKS * THREADS // WARP, WARP, 4)   # (warp, lane, column)
    lanes = np.arange(WARP)
    for col, in_mask in ((0, lanes >= 0), (1, lanes >= 0), (2, lanes < 16), (3, lanes % 2 == 1)):
        sel = got[:, :, col]
        # lanes in the mask return 0 or 1, exactly one 1 per warp; lanes outside keep the poison
        assert set(np.unique(sel[:, in_mask])) <= {0, 1}, sel
        np.testing.assert_array_equal(sel[:, in_mask].sum(axis=1), np.ones(len(sel), np.int32))
        np.testing.assert_array_equal(sel[:, ~in_mask], POISON)
    # deterministic: the full mask elected the same lane both times
    np.testing.assert_array_equal(got[:, :, 0], got[:, :, 1])
