"""cp.async: SASS offline, then exact copies on the GPU."""

import numpy as np
import pytest
from numba import cuda
from numba.cuda import types

from asyncpipe import ptx
from tests.sass import assert_sass

f32 = types.float32[::1]

# ---------------------------------------------------------------------------------------------
# Kernels. Each thread copies one chunk of `size` bytes into shared memory, waits, writes it back.
# ---------------------------------------------------------------------------------------------
COPIES = {
    ("ca", 4): ptx.cp_async_ca_shared_global_4,
    ("ca", 8): ptx.cp_async_ca_shared_global_8,
    ("ca", 16): ptx.cp_async_ca_shared_global_16,
    ("cg", 16): ptx.cp_async_cg_shared_global_16,
}
ZFILL = {
    ("ca", 4): ptx.cp_async_ca_shared_global_4_src_size,
    ("ca", 8): ptx.cp_async_ca_shared_global_8_src_size,
    ("ca", 16): ptx.cp_async_ca_shared_global_16_src_size,
    ("cg", 16): ptx.cp_async_cg_shared_global_16_src_size,
}


def make_copy(copy, words):
    def kernel(src, dst):
        smem = cuda.shared.array(1024, np.float32)
        t = cuda.threadIdx.x
        copy(ptx.addr(smem, t * words), ptx.addr(src, t * words))
        ptx.cp_async_commit_group()
        ptx.cp_async_wait_group(0)
        cuda.syncthreads()
        for w in range(words):
            dst[t * words + w] = smem[t * words + w]

    return kernel


def make_zfill(copy, words):
    def kernel(src, dst, src_bytes):
        smem = cuda.shared.array(1024, np.float32)
        t = cuda.threadIdx.x
        for w in range(words):
            smem[t * words + w] = np.float32(np.nan)      # poison: the zero fill must overwrite it
        cuda.syncthreads()
        copy(ptx.addr(smem, t * words), ptx.addr(src, t * words), src_bytes[t])
        ptx.cp_async_wait_all()
        cuda.syncthreads()
        for w in range(words):
            dst[t * words + w] = smem[t * words + w]

    return kernel


def pipeline_kernel(src, dst, wait_n):
    """Eight groups of one 16-byte copy per thread; after wait_group(N) the first 8 - N have landed."""
    smem = cuda.shared.array((8, 512), np.float32)
    t = cuda.threadIdx.x
    for g in range(8):
        ptx.cp_async_cg_shared_global_16(ptx.addr(smem, (g, t * 4)), ptx.addr(src, g * 512 + t * 4))
        ptx.cp_async_commit_group()
    n = wait_n[0]
    if n == 0:
        ptx.cp_async_wait_group(0)
    elif n == 1:
        ptx.cp_async_wait_group(1)
    elif n == 2:
        ptx.cp_async_wait_group(2)
    elif n == 3:
        ptx.cp_async_wait_group(3)
    elif n == 4:
        ptx.cp_async_wait_group(4)
    elif n == 5:
        ptx.cp_async_wait_group(5)
    elif n == 6:
        ptx.cp_async_wait_group(6)
    else:
        ptx.cp_async_wait_group(7)
    landed = 8 - n
    for g in range(landed):
        for w in range(4):
            dst[g * 512 + t * 4 + w] = smem[g, t * 4 + w]
    ptx.cp_async_wait_all()   # leave no copy in flight at exit


# ---------------------------------------------------------------------------------------------
# Offline SASS
# ---------------------------------------------------------------------------------------------
@pytest.mark.sass
@pytest.mark.parametrize("kind,size", sorted(COPIES))
def test_copy_sass(kind, size):
    copy = COPIES[kind, size].primitive
    cubin = assert_sass(make_copy(COPIES[kind, size], size // 4), (f32, f32),
                        has=(*copy.sass, *ptx.cp_async_commit_group.primitive.sass,
                             *ptx.cp_async_wait_group.primitive.sass))
    assert copy.sass[0] in cubin.opcodes, f"{copy.sass[0]} missing (exact) from SASS:\n{cubin.sass}"


@pytest.mark.sass
@pytest.mark.parametrize("kind,size", sorted(ZFILL))
def test_zfill_sass(kind, size):
    copy = ZFILL[kind, size].primitive
    cubin = assert_sass(make_zfill(ZFILL[kind, size], size // 4), (f32, f32, types.uint32[::1]),
                        has=(*copy.sass, *ptx.cp_async_wait_all.primitive.sass))
    assert copy.sass[0] in cubin.opcodes, f"{copy.sass[0]} missing (exact) from SASS:\n{cubin.sass}"


@pytest.mark.sass
def test_wait_group_immediates_fold():
    cubin = assert_sass(pipeline_kernel, (f32, f32, types.int32[::1]), has=ptx.cp_async_wait_group.primitive.sass)
    waits = [line for line in cubin.sass.splitlines() if "DEPBAR.LE" in line]
    for n in range(8):   # one wait per immediate, none left as a run-time switch on the default
        assert any(f"SB0, 0x{n:x}" in line for line in waits), f"wait_group {n} missing:\n{cubin.sass}"


@pytest.mark.sass
def test_mbarrier_arrive_sass():
    def kernel(src, dst):
        smem = cuda.shared.array(128, np.float32)
        bar = cuda.shared.array(2, np.uint64)
        t = cuda.threadIdx.x
        ptx.cp_async_ca_shared_global_4(ptx.addr(smem, t), ptx.addr(src, t))
        ptx.cp_async_mbarrier_arrive(ptx.addr(bar, 0))
        ptx.cp_async_mbarrier_arrive_noinc(ptx.addr(bar, 1))
        dst[t] = smem[t]

    assert_sass(kernel, (f32, f32), has=(*ptx.cp_async_ca_shared_global_4.primitive.sass,
                                         *ptx.cp_async_mbarrier_arrive.primitive.sass,
                                         *ptx.cp_async_mbarrier_arrive_noinc.primitive.sass))


# ---------------------------------------------------------------------------------------------
# GPU: exact copies
# ---------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("kind,size", sorted(COPIES))
def test_copy_gpu(kind, size, rng):
    words = size // 4
    threads = 1024 // words
    src = rng.standard_normal(1024).astype(np.float32)
    dst = cuda.to_device(np.full(1024, np.nan, np.float32))
    cuda.jit(make_copy(COPIES[kind, size], words))[1, threads](cuda.to_device(src), dst)
    np.testing.assert_array_equal(dst.copy_to_host(), src)


@pytest.mark.gpu
@pytest.mark.parametrize("kind,size", sorted(ZFILL))
def test_zfill_gpu(kind, size, rng):
    words = size // 4
    threads = 1024 // words
    src = rng.standard_normal(1024).astype(np.float32)
    # every thread reads a whole number of words, 0..size bytes (0 = a predicated-off load)
    src_bytes = (rng.integers(0, words + 1, threads) * 4).astype(np.uint32)
    dst = cuda.to_device(np.full(1024, np.nan, np.float32))
    cuda.jit(make_zfill(ZFILL[kind, size], words))[1, threads](cuda.to_device(src), dst, cuda.to_device(src_bytes))
    expect = src.reshape(threads, words).copy()
    expect[np.arange(words)[None, :] >= (src_bytes[:, None] // 4)] = 0.0
    np.testing.assert_array_equal(dst.copy_to_host(), expect.ravel())


@pytest.mark.gpu
@pytest.mark.parametrize("n", range(8))
def test_wait_group_gpu(n, rng):
    src = rng.standard_normal(8 * 512).astype(np.float32)
    dst = cuda.to_device(np.full(8 * 512, np.nan, np.float32))
    cuda.jit(pipeline_kernel)[1, 128](cuda.to_device(src), dst, cuda.to_device(np.array([n], np.int32)))
    got = dst.copy_to_host()
    landed = (8 - n) * 512
    np.testing.assert_array_equal(got[:landed], src[:landed])
    assert np.isnan(got[landed:]).all()
