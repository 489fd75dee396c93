"""The GPU backend: numba's driver for the device's limits, cuda.core for launches (clusters, more than
48 KB of dynamic shared memory), ``cuTensorMapEncodeTiled`` for tensor maps. ``asyncpipe.backend``
loads it when the simulator is not chosen; the host API (``asyncpipe.host``) reaches it through there.

Arguments are marshalled exactly as numba's own launch does (``_Kernel._prepare_args``: host arrays
are copied to the device and back), then ``cuda.core.launch`` runs the kernel.
"""

from __future__ import annotations

import inspect
import sys

import numpy as np

from ..constants import SM_HOPPER, STATIC_SMEM_DEFAULT_MAX
from ..errors import AsyncpipeError, check
from ..spec.device import DeviceInfo, check_cc, no_gpu
from ..spec.launch import API, PreparedLaunch, check_compiled, check_launch
from ..spec.tensor_map import (_DTYPES, _INTERLEAVE, _L2_PROMOTION, _OOB_FILL, _SWIZZLE, TENSOR_MAP_WORDS,
                               TiledLayout)

_TMAP_API = "TensorMap.tiled"
_DRIVER = "cuTensorMapEncodeTiled"


# ---------------------------------------------------------------------------------------------
# The device
# ---------------------------------------------------------------------------------------------
def _current_device(api: str):
    """numba's current ``Device``, or ``UnsupportedDeviceError`` when there is no usable GPU."""
    from numba import cuda

    if "numba.cuda.simulator_init" in sys.modules:      # numba.cuda was imported as its simulator
        raise no_gpu(api, "NUMBA_ENABLE_CUDASIM=1: numba's simulator runs instead of a GPU")

    try:
        available = cuda.is_available()
    except Exception as exc:  # a broken driver install raises instead of answering False
        raise no_gpu(api, f"the CUDA driver failed to load: {exc}") from exc
    if not available:
        raise no_gpu(api, "no CUDA driver or no visible device")
    return cuda.get_current_device()


_CACHE: dict[int, DeviceInfo] = {}


def _read(dev) -> DeviceInfo:
    """Read ``dev`` (a numba ``Device``; each attribute is one checked ``cuDeviceGetAttribute``)."""
    return DeviceInfo(
        name=str(dev.name.decode() if isinstance(dev.name, bytes) else dev.name),
        compute_capability=tuple(dev.compute_capability),
        sm_count=int(dev.MULTIPROCESSOR_COUNT),
        max_threads_per_block=int(dev.MAX_THREADS_PER_BLOCK),
        max_block_dim=(int(dev.MAX_BLOCK_DIM_X), int(dev.MAX_BLOCK_DIM_Y), int(dev.MAX_BLOCK_DIM_Z)),
        max_grid_dim=(int(dev.MAX_GRID_DIM_X), int(dev.MAX_GRID_DIM_Y), int(dev.MAX_GRID_DIM_Z)),
        max_shared_per_block=int(dev.MAX_SHARED_MEMORY_PER_BLOCK),
        max_shared_per_block_optin=int(dev.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
        max_shared_per_sm=int(dev.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
        cluster_launch=bool(dev.CLUSTER_LAUNCH),
        device_id=int(dev.id),
    )


def device_info(api: str = "device_info") -> DeviceInfo:
    """The current GPU's ``DeviceInfo``, read from the driver on first use and cached per device."""
    dev = _current_device(api)
    if dev.id not in _CACHE:
        _CACHE[dev.id] = _read(dev)
    return _CACHE[dev.id]


# ---------------------------------------------------------------------------------------------
# The launch
# ---------------------------------------------------------------------------------------------
def check_kernel(kernel, api: str = API):
    """``kernel`` must be a numba ``@cuda.jit`` kernel (a ``CUDADispatcher``, not a device function)."""
    from numba.cuda.dispatcher import CUDADispatcher

    is_kernel = isinstance(kernel, CUDADispatcher) and not kernel.targetoptions.get("device", False)
    what = f"a device function {kernel.py_func.__name__}" if isinstance(kernel, CUDADispatcher) else (
        f"{type(kernel).__module__}.{type(kernel).__qualname__}")
    check(is_kernel, api, "kernel must be a numba @cuda.jit kernel (not a device function or a Python function)",
          what, "numba.cuda.jit")
    return kernel


def _select_overload(kernel, args, api: str):
    """The compiled numba ``_Kernel`` for ``args``, compiling it if needed (as ``kernel[...](*args)``)."""
    params = inspect.signature(kernel.py_func).parameters.values()
    if not any(p.kind == p.VAR_POSITIONAL for p in params):
        check(len(params) == len(args), api, f"the kernel takes {len(params)} arguments", f"{len(args)} arguments",
              "numba.cuda.jit")
    argtypes = []
    for i, a in enumerate(args):
        try:
            argtypes.append(kernel.typeof_pyval(a))
        except ValueError as exc:
            raise AsyncpipeError(api, "every kernel argument must have a numba type",
                                 f"argument {i} of type {type(a).__name__}", "numba.typeof") from exc
    argtypes = tuple(argtypes)
    kern = kernel.overloads.get(argtypes)
    if kern is None and kernel._can_compile and not kernel.specialized:
        kern = kernel.compile(argtypes)
    if kern is None:   # compiled from signatures: the first one the arguments convert to
        ctx = kernel.typingctx
        kern = next((k for sig, k in kernel.overloads.items() if len(sig) == len(argtypes)
                     and all(ctx.can_convert(a, p) is not None for a, p in zip(argtypes, sig))), None)
        check(kern is not None, api, "the arguments must match one of the kernel's signatures",
              f"{argtypes} for {list(kernel.overloads)}", "numba.cuda.jit(signature)")
    return kern


def _cuda_check(result, what: str) -> None:
    """Raise numba's ``CudaAPIError`` unless the cuda.bindings call returned CUDA_SUCCESS."""
    from cuda.bindings import driver
    from numba.cuda.cudadrv.driver import CudaAPIError

    err = result[0] if isinstance(result, tuple) else result
    if err != driver.CUresult.CUDA_SUCCESS:
        raise CudaAPIError(err, f"{what} failed: {getattr(err, 'name', err)}")


def _set_kernel_attribute(cufunc, attribute: str, value: int, device_id: int) -> None:
    from cuda.bindings import driver

    attr = getattr(driver.CUfunction_attribute, attribute)
    _cuda_check(driver.cuKernelSetAttribute(attr, int(value), cufunc.handle, driver.CUdevice(device_id)),
                f"cuKernelSetAttribute({attribute}={value})")


def _opt_in(cufunc, config, info) -> None:
    """The per-kernel attributes a launch of ``config`` needs, set before it (or before an occupancy query)."""
    if cufunc.attrs.shared + config.shared_mem > STATIC_SMEM_DEFAULT_MAX:
        _set_kernel_attribute(cufunc, "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", config.shared_mem,
                              info.device_id)
    if config.cluster is not None and config.nonportable:
        _set_kernel_attribute(cufunc, "CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED", 1, info.device_id)


def resident_blocks(kernel, block, *args, cluster=None, shared_mem: int = 0, stream=0,
                    nonportable: bool = False) -> int:
    """``asyncpipe.host.resident_blocks`` on the GPU: the driver's occupancy calculator for the compiled
    ``kernel(*args)`` (its registers, its static and ``shared_mem`` bytes of dynamic shared memory):
    ``cuOccupancyMaxActiveBlocksPerMultiprocessor`` times the SMs, or with ``cluster``
    ``cuOccupancyMaxActiveClusters`` times the cluster's CTAs (a cluster lives inside one GPC, and a GPC's
    SMs need not divide by the cluster size, so this can be fewer than the SMs allow one by one)."""
    from cuda.core import LaunchConfig as CoreLaunchConfig
    from numba.cuda.cudadrv.driver import _to_core_stream

    check_kernel(kernel, API)
    info = device_info(API)
    config = check_launch(cluster if cluster is not None else 1, block, cluster, shared_mem, nonportable, device=info)
    cufunc = _select_overload(kernel, args, API)._codelibrary.get_cufunc()
    check_compiled(config, cufunc.attrs.shared, cufunc.attrs.maxthreads, info)
    _opt_in(cufunc, config, info)
    occupancy = cufunc.kernel.occupancy
    if config.cluster is None:
        per_sm = occupancy.max_active_blocks_per_multiprocessor(config.threads_per_block, config.shared_mem)
        blocks, what = per_sm * info.sm_count, "cuOccupancyMaxActiveBlocksPerMultiprocessor"
    else:
        core_config = CoreLaunchConfig(grid=config.clusters, cluster=config.cluster, block=config.block,
                                       shmem_size=config.shared_mem)
        clusters = occupancy.max_active_clusters(core_config, stream=_to_core_stream(stream))
        blocks, what = clusters * config.cluster_size, "cuOccupancyMaxActiveClusters"
    check(blocks > 0, API, f"at least one block{' cluster' if config.cluster else ''} of the kernel must fit on one "
          f"{'GPC' if config.cluster else 'SM'} (threads, registers, shared memory)",
          f"0 resident for {config.threads_per_block} threads, {cufunc.attrs.regs} registers, "
          f"{cufunc.attrs.shared} + {config.shared_mem} bytes of shared memory"
          + (f", clusters of {config.cluster_size}" if config.cluster else ""), what)
    return blocks


def prepare_launch(kernel, grid, block, *args, cluster=None, shared_mem: int = 0, stream=0,
                   nonportable: bool = False, keep=(), once: bool = False) -> PreparedLaunch:
    """``asyncpipe.host.prepare_launch`` on the GPU: check, compile, opt in and marshal once. ``once``: a
    launch run a single time (``launch``), which may take host arrays (copied in, and back after it)."""
    from cuda.core import LaunchConfig as CoreLaunchConfig
    from cuda.core import launch as core_launch
    from numba.cuda.cudadrv.driver import _to_core_stream

    check_kernel(kernel, API)
    info = device_info(API)
    config = check_launch(grid, block, cluster, shared_mem, nonportable, device=info)

    kern = _select_overload(kernel, args, API)
    check(not kern.debug, API, "a kernel compiled with debug=True reports its exceptions only when numba "
          "launches it (kernel[grid, block](...))", "debug=True", "numba.cuda.jit(debug=True)")
    cufunc = kern._codelibrary.get_cufunc()
    check_compiled(config, cufunc.attrs.shared, cufunc.attrs.maxthreads, info)

    _opt_in(cufunc, config, info)

    # --- arguments, as numba's _Kernel.launch marshals them --------------------------------------
    core_stream = _to_core_stream(stream)
    retr, kernelargs = [], []   # retr: write-backs of host arrays copied to the device
    for t, v in zip(kern.argument_types, args):
        kern._prepare_args(t, v, core_stream, retr, kernelargs)
    check(once or not retr, API, "a prepared launch takes device arrays only (a host array is copied to the "
          "device once, when prepared, and its copy would go stale)",
          f"{len(retr)} host array argument(s)", "numba.cuda.to_device")

    if config.cluster is None:
        core_config = CoreLaunchConfig(grid=config.grid, block=config.block, shmem_size=config.shared_mem,
                                       is_cooperative=kern.cooperative)
    else:   # cuda.core counts grid in clusters once cluster is given
        core_config = CoreLaunchConfig(grid=config.clusters, cluster=config.cluster, block=config.block,
                                       shmem_size=config.shared_mem, is_cooperative=kern.cooperative)
    kernelargs = tuple(kernelargs)
    debug = _debug_hook(cufunc, kern, config)

    def run():
        armed = debug and debug()
        core_launch(core_stream, core_config, cufunc.kernel, *kernelargs)
        if armed:
            armed.check(core_stream)
        for writeback in retr:
            writeback()

    return PreparedLaunch(config, run, (*keep, stream, kern))


def _debug_hook(cufunc, kern, config):
    """With ``ASYNCPIPE_DEBUG=1``: what arms a launch of a kernel with debug forms (``asyncpipe.backend.hang``);
    None otherwise."""
    from . import debugging

    if not debugging():
        return None
    from . import hang

    name = kern.py_func.__qualname__
    return lambda: hang.arm(cufunc, name, config.grid, config.block, config.cluster)


def launch(kernel, grid, block, *args, cluster=None, shared_mem: int = 0, stream=0, nonportable: bool = False):
    """Check, prepare and run ``kernel(*args)`` once (host arrays copied in and back); its ``LaunchConfig``."""
    prepared = prepare_launch(kernel, grid, block, *args, cluster=cluster, shared_mem=shared_mem, stream=stream,
                              nonportable=nonportable, once=True)
    prepared()
    return prepared.config


# ---------------------------------------------------------------------------------------------
# Tensor maps
# ---------------------------------------------------------------------------------------------
def _encode(layout: TiledLayout) -> np.ndarray:
    """The 128-byte CUtensorMap of ``layout``, as 16 uint64 words."""
    from cuda.bindings import driver

    # globalStrides has rank - 1 entries; for rank 1 an empty list reaches the driver as a null
    # pointer, which it refuses (CUDA_ERROR_INVALID_VALUE, seen on an H200), so pass one it ignores.
    strides = layout.cuda_strides or [-(-layout.shape[0] * layout.itemsize // 16) * 16]
    err, tmap = driver.cuTensorMapEncodeTiled(
        getattr(driver.CUtensorMapDataType, "CU_TENSOR_MAP_DATA_TYPE_" + _DTYPES[layout.dtype][0]),
        layout.rank,
        layout.address,
        [driver.cuuint64_t(n) for n in layout.cuda_dims],
        [driver.cuuint64_t(s) for s in strides],
        [driver.cuuint32_t(b) for b in layout.cuda_box],
        [driver.cuuint32_t(e) for e in layout.cuda_element_strides],
        getattr(driver.CUtensorMapInterleave, _INTERLEAVE[layout.interleave]),
        getattr(driver.CUtensorMapSwizzle, _SWIZZLE[layout.swizzle]),
        getattr(driver.CUtensorMapL2promotion, _L2_PROMOTION[layout.l2_promotion]),
        getattr(driver.CUtensorMapFloatOOBfill, _OOB_FILL[layout.oob_fill]),
    )
    if err != driver.CUresult.CUDA_SUCCESS:
        raise AsyncpipeError(_TMAP_API, "the driver refused to encode the tensor map", f"{err.name} for {layout}",
                             _DRIVER)
    words = np.array([int(w) for w in tmap.opaque], dtype=np.uint64)
    assert words.size == TENSOR_MAP_WORDS
    return words


def tensor_map_words(layout: TiledLayout):
    """The encoded map of ``layout`` in device memory (a numba device array of 16 ``uint64``)."""
    check_cc(device_info(_TMAP_API), _TMAP_API, SM_HOPPER, "tensor maps (TMA) need compute capability 9.0 or newer",
             "CUDA programming guide, tensor memory access")
    from numba import cuda

    return cuda.to_device(_encode(layout))


class GpuBackend:
    """``asyncpipe.backend.Backend`` on the GPU: this module's functions."""

    name = "gpu"
    caches_plans = True

    def device_info(self, api: str = "device_info") -> DeviceInfo:
        return device_info(api)

    def prepare_launch(self, kernel, grid, block, *args, **options) -> PreparedLaunch:
        return prepare_launch(kernel, grid, block, *args, **options)

    def launch(self, kernel, grid, block, *args, **options):
        return launch(kernel, grid, block, *args, **options)

    def resident_blocks(self, kernel, block, *args, **options) -> int:
        return resident_blocks(kernel, block, *args, **options)

    def tensor_map_words(self, layout: TiledLayout):
        return tensor_map_words(layout)
