"""Fences: SASS offline, then a GPU kernel that runs every fence and still computes exactly."""

import numpy as np
import pytest
from numba import cuda
from numba.cuda import types

from asyncpipe import ptx
from asyncpipe.constants import TENSOR_MAP_BYTES
from asyncpipe.ptx.tensor_map_type import tensormap
from tests.sass import assert_sass

u32 = types.uint32[::1]
tmap_t = tensormap                 # the kernels' second argument: a TensorMap
f32 = types.float32[::1]

THREADS = 128
TMAP_WORDS = TENSOR_MAP_BYTES // 8      # the tensormap fence covers 128 bytes: 16 uint64


# ---------------------------------------------------------------------------------------------
# SASS kernels: a store before and after each fence, so that the fence sits between them.
# ---------------------------------------------------------------------------------------------
def sass_proxy_async_shared_cta(out, tmap):
    out[0] = 1
    ptx.fence_proxy_async_shared_cta()
    out[1] = 2


def sass_proxy_async(out, tmap):
    out[0] = 1
    ptx.fence_proxy_async()
    out[1] = 2


def sass_proxy_tensormap_generic_acquire_gpu(out, tmap):
    out[0] = 1
    ptx.fence_proxy_tensormap_generic_acquire_gpu(ptx.addr(tmap, 0))
    out[1] = 2


def sass_proxy_tensormap_generic_acquire_sys(out, tmap):
    out[0] = 1
    ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tmap, 0))
    out[1] = 2


def sass_acq_rel_cluster(out, tmap):
    out[0] = 1
    ptx.fence_acq_rel_cluster()
    out[1] = 2


def sass_acq_rel_gpu(out, tmap):
    out[0] = 1
    ptx.fence_acq_rel_gpu()
    out[1] = 2


def sass_mbarrier_init_release_cluster(out, tmap):
    bars = cuda.shared.array(1, np.uint64)
    if cuda.threadIdx.x == 0:
        ptx.mbarrier_init(ptx.addr(bars, 0), out[0])
        ptx.fence_mbarrier_init_release_cluster()
    cuda.syncthreads()


SASS = {
    "fence_proxy_async_shared_cta": sass_proxy_async_shared_cta,
    "fence_proxy_async": sass_proxy_async,
    "fence_proxy_tensormap_generic_acquire_gpu": sass_proxy_tensormap_generic_acquire_gpu,
    "fence_proxy_tensormap_generic_acquire_sys": sass_proxy_tensormap_generic_acquire_sys,
    "fence_acq_rel_cluster": sass_acq_rel_cluster,
    "fence_acq_rel_gpu": sass_acq_rel_gpu,
    "fence_mbarrier_init_release_cluster": sass_mbarrier_init_release_cluster,
}


def body(cubin):
    """The opcodes up to the first EXIT: the kernel itself, without the NOPs that pad the end."""
    ops = cubin.opcodes
    return ops[: ops.index("EXIT")]


@pytest.mark.sass
@pytest.mark.parametrize("name", sorted(SASS))
def test_sass(name):
    ops = ptx.REGISTRY[name].sass
    cubin = assert_sass(SASS[name], (u32, tmap_t), has=ops)
    for op in ops:   # inside the kernel (the NOP of fence.mbarrier_init is not end-of-code padding)
        assert op in body(cubin), f"{op} missing from the kernel body:\n{cubin.sass}"


@pytest.mark.sass
def test_shared_cta_proxy_fence_is_cta_scoped():
    """The .shared::cta form needs only a CTA-scope membar; the all-spaces form a GPU-scope one."""
    narrow = assert_sass(sass_proxy_async_shared_cta, (u32, tmap_t), has=("FENCE.VIEW.ASYNC.S",))
    assert "MEMBAR.ALL.GPU" not in narrow.opcodes, narrow.sass
    wide = assert_sass(sass_proxy_async, (u32, tmap_t), has=("FENCE.VIEW.ASYNC.S",))
    assert "MEMBAR.ALL.GPU" in wide.opcodes, wide.sass


@pytest.mark.sass
def test_mbarrier_init_fence_sits_between_init_and_barrier():
    """fence.mbarrier_init is a NOP on sm_90: it must still be there, after the init (SYNCS.EXCH.64)
    and before the block barrier that publishes it."""
    cubin = assert_sass(sass_mbarrier_init_release_cluster, (u32, tmap_t), has=("SYNCS.EXCH.64", "BAR.SYNC"))
    ops = body(cubin)
    init = ops.index("SYNCS.EXCH.64")
    sync = next(i for i, op in enumerate(ops) if op.startswith("BAR.SYNC"))
    assert "NOP" in ops[init:sync], cubin.sass


# ---------------------------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------------------------
def fences_kernel(src, dst, tmap):
    """Each thread writes shared memory, passes every fence, and reads another thread's element
    after an mbarrier phase; thread 0 also fences a 128-byte global block as a tensor map."""
    smem = cuda.shared.array(THREADS, np.float32)
    bars = cuda.shared.array(1, np.uint64)
    bar = ptx.addr(bars, 0)
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * THREADS
    if t == 0:
        ptx.mbarrier_init(bar, THREADS)
        ptx.fence_mbarrier_init_release_cluster()   # release the init to the cluster (here: of one CTA)
        # a tensor map lives in global memory and is read through the tensormap proxy: acquire it
        # once per CTA before the first TMA (there is none here; the fence alone must be harmless)
        ptx.fence_proxy_tensormap_generic_acquire_gpu(ptx.addr(tmap, 0))
        ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tmap, 0))
    cuda.syncthreads()                              # the block barrier that the init fence pairs with
    smem[t] = src[base + t] + np.float32(1)
    ptx.fence_proxy_async_shared_cta()              # generic writes to smem before any async-proxy read
    ptx.fence_proxy_async()                         # same, for every state space
    ptx.fence_acq_rel_cluster()                     # this thread's accesses ordered at cluster scope
    ptx.fence_acq_rel_gpu()                         # ... and at GPU scope
    ptx.mbarrier_arrive(bar)
    ptx.mbarrier_wait_parity(bar, 0)                # every thread's smem write is visible
    dst[base + t] = smem[THREADS - 1 - t]


@pytest.mark.sass
def test_gpu_kernel_compiles():
    assert_sass(fences_kernel, (f32, f32, tmap_t),
                has=("FENCE.VIEW.ASYNC.S", "UTMACCTL.IV", "CCTL.IVALL", "SYNCS.PHASECHK.TRANS64"))


@pytest.mark.gpu
@pytest.mark.hopper
def test_fences_gpu(rng):
    blocks = 4
    src = rng.standard_normal(blocks * THREADS).astype(np.float32)
    dst = cuda.to_device(np.full(src.size, np.nan, np.float32))
    from asyncpipe.host import TensorMap

    # a real map (the fences' operand is typed: ptx.addr of a TensorMap argument), of a small random matrix
    tmap = TensorMap.tiled(cuda.to_device(rng.standard_normal((16, 16)).astype(np.float32)), (8, 8))
    block = tmap.words()
    assert block.size == TMAP_WORDS
    cuda.jit(fences_kernel)[blocks, THREADS](cuda.to_device(src), dst, tmap)
    expect = (src + np.float32(1)).reshape(blocks, THREADS)[:, ::-1].ravel()
    np.testing.assert_array_equal(dst.copy_to_host(), expect)
    np.testing.assert_array_equal(tmap.words(), block)   # a fence writes nothing into the map


def last_block_kernel(src, partial, count, out):
    """Every CTA writes its threads' values to ``partial``; one thread per CTA counts the CTA in ``count`` between two
    GPU-scope acquire-release fences; the CTA that counts last reads every CTA's values (in CTA order) and writes
    their sums to ``out``. No CTA waits for another."""
    last = cuda.shared.array(1, np.int32)
    t = cuda.threadIdx.x
    partial[cuda.blockIdx.x * THREADS + t] = src[cuda.blockIdx.x * THREADS + t] * np.float32(2)
    cuda.syncthreads()                              # the CTA's values are stored ...
    if t == 0:
        ptx.fence_acq_rel_gpu()                     # ... released with the count ...
        last[0] = cuda.atomic.add(count, 0, 1) == cuda.gridDim.x - 1
        ptx.fence_acq_rel_gpu()                     # ... which acquires the CTAs counted before
    cuda.syncthreads()
    if last[0]:
        acc = np.float32(0)
        for b in range(cuda.gridDim.x):
            acc += partial[b * THREADS + t]
        out[t] = acc


@pytest.mark.gpu
@pytest.mark.simulator_too
def test_fence_acq_rel_gpu_publishes_to_the_last_block_gpu(rng):
    blocks = 264                                    # two waves' worth on 132 SMs: CTAs that count in any order
    src = rng.standard_normal(blocks * THREADS).astype(np.float32)
    partial = cuda.to_device(np.full(src.size, np.nan, np.float32))
    count = cuda.to_device(np.zeros(1, np.int32))
    out = cuda.to_device(np.full(THREADS, np.nan, np.float32))
    cuda.jit(last_block_kernel)[blocks, THREADS](cuda.to_device(src), partial, count, out)
    want = np.zeros(THREADS, np.float32)
    for b in range(blocks):                         # the same order of float32 adds as the kernel's
        want += src[b * THREADS:(b + 1) * THREADS] * np.float32(2)
    np.testing.assert_array_equal(out.copy_to_host(), want)
    assert count.copy_to_host()[0] == blocks
