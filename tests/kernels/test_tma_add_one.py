"""The chapter's TMA add-one and its pipelined, persistent twin: exact against numpy."""

import numpy as np
import pytest
from numba import cuda
from numba.cuda import types

from asyncpipe.errors import AsyncpipeError
from asyncpipe.kernels import tma_add_one as T
from asyncpipe.kernels.unroll import unrolled
from asyncpipe.ptx.tensor_map_type import tensormap
from tests.sass import assert_sass

U64 = tensormap                    # the kernels' TensorMap argument


@pytest.mark.sass
def test_chapter_kernel_sass():
    assert_sass(unrolled(T.add_one_tma), (U64,), has=("UTMALDG.2D", "UTMASTG.2D", "SYNCS.ARRIVE.TRANS64", "FENCE.VIEW.ASYNC.S",
                                            "UTMACCTL.IV"))


@pytest.mark.sass
def test_pipelined_kernel_sass():
    cubin = assert_sass(unrolled(T.add_one_pipelined), (U64, types.int32, types.int32),
                        has=("UTMALDG.2D", "UTMASTG.2D", "SYNCS.PHASECHK.TRANS64.TRYWAIT", "DEPBAR.LE"))
    assert cubin.resources.shared <= 48 * 1024


def random_2d(rng, shape, dtype):
    if dtype == np.int32:
        return rng.integers(-(2**30), 2**30, shape, dtype=np.int32)
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.hopper
@pytest.mark.parametrize("pipelined", [False, True])
@pytest.mark.parametrize("dtype", [np.int32, np.float32])
@pytest.mark.parametrize("shape", [(1024, 2048), (1, 4097), (1000, 999), (33, 100), (7, 3), (1, 1), (4096, 4096)])
def test_add_one(pipelined, dtype, shape, rng):
    a = random_2d(rng, shape, dtype)
    d = cuda.to_device(a)
    T.add_one(d, pipelined=pipelined)
    np.testing.assert_array_equal(d.copy_to_host(), a + dtype(1))


@pytest.mark.hopper
@pytest.mark.parametrize("pipelined", [False, True])
def test_add_one_writes_nothing_outside_a_window(pipelined, rng):
    big = random_2d(rng, (70, 140), np.int32)
    d = cuda.to_device(big)
    T.add_one(d[3:67, 8:136], pipelined=pipelined)   # pitch 560 B, start 16-byte aligned
    expect = big.copy()
    expect[3:67, 8:136] += 1
    np.testing.assert_array_equal(d.copy_to_host(), expect)


@pytest.mark.hopper
@pytest.mark.simulator_too
@pytest.mark.parametrize("pipelined", [False, True])
@pytest.mark.parametrize("window", [(slice(3, 67), slice(8, 133)), (slice(3, 67), slice(8, 134)),
                                    (slice(3, 67), slice(8, 135)), (slice(5, 6), slice(0, 140)),
                                    (slice(5, 6), slice(4, 7))],
                         ids=["125-cols", "126-cols", "127-cols", "one-row-140", "one-row-3"])
def test_add_one_rows_ending_inside_a_granule(window, pipelined, rng):
    """Rows whose last 16-byte granule is partial (125..127 int32 of a pitched window, or one contiguous row): the
    TMA store writes whole granules (measured on the H200), so add_one maps the whole granules and adds the last
    elements of a row with a plain kernel; the neighbours of the window, in the same allocation, stay as they were."""
    big = random_2d(rng, (70, 140), np.int32)
    d = cuda.to_device(big)
    T.add_one(d[window], pipelined=pipelined)
    expect = big.copy()
    expect[window] += 1
    np.testing.assert_array_equal(d.copy_to_host(), expect)


@pytest.mark.hopper
@pytest.mark.parametrize("ctas_per_sm,stages", [(1, 4), (3, 2), (4, 5)])
def test_pipelined_grid_sizes(ctas_per_sm, stages, rng):
    a = random_2d(rng, (2048, 1536), np.int32)
    d = cuda.to_device(a)
    T.add_one(d, ctas_per_sm=ctas_per_sm, stages=stages)
    np.testing.assert_array_equal(d.copy_to_host(), a + 1)


@pytest.mark.gpu
@pytest.mark.simulator_too
@pytest.mark.parametrize("make,rule", [
    (lambda: cuda.to_device(np.zeros((4, 4), np.float64)), "a must be int32 or float32"),
    (lambda: cuda.to_device(np.zeros(16, np.int32)), "a must be 2-D"),
    (lambda: cuda.to_device(np.zeros((8, 12), np.int32))[:, 1:7], "global address must be 16-byte aligned"),
    (lambda: cuda.to_device(np.zeros((8, 15), np.int32))[:, 0:8], "rows must be 16-byte aligned"),
    (lambda: np.zeros((4, 4), np.int32), "CUDA device array"),
])
def test_add_one_bad_input(make, rule):
    with pytest.raises(AsyncpipeError, match=rule):
        T.add_one(make())
