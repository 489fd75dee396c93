"""What asyncpipe knows about a GPU (``DeviceInfo``) and the compute-capability rule, as pure data and
functions: both backends build a ``DeviceInfo`` (the GPU's from the driver, the simulator's as the
sm_90 it pretends to be), and the host checks judge one without asking either."""

from __future__ import annotations

from dataclasses import dataclass

from ..constants import CLUSTER_SIZE_NONPORTABLE_MAX, CLUSTER_SIZE_PORTABLE_MAX, SM_HOPPER
from ..errors import UnsupportedDeviceError

NO_GPU_RULE = "needs a CUDA GPU"
NO_GPU_SOURCE = "numba.cuda.is_available()"


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


def no_gpu(api: str, why: str) -> UnsupportedDeviceError:
    """The error for ``api`` when there is no usable GPU, saying why."""
    return UnsupportedDeviceError(api, NO_GPU_RULE, f"none ({why})", NO_GPU_SOURCE)


def check_cc(info: DeviceInfo, api: str, minimum: tuple[int, int] = SM_HOPPER, rule: str | None = None,
             source: str = "CUDA programming guide, compute capabilities") -> None:
    """The pure half of ``require_cc``: judge a given ``DeviceInfo`` (testable without a GPU)."""
    if tuple(info.compute_capability) < tuple(minimum):
        rule = rule or f"needs compute capability {minimum[0]}.{minimum[1]} or newer"
        raise UnsupportedDeviceError(api, rule, info.describe(), source)
