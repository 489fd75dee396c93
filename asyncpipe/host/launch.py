"""``launch``: run a numba ``@cuda.jit`` kernel with what numba's ``kernel[grid, block]`` cannot
give: thread block clusters and more than 48 KB of dynamic shared memory.

    launch(kernel, grid, block, *args, cluster=2, shared_mem=200 * 1024)

``grid`` counts BLOCKS, as in CUDA C++ (``<<<grid, block>>>`` with ``__cluster_dims__``), also when
``cluster`` is given; it must then be a multiple of ``cluster`` in every dimension. (cuda.core's
``LaunchConfig`` counts ``grid`` in clusters once ``cluster`` is set; ``launch`` converts.)

Every argument is checked before anything is compiled or run, by ``check_launch``: a pure function
of the launch and the device's limits (a ``DeviceInfo``), so that each rule is testable without a
GPU. Arguments are marshalled exactly as numba's own launch does (``_Kernel._prepare_args``: host
arrays are copied to the device and back), then ``cuda.core.launch`` runs the kernel.
"""

from __future__ import annotations

import inspect
import math
import operator
from dataclasses import dataclass

from ..constants import CLUSTER_SIZE_NONPORTABLE_MAX, CLUSTER_SIZE_PORTABLE_MAX, SM_HOPPER, STATIC_SMEM_DEFAULT_MAX
from ..errors import AsyncpipeError, UnsupportedDeviceError, check
from .device import DeviceInfo, check_cc, device_info

API = "launch"
Dim3 = tuple[int, int, int]

_SRC_CONFIG = "CUDA programming guide, execution configuration"
_SRC_CLUSTER = "CUDA programming guide, thread block clusters"
_SRC_NONPORTABLE = "CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED"
_SRC_SMEM = "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"


@dataclass(frozen=True)
class LaunchConfig:
    """A checked launch shape. ``grid`` is in blocks; ``cluster`` is None for an ordinary launch."""

    grid: Dim3
    block: Dim3
    cluster: Dim3 | None = None
    shared_mem: int = 0             # bytes of dynamic shared memory per block
    nonportable: bool = False       # allow clusters above the portable 8 CTAs

    @property
    def threads_per_block(self) -> int:
        return math.prod(self.block)

    @property
    def blocks(self) -> int:
        return math.prod(self.grid)

    @property
    def cluster_size(self) -> int:
        """CTAs per cluster (1 without clusters)."""
        return math.prod(self.cluster) if self.cluster else 1

    @property
    def clusters(self) -> Dim3:
        """The grid counted in clusters: what cuda.core's ``LaunchConfig(grid=...)`` wants with ``cluster``."""
        c = self.cluster or (1, 1, 1)
        return tuple(g // k for g, k in zip(self.grid, c))


# ---------------------------------------------------------------------------------------------
# Pure checks (no GPU): each raises AsyncpipeError('<api>: <rule> [<source>], got <value>')
# ---------------------------------------------------------------------------------------------
def as_dim3(value, what: str, api: str = API) -> Dim3:
    """``value`` (an int or a tuple of 1 to 3 ints, each >= 1) as an (x, y, z) tuple."""
    rule = f"{what} must be a positive int or a tuple of 1 to 3 positive ints"
    items = value if isinstance(value, (tuple, list)) else (value,)
    check(1 <= len(items) <= 3, api, rule, repr(value), _SRC_CONFIG)
    dims = []
    for v in items:
        ok = not isinstance(v, bool)
        try:
            n = operator.index(v) if ok else 0
        except TypeError:
            n, ok = 0, False
        check(ok and n >= 1, api, rule, repr(value), _SRC_CONFIG)
        dims.append(n)
    return tuple(dims + [1] * (3 - len(dims)))


def check_shared_mem(shared_mem: int, device: DeviceInfo, static_shared: int = 0, api: str = API) -> int:
    """``shared_mem`` bytes of dynamic shared memory, plus the kernel's static shared memory, must
    fit the device's opt-in limit per block."""
    ok = not isinstance(shared_mem, bool)
    try:
        n = operator.index(shared_mem) if ok else -1
    except TypeError:
        n, ok = -1, False
    check(ok and n >= 0, api, "shared_mem must be a non-negative int (bytes of dynamic shared memory per block)",
          repr(shared_mem), _SRC_CONFIG)
    limit = device.max_shared_per_block_optin
    total = static_shared + n
    check(total <= limit, api,
          f"static + dynamic shared memory per block must be at most {limit} bytes ({limit / 1024:g} KB) "
          f"on {device.name}", f"{static_shared} static + {n} dynamic = {total} bytes", _SRC_SMEM)
    return n


def check_launch(grid, block, cluster=None, shared_mem: int = 0, nonportable: bool = False, *,
                 device: DeviceInfo, static_shared: int = 0, api: str = API) -> LaunchConfig:
    """Check a launch against ``device``'s limits and return it as a ``LaunchConfig``.

    Pure: ``device`` is a ``DeviceInfo`` (``device_info()`` on a GPU, or a literal description in
    tests). ``static_shared`` is the kernel's static shared memory when known (after compiling)."""
    g = as_dim3(grid, "grid", api)
    b = as_dim3(block, "block", api)
    c = None if cluster is None else as_dim3(cluster, "cluster", api)

    # --- blocks ---------------------------------------------------------------------------------
    check(all(x <= m for x, m in zip(b, device.max_block_dim)), api,
          f"block must be at most {device.max_block_dim} threads in (x, y, z)", b,
          "CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X/Y/Z")
    threads = math.prod(b)
    check(threads <= device.max_threads_per_block, api,
          f"a block holds at most {device.max_threads_per_block} threads",
          f"block {b} = {threads} threads", "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK")

    # --- grid, counted in blocks ----------------------------------------------------------------
    check(all(x <= m for x, m in zip(g, device.max_grid_dim)), api,
          f"grid must be at most {device.max_grid_dim} blocks in (x, y, z)", g,
          "CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X/Y/Z")

    # --- clusters -------------------------------------------------------------------------------
    if c is not None:
        check_cc(device, api, SM_HOPPER, "thread block clusters need compute capability 9.0 or newer", _SRC_CLUSTER)
        check(device.cluster_launch, api, "thread block clusters need a GPU that can launch them",
              device.describe(), "CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH", cls=UnsupportedDeviceError)
        bad = [f"{g[i]} % {c[i]} = {g[i] % c[i]} in {'xyz'[i]}" for i in range(3) if g[i] % c[i]]
        check(not bad, api, "grid (in blocks) must be a multiple of cluster in every dimension",
              f"grid {g} with cluster {c}: {', '.join(bad)}", _SRC_CLUSTER)
        size = math.prod(c)
        if nonportable:
            check(size <= CLUSTER_SIZE_NONPORTABLE_MAX, api,
                  f"a non-portable cluster holds at most {CLUSTER_SIZE_NONPORTABLE_MAX} CTAs",
                  f"cluster {c} = {size} CTAs", _SRC_NONPORTABLE)
        else:
            check(size <= CLUSTER_SIZE_PORTABLE_MAX, api,
                  f"a cluster holds at most {CLUSTER_SIZE_PORTABLE_MAX} CTAs "
                  f"({CLUSTER_SIZE_NONPORTABLE_MAX} with nonportable=True)",
                  f"cluster {c} = {size} CTAs", _SRC_CLUSTER)

    # --- shared memory --------------------------------------------------------------------------
    n = check_shared_mem(shared_mem, device, static_shared, api)
    return LaunchConfig(g, b, c, n, bool(nonportable))


def check_kernel(kernel, api: str = API):
    """``kernel`` must be a numba ``@cuda.jit`` kernel (a ``CUDADispatcher``, not a device function)."""
    from numba.cuda.dispatcher import CUDADispatcher

    is_kernel = isinstance(kernel, CUDADispatcher) and not kernel.targetoptions.get("device", False)
    what = f"a device function {kernel.py_func.__name__}" if isinstance(kernel, CUDADispatcher) else (
        f"{type(kernel).__module__}.{type(kernel).__qualname__}")
    check(is_kernel, api, "kernel must be a numba @cuda.jit kernel (not a device function or a Python function)",
          what, "numba.cuda.jit")
    return kernel


def check_compiled(config: LaunchConfig, static_shared: int, max_threads: int, device: DeviceInfo,
                   api: str = API) -> None:
    """What is known only once the kernel is compiled: its static shared memory and the most
    threads per block its registers (or ``launch_bounds``) allow."""
    check(config.threads_per_block <= max_threads, api,
          f"this compiled kernel runs at most {max_threads} threads per block (its registers or launch_bounds)",
          f"block {config.block} = {config.threads_per_block} threads", "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK")
    check_shared_mem(config.shared_mem, device, static_shared, api)


# ---------------------------------------------------------------------------------------------
# The launch
# ---------------------------------------------------------------------------------------------
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


class PreparedLaunch:
    """A checked launch with its arguments marshalled: calling it launches the kernel again, with no
    Python argument handling and no checks (a call costs cuda.core's launch alone). ``config`` is the
    ``LaunchConfig``. The marshalled arguments hold raw device pointers only: the caller keeps the
    arrays alive (``keep``: objects the launch holds on to, such as tensor maps)."""

    __slots__ = ("config", "_run", "keep")

    def __init__(self, config: LaunchConfig, run, keep=()):
        self.config, self._run, self.keep = config, run, tuple(keep)

    def __call__(self) -> None:
        self._run()


class LaunchSequence:
    """Prepared launches that make one plan, run in order on their stream (a kernel and the pass that prepares
    its input); ``keep``: what they need alive, such as a workspace between them."""

    __slots__ = ("launches", "keep")

    def __init__(self, *launches: PreparedLaunch, keep=()):
        self.launches, self.keep = launches, tuple(keep)

    def __call__(self) -> None:
        for launch in self.launches:
            launch()


def prepare_launch(kernel, grid, block, *args, cluster=None, shared_mem: int = 0, stream=0,
                   nonportable: bool = False, keep=(), _once: bool = False) -> PreparedLaunch:
    """``launch``'s checks, compilation, opt-ins and argument marshalling, done once: the returned
    ``PreparedLaunch`` launches ``kernel(*args)`` each time it is called. Every argument must live on
    the device already (a host array would need a copy back after each launch): an
    ``AsyncpipeError`` says so. Kernel functions keep these per problem (``PlanCache``), so a repeated
    call costs microseconds of Python instead of the hundreds that the checks and numba's argument
    handling take (measured on the H200: 417 us per ``wgmma_gemm`` call, longer than the kernel at
    4096^3)."""
    # --- asyncpipe simulator (NUMBA_ENABLE_CUDASIM=1): the same checks, then the CPU engine ----------
    from ..ptx._registry import simulating

    if simulating():
        import functools

        from ..sim.host import launch as sim_launch

        run = functools.partial(sim_launch, kernel, grid, block, *args, cluster=cluster, shared_mem=shared_mem,
                                stream=stream, nonportable=nonportable)
        return PreparedLaunch(None, run, keep)
    # --- end of the simulator's block -------------------------------------------------------------
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

    # --- opt-ins: per kernel and device, before the launch that needs them ----------------------
    if cufunc.attrs.shared + config.shared_mem > STATIC_SMEM_DEFAULT_MAX:
        _set_kernel_attribute(cufunc, "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", config.shared_mem,
                              info.device_id)
    if config.cluster is not None and config.nonportable:
        _set_kernel_attribute(cufunc, "CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED", 1, info.device_id)

    # --- arguments, as numba's _Kernel.launch marshals them --------------------------------------
    core_stream = _to_core_stream(stream)
    retr, kernelargs = [], []   # retr: write-backs of host arrays copied to the device
    for t, v in zip(kern.argument_types, args):
        kern._prepare_args(t, v, core_stream, retr, kernelargs)
    check(_once or not retr, API, "a prepared launch takes device arrays only (a host array is copied to the "
          "device once, when prepared, and its copy would go stale)",
          f"{len(retr)} host array argument(s)", "numba.cuda.to_device")

    if config.cluster is None:
        core_config = CoreLaunchConfig(grid=config.grid, block=config.block, shmem_size=config.shared_mem,
                                       is_cooperative=kern.cooperative)
    else:   # cuda.core counts grid in clusters once cluster is given
        core_config = CoreLaunchConfig(grid=config.clusters, cluster=config.cluster, block=config.block,
                                       shmem_size=config.shared_mem, is_cooperative=kern.cooperative)
    kernelargs = tuple(kernelargs)

    def run():
        core_launch(core_stream, core_config, cufunc.kernel, *kernelargs)
        for writeback in retr:
            writeback()

    return PreparedLaunch(config, run, (*keep, stream, kern))


def launch(kernel, grid, block, *args, cluster=None, shared_mem: int = 0, stream=0, nonportable: bool = False):
    """Launch the numba ``@cuda.jit`` kernel ``kernel(*args)`` on ``grid`` x ``block``.

    - ``grid``: blocks (not clusters), an int or a 1-3 tuple; with ``cluster`` a multiple of it.
    - ``block``: threads per block, an int or a 1-3 tuple.
    - ``cluster``: CTAs per cluster (needs compute capability 9.0): at most 8, or 16 with
      ``nonportable=True`` (sets ``CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED``).
    - ``shared_mem``: bytes of dynamic shared memory per block (``cuda.shared.array(0, dtype)``);
      above 48 KB (with the static part) the kernel is opted in through
      ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES``, up to the device's opt-in limit.
    - ``stream``: 0 (the default stream), a numba stream or a cuda.core stream.

    Everything is checked first (``check_kernel``, ``check_launch``, then ``check_compiled``), each
    failure an ``AsyncpipeError`` or ``UnsupportedDeviceError``. Host arrays are copied to the device
    and back, as numba's own launch does. Returns the ``LaunchConfig`` (in the simulator, what its
    launch returns). To launch the same thing many times, ``prepare_launch`` once.
    """
    from ..ptx._registry import simulating

    if simulating():
        from ..sim.host import launch as sim_launch

        return sim_launch(kernel, grid, block, *args, cluster=cluster, shared_mem=shared_mem, stream=stream,
                          nonportable=nonportable)
    prepared = prepare_launch(kernel, grid, block, *args, cluster=cluster, shared_mem=shared_mem, stream=stream,
                              nonportable=nonportable, _once=True)
    prepared()
    return prepared.config
