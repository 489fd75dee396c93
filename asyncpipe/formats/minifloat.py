"""Small binary floating-point types carried as uint8 codes: exact decode tables and a
round-to-nearest-even encoder, pure numpy.

A type is sign (optional), ``ebits`` exponent bits and ``mbits`` mantissa bits with a ``bias``; an exponent
field of 0 holds zero and the subnormals ``0.m x 2^(1-bias)`` unless ``subnormals`` is off (E8M0, whose
field 0 is the value 2^-127). The types defined here:

- ``E4M3`` (OCP OFP8 v1.0, "E4M3"): bias 7, no infinities, NaN only S.1111.111 (0x7F/0xFF), max normal
  S.1111.110 = 448, min subnormal 2^-9.
- ``E5M2`` (OCP OFP8 v1.0, "E5M2"): bias 15, IEEE-754 conventions: +-inf S.11111.00, NaN S.11111.{01,10,11},
  max normal 57344, min subnormal 2^-16.
- ``E2M1`` (OCP MX v1.0 section 5.3, FP4): bias 1, values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives,
  no infinities, no NaN.
- ``E8M0`` (OCP MX v1.0 section 5.4.1, the MX scale): unsigned, bias 127, every code 2^(code-127) for
  exponents -127..127, 0xFF NaN, no zero, no infinities. Decode only (MX scales come from exponents).

Encoding (``encode``) rounds the exact float16/float32/float64 input once, to nearest with ties to even,
subnormals included (no flush to zero), and keeps the sign of zeros and of values that round to zero.
Overflow follows the OFP8 spec's two conversion modes (the same table as NVIDIA's ``__NV_SATFINITE`` /
``__NV_NOSAT``): ``saturate=True`` (the default) clamps every finite overflow and +-inf to +-max normal;
``saturate=False`` turns them into +-inf (E5M2) or NaN (E4M3). A value overflows when it rounds past max
normal, so for E4M3 464 (the midpoint of 448 and 480, ties to the even 448) stays 448 and 465 overflows.
NaN encodes as the canonical 0x7F. E2M1 has neither infinity nor NaN: it always saturates, and NaN or
``saturate=False`` is an error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from asyncpipe.errors import check

FLOAT_DTYPES = (np.float16, np.float32, np.float64)
OFP8 = "OCP OFP8 v1.0, conversion modes"


@dataclass(frozen=True)
class FloatFormat:
    """One small float type; ``nan`` is "ieee" (exponent all ones, mantissa not 0), "ones" (only the
    all-ones exponent and mantissa) or "none"."""

    name: str
    ebits: int
    mbits: int
    bias: int
    nan: str
    inf: bool = False
    signed: bool = True
    subnormals: bool = True

    @property
    def bits(self) -> int:
        return int(self.signed) + self.ebits + self.mbits

    @cached_property
    def table(self) -> np.ndarray:
        """The float32 value of every code 0 .. 2**bits - 1 (exact)."""
        return np.array([self._value(c) for c in range(1 << self.bits)], dtype=np.float32)

    def _value(self, code: int) -> float:
        sign = -1.0 if self.signed and code >> (self.ebits + self.mbits) else 1.0
        e, m = (code >> self.mbits) & ((1 << self.ebits) - 1), code & ((1 << self.mbits) - 1)
        if e == (1 << self.ebits) - 1:
            if (self.nan == "ieee" and m) or (self.nan == "ones" and m == (1 << self.mbits) - 1):
                return math.nan
            if self.inf and m == 0:
                return sign * math.inf
        if e == 0 and self.subnormals:
            return sign * math.ldexp(m, 1 - self.bias - self.mbits)
        return sign * math.ldexp((1 << self.mbits) + m, e - self.bias - self.mbits)

    @cached_property
    def max_code(self) -> int:
        """The code of the largest finite value (0x7E for E4M3, 0x7B for E5M2, 0x7 for E2M1)."""
        half = 1 << (self.bits - int(self.signed))
        return max(c for c in range(half) if math.isfinite(self.table[c]))

    @property
    def max(self) -> float:
        return float(self.table[self.max_code])

    @property
    def emax(self) -> int:
        """The exponent of the largest normal value: 8 for E4M3, 15 for E5M2, 2 for E2M1."""
        return math.frexp(self.max)[1] - 1

    @property
    def nan_code(self) -> int | None:
        """The canonical NaN: every bit but the sign set (0x7F; 0xFF for the unsigned E8M0)."""
        return None if self.nan == "none" else (1 << (self.bits - int(self.signed))) - 1

    @property
    def inf_code(self) -> int | None:
        return ((1 << self.ebits) - 1) << self.mbits if self.inf else None


E4M3 = FloatFormat("e4m3", ebits=4, mbits=3, bias=7, nan="ones")
E5M2 = FloatFormat("e5m2", ebits=5, mbits=2, bias=15, nan="ieee", inf=True)
E2M1 = FloatFormat("e2m1", ebits=2, mbits=1, bias=1, nan="none")
E8M0 = FloatFormat("e8m0", ebits=8, mbits=0, bias=127, nan="ones", signed=False, subnormals=False)


def float_array(x, api: str, dtypes=FLOAT_DTYPES) -> np.ndarray:
    """``x`` as a numpy array, which must have one of ``dtypes``."""
    a = np.asarray(x)
    names = [np.dtype(d).name for d in dtypes]
    check(a.dtype in dtypes, api, f"x must be a {', '.join(names[:-1])} or {names[-1]} array"
          if len(names) > 1 else f"x must be a {names[0]} array", a.dtype.name)
    return a


def encode(x, fmt: FloatFormat, saturate: bool = True) -> np.ndarray:
    """float16/32/64 values -> uint8 codes of ``fmt`` (same shape), rounded to nearest even."""
    return encode_checked(x, fmt, saturate, "minifloat.encode")


def encode_checked(x, fmt: FloatFormat, saturate: bool, api: str) -> np.ndarray:
    """``encode``, reporting bad input as ``api``."""
    v = float_array(x, api).astype(np.float64)
    check(fmt.signed and fmt.subnormals, api, "encode needs a signed type with zero and subnormals", fmt.name)
    check(saturate or fmt.nan_code is not None, api,
          "saturate=False needs a type with an infinity or a NaN to overflow to", fmt.name, OFP8)
    nan = np.isnan(v)
    check(fmt.nan_code is not None or not nan.any(), api, f"{fmt.name} has no NaN to encode a NaN as",
          "NaN", OFP8)
    a = np.abs(np.where(nan, 0.0, v))
    finite = np.isfinite(a)
    a = np.where(finite, a, 0.0)
    emin = 1 - fmt.bias
    e = np.where(a == 0, emin, np.maximum(np.frexp(a)[1] - 1, emin))    # the binade, subnormals share emin's
    n = np.rint(np.ldexp(a, fmt.mbits - e)).astype(np.int64)               # exact scaling, one RNE rounding
    mag = ((e + fmt.bias) << fmt.mbits) + n - (1 << fmt.mbits)             # carries into the next binade
    over = (mag > fmt.max_code) | ~finite
    if saturate:
        mag = np.where(over, fmt.max_code, mag)
    else:
        overflow = fmt.inf_code if fmt.inf else fmt.nan_code
        mag = np.where(over, overflow, mag)
        nan |= over & (not fmt.inf)
    codes = mag | np.where(np.signbit(v), 1 << (fmt.bits - 1), 0)
    if fmt.nan_code is not None:
        codes = np.where(nan, fmt.nan_code, codes)
    return codes.astype(np.uint8)


def decode(codes, fmt: FloatFormat) -> np.ndarray:
    """uint8 codes of ``fmt`` -> float32 values (exact; NaN codes give NaN)."""
    return decode_checked(codes, fmt, "minifloat.decode")


def decode_checked(codes, fmt: FloatFormat, api: str, what: str = "codes") -> np.ndarray:
    """``decode``, reporting bad input as ``api`` (``what`` names the argument)."""
    c = np.asarray(codes)
    check(c.dtype == np.uint8, api, f"{what} must be a uint8 array", c.dtype.name)
    if fmt.bits < 8 and c.size:
        top = int(c.max())
        check(top < 1 << fmt.bits, api, f"{what} of {fmt.name} must be below {1 << fmt.bits:#x} (one code a byte, "
              "unpacked)", f"{top:#x}")
    return fmt.table[c]
