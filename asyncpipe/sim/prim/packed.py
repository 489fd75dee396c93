"""Packed 16-bit arithmetic in the simulator: bfloat16 fma exact (Python integers, one rounding to nearest even),
the unsigned lane minimum and maximum."""

from __future__ import annotations

import numpy as np

BF16_NAN = 0x7FFF               # the canonical NaN the GPU's bf16 conversions write
BF16_INF = 0x7F80
MANTISSA_BITS = 7
SUBNORMAL_LSB = -133            # a bf16 subnormal's last bit is worth 2^-133
PRECISION = MANTISSA_BITS + 1


def _lanes(word) -> tuple[int, int]:
    w = int(word) & 0xFFFFFFFF
    return w & 0xFFFF, w >> 16


def _pack(lo: int, hi: int) -> np.uint32:
    return np.uint32(lo | (hi << 16))


def _decode(h: int):
    """(kind, sign, integer significand, exponent of its last bit) of bf16 bits; kind "finite", "inf" or "nan"."""
    sign, e, m = h >> 15, (h >> MANTISSA_BITS) & 0xFF, h & 0x7F
    if e == 0xFF:
        return ("nan" if m else "inf"), sign, 0, 0
    if e == 0:
        return "finite", sign, m, SUBNORMAL_LSB
    return "finite", sign, m | 0x80, e - 134


def _round(n: int, lsb: int, sign: int) -> int:
    """bf16 bits of sign * n * 2^lsb (n > 0), rounded to nearest even; subnormals kept, overflow to infinity."""
    drop = max(n.bit_length() - PRECISION, SUBNORMAL_LSB - lsb)
    if drop > 0:
        q, r = divmod(n, 1 << drop)
        half = 1 << (drop - 1)
        q += r > half or (r == half and q & 1)
        lsb += drop
    else:
        q, lsb = n << -drop, lsb + drop
    if q >> PRECISION:                   # the rounding carried into a new binade
        q, lsb = q >> 1, lsb + 1
    bits = ((lsb - SUBNORMAL_LSB) << MANTISSA_BITS) + q if q else 0
    return (sign << 15) | min(bits, BF16_INF)


def _fma_lane(a: int, b: int, c: int) -> int:
    (ka, sa, ma, ea), (kb, sb, mb, eb), (kc, csign, mc, ec) = _decode(a), _decode(b), _decode(c)
    if "nan" in (ka, kb, kc):
        return BF16_NAN
    psign = sa ^ sb
    if "inf" in (ka, kb):                                            # an infinite factor
        if (ka == "finite" and ma == 0) or (kb == "finite" and mb == 0) or (kc == "inf" and csign != psign):
            return BF16_NAN                                          # inf * 0, inf - inf
        return (psign << 15) | BF16_INF
    if kc == "inf":
        return (csign << 15) | BF16_INF
    lsb = min(ea + eb, ec)
    n = (-1) ** psign * (ma * mb << (ea + eb - lsb)) + (-1) ** csign * (mc << (ec - lsb))
    if n == 0:                                                       # +0 unless both addends are -0
        return 0x8000 if (ma * mb == 0 and mc == 0 and psign and csign) else 0
    return _round(abs(n), lsb, int(n < 0))


def fma_rn_bf16x2(a, b, c):
    (a0, a1), (b0, b1), (c0, c1) = _lanes(a), _lanes(b), _lanes(c)
    return _pack(_fma_lane(a0, b0, c0), _fma_lane(a1, b1, c1))


def min_u16x2(a, b):
    (a0, a1), (b0, b1) = _lanes(a), _lanes(b)
    return _pack(min(a0, b0), min(a1, b1))


def max_u16x2(a, b):
    (a0, a1), (b0, b1) = _lanes(a), _lanes(b)
    return _pack(max(a0, b0), max(a1, b1))
