"""Host side: the current GPU's limits, and kernel launches with clusters and large shared memory.

    from asyncpipe.host import launch, device_info, require_cc

    launch(kernel, grid_blocks, block, *args, cluster=2, shared_mem=200 * 1024)

Host code only: never imported inside kernels.
"""

from .device import DeviceInfo, check_cc, device_info, require_cc
from .launch import (LaunchConfig, as_dim3, check_compiled, check_kernel, check_launch, check_shared_mem, launch,
                     persistent_grid, resident_blocks)

__all__ = [
    "DeviceInfo",
    "LaunchConfig",
    "as_dim3",
    "check_cc",
    "check_compiled",
    "check_kernel",
    "check_launch",
    "check_shared_mem",
    "device_info",
    "launch",
    "persistent_grid",
    "require_cc",
    "resident_blocks",
    "TensorMap",
]
from .tensor_map import TensorMap  # noqa: E402,F401
