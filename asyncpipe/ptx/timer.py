"""The SM's cycle counter: timestamps a kernel takes of its own pipeline.

``clock64`` reads the SM's 64-bit cycle counter (``CS2R ... SR_CLOCKLO``). A kernel that records it where a wait
ends and where a group of mmas is issued shows, per warp, how long each step took and how two warpgroups' steps
lie against each other (``scripts/fp8_trace.py`` does this for the FP8 GEMM). Each SM counts for itself, so only
readings taken on one SM compare; at the SM's clock, which the GPU lowers under load.
"""

from ..sim.prim import timer as _sim
from ._registry import primitive


@primitive("uint64()", ptx="mov.u64 d, %clock64;", isa=20, sm=20, who="each thread", sass=("CS2R",))
def clock64():
    """Returns the SM's cycle counter. Two readings by one thread are in program order; the difference of two
    readings on one SM is the cycles between them. In the simulator: the host's monotonic clock in nanoseconds, so
    only the order and the differences within one run mean anything."""
    return _sim.clock64()
