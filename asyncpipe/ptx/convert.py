"""Number-format conversions a kernel's epilogue needs.

``cvt_rn_bf16x2_f32`` turns two fp32 accumulators into the two bfloat16 halves of one 32-bit word, in
one instruction: the word a bf16 C is stored in, two columns at a time; ``cvt_rn_f16x2_f32`` the same
for float16 (attention's P operand in registers, an fp16 output); ``cvt_rn_satfinite_e4m3x2_f32`` two fp32
to FP8 E4M3 codes (the FP8 quantizer).
"""

from ..sim.prim import convert as _sim
from ._registry import primitive


@primitive("uint32(float32, float32)", ptx="cvt.rn.bf16x2.f32 d, a, b;", isa=70, sm=80, who="each thread",
           sass=("F2FP.BF16.F32.PACK_AB",))
def cvt_rn_bf16x2_f32(a, b):
    """Returns the bfloat16 of ``a`` (rounded to nearest, ties to even) in the upper 16 bits and that of
    ``b`` in the lower 16: in memory (little-endian) ``b`` comes first, so ``cvt_rn_bf16x2_f32(x1, x0)``
    stores the pair x0, x1. ``asyncpipe.bf16.bf16_bits`` rounds the same way on the host; a NaN becomes
    the canonical NaN 0x7FFF (the host keeps its sign and payload)."""
    return _sim.cvt_rn_bf16x2_f32(a, b)


@primitive("uint32(float32, float32)", ptx="cvt.rn.f16x2.f32 d, a, b;", isa=70, sm=80, who="each thread",
           sass=("F2FP.F16.F32.PACK_AB",))
def cvt_rn_f16x2_f32(a, b):
    """Returns the float16 of ``a`` (rounded to nearest, ties to even; beyond 65504 infinity) in the upper
    16 bits and that of ``b`` in the lower 16, as ``cvt_rn_bf16x2_f32`` packs them. numpy's
    ``astype(np.float16)`` rounds the same way; a NaN becomes 0x7FFF in the simulator (the H200's value for
    bf16; for f16 not yet measured)."""
    return _sim.cvt_rn_f16x2_f32(a, b)


@primitive("uint32(float32, float32)", ptx="cvt.rn.satfinite.e4m3x2.f32 d, a, b;", isa=78, sm=89, who="each thread",
           sass=("F2FP.SATFINITE.E4M3",))
def cvt_rn_satfinite_e4m3x2_f32(a, b):
    """Returns the FP8 E4M3 code of ``a`` (rounded to nearest, ties to even; finite overflow and infinities to
    +-448) in bits 8..15 and that of ``b`` in bits 0..7 (bits 16..31 zero): in memory ``b`` comes first, as
    ``cvt_rn_bf16x2_f32`` packs. ``asyncpipe.formats.minifloat.encode(x, E4M3, saturate=True)`` rounds the same
    way on the host; a NaN becomes 0x7F."""
    return _sim.cvt_rn_satfinite_e4m3x2_f32(a, b)


@primitive("uint32(float32, float32)", ptx="cvt.rn.satfinite.e5m2x2.f32 d, a, b;", isa=78, sm=89, who="each thread",
           sass=("F2FP.SATFINITE.E5M2",))
def cvt_rn_satfinite_e5m2x2_f32(a, b):
    """Returns the FP8 E5M2 code of ``a`` (rounded to nearest, ties to even; finite overflow and infinities to
    +-57344) in bits 8..15 and that of ``b`` in bits 0..7 (bits 16..31 zero), packed as
    ``cvt_rn_satfinite_e4m3x2_f32`` packs. ``asyncpipe.formats.minifloat.encode(x, E5M2, saturate=True)`` rounds
    the same way on the host; a NaN becomes 0x7F in the simulator (the GPU's NaN code is not yet measured: any of
    0x7D..0x7F, 0xFD..0xFF is a NaN)."""
    return _sim.cvt_rn_satfinite_e5m2x2_f32(a, b)
