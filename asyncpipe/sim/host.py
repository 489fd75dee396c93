"""Host-side entry points under the simulator: ``asyncpipe.host.launch`` hands its launches here."""

from __future__ import annotations

from ..errors import check
from ..host.launch import API, check_launch
from .device import sim_device_info
from .launcher import run_kernel


def launch(kernel, grid, block, *args, cluster=None, shared_mem: int = 0, stream=0, nonportable: bool = False):
    """``asyncpipe.host.launch`` in the simulator: the same checks against the simulated sm_90 device,
    then the launch in asyncpipe's engine (clusters and all). Returns the ``LaunchConfig``."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    is_kernel = isinstance(kernel, FakeCUDAKernel) and not kernel._device
    check(is_kernel, API, "kernel must be a numba @cuda.jit kernel (not a device function or a Python function)",
          type(kernel).__name__, "numba.cuda.jit")
    config = check_launch(grid, block, cluster, shared_mem, nonportable, device=sim_device_info())
    run_kernel(kernel, args, config.grid, config.block, config.cluster, config.shared_mem)
    return config


def check_plain_launch(grid, block, shared_mem):
    """``kernel[grid, block](...)``: the launch shape as 3-tuples, checked like any launch."""
    config = check_launch(grid, block, None, shared_mem or 0, device=sim_device_info(), api="kernel[grid, block]")
    return config.grid, config.block
