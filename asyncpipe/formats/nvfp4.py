"""NVIDIA NVFP4: E2M1 elements, one E4M3 scale per 16 consecutive elements, one float32 tensor scale.

Sources: NVIDIA's "Introducing NVFP4 for Efficient and Accurate Low-Precision Inference" (two-level
scaling: an E4M3 scale per 16-value micro-block and an FP32 per-tensor scale), torchao's ``nvfp4_quantize``
and ``per_tensor_amax_to_scale`` (torchao/prototype/mx_formats/nvfp4_tensor.py) and Transformer Engine's
``NVFP4QuantizerRef`` (transformer_engine/pytorch/custom_recipes/quantization_nvfp4.py).

The arithmetic is IEEE float32, each step rounded to nearest even, subnormals kept (what a GPU kernel
writes without fast-math):

- tensor scale s_t: given, or by default fl(amax_t / 2688), 2688 = 448 * 6 (E4M3 max x E2M1 max), with
  amax_t the largest *finite* |x| (1.0 when that is 0, so an all-zero tensor still has a usable scale);
- block scale code = E4M3(fl(fl(amax_b / 6) / s_t)), RNE, saturating at 448;
- element code = E2M1(fl(x / fl(decode(scale code) * s_t))), RNE, saturating at 6; a block scale that
  rounds to 0 makes the division x / 0: +-inf saturates to +-6, and 0 / 0 is taken as the signed zero x.
- a block holding a NaN or +-inf gets the E4M3 NaN scale 0x7F and element codes 0 (it decodes to NaN).

Where the sources differ (the choice here is the one named first):

- block scale: (amax_b / 6) / s_t (torchao, two divisions) against Transformer Engine's
  amax_b * ((2688 / amax_t) * (1 / 6)) and element factor 1 / (decode(scale) * (1 / global_encode)),
  multiplications by reciprocals; the float32 roundings differ in the last place, so a code can differ
  where a value lies within an ulp of an E4M3 or E2M1 rounding midpoint.
- a block with +-inf: NaN here (as MX does); Transformer Engine clamps its scale to 448.
- -0.0 encodes as 0x8 (the IEEE sign of zero is kept); Transformer Engine's ``cast_to_fp4x2``
  writes 0x0 for an exact -0.0 (and 0x8 for negatives that round to zero).
- torchao clamps the block scale below at the smallest E4M3 subnormal; here it may round to 0.

``dequantize`` returns fl(decode(e) * decode(scale) * s_t): the first product is exact (at most 6
significant bits), so one rounding, as block-scaled MMA applies the tensor scale after the block scale.
Codes are unpacked, one a byte; ``asyncpipe.formats.mx.pack_fp4`` packs them (lower index, low nibble).
"""

from __future__ import annotations

import numpy as np

from asyncpipe.errors import check
from asyncpipe.formats.minifloat import E2M1, E4M3, decode_checked, encode_checked, float_array
from asyncpipe.formats.mx import blocks_last, scaled_blocks, unblock

BLOCK = 16
TENSOR_SCALE_DIVISOR = np.float32(448.0 * 6.0)
E2M1_MAX = np.float32(6.0)
SPEC = "NVIDIA NVFP4: one E4M3 scale per 16 elements"
FLOAT32_ONLY = (np.float16, np.float32)


def default_tensor_scale(x) -> np.float32:
    """fl(amax_t / 2688) over the finite values of ``x``; 1.0 when they are all zero (or none is finite)."""
    a = np.abs(float_array(x, "nvfp4.default_tensor_scale", FLOAT32_ONLY).astype(np.float32))
    finite = a[np.isfinite(a)]
    amax = np.float32(finite.max()) if finite.size else np.float32(0)
    return np.float32(1.0) if amax == 0 else np.float32(amax / TENSOR_SCALE_DIVISOR)


def _tensor_scale(tensor_scale, api: str) -> np.float32:
    t = np.asarray(tensor_scale)
    with np.errstate(over="ignore"):
        s = np.float32(t) if t.ndim == 0 and t.dtype.kind in "fiu" else np.float32(np.nan)
    check(bool(np.isfinite(s) and s > 0), api, "tensor_scale must be a positive finite float32 scalar",
          repr(tensor_scale))
    return s


def quantize(x, tensor_scale=None, axis: int = -1) -> tuple[np.ndarray, np.ndarray, np.float32]:
    """float16/32 ``x`` -> (E2M1 codes uint8, unpacked, shaped like ``x``; E4M3 scales uint8; s_t)."""
    api = "nvfp4.quantize"
    a = float_array(x, api, FLOAT32_ONLY)
    s_t = default_tensor_scale(a) if tensor_scale is None else _tensor_scale(tensor_scale, api)
    b = blocks_last(a, BLOCK, axis, api, SPEC).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        amax = np.max(np.abs(b), axis=-1)
        ok = np.isfinite(amax)
        scales = encode_checked(np.where(ok, amax / E2M1_MAX / s_t, 0).astype(np.float32), E4M3, True, api)
        denom = (decode_checked(scales, E4M3, api) * s_t)[..., None]
        q = np.where(b == 0, b, b / denom)
    q = np.where(ok[..., None], q, 0).astype(np.float32)
    codes = encode_checked(q, E2M1, True, api)
    scales = np.where(ok, scales, E4M3.nan_code).astype(np.uint8)
    return unblock(codes, axis), np.moveaxis(scales, -1, axis), s_t


def dequantize(codes, scales, tensor_scale, axis: int = -1) -> np.ndarray:
    """(E2M1 codes uint8, unpacked; E4M3 scales uint8; s_t) -> float32 values."""
    api = "nvfp4.dequantize"
    s_t = _tensor_scale(tensor_scale, api)
    v, s = scaled_blocks(decode_checked(codes, E2M1, api), decode_checked(scales, E4M3, api, "scales"),
                         BLOCK, axis, api, SPEC)
    with np.errstate(over="ignore"):
        return unblock((v * s) * s_t, axis)
