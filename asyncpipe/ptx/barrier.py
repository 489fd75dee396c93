"""Named barriers: ``bar.sync`` / ``bar.arrive`` with a barrier id and a thread count.

``cuda.syncthreads()`` is ``bar.sync 0`` for the whole CTA. A warp-specialized kernel needs barriers
for part of it: the 128 threads of one consumer warpgroup meet at their own id while the producer
warpgroup and the other consumers run on. A CTA has 16 barriers (ids 0..15); asyncpipe leaves id 0
to ``cuda.syncthreads`` and its kernels use 1..15. The count is in threads, a multiple of 32: the
hardware counts whole warps, so every lane of a warp that takes part executes the instruction.
"""

from ..sim.prim import barrier as _sim
from ._registry import primitive

_WHO = "every thread of the b taking part (whole warps, converged), with the same a and b"


@primitive("void(uint32, uint32)", ptx="bar.sync a, b;", isa=20, sm=20, who=_WHO, sass=("BAR.SYNC",), debug=True)
def bar_sync(a, b):
    """Arrives at barrier ``a`` and waits until ``b`` threads have arrived (by ``bar_sync`` or
    ``bar_arrive``) in this phase. Shared-memory writes of every arriving thread before the barrier
    are visible to every waiting thread after it. ``a``: 1..15 (0 is ``cuda.syncthreads``'); ``b``: a
    multiple of 32, at most the block size. Both must be the same in every arriving thread."""
    _sim.bar_sync(a, b)


@primitive("void(uint32, uint32)", ptx="bar.arrive a, b;", isa=20, sm=20, who=_WHO, sass=("BAR.ARV",), debug=True)
def bar_arrive(a, b):
    """Arrives at barrier ``a`` (counting towards ``b``) and returns at once: the thread's earlier
    shared-memory writes are released to the threads that ``bar_sync`` on ``a`` in this phase. Same
    ``a`` and ``b`` rules as ``bar_sync``."""
    _sim.bar_arrive(a, b)
