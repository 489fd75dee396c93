"""The mistakes the simulator catches, one error class each, all reported the asyncpipe way.

Every message opens like any ``AsyncpipeError`` (``<api>: <rule> [<source>], got <value>``) and then
says where it happened: the kernel source line, the thread (block and thread index, warp and lane),
and the seed that reproduces the interleaving. ``got`` names the barrier, group or stage involved.
"""

from __future__ import annotations

from ..errors import AsyncpipeError


class SimError(AsyncpipeError):
    """A kernel broke a rule of the hardware while running in the asyncpipe simulator."""

    def __init__(self, api: str, rule: str, got, source: str | None = None, *, where: str = "", seed=None):
        super().__init__(api, rule, got, source)
        self.where, self.seed = where, seed
        extra = ""
        if where:
            extra += "\n  " + where.replace("\n", "\n  ")
        if seed is not None:
            extra += f"\n  (replay: ASYNCPIPE_SIM_SEED={seed})"
        if extra:
            self.args = (self.args[0] + extra,)


class UnwaitedAsyncReadError(SimError):
    """Shared memory read (or overwritten) while an asynchronous copy into it is still pending: the
    copy was never waited for (cp.async ``wait_group``/``wait_all``, or the TMA's mbarrier phase)."""


class WaitGroupError(UnwaitedAsyncReadError):
    """The thread did wait, but its ``cp_async_wait_group(N)`` left the group holding the data in
    flight: N too large, or an iteration that issued nothing skipped its (empty) ``commit_group``."""


class DeadlockError(SimError):
    """Every live thread waits on something no other thread or copy will ever provide: a wrong
    mbarrier parity, a phase whose arrivals or bytes never come, a barrier some threads skip."""


class MbarrierPhaseError(SimError):
    """A wait that cannot name the phase it means: the barrier moved on by two phases before the
    waiting thread saw the one it waited for (an arrival for the next phase came too early)."""




class TxCountError(SimError):
    """An mbarrier phase's transaction count does not match the bytes its copies deliver."""


class ProxyFenceError(SimError):
    """Generic-proxy and async-proxy (TMA, bulk copy) accesses to the same shared memory with no
    ``fence.proxy.async`` between them."""


class MbarrierInitError(SimError):
    """An mbarrier used before its ``mbarrier_init`` (and, for TMA or other CTAs, its fence) is
    visible, or initialised again while it is still in use."""


class DsmemLifetimeError(SimError):
    """A CTA's shared memory accessed through DSMEM after, or not ordered before, that CTA exits."""


class SharedMemoryRaceError(SimError):
    """Two threads access the same shared-memory word, one of them writing, with no barrier ordering
    one before the other."""


class MbarrierParityError(MbarrierPhaseError, UnwaitedAsyncReadError, SharedMemoryRaceError):
    """A parity wait whose outcome depends on timing (a wrong parity): it returned at once, the phase
    before counting as complete, and the thread read what the current phase's copy still writes (or
    read the destination before the copy was issued); or it waits for the current phase while the phase
    before completed unknown to it (had it come earlier, it would have returned at once). It is each
    of the symptoms the simulator used to report instead, depending on the interleaving (an unwaited
    read, a race with the TMA write), so code that caught those still catches it."""


class WarpgroupError(SimError):
    """A ``.sync.aligned`` warpgroup instruction (``wgmma.*``, ``setmaxnreg``) that the 128 threads of a
    warpgroup do not execute together, with the same uniform operands, or with an operand out of range."""


class WgmmaFenceError(SimError):
    """A ``wgmma.mma_async`` whose accumulator registers the thread accessed with no ``wgmma.fence``
    between (or the warpgroup's first mma with no fence before it)."""


class WgmmaPendingError(UnwaitedAsyncReadError):
    """Accumulators read or written, or shared memory an mma reads overwritten, while that
    ``wgmma.mma_async`` is still pending (its group not yet retired by ``wgmma.wait_group``)."""


class SimUsageError(SimError):
    """An operand the hardware refuses: a misaligned or out-of-range address, a wrong state space."""


class SharedBoundsError(SimUsageError):
    """A copy (cp.async, cp.async.bulk, TMA) through a pointer into a shared array that runs past the
    array's end: on the GPU it writes (or reads) the next array in silence."""


class SimTimeoutError(SimError):
    """A thread ran past the simulator's time limit without reaching a synchronisation point."""


class DivergentBarrierError(SimError):
    """A ``__syncthreads`` (``bar.sync 0``, ``.aligned``) that not every thread of the block reaches: some
    threads wait at it while others exit or wait at a different ``__syncthreads`` (undefined behaviour
    on the GPU: a hang, or a barrier that releases too early)."""
