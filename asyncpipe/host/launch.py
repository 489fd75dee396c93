"""``launch``: run a numba ``@cuda.jit`` kernel with what numba's ``kernel[grid, block]`` cannot
give: thread block clusters and more than 48 KB of dynamic shared memory.

    launch(kernel, grid, block, *args, cluster=2, shared_mem=200 * 1024)

``grid`` counts BLOCKS, as in CUDA C++ (``<<<grid, block>>>`` with ``__cluster_dims__``), also when
``cluster`` is given; it must then be a multiple of ``cluster`` in every dimension. (cuda.core's
``LaunchConfig`` counts ``grid`` in clusters once ``cluster`` is set; ``launch`` converts.)

Every argument is checked before anything is compiled or run, by ``check_launch``: a pure function
of the launch and the device's limits (a ``DeviceInfo``), so that each rule is testable without a
GPU (``asyncpipe.spec.launch``). The launch itself goes to the backend chosen in ``asyncpipe.backend``:
on the GPU (``asyncpipe.backend.gpu``) arguments are marshalled exactly as numba's own launch does
(``_Kernel._prepare_args``: host arrays are copied to the device and back), then ``cuda.core.launch``
runs the kernel; in the simulator, asyncpipe's CPU engine runs it after the same checks.
"""

from __future__ import annotations

import math

from ..backend import current
from ..backend.gpu import _select_overload, _set_kernel_attribute, check_kernel  # noqa: F401  (re-exported)
from ..spec.launch import (API, Dim3, LaunchConfig, LaunchSequence, PreparedLaunch, as_dim3,  # noqa: F401
                           check_compiled, check_launch, check_shared_mem)


def prepare_launch(kernel, grid, block, *args, cluster=None, shared_mem: int = 0, stream=0,
                   nonportable: bool = False, keep=(), _once: bool = False) -> PreparedLaunch:
    """``launch``'s checks, compilation, opt-ins and argument marshalling, done once: the returned
    ``PreparedLaunch`` launches ``kernel(*args)`` each time it is called. Every argument must live on
    the device already (a host array would need a copy back after each launch): an
    ``AsyncpipeError`` says so. Kernel functions keep these per problem (``PlanCache``), so a repeated
    call costs microseconds of Python instead of the hundreds that the checks and numba's argument
    handling take (measured on the H200: 417 us per ``wgmma_gemm`` call, longer than the kernel at
    4096^3)."""
    return current().prepare_launch(kernel, grid, block, *args, cluster=cluster, shared_mem=shared_mem, stream=stream,
                                     nonportable=nonportable, keep=keep, once=_once)


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
    return current().launch(kernel, grid, block, *args, cluster=cluster, shared_mem=shared_mem, stream=stream,
                            nonportable=nonportable)


def resident_blocks(kernel, block, *args, cluster=None, shared_mem: int = 0, stream=0,
                    nonportable: bool = False) -> int:
    """How many blocks of ``kernel(*args)`` on ``block`` threads, with ``shared_mem`` bytes of dynamic shared
    memory and in clusters of ``cluster``, the device holds at once: the most a persistent grid (blocks that loop
    over the work) may launch, since the blocks past it would wait for the first ones to exit and run as a second
    wave. A multiple of the cluster size. Compiles the kernel for ``args`` as a launch would.

    With clusters this is the driver's ``cuOccupancyMaxActiveClusters``, which can be fewer than the SMs divided
    by the cluster size: a cluster's CTAs share one GPC, and a GPC's SMs need not divide by the cluster
    (``sm_count // 4`` clusters of 4 do not all fit at once on an H100's 132 SMs when every CTA needs an SM).
    In the simulator: one block per simulated SM (``ASYNCPIPE_SIM_SMS``; it knows no registers), in whole clusters.
    Errors as ``launch``'s, and on the GPU one when not even one block or cluster fits (the simulator then answers
    0, and ``persistent_grid`` launches one cluster, as the simulator can run it)."""
    return current().resident_blocks(kernel, block, *args, cluster=cluster, shared_mem=shared_mem, stream=stream,
                                     nonportable=nonportable)


def persistent_grid(kernel, units: int, block, *args, cluster=None, shared_mem: int = 0, stream=0,
                    resident: int | None = None) -> int:
    """The grid, in blocks, of a persistent ``kernel(*args)`` whose clusters (or blocks, without ``cluster``) loop
    over ``units`` units of work, one unit per cluster at a time: as many clusters as there are units, but no more
    than the device holds at once (``resident_blocks``; ``resident``: its answer for this launch, already asked)."""
    size = math.prod(as_dim3(cluster, "cluster", API)) if cluster is not None else 1
    if resident is None:
        resident = resident_blocks(kernel, block, *args, cluster=cluster, shared_mem=shared_mem, stream=stream)
    return max(1, min(int(units), resident // size)) * size
