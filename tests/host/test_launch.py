"""launch(): every rule's message offline (an H200-like device description), then cluster and
large-shared-memory launches on the GPU."""

import dataclasses
import importlib
import math
from types import SimpleNamespace

import numpy as np
import pytest
from numba import cuda

from asyncpipe import ptx
from asyncpipe.errors import AsyncpipeError, UnsupportedDeviceError
from asyncpipe.host import (DeviceInfo, LaunchConfig, check_cc, check_compiled, check_kernel, check_launch,
                            device_info, launch, require_cc)
from asyncpipe.host.launch import _select_overload, prepare_launch
from tests.conftest import gpu_cc
from tests.ptx.test_cluster import SREGS, expected_sregs, sreg_kernel

# What device_info() reads on the H200 (FACTS.md): 227 KB of shared memory per block after opt-in.
H200 = DeviceInfo(
    name="NVIDIA H200",
    compute_capability=(9, 0),
    sm_count=132,
    max_threads_per_block=1024,
    max_block_dim=(1024, 1024, 64),
    max_grid_dim=(2**31 - 1, 65535, 65535),
    max_shared_per_block=48 * 1024,
    max_shared_per_block_optin=227 * 1024,
    max_shared_per_sm=228 * 1024,
    cluster_launch=True,
)
A100 = dataclasses.replace(H200, name="NVIDIA A100-SXM4-80GB", compute_capability=(8, 0), sm_count=108,
                           max_shared_per_block_optin=163 * 1024, max_shared_per_sm=164 * 1024, cluster_launch=False)


def raises(exc, *fragments, cls=AsyncpipeError):
    """Assert that ``exc`` is a ``cls`` whose message has the house form and every fragment."""
    msg = str(exc.value)
    assert isinstance(exc.value, cls), (type(exc.value), msg)
    assert msg.startswith("launch: ") and " [" in msg and "], got " in msg, msg
    for f in fragments:
        assert f in msg, f"{f!r} not in {msg!r}"
    return msg


# ---------------------------------------------------------------------------------------------
# Offline: the pure checks
# ---------------------------------------------------------------------------------------------
def test_valid_launch_normalises():
    cfg = check_launch((8, 4), 128, cluster=(2, 2), shared_mem=200 * 1024, device=H200)
    assert cfg == LaunchConfig((8, 4, 1), (128, 1, 1), (2, 2, 1), 200 * 1024, False)
    assert cfg.blocks == 32 and cfg.cluster_size == 4 and cfg.threads_per_block == 128
    assert cfg.clusters == (4, 2, 1)       # what cuda.core's LaunchConfig gets: the grid in clusters
    plain = check_launch(np.int64(3), (32, 32), device=H200)
    assert plain.cluster is None and plain.clusters == (3, 1, 1) and plain.cluster_size == 1


BAD_SHAPES = [0, -2, (), (1, 2, 3, 4), (2, 0), 2.0, True, "4", None]


@pytest.mark.parametrize("what,bad", [(w, b) for w in ("grid", "block", "cluster") for b in BAD_SHAPES
                                      if not (w == "cluster" and b is None)])   # cluster=None: no cluster
def test_shape_must_be_positive_ints(what, bad):
    kw = {"grid": 8, "block": 32, "cluster": 2}
    kw[what] = bad
    with pytest.raises(AsyncpipeError) as exc:
        check_launch(kw["grid"], kw["block"], kw["cluster"], device=H200)
    raises(exc, f"{what} must be a positive int or a tuple of 1 to 3 positive ints", f"got {bad!r}")


def test_block_dims_limit():
    with pytest.raises(AsyncpipeError) as exc:
        check_launch(1, (1, 1, 65), device=H200)
    raises(exc, "block must be at most (1024, 1024, 64) threads in (x, y, z)", "got (1, 1, 65)",
           "MAX_BLOCK_DIM")


def test_block_threads_limit():
    with pytest.raises(AsyncpipeError) as exc:
        check_launch(1, (32, 64), device=H200)
    raises(exc, "a block holds at most 1024 threads", "got block (32, 64, 1) = 2048 threads")


def test_grid_dims_limit():
    with pytest.raises(AsyncpipeError) as exc:
        check_launch((1, 65536), 32, device=H200)
    raises(exc, "grid must be at most (2147483647, 65535, 65535) blocks", "got (1, 65536, 1)")


def test_grid_multiple_of_cluster():
    with pytest.raises(AsyncpipeError) as exc:
        check_launch((6, 4), 64, cluster=(4, 2), device=H200)
    raises(exc, "grid (in blocks) must be a multiple of cluster in every dimension",
           "got grid (6, 4, 1) with cluster (4, 2, 1): 6 % 4 = 2 in x")


def test_grid_multiple_of_cluster_names_every_dimension():
    with pytest.raises(AsyncpipeError) as exc:
        check_launch((3, 3, 3), 64, cluster=(2, 1, 2), device=H200)
    raises(exc, "3 % 2 = 1 in x, 3 % 2 = 1 in z")


def test_portable_cluster_size():
    with pytest.raises(AsyncpipeError) as exc:
        check_launch((32, 4), 64, cluster=(4, 4), device=H200)
    raises(exc, "a cluster holds at most 8 CTAs (16 with nonportable=True)", "got cluster (4, 4, 1) = 16 CTAs")


def test_nonportable_cluster_size():
    assert check_launch(32, 64, cluster=16, nonportable=True, device=H200).cluster_size == 16
    with pytest.raises(AsyncpipeError) as exc:
        check_launch((64, 8), 64, cluster=(4, 8), nonportable=True, device=H200)
    raises(exc, "a non-portable cluster holds at most 16 CTAs", "got cluster (4, 8, 1) = 32 CTAs",
           "NON_PORTABLE_CLUSTER_SIZE_ALLOWED")


def test_clusters_need_hopper():
    assert check_launch(8, 64, device=A100).cluster is None        # no cluster: fine on an A100
    with pytest.raises(UnsupportedDeviceError) as exc:
        check_launch(8, 64, cluster=2, device=A100)
    raises(exc, "thread block clusters need compute capability 9.0 or newer",
           "got NVIDIA A100-SXM4-80GB (compute capability 8.0)", cls=UnsupportedDeviceError)


def test_clusters_need_cluster_launch():
    no_clusters = dataclasses.replace(H200, cluster_launch=False)
    with pytest.raises(UnsupportedDeviceError) as exc:
        check_launch(8, 64, cluster=2, device=no_clusters)
    raises(exc, "thread block clusters need a GPU that can launch them", "CLUSTER_LAUNCH",
           cls=UnsupportedDeviceError)


def test_shared_mem_opt_in_limit():
    assert check_launch(1, 32, shared_mem=227 * 1024, device=H200).shared_mem == 227 * 1024
    with pytest.raises(AsyncpipeError) as exc:
        check_launch(1, 32, shared_mem=228 * 1024, device=H200)
    raises(exc, "static + dynamic shared memory per block must be at most 232448 bytes (227 KB) on NVIDIA H200",
           "got 0 static + 233472 dynamic = 233472 bytes", "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")


def test_shared_mem_counts_static():
    with pytest.raises(AsyncpipeError) as exc:
        check_launch(1, 32, shared_mem=220 * 1024, device=H200, static_shared=8192)
    raises(exc, "got 8192 static + 225280 dynamic = 233472 bytes")


def test_shared_mem_limit_is_the_devices():
    with pytest.raises(AsyncpipeError) as exc:
        check_launch(1, 32, shared_mem=200 * 1024, device=A100)
    raises(exc, "at most 166912 bytes (163 KB) on NVIDIA A100-SXM4-80GB", "got 0 static + 204800 dynamic")


@pytest.mark.parametrize("bad", [-1, 1.5, "1024", None, True])
def test_shared_mem_must_be_a_byte_count(bad):
    with pytest.raises(AsyncpipeError) as exc:
        check_launch(1, 32, shared_mem=bad, device=H200)
    raises(exc, "shared_mem must be a non-negative int (bytes of dynamic shared memory per block)", f"got {bad!r}")


def test_compiled_kernel_thread_limit():
    cfg = check_launch(1, 1024, device=H200)
    check_compiled(cfg, static_shared=0, max_threads=1024, device=H200)
    with pytest.raises(AsyncpipeError) as exc:
        check_compiled(cfg, static_shared=0, max_threads=512, device=H200)
    raises(exc, "this compiled kernel runs at most 512 threads per block", "got block (1024, 1, 1) = 1024 threads",
           "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK")


def test_compiled_kernel_static_shared():
    cfg = check_launch(1, 32, shared_mem=227 * 1024, device=H200)
    with pytest.raises(AsyncpipeError) as exc:
        check_compiled(cfg, static_shared=1024, max_threads=1024, device=H200)
    raises(exc, "got 1024 static + 232448 dynamic = 233472 bytes")


def _plain(a):
    a[0] = 1


def test_kernel_must_be_a_cuda_jit_kernel():
    check_kernel(cuda.jit(_plain))
    with pytest.raises(AsyncpipeError) as exc:
        check_kernel(_plain)
    raises(exc, "kernel must be a numba @cuda.jit kernel", "got builtins.function", "numba.cuda.jit")
    with pytest.raises(AsyncpipeError) as exc:
        check_kernel(cuda.jit(device=True)(_plain))
    raises(exc, "got a device function _plain")


def test_arguments_need_numba_types():
    with pytest.raises(AsyncpipeError) as exc:
        _select_overload(cuda.jit(_plain), (object(),), "launch")
    raises(exc, "every kernel argument must have a numba type", "got argument 0 of type object")


def test_argument_count():
    with pytest.raises(AsyncpipeError) as exc:
        _select_overload(cuda.jit(_plain), (np.zeros(4, np.float32), 3), "launch")
    raises(exc, "the kernel takes 1 arguments", "got 2 arguments")


def test_require_cc_names_the_gpu():
    check_cc(H200, "wgmma", (9, 0))
    with pytest.raises(UnsupportedDeviceError) as exc:
        check_cc(A100, "wgmma", (9, 0))
    assert str(exc.value) == ("wgmma: needs compute capability 9.0 or newer [CUDA programming guide, compute "
                              "capabilities], got NVIDIA A100-SXM4-80GB (compute capability 8.0)")


def test_device_limits():
    assert H200.max_cluster_size() == 8 and H200.max_cluster_size(nonportable=True) == 16
    assert A100.max_cluster_size() == 1


class _FakeKernel:
    """Stands in for numba's compiled ``_Kernel``: records marshalling, adds one write-back."""

    debug = False
    cooperative = False

    def __init__(self, static_shared=0, maxthreads=1024):
        attrs = SimpleNamespace(shared=static_shared, maxthreads=maxthreads)
        self.cufunc = SimpleNamespace(attrs=attrs, handle="CUkernel", kernel="core-kernel")
        self._codelibrary = SimpleNamespace(get_cufunc=lambda: self.cufunc)
        self.argument_types = ("t0", "t1")
        self.written_back = 0

    def _prepare_args(self, ty, val, stream, retr, kernelargs):
        kernelargs.append((ty, val, stream))
        retr.append(self._write_back)

    def _write_back(self):
        self.written_back += 1


@pytest.fixture
def offline_launch(monkeypatch):
    """launch() with the GPU parts replaced by recorders: what it would hand to the driver."""
    import cuda.core
    import numba.cuda.cudadrv.driver as numba_driver
    from cuda.bindings import driver

    gpu = importlib.import_module("asyncpipe.backend.gpu")   # what asyncpipe.host.launch hands GPU launches to
    calls = SimpleNamespace(attributes=[], configs=[], launches=[], kernel=_FakeKernel(), attr_result=None)
    calls.attr_result = (driver.CUresult.CUDA_SUCCESS,)

    def set_attribute(attr, val, kernel, dev):
        calls.attributes.append((attr, val, kernel, int(dev)))
        return calls.attr_result

    monkeypatch.setattr(gpu, "device_info", lambda api: H200)
    monkeypatch.setattr(gpu, "_select_overload", lambda kernel, args, api: calls.kernel)
    monkeypatch.setattr(driver, "cuKernelSetAttribute", set_attribute)
    monkeypatch.setattr(numba_driver, "_to_core_stream", lambda stream: ("core-stream", stream))
    monkeypatch.setattr(cuda.core, "LaunchConfig", lambda **kw: calls.configs.append(kw) or kw)
    monkeypatch.setattr(cuda.core, "launch", lambda *a: calls.launches.append(a))
    return calls


def test_launch_converts_grid_to_clusters_offline(offline_launch):
    calls = offline_launch
    cfg = launch(cuda.jit(_plain), (8, 4), 128, "a", "b", cluster=(2, 2), stream=7)
    assert cfg.grid == (8, 4, 1) and cfg.clusters == (4, 2, 1)
    (core,) = calls.configs
    assert core == dict(grid=(4, 2, 1), cluster=(2, 2, 1), block=(128, 1, 1), shmem_size=0, is_cooperative=False)
    (launched,) = calls.launches
    stream = ("core-stream", 7)
    assert launched == (stream, core, "core-kernel", ("t0", "a", stream), ("t1", "b", stream))
    assert calls.kernel.written_back == 2
    assert calls.attributes == []           # 0 bytes of shared memory, portable cluster: no opt-in


def test_launch_without_cluster_keeps_grid_offline(offline_launch):
    launch(cuda.jit(_plain), 6, (16, 8), "a", "b")
    (core,) = offline_launch.configs
    assert core == dict(grid=(6, 1, 1), block=(16, 8, 1), shmem_size=0, is_cooperative=False)


def test_launch_opts_in_offline(offline_launch):
    from cuda.bindings import driver

    attr = driver.CUfunction_attribute
    launch(cuda.jit(_plain), 16, 64, "a", "b", cluster=16, nonportable=True, shared_mem=200 * 1024)
    assert offline_launch.attributes == [
        (attr.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 200 * 1024, "CUkernel", 0),
        (attr.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1, "CUkernel", 0),
    ]
    assert offline_launch.configs[0]["shmem_size"] == 200 * 1024
    assert offline_launch.configs[0]["grid"] == (1, 1, 1)


def test_launch_opt_in_counts_static_shared_offline(offline_launch):
    offline_launch.kernel = _FakeKernel(static_shared=40 * 1024)
    launch(cuda.jit(_plain), 1, 64, "a", "b", shared_mem=10 * 1024)     # 40 + 10 KB > 48 KB
    assert [v for _, v, _, _ in offline_launch.attributes] == [10 * 1024]


def test_launch_checks_the_compiled_kernel_offline(offline_launch):
    offline_launch.kernel = _FakeKernel(maxthreads=256)
    with pytest.raises(AsyncpipeError) as exc:
        launch(cuda.jit(_plain), 1, 512, "a", "b")
    raises(exc, "this compiled kernel runs at most 256 threads per block")
    assert offline_launch.launches == []


def test_launch_checks_cuda_results_offline(offline_launch):
    from cuda.bindings import driver
    from numba.cuda.cudadrv.driver import CudaAPIError

    offline_launch.attr_result = (driver.CUresult.CUDA_ERROR_INVALID_VALUE,)
    with pytest.raises(CudaAPIError, match="CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES.*CUDA_ERROR_INVALID_VALUE"):
        launch(cuda.jit(_plain), 1, 64, "a", "b", shared_mem=100 * 1024)
    assert offline_launch.launches == []


def test_launch_refuses_debug_kernels_offline(offline_launch):
    offline_launch.kernel.debug = True
    with pytest.raises(AsyncpipeError) as exc:
        launch(cuda.jit(_plain), 1, 64, "a", "b")
    raises(exc, "a kernel compiled with debug=True", "got debug=True")


@pytest.mark.skipif(gpu_cc() is not None, reason="checks the no-GPU error: a GPU is visible here")
def test_no_gpu_is_an_unsupported_device():
    for call in (lambda: device_info(), lambda: require_cc("wgmma"),
                 lambda: launch(cuda.jit(_plain), 1, 1, np.zeros(1))):
        with pytest.raises(UnsupportedDeviceError) as exc:
            call()
        assert "needs a CUDA GPU" in str(exc.value) and "got none" in str(exc.value), str(exc.value)


# ---------------------------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------------------------
IDS = len(SREGS)   # the values sreg_kernel writes per CTA


def _dim3(c):
    c = (c,) if isinstance(c, int) else tuple(c)
    return c + (1,) * (3 - len(c))


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("cluster,grid", [
    (2, (8,)), (4, (8, 3)), (8, (16, 1, 2)), ((2, 2), (4, 6)), ((2, 2, 2), (4, 2, 6)), ((1, 4), (3, 8)),
    ((1, 2, 4), (3, 4, 8)),
], ids=str)
def test_cluster_ids_gpu(cluster, grid):
    grid3, cluster3 = _dim3(grid), _dim3(cluster)
    blocks = math.prod(grid3)
    out = cuda.to_device(np.full((blocks, IDS), 0xFFFFFFFF, np.uint32))
    cfg = launch(cuda.jit(sreg_kernel), grid, 64, out, cluster=cluster)
    cuda.synchronize()
    assert cfg.blocks == blocks
    np.testing.assert_array_equal(out.copy_to_host(), expected_sregs(grid3, cluster3))


@pytest.mark.gpu
@pytest.mark.hopper
def test_nonportable_cluster_of_16_gpu():
    grid, cluster = (32,), 16
    out = cuda.to_device(np.full((32, IDS), 0xFFFFFFFF, np.uint32))
    launch(cuda.jit(sreg_kernel), grid, 32, out, cluster=cluster, nonportable=True)
    cuda.synchronize()
    np.testing.assert_array_equal(out.copy_to_host(), expected_sregs((32, 1, 1), (16, 1, 1)))


def count_kernel(out):
    if cuda.threadIdx.x == 0:
        out[cuda.blockIdx.x] = cuda.blockIdx.x + 1


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("cluster", [None, 2, 4, 8])
def test_grid_counts_blocks_gpu(cluster):
    """grid=8 runs 8 blocks with or without clusters (cuda.core would run 8 clusters)."""
    out = cuda.to_device(np.zeros(64, np.int32))
    launch(cuda.jit(count_kernel), 8, 32, out, cluster=cluster)
    cuda.synchronize()
    expect = np.zeros(64, np.int32)
    expect[:8] = np.arange(1, 9)
    np.testing.assert_array_equal(out.copy_to_host(), expect)


SMEM_BYTES = 200 * 1024
SMEM_WORDS = SMEM_BYTES // 4


def dyn_smem_kernel(src, dst):
    """Fills all 200 KB of dynamic shared memory, then writes it back reversed."""
    smem = cuda.shared.array(0, np.float32)
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * SMEM_WORDS
    i = t
    while i < SMEM_WORDS:      # (a while loop: range() with a run-time step divides in 64 bits)
        smem[i] = src[base + i]
        i += cuda.blockDim.x
    cuda.syncthreads()
    i = t
    while i < SMEM_WORDS:
        dst[base + i] = smem[SMEM_WORDS - 1 - i]
        i += cuda.blockDim.x


@pytest.mark.gpu
def test_dynamic_shared_memory_200kb_gpu(rng):
    require_cc("test_dynamic_shared_memory_200kb_gpu", (8, 0))     # 200 KB per block: Ampere A100 or newer
    blocks = 3
    src = rng.standard_normal(blocks * SMEM_WORDS).astype(np.float32)
    dst = cuda.to_device(np.full(blocks * SMEM_WORDS, np.nan, np.float32))
    launch(cuda.jit(dyn_smem_kernel), blocks, 256, cuda.to_device(src), dst, shared_mem=SMEM_BYTES)
    cuda.synchronize()
    np.testing.assert_array_equal(dst.copy_to_host(), src.reshape(blocks, SMEM_WORDS)[:, ::-1].ravel())


def dsmem_far_end_kernel(src, dst):
    """Clusters of 2 with 200 KB each: every CTA fills its dynamic shared memory, then reads its
    peer's, far end first, through DSMEM."""
    smem = cuda.shared.array(0, np.float32)
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * SMEM_WORDS
    i = t
    while i < SMEM_WORDS:
        smem[i] = src[base + i]
        i += cuda.blockDim.x
    ptx.barrier_cluster_arrive()
    ptx.barrier_cluster_wait()
    peer = 1 - ptx.cluster_ctarank()
    i = t
    while i < SMEM_WORDS:
        far = ptx.mapa_shared_cluster(ptx.addr(smem, SMEM_WORDS - 1 - i), peer)
        dst[base + i] = ptx.ld_shared_cluster_f32(far)
        i += cuda.blockDim.x
    ptx.barrier_cluster_arrive()
    ptx.barrier_cluster_wait()


@pytest.mark.gpu
@pytest.mark.hopper
def test_cluster_with_200kb_shared_memory_gpu(rng):
    blocks = 4
    src = rng.standard_normal((blocks, SMEM_WORDS)).astype(np.float32)
    dst = cuda.to_device(np.full(blocks * SMEM_WORDS, np.nan, np.float32))
    launch(cuda.jit(dsmem_far_end_kernel), blocks, 256, cuda.to_device(src.ravel()), dst, cluster=2,
           shared_mem=SMEM_BYTES)
    cuda.synchronize()
    peer = np.arange(blocks) ^ 1
    np.testing.assert_array_equal(dst.copy_to_host(), src[peer][:, ::-1].ravel())


def axpy_kernel(a, x, y, n):
    i = cuda.grid(1)
    if i < n:
        y[i] = a * x[i] + y[i]


@pytest.mark.gpu
def test_arguments_marshalled_like_numba_gpu(rng):
    """Scalars and host arrays (copied in and written back), as kernel[grid, block](...) does."""
    n = 1000
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    y = rng.integers(-1000, 1000, n).astype(np.int32)
    expect = 3 * x + y
    launch(cuda.jit(axpy_kernel), 4, 256, np.int32(3), x, y, n)   # y: a host array, written back
    np.testing.assert_array_equal(y, expect)


@pytest.mark.gpu
def test_stream_gpu(rng):
    n = 4096
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    stream = cuda.stream()
    y = cuda.to_device(np.zeros(n, np.int32), stream=stream)
    launch(cuda.jit(axpy_kernel), n // 128, 128, 2, cuda.to_device(x, stream=stream), y, n, stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(y.copy_to_host(), 2 * x)


@pytest.mark.gpu
def test_prepared_launch_runs_again_gpu(rng):
    """A prepared launch runs the kernel each time it is called, with the arguments it was given."""
    n = 1000
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    y0 = rng.integers(-1000, 1000, n).astype(np.int32)
    y = cuda.to_device(y0)
    prepared = prepare_launch(cuda.jit(axpy_kernel), 4, 256, np.int32(3), cuda.to_device(x), y, n)
    np.testing.assert_array_equal(y.copy_to_host(), y0)            # preparing launches nothing
    for _ in range(3):
        prepared()
    np.testing.assert_array_equal(y.copy_to_host(), 9 * x + y0)
    assert prepared.config.grid == (4, 1, 1)


@pytest.mark.gpu
def test_prepared_launch_refuses_host_arrays_gpu(rng):
    with pytest.raises(AsyncpipeError) as exc:
        prepare_launch(cuda.jit(axpy_kernel), 4, 256, np.int32(3), cuda.to_device(np.zeros(8, np.int32)),
                       np.zeros(8, np.int32), 8)
    raises(exc, "a prepared launch takes device arrays only", "got 1 host array argument(s)")


@pytest.mark.gpu
def test_eager_signature_must_match_gpu():
    kernel = cuda.jit("void(float32[::1])")(_plain)
    with pytest.raises(AsyncpipeError) as exc:
        launch(kernel, 1, 1, np.zeros(4, np.complex128))
    raises(exc, "the arguments must match one of the kernel's signatures")


@pytest.mark.gpu
def test_debug_kernels_are_refused_gpu():
    with pytest.raises(AsyncpipeError) as exc:
        launch(cuda.jit(debug=True, opt=False)(_plain), 1, 1, np.zeros(4, np.float32))
    raises(exc, "a kernel compiled with debug=True", "got debug=True")


@pytest.mark.sass
def test_gpu_kernels_compile_clean():
    """The kernels above compile offline for sm_90a with every shim inlined (no CALL, no local memory)."""
    from numba.cuda import types

    from tests.sass import assert_sass

    f32, i32 = types.float32[::1], types.int32[::1]
    assert_sass(count_kernel, (i32,))
    assert_sass(dyn_smem_kernel, (f32, f32), has=("STS", "LDS", "BAR.SYNC"))
    assert_sass(dsmem_far_end_kernel, (f32, f32), has=("UCGABAR_ARV", "UCGABAR_WAIT", "PRMT", "LD.E"))
    assert_sass(axpy_kernel, (types.int32, i32, i32, types.int64))


@pytest.mark.gpu
def test_device_info_reads_the_gpu():
    info = device_info()
    assert info is device_info()      # cached
    assert info.sm_count > 0 and info.max_threads_per_block >= 1024
    assert info.max_shared_per_block_optin >= info.max_shared_per_block
    if info.compute_capability >= (9, 0):
        assert info.cluster_launch
