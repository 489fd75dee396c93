"""Warp-level primitives: what one warp does together.

``elect_sync`` picks one lane of a warp to do a single-thread job (initialise a barrier, issue a TMA
copy) without a ``laneid == 0`` test: the hardware elects a lane that is active, and the other lanes
wait for it at the same instruction, so the warp stays converged.
"""

from ..sim.prim import warp as _sim
from ._registry import primitive


@primitive("uint32(uint32)", ptx="elect.sync _|p, membermask;", isa=80, sm=90,
           who="every lane in membermask, together", sass=("ELECT",))
def elect_sync(membermask):
    """Returns 1 in exactly one lane of ``membermask`` (``0xFFFFFFFF``: the whole warp) and 0 in the
    others. The same mask elects the same lane every time. All lanes in ``membermask`` must execute it
    (each waits for the others), and the executing lane must be in ``membermask``: call it where the
    whole warp (or the whole mask) is converged, not inside a branch that some of those lanes skip."""
    return _sim.elect_sync(membermask)
