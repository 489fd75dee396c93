"""The transpose into a zero-padded buffer (what sgemm(schedule="kmajor") reads A through), against numpy."""

import numpy as np
import pytest
from numba import cuda
from numba.cuda import types

from asyncpipe.kernels import transpose as T
from tests.sass import assert_sass


def run(a, rows_out, cols_out):
    rows, cols = a.shape
    dst = cuda.to_device(np.full(rows_out * cols_out, np.nan, np.float32))      # poisoned: padding must be written
    T.prepare(cuda.to_device(a.reshape(-1)), dst, rows, cols, rows_out, cols_out)()
    return dst.copy_to_host().reshape(cols_out, rows_out)


@pytest.mark.gpu
@pytest.mark.simulator_too
@pytest.mark.parametrize("rows,cols,rows_out,cols_out", [
    (64, 32, 64, 32),             # whole tiles, no padding
    (70, 33, 128, 48),            # ragged: padded to the kmajor SGEMM's BM rows and bk 16
    (1, 1, 128, 16),
    (130, 45, 256, 48),
])
def test_transpose(rows, cols, rows_out, cols_out, rng):
    a = rng.standard_normal((rows, cols)).astype(np.float32)
    got = run(a, rows_out, cols_out)
    np.testing.assert_array_equal(got[:cols, :rows], a.T)
    assert not got[cols:, :].any() and not got[:, rows:].any()          # zeros, not the NaN poison


@pytest.mark.gpu
def test_transpose_large(rng):
    a = rng.standard_normal((1000, 4097)).astype(np.float32)
    got = run(a, 1024, 4112)
    np.testing.assert_array_equal(got[:4097, :1000], a.T)
    assert not got[4097:, :].any() and not got[:, 1000:].any()


@pytest.mark.sass
def test_transpose_sass():
    """Coalesced both ways: 4-byte global loads and stores, one barrier, no local memory."""
    f32 = types.float32[::1]
    cubin = assert_sass(T._transpose, (f32, f32, types.int32, types.int32, types.int32, types.int32),
                        has=("LDG.E", "STG.E", "STS", "LDS", "BAR.SYNC"), lacks=("CALL", "LDL", "STL"))
    assert cubin.count("BAR.SYNC") == 1
