"""load_x4 / store_x4: one 16-byte instruction for four 4-byte elements."""

import numpy as np
import pytest
from numba import cuda
from numba.cuda import types

from asyncpipe.kernels.vector import load_x4, store_x4
from tests.sass import assert_sass


def copy4(src, dst):
    tile = cuda.shared.array(512, np.float32, alignment=16)
    i = cuda.threadIdx.x * 4
    v = load_x4(src, i)
    store_x4(tile, i, v[0], v[1], v[2], v[3])
    cuda.syncthreads()
    w = load_x4(tile, i)
    store_x4(dst, i, w[1], w[0], w[3], w[2])     # a visible permutation: the lanes stay apart


@pytest.mark.sass
def test_sixteen_byte_instructions():
    cubin = assert_sass(copy4, (types.float32[::1], types.float32[::1]),
                        has=("LDG.E.128", "STS.128", "LDS.128", "STG.E.128"))
    assert not any(op.startswith(("LDG.E ", "STG.E ")) or op in ("LDG.E", "STG.E") for op in cubin.opcodes)


def test_only_1d_four_byte_arrays():
    with pytest.raises(Exception, match="load_x4|_load_x4|No implementation"):
        cuda.compile_ptx(lambda a: load_x4(a, 0), (types.float64[::1],), cc=(9, 0))


@pytest.mark.gpu
def test_copy4_gpu(rng):
    src = rng.standard_normal(512).astype(np.float32)
    dst = cuda.to_device(np.full(512, np.nan, np.float32))
    cuda.jit(copy4)[1, 128](cuda.to_device(src), dst)
    np.testing.assert_array_equal(dst.copy_to_host(), src.reshape(-1, 2, 2)[:, :, ::-1].reshape(-1))
