"""The bounded forms of the blocking waits, whatever ``ASYNCPIPE_DEBUG`` says.

With ``ASYNCPIPE_DEBUG=1`` set before asyncpipe is imported, ``asyncpipe.ptx``'s blocking waits are
these: ``mbarrier_wait_parity`` (bounded), ``mbarrier_try_wait_parity`` and ``mbarrier_test_wait_parity``
(one attempt each, as always; a thread whose polls of one barrier and parity keep failing for longer
than the timeout gives up, however its loop is written), ``bar_sync``/``bar_arrive`` (named barriers
in software) and the cluster barrier (``barrier_cluster_arrive[_relaxed]``/``barrier_cluster_wait``
in software for a cluster launch). A wait gives up after ``ASYNCPIPE_DEBUG_TIMEOUT`` seconds (default
1), ends its thread and every thread that waits after it, and the host raises ``HangError`` naming the
barrier, phase, block and thread (``asyncpipe.backend.hang``; ``ptx_shims/debug.cu`` has the code).

Limits: a thread that exits before a cluster barrier its peers wait at counts as arrived on the GPU,
not in debug mode (reported as a hang); a kernel waiting in ``cuda.syncthreads()`` that some thread
never reaches, or in a spin loop of its own, is not bounded (the host says the kernel still runs).

This module exposes them under their usual names to call explicitly (``from asyncpipe.ptx import debug``,
then ``debug.mbarrier_wait_parity(...)`` in a kernel), in any mode. In the simulator they are the
simulator's own bodies: it names a deadlock whatever the mode.
"""

from . import REGISTRY, barrier, cluster, mbarrier  # noqa: F401  (declares them)
from ._registry import DEBUG_FORMS, simulating

NAMES = tuple(name for name, p in REGISTRY.items() if p.debug)


def __getattr__(name: str):
    if name not in NAMES:
        raise AttributeError(f"asyncpipe.ptx.debug has no {name!r}; the blocking waits it bounds: {', '.join(NAMES)}")
    return _sim_body(name) if simulating() else DEBUG_FORMS[name]


def _sim_body(name: str):
    import asyncpipe.ptx as ptx

    return getattr(ptx, name)


__all__ = list(NAMES)
