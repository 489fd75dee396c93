"""The block-scaled format codecs' kernels: bf16 <-> MXFP8 (E4M3, E5M2), MXFP4 and NVFP4, bit-exact against
``asyncpipe.formats`` (the host side, checks and layouts: ``asyncpipe.kernels.mx_codec``).

Every array is seen flat. A block (32 elements for MX, 16 for NVFP4) lies inside one row because the row length
is a multiple of the block size, so a C-contiguous ``(..., K)`` array is a flat run of blocks and its scales
``(..., K / block)`` a flat run of one byte per block. Each kernel walks *lanes* (a lane: the elements one
thread converts per step), grid-stride. The indices are 64-bit (numba types ``blockIdx.x * THREADS + ...`` as
int64: the PTX compares and addresses in s64); the counts come in as int32, hence the host's limit of fewer than
2^31 elements:

=====================  ===============  =======================================================  ==========
kernel                 elements a lane  memory per lane and step                                 amax
=====================  ===============  =======================================================  ==========
mxfp8 quantize         16 (1/2 block)   2 LDG.128 in, 1 STG.128 out, the even lane a scale byte   shfl.xor 1
mxfp4 quantize         32 (one block)   4 LDG.128 in, 1 STG.128 out (32 nibbles), a scale byte    in-lane
nvfp4 quantize         32 (two blocks)  4 LDG.128 in, 1 STG.128 out, two scale bytes              in-lane
mxfp8 dequantize       8 (1/4 block)    1 LDG.64 + the block's scale byte in, 1 STG.128 out       --
mxfp4 dequantize       8 (1/4 block)    1 LDG.32 + the block's scale byte in, 1 STG.128 out       --
nvfp4 dequantize       8 (1/2 block)    1 LDG.32 + the block's scale byte in, 1 STG.128 out       --
=====================  ===============  =======================================================  ==========

NVFP4's last lane holds one block when the element count is an odd number of 16-blocks: it loads and stores
half, with 4-byte accesses. The dequantizers' lanes of one block are neighbours in a warp, so a warp's every
load and store covers a contiguous span of whole 32-byte sectors. The quantizers' FP4 lanes stay whole blocks:
on the H200, 8-element lanes (one LDG.128, the amax by shfl.xor) ran at 0.52x / 0.41x the copy, and with four
grid-strided lanes loaded ahead a step 0.58x / 0.44x, against 0.72x / 0.53x for these (bench/h200.md,
eighteenth session).

**Why no TMA ring.** A codec reads every byte once and writes every byte once; nothing is reused, so a
shared-memory ring would only be a detour: TMA into shared memory, an mbarrier wait, ``LDS`` into registers
(the conversion is per element, in registers), and for a TMA store the results back through shared memory
behind a proxy fence. What a ring buys a GEMM, many bytes in flight without registers, a streaming kernel
gets from occupancy: Little's law for the H200 (about 4.8 TB/s at roughly 1 us of DRAM latency) asks for
about 4.8 MB in flight, 36 KB per SM; a quantize lane has 32-64 bytes of loads in flight before it first uses
one, so 1024 resident threads per SM (half occupancy) already hold 32-64 KB. The kernels therefore are plain
16-byte vector loads and stores (``asyncpipe.kernels.vector``), coalesced (a warp's lanes cover one contiguous
512 B-2 KB span), with the block amax as an integer maximum of the bf16 magnitudes in registers (one
``shfl.xor`` where two lanes share a block). The target is at least 0.85x the device-to-device copy at 1 GiB.

**What bounds the FP4 quantizers** is the integer pipe, which on Hopper takes a warp's instruction every other
cycle (the FMA pipe every cycle): the eighteenth session's software E2M1 (per element a float exponent, a
scale, a round by 2^23, selects) ran at 0.72x (MXFP4) and 0.53x (NVFP4) the copy with about 420 and 600
integer-pipe instructions a lane and step; the forms below take about 170 and 310 (offline SASS; the SASS tests
count their pieces), the arithmetic moved to bf16x2 fmas and IMADs, which the FMA pipe runs. NVFP4 does not
divide per element: an IEEE ``div.rn.f32`` is about ten instructions and a ``CALL`` to its slow path.

**The arithmetic**, exactly the references':

- MX scale: the block amax's bf16 exponent field E (the integer maximum of the magnitudes orders NaN above
  inf above finite): scale byte ``max(E - emax, 0)`` (E8M0, shared_exp + 127 clamped at 0; emax 8 for E4M3,
  15 for E5M2, 2 for E2M1); E = 255 (a NaN or an infinity in the block) gives 0xFF and NaN element codes
  (0x7F for FP8, 0 for FP4). Elements: ``x * 2^(127 - scale)``, a power of two built from bits (always a
  normal float32), exact unless the product falls below 2^-126, where every format's code is a signed zero
  either way; then ``cvt.rn.satfinite.e4m3x2/e5m2x2.f32`` (round to nearest even, saturating).
- E2M1 (no Hopper instruction: ``cvt ... e2m1x2`` is sm_100a) in software, two elements at a time. The E2M1
  values are three evenly spaced grids: step 1/2 on [0, 2], 1 on [2, 4], 2 on [4, 6]. With b = |x| 2^(126 - s)
  (half the scaled element; ``fma.rn.bf16x2`` with -0, exact unless below 2^-126, where every code is 0), the
  code is ``min(rint(4b), rint(2b) + 2, rint(b) + 4, 7)``: on [0, 2] the first is the code and the others are
  not smaller (2a <= a + 2 <= a/2 + 4 there, rint is monotone and the even offsets keep its ties), and so on
  for the other two grids; the 7 saturates. Each rint is one ``fma.rn.bf16x2`` (4b + 128, 2b + 130, b + 132:
  bf16's ulp is 1 in [128, 256), so the single rounding of the exact value is rint, ties to even), the
  minimum two ``min.u16x2`` on the bit patterns, the code their low three bits. A lane's eight elements are
  regrouped as the pairs (e_k, e_k+4) (``byte_perm``), so that one shift puts both codes of a pair into their
  nibbles; the sign bits are gathered the same way.
- NVFP4: tensor scale s_t given, or fl(amax / 2688) of the finite values (a separate amax pass); block
  scale ``E4M3(fl(fl(amax_b / 6) / s_t))`` (two IEEE divisions a block); elements
  ``E2M1(fl(x / d))``, d = ``fl(decode(scale) * s_t)``, x itself where x is zero, decided without dividing.
  The code of fl(y), y = |x| / d, counts the E2M1 rounding boundaries fl(y) passes, and each is a boundary of
  y: fl(y) > T <=> y > T + ulp(T)/2 for T = 0.25, 1.25, 2.5, 5 (the midpoint rounds to T, whose significand is
  even) and fl(y) >= T <=> y >= T - ulp(T)/2 for T = 0.75, 1.75, 3.5. Such a midpoint M has 25 significant
  bits, so M * d is exact in float64 (49 bits; no float64 underflow or overflow for any float32 d) and, for d
  > 0, never a float32 (the odd part of M's numerator exceeds 2^24): no float32 x has y = M, and
  y > M <=> |x| > M * d <=> |x| > RD(M * d), RD the float32 rounding down (``cvt.rm.f32.f64``). Per block:
  seven DMUL and conversions; per element the number of thresholds |x| exceeds, two elements at a time: x is
  a bf16, so |x| > c <=> |x| > RD_bf16(c), and on the magnitude bits h (15 bits a 16-bit lane) that is a carry
  into the lane's bit 15 of h + (0x7FFF - RD_bf16(c)), seven integer adds for both elements. The thresholds
  ascend, so the carries form a thermometer code: the count's bit 2 is the fourth carry, bit 1 the XOR of the
  second, fourth and sixth, bit 0 the XOR of all seven; ``mul.hi`` by powers of two moves them and the sign
  bit into the nibble. d = 0 makes every threshold 0 (x / 0 is +-inf: code 7, and x = 0 stays 0),
  d = inf makes them inf (code 0). Checked against the reference's division for every finite bf16 x with
  thousands of d, those that put x / d next to a midpoint included (tests/kernels/test_mx_codec.py).
- Dequantize: FP8/FP4 codes decoded by shifting their bits into a float32's exponent and mantissa fields and
  multiplying by the bias difference (2^120 E4M3, 2^112 E5M2, 2^126 E2M1: exact, subnormals included, since
  float32 subnormals are laid out the same way), NaN/inf codes by their exponent field, then times the scale
  (E8M0 0 is 2^-127, 0xFF NaN) or ``decode(scale) * s_t``; the float32 result rounded to bf16
  (``cvt.rn.bf16x2.f32``, NaN as 0x7FFF).
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32, float64, int32, uint8, uint32

from .. import ptx
from ..ptx._registry import simulating
from .fp8_quant import _magnitude, f32_from_bits
from .unroll import unroll, unrolled
from .vector import load_x2, load_x4, store_x4

THREADS = 256
WARPS = THREADS // 32
BLOCKS_PER_SM = 8                       # the host's grid cap: 2048 threads per SM
MX_BLOCK = 32                           # OCP MX v1.0: one E8M0 scale per 32 elements
NV_BLOCK = 16                           # NVFP4: one E4M3 scale per 16 elements
LANE_ELEMS = {"mxfp8_quantize": 16, "mxfp4_quantize": 32, "nvfp4_quantize": 32, "mxfp8_dequantize": 8,
              "mxfp4_dequantize": 8, "nvfp4_dequantize": 8}
EMAX = {"e4m3": 8, "e5m2": 15, "e2m1": 2}          # exponent of each element type's largest normal
BF16_EXP_ALL_ONES = 255                 # a bf16 exponent field of NaN and inf
BF16_INF_BITS = 0x7F80                  # bf16 +inf, bits: magnitudes at or above it are not finite
SCALE_NAN = 0xFF                        # E8M0's NaN
E4M3_NAN = 0x7F
FP8_NAN_WORD = 0x7F7F7F7F               # four E4M3/E5M2 NaN codes
E2M1_MAX = 6.0
# MXFP4's elements, two at a time in bf16x2 (module doc): b = |x| 2^(126 - s), the code min(rint(4b), rint(2b) + 2,
# rint(b) + 4, 7) read off the low bits of 128 + each (bf16's ulp is 1 in [128, 256): fma rounds to an integer)
BF16X2_MAGNITUDE = 0x7FFF7FFF
BF16X2_NEG_ZERO = 0x80008000            # -0 + p = p exactly: fma(a, b, -0) is the product
BF16X2_ONE, BF16X2_TWO, BF16X2_FOUR = 0x3F803F80, 0x40004000, 0x40804080
GRID_HALF, GRID_ONE, GRID_TWO, GRID_CAP = 0x43004300, 0x43024302, 0x43044304, 0x43074307   # 128, 130, 132, 135
CODE_LANES = 0x00070007
LANE_TOP_BITS = 0x80008000            # bit 15 of each 16-bit lane: a bf16's sign
LOW_HALVES, HIGH_HALVES = 0x5410, 0x7632  # byte_perm selectors: (a.lo, b.lo), (a.hi, b.hi)
RINT_MAGIC = 8388608.0                  # 2^23: adding it rounds a float32 in [0, 2^22] to an integer, RNE
RINT_MAGIC_BITS = 0x4B000000
F32_EXP_SHIFT = 23
F32_NAN_BITS = 0x7FC00000
E8M0_ZERO_VALUE_BITS = 0x00400000       # 2^-127, the value of scale byte 0 (a float32 subnormal)
NVFP4_AMAX_DIVISOR = 448.0 * 6.0        # E4M3 max x E2M1 max (asyncpipe.formats.nvfp4)
# decode: a code's exponent and mantissa bits moved under float32's, then scaled by 2^(127 - bias)
E4M3_SHIFT, E4M3_REBIAS_BITS = 20, (127 + 120) << 23
E5M2_SHIFT, E5M2_REBIAS_BITS = 21, (127 + 112) << 23
E2M1_SHIFT, E2M1_REBIAS_BITS = 22, (127 + 126) << 23
E4M3_SPECIAL_ADD = 0x78000000           # 0x7F << 20 plus this: 0x7FF00000, a NaN
E5M2_SPECIAL_ADD = 0x70000000           # 0x7C << 21 plus this: 0x7F800000, inf (0x7D..0x7F: NaN)
# NVFP4's element rounding without division (module doc): the midpoints M of y = |x| / d that fl(y)'s E2M1 code
# steps at, T + ulp(T)/2 where fl(y) = T rounds down (0.25, 1.25, 2.5, 5), T - ulp(T)/2 where it rounds up
E2M1_MIDPOINTS = (0.25 + 2.0**-26, 0.75 - 2.0**-25, 1.25 + 2.0**-24, 1.75 - 2.0**-24, 2.5 + 2.0**-23,
                  3.5 - 2.0**-23, 5.0 + 2.0**-22)


# ------------------------------------------------------------------------------------------------
# float32 <-> bits: numba intrinsics on the GPU (register moves), numpy in the simulator
# ------------------------------------------------------------------------------------------------
def _gpu_bits_intrinsic():
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    @intrinsic
    def f32_bits(typingctx, x):
        """The bit pattern of the float32 ``x`` as uint32 (a register move, no instruction)."""
        if x != types.float32:
            return None

        def codegen(context, builder, sig, args):
            return builder.bitcast(args[0], ir.IntType(32))

        return types.uint32(x), codegen

    return f32_bits


def _f32_bits_sim(x):
    return np.array([x], np.float32).view(np.uint32)[0]


def _f32_rd_sim(p):
    """The float32 of the float64 ``p`` rounded down: numpy rounds to nearest, then one step down if above."""
    with np.errstate(over="ignore"):
        c = np.float32(p)
    return np.nextafter(c, np.float32(-np.inf)) if np.float64(c) > p else c


def _byte_perm_sim(a, b, selector):
    src = int(a) | (int(b) << 32)
    return np.uint32(sum(((src >> (8 * ((selector >> (4 * k)) & 7))) & 0xFF) << (8 * k) for k in range(4)))


def _umulhi_sim(a, b):
    return np.uint32((int(a) * int(b)) >> 32)


def _byte_perm_gpu(a, b, selector):
    return uint32(libdevice.byte_perm(int32(a), int32(b), int32(selector)))


f32_bits = _f32_bits_sim if simulating() else _gpu_bits_intrinsic()
from numba.cuda import libdevice

if simulating():
    f32_rd = _f32_rd_sim
else:

    f32_rd = libdevice.double2float_rd                   # cvt.rm.f32.f64
_byte_perm = _byte_perm_sim if simulating() else cuda.jit(device=True, inline="always")(_byte_perm_gpu)
_umulhi = _umulhi_sim if simulating() else libdevice.umulhi
cvt_e4m3x2 = ptx.cvt_rn_satfinite_e4m3x2_f32
fma_bf16x2 = ptx.fma_rn_bf16x2
min_u16x2, max_u16x2 = ptx.min_u16x2, ptx.max_u16x2
cvt_e5m2x2 = ptx.cvt_rn_satfinite_e5m2x2_f32
cvt_bf16x2 = ptx.cvt_rn_bf16x2_f32


# ------------------------------------------------------------------------------------------------
# Element helpers (inlined)
# ------------------------------------------------------------------------------------------------
@cuda.jit(device=True, inline="always")
def _lo(w):
    """The float32 of the bf16 in the low half of ``w``."""
    return f32_from_bits((w & uint32(0xFFFF)) << uint32(16))


@cuda.jit(device=True, inline="always")
def _hi(w):
    return f32_from_bits(w & uint32(0xFFFF0000))


@cuda.jit(device=True, inline="always")
def _quad_e4m3(w_lo, w_hi, f):
    """Four bf16 (lowest element in w_lo's low half) times ``f`` -> four E4M3 codes, lowest in the lowest byte."""
    return (cvt_e4m3x2(_hi(w_lo) * f, _lo(w_lo) * f) | (cvt_e4m3x2(_hi(w_hi) * f, _lo(w_hi) * f) << uint32(16)))


@cuda.jit(device=True, inline="always")
def _quad_e5m2(w_lo, w_hi, f):
    return (cvt_e5m2x2(_hi(w_lo) * f, _lo(w_lo) * f) | (cvt_e5m2x2(_hi(w_hi) * f, _lo(w_hi) * f) << uint32(16)))


@cuda.jit(device=True, inline="always")
def _lane_pairs(w0, w1, w2, w3):
    """Eight bf16 (four words, element 2i in word i's low half) regrouped as the pairs (e_k, e_k+4), k = 0..3:
    a pair's two codes then land four nibbles apart, where one shift places both (``_nibbles``)."""
    return (_byte_perm(w0, w2, LOW_HALVES), _byte_perm(w0, w2, HIGH_HALVES), _byte_perm(w1, w3, LOW_HALVES),
            _byte_perm(w1, w3, HIGH_HALVES))


@cuda.jit(device=True, inline="always")
def _shr(x, n):
    """``x >> n`` as the high word of x 2^(32 - n) (``mul.hi.u32``): an IMAD.HI, which runs on the FMA pipe and
    adds what follows it for free, where a shift and an OR are two instructions of the integer pipe, the one
    these kernels are bound by."""
    return _umulhi(x, uint32(1 << (32 - n)))


@cuda.jit(device=True, inline="always")
def _gather_bit15(p0, p1, p2, p3):
    """Bit 15 of each lane of four pair words (``_lane_pairs``' order) at bit 3 of its element's nibble:
    ``p0 >> 12 | p1 >> 8 | p2 >> 4 | p3`` of the masked bits (disjoint: a sum)."""
    top = uint32(LANE_TOP_BITS)
    return _shr(p0 & top, 12) + _shr(p1 & top, 8) + _shr(p2 & top, 4) + (p3 & top)


@cuda.jit(device=True, inline="always")
def _nibbles(c0, c1, c2, c3):
    """Four pairs of 4-bit codes (bits 0..3 and 16..19 of each) -> one word, pair k's codes in nibbles k, k + 4."""
    return c0 | (c1 << uint32(4)) | (c2 << uint32(8)) | (c3 << uint32(12))


@cuda.jit(device=True, inline="always")
def _e2m1_mx_pair(m, f_half):
    """The E2M1 codes (3 bits a lane, no sign) of the magnitude pair ``m`` (bf16x2) times 2^(127 - scale), given
    ``f_half`` = 2^(126 - scale) in both lanes (module doc: the three grids)."""
    b = fma_bf16x2(m, f_half, uint32(BF16X2_NEG_ZERO))          # |x| 2^(126 - s): exact unless below 2^-126
    c = min_u16x2(min_u16x2(fma_bf16x2(b, uint32(BF16X2_FOUR), uint32(GRID_HALF)),
                            fma_bf16x2(b, uint32(BF16X2_TWO), uint32(GRID_ONE))),
                  min_u16x2(fma_bf16x2(b, uint32(BF16X2_ONE), uint32(GRID_TWO)), uint32(GRID_CAP)))
    return c & uint32(CODE_LANES)


@cuda.jit(device=True, inline="always")
def _e2m1_mx_word(w0, w1, w2, w3, f_half):
    """Eight bf16 (four words) -> eight E2M1 codes in one word, element 2i in byte i's low nibble."""
    p0, p1, p2, p3 = _lane_pairs(w0, w1, w2, w3)
    mag = uint32(BF16X2_MAGNITUDE)
    return (_nibbles(_e2m1_mx_pair(p0 & mag, f_half), _e2m1_mx_pair(p1 & mag, f_half),
                     _e2m1_mx_pair(p2 & mag, f_half), _e2m1_mx_pair(p3 & mag, f_half))
            | _gather_bit15(p0, p1, p2, p3))


@cuda.jit(device=True, inline="always")
def _e2m1_cuts(d):
    """The seven float32 thresholds (ascending) of a block whose divisor is ``d``: the E2M1 code of fl(|x| / d)
    is the number of them that |x| exceeds (module doc)."""
    d64 = float64(d)
    return (f32_rd(d64 * E2M1_MIDPOINTS[0]), f32_rd(d64 * E2M1_MIDPOINTS[1]), f32_rd(d64 * E2M1_MIDPOINTS[2]),
            f32_rd(d64 * E2M1_MIDPOINTS[3]), f32_rd(d64 * E2M1_MIDPOINTS[4]), f32_rd(d64 * E2M1_MIDPOINTS[5]),
            f32_rd(d64 * E2M1_MIDPOINTS[6]))


@cuda.jit(device=True, inline="always")
def _thermometer(c):
    """The block's seven thresholds ``c`` (``_e2m1_cuts``) as addends: bf16 magnitude bits h + K_i carry into
    bit 15 of their 16-bit lane exactly when |x| > c_i (K_i = 0x7FFF - RD_bf16(c_i), in both lanes)."""
    ones = uint32(BF16X2_MAGNITUDE)
    lanes = uint32(0x10001)
    return (ones - (f32_bits(c[0]) >> uint32(16)) * lanes, ones - (f32_bits(c[1]) >> uint32(16)) * lanes,
            ones - (f32_bits(c[2]) >> uint32(16)) * lanes, ones - (f32_bits(c[3]) >> uint32(16)) * lanes,
            ones - (f32_bits(c[4]) >> uint32(16)) * lanes, ones - (f32_bits(c[5]) >> uint32(16)) * lanes,
            ones - (f32_bits(c[6]) >> uint32(16)) * lanes)


@cuda.jit(device=True, inline="always")
def _e2m1_nv_pair(h, k):
    """The three bits of the E2M1 codes of the magnitude pair ``h`` against the block's ``_thermometer`` ``k``,
    each at bit 15 of its lane (bits 0..14 are left over): the thresholds exceeded form a thermometer code
    (they ascend), so the count's bit 2 is whether the fourth is exceeded, bit 1 the parity of the second,
    fourth and sixth, bit 0 the parity of all seven."""
    u1, u3, u5 = uint32(h + k[1]), uint32(h + k[3]), uint32(h + k[5])
    odd = u1 ^ u3 ^ u5
    return uint32(h + k[0]) ^ uint32(h + k[2]) ^ uint32(h + k[4]) ^ uint32(h + k[6]) ^ odd, odd, u3


@cuda.jit(device=True, inline="always")
def _e2m1_nv_nibbles(p, m, k, sh):
    """The sign-and-code nibbles of the pair word ``p`` (magnitudes ``m``) at bits 12..15 and 28..31, zeros
    below: its ``_e2m1_nv_pair`` bits and its sign bit, each at bit 15, shifted into place (``sh``:
    ``_shifters``)."""
    top = uint32(LANE_TOP_BITS)
    b0, b1, b2 = _e2m1_nv_pair(m, k)
    return _umulhi(b0 & top, sh[0]) + _umulhi(b1 & top, sh[1]) + _umulhi(b2 & top, sh[2]) + (p & top)


@cuda.jit(device=True, inline="always")
def _e2m1_nv_word(p, m, k, sh):
    """As ``_e2m1_mx_word`` for fl(x / d) (NVFP4): ``p`` four pair words (``_lane_pairs``), ``m`` their
    magnitudes, ``k`` the block's ``_thermometer``, ``sh`` the ``_shifters``."""
    return (_umulhi(_e2m1_nv_nibbles(p[0], m[0], k, sh), sh[3]) + _umulhi(_e2m1_nv_nibbles(p[1], m[1], k, sh), sh[4])
            + _umulhi(_e2m1_nv_nibbles(p[2], m[2], k, sh), sh[5]) + _e2m1_nv_nibbles(p[3], m[3], k, sh))


@cuda.jit(device=True, inline="always")
def _shifters(positive):
    """Multipliers 2^(32 - n) whose ``mul.hi`` shifts right by n = 3, 2, 1 (a code bit into its nibble) and 12, 8,
    4 (a nibble into its word), each times a 1 that ptxas cannot see (1 plus the sign bit of the float
    ``positive``, which is > 0). Given a constant power of two, ptxas turns ``mul.hi`` and the add after it into a
    LEA.HI of the integer pipe, the one this kernel is bound by; from a register it stays an IMAD.HI, on the FMA
    pipe (offline SASS: 350 -> 309 integer-pipe instructions a lane and step)."""
    one = uint32(1) + (f32_bits(positive) >> uint32(31))
    return (one << uint32(29), one << uint32(30), one << uint32(31), one << uint32(20), one << uint32(24),
            one << uint32(28))


@cuda.jit(device=True, inline="always")
def _magnitudes(p):
    """The four pair words ``p`` with their signs cleared."""
    mag = uint32(BF16X2_MAGNITUDE)
    return p[0] & mag, p[1] & mag, p[2] & mag, p[3] & mag


@cuda.jit(device=True, inline="always")
def _lanes_max(m):
    """The largest lane of the four magnitude pair words ``m``, as int32."""
    top = max_u16x2(max_u16x2(m[0], m[1]), max_u16x2(m[2], m[3]))
    return int32(max(top & uint32(0xFFFF), top >> uint32(16)))


@cuda.jit(device=True, inline="always")
def _mx_factor(mag, emax):
    """(scale byte, 2^(127 - scale) as float32) of a block whose bf16 magnitude maximum is ``mag``."""
    s = max(int32(mag >> int32(7)) - int32(emax), int32(0))
    return s, f32_from_bits(uint32(254 - s) << uint32(F32_EXP_SHIFT))


@cuda.jit(device=True, inline="always")
def _e8m0_value(s):
    """The float32 of the E8M0 scale byte ``s``: 2^(s - 127), NaN for 0xFF."""
    bits = uint32(s) << uint32(F32_EXP_SHIFT)
    if s == 0:
        bits = uint32(E8M0_ZERO_VALUE_BITS)
    if s == SCALE_NAN:
        bits = uint32(F32_NAN_BITS)
    return f32_from_bits(bits)


@cuda.jit(device=True, inline="always")
def _e4m3_value(c):
    """The float32 of the E4M3 code in the low byte of ``c`` (0x7F/0xFF: NaN)."""
    mag = c & uint32(0x7F)
    bits = ((c & uint32(0x80)) << uint32(24)) | (mag << uint32(E4M3_SHIFT))
    if mag == uint32(0x7F):
        bits += uint32(E4M3_SPECIAL_ADD)
    return f32_from_bits(bits) * f32_from_bits(uint32(E4M3_REBIAS_BITS))


@cuda.jit(device=True, inline="always")
def _e5m2_value(c):
    mag = c & uint32(0x7F)
    bits = ((c & uint32(0x80)) << uint32(24)) | (mag << uint32(E5M2_SHIFT))
    if mag >= uint32(0x7C):
        bits += uint32(E5M2_SPECIAL_ADD)
    return f32_from_bits(bits) * f32_from_bits(uint32(E5M2_REBIAS_BITS))


@cuda.jit(device=True, inline="always")
def _e2m1_value(n):
    """The float32 of the E2M1 code in the low nibble of ``n``."""
    bits = ((n & uint32(8)) << uint32(28)) | ((n & uint32(7)) << uint32(E2M1_SHIFT))
    return f32_from_bits(bits) * f32_from_bits(uint32(E2M1_REBIAS_BITS))


# ------------------------------------------------------------------------------------------------
# Quantize. x: bf16 pairs as uint32 words (flat); codes: uint32 words (flat); scales: one uint8 a block.
# ------------------------------------------------------------------------------------------------
def mxfp8_quantize_kernel(x, q, scales, lanes):
    """QUAD (``_quad_e4m3``/``_quad_e5m2``) and ELEM_EMAX are compile-time constants (``unrolled``). A lane: 16
    elements, half a block; lanes 2i and 2i + 1 share block i's amax through one shfl.xor (``lanes`` is even)."""
    lane = cuda.threadIdx.x % 32
    c = (cuda.blockIdx.x * WARPS + cuda.threadIdx.x // 32) * 32 + lane
    step = cuda.gridDim.x * THREADS
    while c - lane < lanes:                              # uniform in the warp: the shuffle sees every lane
        valid = c < lanes
        z = uint32(0)
        w = (z, z, z, z, z, z, z, z)
        if valid:
            w = load_x4(x, c * 8) + load_x4(x, c * 8 + 4)
        mag = int32(0)
        for k in unroll(8):
            mag = max(mag, _magnitude(w[k]))
        mag = max(mag, cuda.shfl_xor_sync(0xFFFFFFFF, mag, 1))
        if valid:
            s, f = _mx_factor(mag, ELEM_EMAX)
            q0, q1, q2, q3 = QUAD(w[0], w[1], f), QUAD(w[2], w[3], f), QUAD(w[4], w[5], f), QUAD(w[6], w[7], f)
            if mag >= BF16_INF_BITS:                     # a NaN or an infinity: NaN scale, NaN codes
                s = int32(SCALE_NAN)
                q0 = q1 = q2 = q3 = uint32(FP8_NAN_WORD)
            store_x4(q, c * 4, q0, q1, q2, q3)
            if lane % 2 == 0:
                scales[c // 2] = uint8(s)
        c += step


def mxfp4_quantize_kernel(x, q, scales, lanes):
    """A lane: one 32-element block, 16 words in, 4 words (32 nibbles) out; no shuffle."""
    c = cuda.blockIdx.x * THREADS + cuda.threadIdx.x
    step = cuda.gridDim.x * THREADS
    while c < lanes:
        w = load_x4(x, c * 16) + load_x4(x, c * 16 + 4) + load_x4(x, c * 16 + 8) + load_x4(x, c * 16 + 12)
        m2 = w[0] & uint32(BF16X2_MAGNITUDE)
        for k in unroll(15):
            m2 = max_u16x2(m2, w[k + 1] & uint32(BF16X2_MAGNITUDE))
        mag = int32(max(m2 & uint32(0xFFFF), m2 >> uint32(16)))
        s, _ = _mx_factor(mag, EMAX_E2M1)
        f_half = (uint32(253 - s) << uint32(7)) * uint32(0x10001)     # 2^(126 - s) as bf16, both lanes
        q0, q1 = _e2m1_mx_word(w[0], w[1], w[2], w[3], f_half), _e2m1_mx_word(w[4], w[5], w[6], w[7], f_half)
        q2, q3 = _e2m1_mx_word(w[8], w[9], w[10], w[11], f_half), _e2m1_mx_word(w[12], w[13], w[14], w[15], f_half)
        if mag >= BF16_INF_BITS:                         # NaN scale; E2M1 has no NaN: codes 0
            s = int32(SCALE_NAN)
            q0 = q1 = q2 = q3 = uint32(0)
        store_x4(q, c * 4, q0, q1, q2, q3)
        scales[c] = uint8(s)
        c += step


@cuda.jit(device=True, inline="always")
def _nvfp4_block(w0, w1, w2, w3, w4, w5, w6, w7, s_t):
    """(E4M3 scale code, two words of E2M1 codes) of one 16-element NVFP4 block."""
    p, r = _lane_pairs(w0, w1, w2, w3), _lane_pairs(w4, w5, w6, w7)
    m, n = _magnitudes(p), _magnitudes(r)
    mag = max(_lanes_max(m), _lanes_max(n))
    amax = f32_from_bits(uint32(mag) << uint32(16))
    code = cvt_e4m3x2(float32(0), (amax / float32(E2M1_MAX)) / s_t) & uint32(0xFF)
    k, sh = _thermometer(_e2m1_cuts(_e4m3_value(code) * s_t)), _shifters(s_t)
    lo, hi = _e2m1_nv_word(p, m, k, sh), _e2m1_nv_word(r, n, k, sh)
    if mag >= BF16_INF_BITS:                             # a NaN or an infinity: NaN scale, codes 0
        code, lo, hi = uint32(E4M3_NAN), uint32(0), uint32(0)
    return code, lo, hi


@cuda.jit(device=True, inline="always")
def _tensor_scale(amax_bits, given):
    """``given`` when positive, else fl(amax / 2688) of the finite amax (bf16 bits), 1 when it is zero."""
    if given > float32(0):
        return given
    if amax_bits == uint32(0):
        return float32(1)
    return f32_from_bits(amax_bits << uint32(16)) / float32(NVFP4_AMAX_DIVISOR)


def nvfp4_quantize_kernel(x, q, scales, ts, amax_bits, given, nblocks):
    """A lane: blocks 2c and 2c + 1 (16 words in, 4 words out, two scale bytes); the last lane may hold one
    block (8 words in, 2 out). ``ts[0]``: the tensor scale used, written by thread 0 of block 0."""
    s_t = _tensor_scale(amax_bits[0], given)
    c = cuda.blockIdx.x * THREADS + cuda.threadIdx.x
    if c == 0:
        ts[0] = s_t
    step = cuda.gridDim.x * THREADS
    while 2 * c < nblocks:
        full = 2 * c + 1 < nblocks
        a = load_x4(x, c * 16) + load_x4(x, c * 16 + 4)
        z = uint32(0)
        b = (z, z, z, z, z, z, z, z)
        if full:
            b = load_x4(x, c * 16 + 8) + load_x4(x, c * 16 + 12)
        s0, q0, q1 = _nvfp4_block(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], s_t)
        s1, q2, q3 = _nvfp4_block(b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], s_t)
        scales[2 * c] = uint8(s0)
        if full:
            store_x4(q, c * 4, q0, q1, q2, q3)
            scales[2 * c + 1] = uint8(s1)
        else:
            q[c * 4] = q0
            q[c * 4 + 1] = q1
        c += step


def finite_amax_kernel(x, amax_bits, words):
    """amax_bits[0] = max over the bf16 pairs ``x`` of the finite magnitudes' bits (NVFP4's tensor amax):
    16-byte loads grid-stride, a warp's maximum by shfl.xor, one atomic max per warp. ``words`` % 4 == 0."""
    lane = cuda.threadIdx.x % 32
    i = (cuda.blockIdx.x * THREADS + cuda.threadIdx.x) * 4
    step = cuda.gridDim.x * THREADS * 4
    best = int32(0)
    while i < words:
        v = load_x4(x, i)
        for k in unroll(4):
            lo, hi = int32(v[k] & uint32(0x7FFF)), int32((v[k] >> uint32(16)) & uint32(0x7FFF))
            best = max(best, lo if lo < int32(BF16_INF_BITS) else int32(0))
            best = max(best, hi if hi < int32(BF16_INF_BITS) else int32(0))
        i += step
    for k in unroll(5):
        best = max(best, cuda.shfl_xor_sync(0xFFFFFFFF, best, 1 << k))
    if lane == 0 and best > int32(0):
        cuda.atomic.max(amax_bits, 0, uint32(best))


# ------------------------------------------------------------------------------------------------
# Dequantize. out: bf16 pairs as uint32 words (flat).
# ------------------------------------------------------------------------------------------------
def mxfp8_dequantize_kernel(q, scales, out, lanes):
    """VALUE (``_e4m3_value``/``_e5m2_value``) a compile-time constant. A lane: 8 codes (2 words in, one LDG.64) and
    their block's scale byte (4 lanes share it), 8 bf16 out (one STG.128): a warp reads 256 contiguous bytes and
    writes 512, so every load and store instruction is whole 32-byte sectors."""
    c = cuda.blockIdx.x * THREADS + cuda.threadIdx.x
    step = cuda.gridDim.x * THREADS
    while c < lanes:
        lo, hi = load_x2(q, c * 2)
        sf = _e8m0_value(uint32(scales[c >> 2]))
        store_x4(out, c * 4,
                 cvt_bf16x2(VALUE(lo >> uint32(8)) * sf, VALUE(lo) * sf),
                 cvt_bf16x2(VALUE(lo >> uint32(24)) * sf, VALUE(lo >> uint32(16)) * sf),
                 cvt_bf16x2(VALUE(hi >> uint32(8)) * sf, VALUE(hi) * sf),
                 cvt_bf16x2(VALUE(hi >> uint32(24)) * sf, VALUE(hi >> uint32(16)) * sf))
        c += step


@cuda.jit(device=True, inline="always")
def _store_fp4_dequant(out, at, w, sf, ts):
    """Eight E2M1 codes (one word) -> fl(fl(value * sf) * ts) as eight bf16 (four words) at out[at]."""
    v = (_e2m1_value(w) * sf * ts, _e2m1_value(w >> uint32(4)) * sf * ts, _e2m1_value(w >> uint32(8)) * sf * ts,
         _e2m1_value(w >> uint32(12)) * sf * ts, _e2m1_value(w >> uint32(16)) * sf * ts,
         _e2m1_value(w >> uint32(20)) * sf * ts, _e2m1_value(w >> uint32(24)) * sf * ts,
         _e2m1_value(w >> uint32(28)) * sf * ts)
    store_x4(out, at, cvt_bf16x2(v[1], v[0]), cvt_bf16x2(v[3], v[2]), cvt_bf16x2(v[5], v[4]), cvt_bf16x2(v[7], v[6]))


def mxfp4_dequantize_kernel(q, scales, out, lanes):
    """A lane: 8 codes (one packed word in) and their block's scale byte (4 lanes share it), 8 bf16 out (one
    STG.128): a warp reads 128 contiguous bytes and writes 512. The tensor-scale factor is 1 (exact)."""
    c = cuda.blockIdx.x * THREADS + cuda.threadIdx.x
    step = cuda.gridDim.x * THREADS
    while c < lanes:
        _store_fp4_dequant(out, c * 4, q[c], _e8m0_value(uint32(scales[c >> 2])), float32(1))
        c += step


def nvfp4_dequantize_kernel(q, scales, ts, out, lanes):
    """A lane: 8 codes (one packed word in) and their block's E4M3 scale (2 lanes share it), 8 bf16 out (one
    STG.128), as mxfp4_dequantize_kernel's."""
    s_t = ts[0]
    c = cuda.blockIdx.x * THREADS + cuda.threadIdx.x
    step = cuda.gridDim.x * THREADS
    while c < lanes:
        _store_fp4_dequant(out, c * 4, q[c], _e4m3_value(uint32(scales[c >> 1])), s_t)
        c += step


# ------------------------------------------------------------------------------------------------
# Kernels by name, with their numba argument types (the SASS tests compile them offline)
# ------------------------------------------------------------------------------------------------
QUADS = {"e4m3": _quad_e4m3, "e5m2": _quad_e5m2}
VALUES = {"e4m3": _e4m3_value, "e5m2": _e5m2_value}


def kernel_function(name: str, fmt: str | None = None):
    """The Python kernel function (compile-time constants bound) of ``name``: "mxfp8_quantize" (fmt "e4m3" or
    "e5m2"), "mxfp4_quantize", "nvfp4_quantize", "finite_amax", "mxfp8_dequantize" (fmt), "mxfp4_dequantize",
    "nvfp4_dequantize"."""
    if name == "mxfp8_quantize":
        return unrolled(mxfp8_quantize_kernel, c_indexing=False, QUAD=QUADS[fmt], ELEM_EMAX=EMAX[fmt])
    if name == "mxfp8_dequantize":
        return unrolled(mxfp8_dequantize_kernel, c_indexing=False, VALUE=VALUES[fmt])
    fn = {"mxfp4_quantize": mxfp4_quantize_kernel, "nvfp4_quantize": nvfp4_quantize_kernel,
          "finite_amax": finite_amax_kernel, "mxfp4_dequantize": mxfp4_dequantize_kernel,
          "nvfp4_dequantize": nvfp4_dequantize_kernel}[name]
    return unrolled(fn, c_indexing=False, EMAX_E2M1=EMAX["e2m1"])


def kernel_argtypes(name: str):
    from numba import types

    u32, u8, f32, i32 = types.uint32[::1], types.uint8[::1], types.float32[::1], types.int32
    return {"mxfp8_quantize": (u32, u32, u8, i32), "mxfp4_quantize": (u32, u32, u8, i32),
            "nvfp4_quantize": (u32, u32, u8, f32, u32, types.float32, i32), "finite_amax": (u32, u32, i32),
            "mxfp8_dequantize": (u32, u8, u32, i32), "mxfp4_dequantize": (u32, u8, u32, i32),
            "nvfp4_dequantize": (u32, u8, f32, u32, i32)}[name]


__all__ = ["THREADS", "BLOCKS_PER_SM", "MX_BLOCK", "NV_BLOCK", "LANE_ELEMS", "kernel_function", "kernel_argtypes",
           "f32_bits"]
