"""OCP Microscaling (MX v1.0) MXFP8 (E4M3 or E5M2 elements) and MXFP4 (E2M1 elements): numpy reference.

Each block of 32 consecutive elements along ``axis`` shares one E8M0 scale X = 2^(s - 127) (s the scale
byte); the block's values are X * P_i (MX v1.0 sections 5 and 5.4.1). Quantization is section 6.3's
conversion, as the spec's reference code (microsoft/microxcaling, mx/mx_ops.py ``_quantize_mx``) and
torchao's ``to_mx`` (ScaleCalculationMode.FLOOR) do it:

- shared_exp = floor(log2(amax)) - emax_elem, amax = max |V_i| over the block, emax_elem the exponent of
  the element type's largest normal (8 for E4M3, 15 for E5M2, 2 for E2M1); floor(log2) is exact
  (subnormal inputs included);
- shared_exp is clamped below at -127 (scale byte 0x00); a block of zeros has amax 0 and gets 0x00;
- P_i = V_i / 2^shared_exp (exact) converted to the element type with round-to-nearest-even and, by
  default, saturation to +-max normal (the spec's "clamping normal numbers"; ``saturate=False`` gives
  the OFP8 non-saturating mode instead: E5M2 overflow to inf, E4M3 to NaN; not available for E2M1).
  Ties to even as torchao's casts do; microxcaling's default ``round="nearest"`` breaks ties away from
  zero instead (its ``round="even"`` is this rule), so it can differ at exact midpoints.

NaN and infinity (not fixed by the spec's pseudo-code; chosen to agree with microxcaling and torchao):
a block whose amax is NaN or +-inf, or (float64 input only) whose shared_exp would exceed 127, gets
the E8M0 NaN scale 0xFF, and the whole block then means NaN (MX v1.0 section 5: X = NaN makes every
value of the block NaN regardless of P_i). Its element codes are written as the element type's NaN
0x7F (MXFP8) or 0x0 (MXFP4, E2M1 has no NaN).

Codes come back unpacked, one per uint8 in the input's shape; scales as uint8 of the same shape with
``axis`` divided by 32. ``pack_fp4`` puts two E2M1 codes in a byte, the lower index in the low nibble
(the spec leaves the physical layout open; this is the order of PyTorch's ``float4_e2m1fn_x2`` as
torchao's ``pack_uint4`` and Transformer Engine's ``cast_to_fp4x2`` write it, of NVIDIA's
``__nv_fp4x2_e2m1``, and of triton's MXFP4 packing after triton-lang/triton#5197).

``dequantize`` multiplies each decoded element by 2^(s - 127) in IEEE float32 with subnormals (exact
unless the product overflows to inf); a scale 0xFF gives NaN for the whole block.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from asyncpipe.errors import check
from asyncpipe.formats.minifloat import E2M1, E4M3, E5M2, E8M0, FloatFormat, decode_checked, encode_checked, \
    float_array

SCALE_BIAS = 127
SCALE_NAN = 0xFF
BLOCK = 32
SPEC = "OCP MX v1.0 section 5"


@dataclass(frozen=True)
class MXFormat:
    name: str
    element: FloatFormat
    block: int = BLOCK


MXFP8_E4M3 = MXFormat("mxfp8_e4m3", E4M3)
MXFP8_E5M2 = MXFormat("mxfp8_e5m2", E5M2)
MXFP4 = MXFormat("mxfp4", E2M1)
FORMATS = {f.name: f for f in (MXFP8_E4M3, MXFP8_E5M2, MXFP4)}


def mx_format(fmt, api: str) -> MXFormat:
    if isinstance(fmt, MXFormat):
        return fmt
    check(isinstance(fmt, str) and fmt in FORMATS, api, f"fmt must be one of {', '.join(map(repr, FORMATS))}",
          repr(fmt))
    return FORMATS[fmt]


def blocks_last(a: np.ndarray, block: int, axis: int, api: str, source: str) -> np.ndarray:
    """``a`` with ``axis`` moved last and split into ``(..., n // block, block)``."""
    check(a.ndim >= 1 and -a.ndim <= axis < a.ndim, api, f"axis must name one of the array's {a.ndim} axes", axis)
    a = np.moveaxis(a, axis, -1)
    n = a.shape[-1]
    check(n % block == 0, api, f"the length of axis {axis} must be a multiple of the block size {block}", n, source)
    return a.reshape(*a.shape[:-1], n // block, block)


def unblock(b: np.ndarray, axis: int) -> np.ndarray:
    """The inverse of ``blocks_last``: ``(..., nb, block)`` back to the original layout."""
    return np.moveaxis(b.reshape(*b.shape[:-2], -1), -1, axis)


def scaled_blocks(values: np.ndarray, scales: np.ndarray, block: int, axis: int, api: str, source: str):
    """Decoded elements and decoded scales as ``(..., nb, block)`` and ``(..., nb, 1)``, shapes checked."""
    v = blocks_last(values, block, axis, api, source)
    s = np.moveaxis(scales, axis, -1) if scales.ndim == values.ndim else scales
    check(s.shape == v.shape[:-1], api, f"scales must have the codes' shape with axis {axis} divided by {block}",
          f"{scales.shape} for codes {values.shape}", source)
    return v, s[..., None]


def quantize(x, fmt, axis: int = -1, saturate: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """float16/32/64 ``x`` -> (element codes uint8, unpacked, shaped like ``x``; E8M0 scales uint8)."""
    api = "mx.quantize"
    f = mx_format(fmt, api)
    b = blocks_last(float_array(x, api), f.block, axis, api, SPEC).astype(np.float64)
    amax = np.max(np.abs(b), axis=-1)
    ok = np.isfinite(amax)
    floor_log2 = np.frexp(np.where(ok, amax, 0.0))[1] - 1
    shared = np.maximum(np.where(amax > 0, floor_log2 - f.element.emax, -SCALE_BIAS), -SCALE_BIAS)
    ok &= shared <= SCALE_BIAS
    shared = np.where(ok, shared, 0)
    scales = np.where(ok, shared + SCALE_BIAS, SCALE_NAN).astype(np.uint8)
    p = np.where(ok[..., None], np.ldexp(b, -shared[..., None]), 0.0)
    codes = encode_checked(p, f.element, saturate, api)
    codes = np.where(ok[..., None], codes, f.element.nan_code or 0).astype(np.uint8)
    return unblock(codes, axis), np.moveaxis(scales, -1, axis)


def dequantize(codes, scales, fmt, axis: int = -1) -> np.ndarray:
    """(element codes uint8, unpacked; E8M0 scales uint8) -> float32 values."""
    api = "mx.dequantize"
    f = mx_format(fmt, api)
    v, s = scaled_blocks(decode_checked(codes, f.element, api), decode_checked(scales, E8M0, api, "scales"),
                         f.block, axis, api, SPEC)
    return unblock((v.astype(np.float64) * s).astype(np.float32), axis)


def pack_fp4(codes) -> np.ndarray:
    """E2M1 codes (uint8, one a byte, last axis even) -> bytes of two, element 2j in the low nibble."""
    c = np.asarray(codes)
    decode_checked(c, E2M1, "mx.pack_fp4")
    check(c.ndim >= 1 and c.shape[-1] % 2 == 0, "mx.pack_fp4", "the last axis must have an even length",
          c.shape[-1] if c.ndim else "a scalar")
    return (c[..., 0::2] | (c[..., 1::2] << 4)).astype(np.uint8)


def unpack_fp4(packed) -> np.ndarray:
    """The inverse of ``pack_fp4``: bytes -> E2M1 codes, the last axis twice as long."""
    p = np.asarray(packed)
    check(p.dtype == np.uint8 and p.ndim >= 1, "mx.unpack_fp4", "packed must be a uint8 array of one or more axes",
          f"{p.dtype.name} of shape {p.shape}")
    return np.stack([p & 0xF, p >> 4], axis=-1).reshape(*p.shape[:-1], 2 * p.shape[-1])
