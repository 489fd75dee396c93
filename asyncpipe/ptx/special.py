"""The special function unit (MUFU): approximate transcendentals in one instruction.

``ex2_approx_ftz_f32`` is 2**x as a softmax wants it: one ``MUFU.EX2``. numba's ``math.exp2`` compiles to
``ex2.approx.f32`` without ``.ftz``, which ptxas wraps in a range test and two multiplies (so that subnormal
results survive): three more instructions per exponential, and attention computes one per score.
"""

from ..sim.prim import special as _sim
from ._registry import primitive


@primitive("float32(float32)", ptx="ex2.approx.ftz.f32 d, a;", isa=14, sm=20, who="each thread", sass=("MUFU.EX2",))
def ex2_approx_ftz_f32(a):
    """Returns 2 ** ``a`` within 2 ulp (the PTX ISA's bound; the simulator rounds the exact value), subnormal
    inputs and results flushed to zero of the same sign; ``-inf`` gives +0, ``+inf`` gives ``+inf``, NaN NaN."""
    return _sim.ex2_approx_ftz_f32(a)
