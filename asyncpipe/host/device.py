"""The current GPU's limits, read once from the driver, and the compute-capability gate.

``device_info()`` reads the current device through numba (whose ``Device`` reads
``cuDeviceGetAttribute`` from cuda.bindings and checks every result) and caches the answer per
device. ``require_cc(api, (9, 0))`` raises ``UnsupportedDeviceError`` unless the GPU is new enough;
with no GPU at all both raise that error too, saying there is none.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..constants import CLUSTER_SIZE_NONPORTABLE_MAX, CLUSTER_SIZE_PORTABLE_MAX, SM_HOPPER
from ..errors import UnsupportedDeviceError

_NO_GPU_RULE = "needs a CUDA GPU"
_NO_GPU_SOURCE = "numba.cuda.is_available()"


@dataclass(frozen=True)
class DeviceInfo:
    """What asyncpipe needs to know about one GPU. Every field is a driver attribute
    (``CU_DEVICE_ATTRIBUTE_<NAME>``), named in its comment."""

    name: str
    compute_capability: tuple[int, int]       # COMPUTE_CAPABILITY_MAJOR/MINOR
    sm_count: int                             # MULTIPROCESSOR_COUNT
    max_threads_per_block: int                # MAX_THREADS_PER_BLOCK
    max_block_dim: tuple[int, int, int]       # MAX_BLOCK_DIM_X/Y/Z
    max_grid_dim: tuple[int, int, int]        # MAX_GRID_DIM_X/Y/Z (in blocks)
    max_shared_per_block: int                 # MAX_SHARED_MEMORY_PER_BLOCK: without the opt-in (48 KB)
    max_shared_per_block_optin: int           # MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: static + dynamic, opted in
    max_shared_per_sm: int                    # MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
    cluster_launch: bool                      # CLUSTER_LAUNCH: thread block clusters can be launched
    device_id: int = 0

    def max_cluster_size(self, nonportable: bool = False) -> int:
        """The most CTAs one cluster may hold on this GPU: 1 without cluster launch, else the
        portable 8, or 16 with ``nonportable`` (Hopper's non-portable size, opted into per kernel
        with ``CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED``).

        The driver has no device attribute for it: the exact figure for one kernel and launch is
        ``cuOccupancyMaxPotentialClusterSize``; these are the programming guide's limits."""
        if not self.cluster_launch:
            return 1
        return CLUSTER_SIZE_NONPORTABLE_MAX if nonportable else CLUSTER_SIZE_PORTABLE_MAX

    def describe(self) -> str:
        """``NVIDIA H200 (compute capability 9.0)``: how error messages name the GPU."""
        major, minor = self.compute_capability
        return f"{self.name} (compute capability {major}.{minor})"


def _no_gpu(api: str, why: str) -> UnsupportedDeviceError:
    return UnsupportedDeviceError(api, _NO_GPU_RULE, f"none ({why})", _NO_GPU_SOURCE)


def _current_device(api: str):
    """numba's current ``Device``, or ``UnsupportedDeviceError`` when there is no usable GPU."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        raise _no_gpu(api, "NUMBA_ENABLE_CUDASIM=1: numba's simulator runs instead of a GPU")
    from numba import cuda

    try:
        available = cuda.is_available()
    except Exception as exc:  # a broken driver install raises instead of answering False
        raise _no_gpu(api, f"the CUDA driver failed to load: {exc}") from exc
    if not available:
        raise _no_gpu(api, "no CUDA driver or no visible device")
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
    """The current GPU's ``DeviceInfo``, read from the driver on first use and cached per device.
    Raises ``UnsupportedDeviceError`` (naming ``api``) when there is no usable GPU. Under asyncpipe's
    simulator it is the simulated sm_90 device."""
    from ..ptx._registry import simulating

    if simulating():
        from ..sim.device import sim_device_info

        return sim_device_info()
    dev = _current_device(api)
    if dev.id not in _CACHE:
        _CACHE[dev.id] = _read(dev)
    return _CACHE[dev.id]


def require_cc(api: str, minimum: tuple[int, int] = SM_HOPPER, rule: str | None = None,
               source: str = "CUDA programming guide, compute capabilities") -> DeviceInfo:
    """Return the current GPU's ``DeviceInfo`` if its compute capability is at least ``minimum``;
    otherwise raise ``UnsupportedDeviceError`` naming ``api``, the rule and this GPU's capability
    (with no GPU at all, saying that there is none)."""
    info = device_info(api)
    check_cc(info, api, minimum, rule, source)
    return info


def check_cc(info: DeviceInfo, api: str, minimum: tuple[int, int] = SM_HOPPER, rule: str | None = None,
             source: str = "CUDA programming guide, compute capabilities") -> None:
    """The pure half of ``require_cc``: judge a given ``DeviceInfo`` (testable without a GPU)."""
    if tuple(info.compute_capability) < tuple(minimum):
        rule = rule or f"needs compute capability {minimum[0]}.{minimum[1]} or newer"
        raise UnsupportedDeviceError(api, rule, info.describe(), source)
