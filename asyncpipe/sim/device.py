"""The GPU the simulator pretends to be: an sm_90 (Hopper) device with ``ASYNCPIPE_SIM_SMS`` SMs and
the H100/H200 limits, as a ``DeviceInfo`` (for ``check_launch``) and as driver attribute names (for
host code that reads ``cuda.get_current_device().MULTIPROCESSOR_COUNT``)."""

from __future__ import annotations

from ..spec.device import DeviceInfo
from . import config

NAME = "asyncpipe simulator (sm_90)"


def sim_device_info() -> DeviceInfo:
    return DeviceInfo(name=NAME, compute_capability=(9, 0), sm_count=config.current().sms,
                      max_threads_per_block=1024, max_block_dim=(1024, 1024, 64),
                      max_grid_dim=(2**31 - 1, 65535, 65535), max_shared_per_block=48 * 1024,
                      max_shared_per_block_optin=232448, max_shared_per_sm=233472, cluster_launch=True)


def attribute(name: str):
    info = sim_device_info()
    table = {
        "MULTIPROCESSOR_COUNT": info.sm_count,
        "MAX_THREADS_PER_BLOCK": info.max_threads_per_block,
        "MAX_BLOCK_DIM_X": info.max_block_dim[0], "MAX_BLOCK_DIM_Y": info.max_block_dim[1],
        "MAX_BLOCK_DIM_Z": info.max_block_dim[2],
        "MAX_GRID_DIM_X": info.max_grid_dim[0], "MAX_GRID_DIM_Y": info.max_grid_dim[1],
        "MAX_GRID_DIM_Z": info.max_grid_dim[2],
        "MAX_SHARED_MEMORY_PER_BLOCK": info.max_shared_per_block,
        "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": info.max_shared_per_block_optin,
        "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": info.max_shared_per_sm,
        "CLUSTER_LAUNCH": 1, "WARP_SIZE": 32, "COMPUTE_CAPABILITY_MAJOR": 9, "COMPUTE_CAPABILITY_MINOR": 0,
        "name": NAME, "id": 0,
    }
    if name not in table:
        raise AttributeError(f"the simulated device has no attribute {name!r}")
    return table[name]
