"""The simulator's side of the backend door (``asyncpipe.backend``): ``SimBackend`` answers the host API
(``asyncpipe.host.launch``, ``prepare_launch``, ``device_info``, ``TensorMap.tiled``) with the simulated
sm_90 device and asyncpipe's CPU engine. Loading it installs the engine into numba's simulator.

Only the pure rules are shared with the GPU side (``asyncpipe.spec``): this module never imports
``asyncpipe.host``.
"""

from __future__ import annotations

import functools

from ..constants import STATIC_SMEM_DEFAULT_MAX
from ..errors import check
from ..spec.launch import API, PreparedLaunch, check_launch
from .device import sim_device_info
from .launcher import run_kernel
from .static_shared import static_shared_bytes
from .tensor_map import simulated_words


def launch(kernel, grid, block, *args, cluster=None, shared_mem: int = 0, stream=0, nonportable: bool = False):
    """``asyncpipe.host.launch`` in the simulator: the same checks against the simulated sm_90 device,
    then the launch in asyncpipe's engine (clusters and all). Returns the ``LaunchConfig``."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    is_kernel = isinstance(kernel, FakeCUDAKernel) and not kernel._device
    check(is_kernel, API, "kernel must be a numba @cuda.jit kernel (not a device function or a Python function)",
          type(kernel).__name__, "numba.cuda.jit")
    static = _static_shared(kernel, API)
    config = check_launch(grid, block, cluster, shared_mem, nonportable, device=sim_device_info(), static_shared=static)
    run_kernel(kernel, args, config.grid, config.block, config.cluster, config.shared_mem, opt_in=True)
    return config


def resident_blocks(kernel, block, *args, cluster=None, shared_mem: int = 0, stream=0, nonportable: bool = False):
    """``asyncpipe.host.resident_blocks`` in the simulator: the same checks as a launch of one cluster, then one
    block per simulated SM (``ASYNCPIPE_SIM_SMS``), in whole clusters. The simulator knows no registers, so it
    cannot tell how many blocks would share an SM; one each keeps a persistent grid as small as the SM count says,
    which is what that setting is for (fewer CTAs to simulate, each walking more units)."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    check(isinstance(kernel, FakeCUDAKernel) and not kernel._device, API,
          "kernel must be a numba @cuda.jit kernel (not a device function or a Python function)",
          type(kernel).__name__, "numba.cuda.jit")
    info = sim_device_info()
    config = check_launch(cluster if cluster is not None else 1, block, cluster, shared_mem, nonportable, device=info,
                          static_shared=_static_shared(kernel, API))
    return info.sm_count // config.cluster_size * config.cluster_size


PLAIN_API = "kernel[grid, block, stream, shared]"


def _static_shared(kernel, api: str) -> int:
    """The kernel's static shared memory (its ``cuda.shared.array`` calls), which ptxas limits to 48 KB."""
    static = static_shared_bytes(kernel)
    check(static <= STATIC_SMEM_DEFAULT_MAX, api, f"static shared memory (cuda.shared.array with a shape) must be "
          f"at most {STATIC_SMEM_DEFAULT_MAX} bytes (48 KB): more must be dynamic (cuda.shared.array(0, ...) with "
          "asyncpipe.host.launch(..., shared_mem=...))", f"{static} bytes of static shared arrays",
          "ptxas, 'uses too much shared data'")
    return static


def check_plain_launch(grid, block, shared_mem, kernel=None):
    """``kernel[grid, block, stream, shared](...)``: the launch shape as 3-tuples, checked like any launch,
    and the shared memory as numba's launch leaves it: without the opt-in attribute the kernel may use
    48 KB of static plus dynamic shared memory, as a GPU's ``cuLaunchKernel`` allows."""
    static = _static_shared(kernel, PLAIN_API) if kernel is not None else 0
    config = check_launch(grid, block, None, shared_mem or 0, device=sim_device_info(), api=PLAIN_API,
                          static_shared=static)
    limit = sim_device_info().max_shared_per_block
    check(static + config.shared_mem <= limit, PLAIN_API,
          f"without the CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES opt-in (numba's launch does not set it) "
          f"static + dynamic shared memory must be at most {limit} bytes (48 KB); asyncpipe.host.launch(kernel, grid, "
          "block, *args, shared_mem=...) opts in, up to 227 KB",
          f"{static} static + {config.shared_mem} dynamic = {static + config.shared_mem} bytes",
          "cuLaunchKernel, CUDA_ERROR_INVALID_VALUE")
    return config.grid, config.block


class SimBackend:
    """``asyncpipe.backend.Backend`` in the simulator. A prepared launch runs the checks and the engine at
    every call (``config`` None), so kernel functions build their plans every time (``caches_plans``)."""

    name = "simulator"
    caches_plans = False

    def __init__(self):
        from . import install

        install()

    def device_info(self, api: str = "device_info"):
        return sim_device_info()

    def prepare_launch(self, kernel, grid, block, *args, cluster=None, shared_mem: int = 0, stream=0,
                       nonportable: bool = False, keep=(), once: bool = False) -> PreparedLaunch:
        run = functools.partial(launch, kernel, grid, block, *args, cluster=cluster, shared_mem=shared_mem,
                                stream=stream, nonportable=nonportable)
        return PreparedLaunch(None, run, keep)

    def launch(self, kernel, grid, block, *args, **options):
        return launch(kernel, grid, block, *args, **options)

    def resident_blocks(self, kernel, block, *args, **options) -> int:
        return resident_blocks(kernel, block, *args, **options)

    def tensor_map_words(self, layout):
        return simulated_words(layout)
