"""load_x4 / store_x4: one 16-byte instruction for four 4-byte elements; load_shared_x2: one 8-byte shared load
that stays one."""

import numpy as np
import pytest
from numba import cuda
from numba.cuda import types

from asyncpipe.kernels.vector import load_shared_x2, load_x2, load_x4, store_x4
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


def pairs(src, dst):
    tile = cuda.shared.array(512, np.float32, alignment=16)
    i = cuda.threadIdx.x * 4
    v = load_x4(src, i)
    store_x4(tile, i, v[0], v[1], v[2], v[3])
    cuda.syncthreads()
    lo = load_shared_x2(tile, i)                  # two aligned neighbours: plain reads would become one LDS.128
    hi = load_shared_x2(tile, i + 2)
    store_x4(dst, i, hi[1], hi[0], lo[1], lo[0])


@pytest.mark.sass
def test_load_shared_x2_stays_two_lds64():
    cubin = assert_sass(pairs, (types.float32[::1], types.float32[::1]), has=("LDS.64",))
    assert cubin.count("LDS.64") == 2 and cubin.count("LDS.128") == 0


def test_load_shared_x2_takes_float32_arrays_only():
    with pytest.raises(Exception, match="load_shared_x2|_load_shared_x2|No implementation"):
        cuda.compile_ptx(lambda a: load_shared_x2(a, 0), (types.float64[::1],), cc=(9, 0))


def halves(src, dst):
    i = cuda.threadIdx.x * 4
    lo = load_x2(src, i)                          # two 8-byte loads where a 16-byte one would do
    hi = load_x2(src, i + 2)
    store_x4(dst, i, hi[1], hi[0], lo[1], lo[0])


@pytest.mark.sass
def test_load_x2_is_one_eight_byte_load():
    cubin = assert_sass(halves, (types.float32[::1], types.float32[::1]), has=("LDG.E.64", "STG.E.128"))
    assert cubin.count("LDG.E.64") == 2 and cubin.count("LDG.E.128") == 0


def test_load_x2_takes_four_byte_arrays_only():
    with pytest.raises(Exception, match="load_x2|No implementation"):
        cuda.compile_ptx(lambda a: load_x2(a, 0), (types.float64[::1],), cc=(9, 0))


@pytest.mark.gpu
@pytest.mark.parametrize("kernel,permute", [
    (copy4, lambda x: x.reshape(-1, 2, 2)[:, :, ::-1].reshape(-1)),    # lanes swapped in pairs
    (pairs, lambda x: x.reshape(-1, 4)[:, ::-1].reshape(-1)),           # each group of four reversed
    (halves, lambda x: x.reshape(-1, 4)[:, ::-1].reshape(-1)),          # the same through 8-byte loads
], ids=["copy4", "pairs", "halves"])
def test_vector_moves_gpu(kernel, permute, rng):
    src = rng.standard_normal(512).astype(np.float32)
    dst = cuda.to_device(np.full(512, np.nan, np.float32))
    cuda.jit(kernel)[1, 128](cuda.to_device(src), dst)
    np.testing.assert_array_equal(dst.copy_to_host(), permute(src))
