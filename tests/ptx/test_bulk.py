"""cp.async.bulk (no tensor map): SASS offline, then exact copies both ways on the GPU."""

from pathlib import Path

import numpy as np
import pytest
from numba import cuda
from numba.cuda import types

from asyncpipe import ptx
from asyncpipe.constants import BULK_SMEM_ALIGN_TENSOR
from tests.sass import assert_sass

i32 = types.int32[::1]

# A GPU test must fail, never hang: a copy that never lands leaves its mbarrier phase incomplete, so
# kernels wait with test_wait + a nap, a bounded number of times, and report a timeout in an output
# flag instead of spinning forever in mbarrier_wait_parity. The loop is written out in each kernel:
# a device function (cuda.jit(device=True) or register_jitable) cannot be compiled offline, since
# numba-cuda 0.30.4 asks the current GPU for its compute capability when it compiles one.
WAIT_TRIES = 1 << 21              # x a nap of ~1 us (nanosleep sleeps 0..2x): gives up after ~2-4 s
WAIT_NAP_NS = 1000


# ---------------------------------------------------------------------------------------------
# Kernels. Block b copies `size` bytes at int32 offset b * CHUNK of src into shared memory with one
# bulk load, adds one to every word, and writes them to dst at the same offset with one bulk store.
# ---------------------------------------------------------------------------------------------
CHUNK = 4096                      # int32 words between two blocks' chunks (the rest stays poisoned)
SMEM_WORDS = 4096                 # 16 KiB of shared memory, the largest copy below


def roundtrip_kernel(src, dst, size, timeouts):
    # TMA needs 16-byte aligned shared memory; ask for 128 like the tensor copies do.
    tile = cuda.shared.array(SMEM_WORDS, np.int32, alignment=BULK_SMEM_ALIGN_TENSOR)
    bar = cuda.shared.array(1, np.uint64)
    t = cuda.threadIdx.x
    b = cuda.blockIdx.x
    base = b * CHUNK
    words = size // 4
    if t == 0:
        ptx.mbarrier_init(ptx.addr(bar, 0), 1)
        ptx.fence_mbarrier_init_release_cluster()      # the barrier is visible to the async proxy (TMA)
    cuda.syncthreads()

    # --- load: one thread announces the bytes and issues the copy ------------------------------
    if t == 0:
        ptx.mbarrier_arrive_expect_tx(ptx.addr(bar, 0), size)
        ptx.cp_async_bulk_shared_global(ptx.addr(tile, 0), ptx.addr(src, base), size, ptx.addr(bar, 0))
    landed = False
    for _ in range(WAIT_TRIES):
        if ptx.mbarrier_test_wait_parity(ptx.addr(bar, 0), 0) != 0:
            landed = True
            break
        cuda.nanosleep(WAIT_NAP_NS)
    if not landed:
        timeouts[b] = 1
        return

    # --- every thread works on the tile (a while loop: range with a run-time step calls a division) --
    i = t
    while i < words:
        tile[i] += 1
        i += cuda.blockDim.x
    ptx.fence_proxy_async_shared_cta()                  # the TMA store must see the threads' writes
    cuda.syncthreads()

    # --- store: one thread, then wait for the writes to complete --------------------------------
    if t == 0:
        ptx.cp_async_bulk_global_shared(ptx.addr(dst, base), ptx.addr(tile, 0), size)
        ptx.cp_async_bulk_commit_group()
        ptx.cp_async_bulk_wait_group(0)


def store_only_kernel(dst, size):
    """Threads fill shared memory, one bulk store per block, wait_group_read 0 before exit."""
    tile = cuda.shared.array(SMEM_WORDS, np.int32, alignment=BULK_SMEM_ALIGN_TENSOR)
    t = cuda.threadIdx.x
    b = cuda.blockIdx.x
    i = t
    while i < size // 4:
        tile[i] = b * 100000 + i
        i += cuda.blockDim.x
    ptx.fence_proxy_async_shared_cta()
    cuda.syncthreads()
    if t == 0:
        ptx.cp_async_bulk_global_shared(ptx.addr(dst, b * CHUNK), ptx.addr(tile, 0), size)
        ptx.cp_async_bulk_commit_group()
        ptx.cp_async_bulk_wait_group_read(0)


def wait_immediates_kernel(dst, n):
    """Eight bulk stores, one group each, then wait_group(_read) with every immediate 0..7."""
    tile = cuda.shared.array(SMEM_WORDS, np.int32, alignment=BULK_SMEM_ALIGN_TENSOR)
    t = cuda.threadIdx.x
    tile[t] = t
    ptx.fence_proxy_async_shared_cta()
    cuda.syncthreads()
    if t == 0:
        for g in range(8):
            ptx.cp_async_bulk_global_shared(ptx.addr(dst, g * 64), ptx.addr(tile, g * 64), 256)
            ptx.cp_async_bulk_commit_group()
        k = n[0]
        if k == 0:
            ptx.cp_async_bulk_wait_group(0)
            ptx.cp_async_bulk_wait_group_read(0)
        elif k == 1:
            ptx.cp_async_bulk_wait_group(1)
            ptx.cp_async_bulk_wait_group_read(1)
        elif k == 2:
            ptx.cp_async_bulk_wait_group(2)
            ptx.cp_async_bulk_wait_group_read(2)
        elif k == 3:
            ptx.cp_async_bulk_wait_group(3)
            ptx.cp_async_bulk_wait_group_read(3)
        elif k == 4:
            ptx.cp_async_bulk_wait_group(4)
            ptx.cp_async_bulk_wait_group_read(4)
        elif k == 5:
            ptx.cp_async_bulk_wait_group(5)
            ptx.cp_async_bulk_wait_group_read(5)
        elif k == 6:
            ptx.cp_async_bulk_wait_group(6)
            ptx.cp_async_bulk_wait_group_read(6)
        else:
            ptx.cp_async_bulk_wait_group(7)
            ptx.cp_async_bulk_wait_group_read(7)
        ptx.cp_async_bulk_wait_group_read(0)            # nothing may still read shared memory at exit


# ---------------------------------------------------------------------------------------------
# Registry and shim agree
# ---------------------------------------------------------------------------------------------
def test_registry_matches_shim():
    names = {n for n, p in ptx.REGISTRY.items() if p.stem == "bulk"}
    text = Path(ptx.REGISTRY["cp_async_bulk_commit_group"].shim_path).read_text()
    shims = {line.split("void ap_", 1)[1].split("(", 1)[0] for line in text.splitlines() if 'extern "C"' in line}
    assert shims == names
    for name in names:
        opcode = ptx.REGISTRY[name].ptx.split(" ", 1)[0].rstrip(";")
        assert f"// {opcode}" in text, f"{name}: no comment with {opcode} in the shim"


# ---------------------------------------------------------------------------------------------
# Offline SASS
# ---------------------------------------------------------------------------------------------
@pytest.mark.sass
def test_roundtrip_sass():
    assert_sass(roundtrip_kernel, (i32, i32, types.uint32, i32),
                has=(*ptx.cp_async_bulk_shared_global.primitive.sass,
                     *ptx.cp_async_bulk_global_shared.primitive.sass,
                     *ptx.cp_async_bulk_commit_group.primitive.sass,
                     *ptx.cp_async_bulk_wait_group.primitive.sass))


@pytest.mark.sass
def test_store_wait_read_sass():
    # wait_group.read waits for the reads of shared memory only: no L1 invalidation after it
    assert_sass(store_only_kernel, (i32, types.uint32),
                has=(*ptx.cp_async_bulk_global_shared.primitive.sass, *ptx.cp_async_bulk_commit_group.primitive.sass,
                     *ptx.cp_async_bulk_wait_group_read.primitive.sass),
                lacks=("CALL", "CCTL.IVALL"))


@pytest.mark.sass
def test_wait_group_immediates_fold():
    cubin = assert_sass(wait_immediates_kernel, (i32, i32), has=ptx.cp_async_bulk_wait_group.primitive.sass)
    waits = [line for line in cubin.sass.splitlines() if "DEPBAR.LE" in line]
    for n in range(8):   # both waits for every immediate, none left as a run-time switch
        assert sum(f"SB0, 0x{n:x} " in line for line in waits) >= 2, f"wait_group {n} missing:\n{cubin.sass}"
    assert cubin.count("UBLKCP.G.S") == 8


# ---------------------------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("size", [16, 48, 1008, 4 * SMEM_WORDS])
def test_roundtrip_gpu(size, rng):
    blocks = 4
    src = rng.integers(-(2**30), 2**30, blocks * CHUNK, dtype=np.int32)
    poison = np.int32(-123456789)
    dst = cuda.to_device(np.full(blocks * CHUNK, poison, np.int32))
    timeouts = cuda.to_device(np.zeros(blocks, np.int32))
    cuda.jit(roundtrip_kernel)[blocks, 128](cuda.to_device(src), dst, np.uint32(size), timeouts)
    assert not timeouts.copy_to_host().any(), "a bulk load never completed its mbarrier phase"
    got = dst.copy_to_host().reshape(blocks, CHUNK)
    words = size // 4
    np.testing.assert_array_equal(got[:, :words], src.reshape(blocks, CHUNK)[:, :words] + 1)
    assert (got[:, words:] == poison).all(), "the bulk store wrote past its size"


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("size", [16, 4 * SMEM_WORDS])
def test_store_wait_read_gpu(size):
    blocks = 3
    poison = np.int32(-7)
    dst = cuda.to_device(np.full(blocks * CHUNK, poison, np.int32))
    cuda.jit(store_only_kernel)[blocks, 256](dst, np.uint32(size))
    got = dst.copy_to_host().reshape(blocks, CHUNK)   # the launch has ended: every write has landed
    words = size // 4
    expect = np.arange(blocks, dtype=np.int32)[:, None] * 100000 + np.arange(words, dtype=np.int32)[None, :]
    np.testing.assert_array_equal(got[:, :words], expect)
    assert (got[:, words:] == poison).all()


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("n", [0, 3, 7])
def test_wait_group_gpu(n):
    dst = cuda.to_device(np.full(8 * 64, -1, np.int32))
    cuda.jit(wait_immediates_kernel)[1, 8 * 64](dst, cuda.to_device(np.array([n], np.int32)))
    np.testing.assert_array_equal(dst.copy_to_host(), np.arange(8 * 64, dtype=np.int32))
