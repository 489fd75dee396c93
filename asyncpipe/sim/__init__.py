"""asyncpipe's CPU simulator: runs unchanged asyncpipe kernels with asynchronous semantics and
reports pipeline mistakes (see ``README.md``, "Simulator").

It is chosen by ``asyncpipe.backend`` (``NUMBA_ENABLE_CUDASIM=1``, or ``ASYNCPIPE_SIM=1`` before
``numba.cuda`` is imported): ``import asyncpipe.ptx`` then loads its backend (``host.SimBackend``), which
installs it into numba's simulator (``install``); every primitive runs its simulator body, and launches
(``kernel[grid, block](...)``, ``asyncpipe.host.launch``) run here. It imports nothing of
``asyncpipe.host``: what both share is in ``asyncpipe.spec``.

Layout: ``engine`` (launch, clusters, CTAs), ``scheduler`` (threads and the seeded baton),
``shared_memory`` and ``arrays`` (shared memory, its shadow state, pointers), ``warps``,
``cuda_module`` (the in-kernel ``cuda``), ``prim/`` (the primitives' semantics and checks),
``tensor_map`` (TMA boxes), ``numba_patch`` and ``host`` (the host side: the backend), ``config`` (seed, checks),
``errors`` (one class per mistake).
"""

from .config import CHECKS, SimConfig, settings
from .errors import (
    DeadlockError,
    DivergentBarrierError,
    DsmemLifetimeError,
    MbarrierInitError,
    MbarrierParityError,
    MbarrierPhaseError,
    ProxyFenceError,
    SharedBoundsError,
    SharedMemoryRaceError,
    SimError,
    SimTimeoutError,
    SimUsageError,
    TxCountError,
    UnwaitedAsyncReadError,
    WaitGroupError,
    WarpgroupError,
    WgmmaFenceError,
    WgmmaPendingError,
)


def install() -> None:
    """Make numba's simulator run launches in asyncpipe's engine (idempotent)."""
    from .numba_patch import install as _install

    _install()


__all__ = [
    "CHECKS", "SimConfig", "settings", "install",
    "SimError", "UnwaitedAsyncReadError", "WaitGroupError", "DeadlockError", "DivergentBarrierError", "TxCountError",
    "ProxyFenceError",
    "MbarrierInitError", "MbarrierPhaseError", "DsmemLifetimeError", "SharedMemoryRaceError", "SimUsageError",
    "SharedBoundsError", "MbarrierParityError",
    "SimTimeoutError", "WarpgroupError", "WgmmaFenceError", "WgmmaPendingError",
]
