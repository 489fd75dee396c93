"""The launch shape and every rule it must obey, as pure data and functions of a ``DeviceInfo``
(testable without a GPU), and the prepared launch that both backends return.

``grid`` counts BLOCKS, as in CUDA C++ (``<<<grid, block>>>`` with ``__cluster_dims__``), also when
``cluster`` is given; it must then be a multiple of ``cluster`` in every dimension.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

from ..constants import CLUSTER_SIZE_NONPORTABLE_MAX, CLUSTER_SIZE_PORTABLE_MAX, SM_HOPPER
from ..errors import UnsupportedDeviceError, check
from .device import DeviceInfo, check_cc

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


def check_compiled(config: LaunchConfig, static_shared: int, max_threads: int, device: DeviceInfo,
                   api: str = API) -> None:
    """What is known only once the kernel is compiled: its static shared memory and the most
    threads per block its registers (or ``launch_bounds``) allow."""
    check(config.threads_per_block <= max_threads, api,
          f"this compiled kernel runs at most {max_threads} threads per block (its registers or launch_bounds)",
          f"block {config.block} = {config.threads_per_block} threads", "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK")
    check_shared_mem(config.shared_mem, device, static_shared, api)


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
