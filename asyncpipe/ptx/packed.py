"""Packed arithmetic: a 32-bit register as two 16-bit lanes, one instruction for both.

``fma_rn_bf16x2`` is bfloat16 arithmetic two elements at a time on the FMA pipe (the FP4 quantizer rounds with
it: an exact product plus a magic number, rounded once); ``min_u16x2`` and ``max_u16x2`` compare the two lanes as
unsigned integers, which on the bit patterns of non-negative floats is the float order (a block's largest
magnitude, a clamp). Arguments and results are the raw 32-bit words, the lower lane the element stored first.
"""

from ..sim.prim import packed as _sim
from ._registry import primitive


@primitive("uint32(uint32, uint32, uint32)", ptx="fma.rn.bf16x2 d, a, b, c;", isa=70, sm=80, who="each thread",
           sass=("HFMA2",))
def fma_rn_bf16x2(a, b, c):
    """Returns, per 16-bit lane, the bfloat16 ``a * b + c`` of the bfloat16 lanes of ``a``, ``b`` and ``c``, rounded
    once to nearest even (an exact product; subnormals kept; overflow to infinity; a NaN result is 0x7FFF)."""
    return _sim.fma_rn_bf16x2(a, b, c)


@primitive("uint32(uint32, uint32)", ptx="min.u16x2 d, a, b;", isa=80, sm=90, who="each thread",
           sass=("VIMNMX.U16x2",))
def min_u16x2(a, b):
    """Returns, per 16-bit lane, the smaller of the unsigned lanes of ``a`` and ``b``."""
    return _sim.min_u16x2(a, b)


@primitive("uint32(uint32, uint32)", ptx="max.u16x2 d, a, b;", isa=80, sm=90, who="each thread",
           sass=("VIMNMX.U16x2",))
def max_u16x2(a, b):
    """Returns, per 16-bit lane, the larger of the unsigned lanes of ``a`` and ``b``."""
    return _sim.max_u16x2(a, b)
