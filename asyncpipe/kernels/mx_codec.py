"""GPU quantize and dequantize for the block-scaled formats, bit-exact against ``asyncpipe.formats``:

    codes, scales = quantize_mxfp8(x, fmt="e4m3")      # x (..., K) bf16, K % 32 == 0; codes uint8 like x,
    y = dequantize_mxfp8(codes, scales, fmt="e4m3")    #   scales (..., K/32) E8M0 bytes; y bf16
    packed, scales = quantize_mxfp4(x)                  # packed (..., K/2): two E2M1 codes a byte, element
    y = dequantize_mxfp4(packed, scales)                #   2j in the low nibble (mx.pack_fp4's order)
    packed, scales, ts = quantize_nvfp4(x, tensor_scale=None)   # K % 16 == 0; scales (..., K/16) E4M3 bytes;
    y = dequantize_nvfp4(packed, scales, ts)                    #   ts a (1,) float32 device array

``x`` is bf16: a torch bfloat16 CUDA tensor, or a numba/CuPy device array of its bits (uint16 or int16), as
``asyncpipe.kernels.attention`` takes it. Outputs are numba device arrays (uint8 codes and scales, uint16 bf16
bits), or torch tensors for torch input (MXFP8 codes as ``torch.float8_e4m3fn``/``float8_e5m2``, FP4 bytes and
scales as ``torch.uint8``, values as ``torch.bfloat16``). The layouts and the rounding are the references':
``mx.quantize``/``mx.dequantize`` (round to nearest even, saturating), ``mx.pack_fp4``, ``nvfp4.quantize``/
``nvfp4.dequantize`` (float32 steps); dequantized values are the references' float32 rounded to bf16 (nearest
even, a NaN as 0x7FFF: the GPU's ``cvt.rn.bf16x2.f32``). ``reference(...)`` computes what each function returns,
in numpy; the kernels (``mx_codec_kernel``, whose module doc says why they are plain 16-byte vector loads and
not a TMA ring) are compared with it bit for bit.

NVFP4's tensor scale: ``tensor_scale=None`` computes fl(amax / 2688) of the finite values on the GPU (one more
pass over x, then the quantizer reads the amax) and returns it as a (1,) float32 device array without a
synchronisation; a given positive finite float is used as it is (and returned the same way).
``dequantize_nvfp4`` takes that array or a float.

Every input rule is checked before anything runs (``check_input``, ``check_scales``; each message names the rule
and the value). ``benchmark(nbytes)`` times each codec beside the device-to-device copy of the same bytes.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import cuda

from ..bf16 import bf16_to_float32, gpu_bf16_bits
from ..errors import check
from ..formats import mx, nvfp4
from . import mx_codec_kernel as K
from .checks import as_device_array, is_torch, torch_bits

VECTOR_BYTES = 16                       # LDG.128 / STG.128: every buffer starts on a 16-byte boundary
MAX_ELEMENTS = 2**31 - 1                # the kernels' 32-bit indices
FP8_FORMATS = ("e4m3", "e5m2")
MIN_CC = (8, 9)
MIN_CC_RULE = "needs compute capability 8.9 or newer (cvt.rn.satfinite.e4m3x2/e5m2x2.f32: sm_89)"
BF16_RULE = "must hold bfloat16 (a torch bfloat16 tensor, or its bits in a uint16/int16 array)"
BF16_KINDS = ("uint16", "int16", "bfloat16")
CODE_KINDS = ("uint8", "float8_e4m3fn", "float8_e5m2")
MX_SOURCE = mx.SPEC
NV_SOURCE = nvfp4.SPEC


# ------------------------------------------------------------------------------------------------
# Checks (pure: shapes, dtype names, flags and addresses; testable with no GPU)
# ------------------------------------------------------------------------------------------------
def check_input(api: str, name: str, shape, dtype: str, contiguous: bool, address: int, block: int, source: str,
                kinds=BF16_KINDS, rule: str = BF16_RULE, per_byte: int = 1) -> int:
    """Every rule of a values or codes argument; ``per_byte`` elements a byte (2 for packed FP4). Returns the
    number of elements."""
    shape = tuple(shape)
    check(dtype in kinds, api, f"{name} {rule}", dtype)
    check(len(shape) >= 1, api, f"{name} must have at least one axis", "a 0-d array")
    n = math.prod(shape) * per_byte
    check(n >= 1, api, f"{name} must not be empty", f"shape {shape}")
    row = shape[-1] * per_byte
    unit = "" if per_byte == 1 else f" ({per_byte} codes a byte: {row} elements)"
    check(row % block == 0, api, f"the last axis of {name} (its row length) must be a multiple of the block size "
          f"{block}", f"{shape[-1]}{unit}", source)
    check(n <= MAX_ELEMENTS, api, f"{name} must have fewer than 2^31 elements (32-bit indices)", n)
    check(contiguous, api, f"{name} must be C-contiguous (row-major, unit stride)", f"shape {shape}")
    check(address % VECTOR_BYTES == 0, api, f"{name} must start on a {VECTOR_BYTES}-byte boundary (16-byte vector "
          "loads and stores)", f"address {address:#x} ({address % VECTOR_BYTES} bytes past one)")
    return n


def check_scales(api: str, shape, dtype: str, contiguous: bool, values_shape, block: int, per_byte: int = 1,
                 what: str = "E8M0") -> None:
    """The scales of codes shaped ``values_shape`` (bytes; ``per_byte`` codes each): uint8, one per block."""
    shape, values_shape = tuple(shape), tuple(values_shape)
    check(dtype == "uint8", api, f"scales must be uint8 (one {what} byte a block)", dtype)
    want = values_shape[:-1] + (values_shape[-1] * per_byte // block,)
    check(shape == want, api, f"scales must have the codes' shape with the last axis (in elements) divided by "
          f"{block}", f"scales {shape} for codes {values_shape}")
    check(contiguous, api, "scales must be C-contiguous (row-major, unit stride)", f"shape {shape}")


def check_fmt(api: str, fmt) -> str:
    check(fmt in FP8_FORMATS, api, "fmt must be 'e4m3' or 'e5m2'", repr(fmt))
    return fmt


def check_device(api: str, info) -> None:
    from ..spec.device import check_cc

    check_cc(info, api, MIN_CC, MIN_CC_RULE)


# ------------------------------------------------------------------------------------------------
# Arguments: torch tensors and numba/CuPy arrays
# ------------------------------------------------------------------------------------------------
def _arg(api: str, name: str, x):
    """(numba device array, dtype name, torch?) of ``x``; torch bf16 and float8 are seen as their bits."""
    if is_torch(x):
        check(x.is_cuda, api, f"{name} must be on a CUDA device", str(x.device))
        kind = str(x.dtype).replace("torch.", "")
        return as_device_array(api, name, torch_bits(x)), kind, True
    a = as_device_array(api, name, x)
    return a, a.dtype.name, False


def _checked(api, name, x, block, source, **kw):
    a, kind, torch_in = _arg(api, name, x)
    contiguous = a.is_c_contiguous()
    address = a.__cuda_array_interface__["data"][0]
    n = check_input(api, name, a.shape, kind, contiguous, address, block, source, **kw)
    return a, kind, torch_in, n


def _scales_arg(api, scales, values, block, per_byte=1, what="E8M0"):
    s, kind, _ = _arg(api, "scales", scales)
    check_scales(api, s.shape, kind, s.is_c_contiguous(), values.shape, block, per_byte, what)
    return s


def _flat(a, dtype):
    return a.reshape(a.size).view(dtype)


def _blocks_shape(a, block):
    shape = tuple(a.shape)
    return shape[:-1] + (shape[-1] // block,)


def _grid(lanes: int, info) -> int:
    return max(1, min(-(-lanes // K.THREADS), info.sm_count * K.BLOCKS_PER_SM))


def _info(api):
    from ..host import device_info

    info = device_info(api)
    check_device(api, info)
    return info


@functools.lru_cache(maxsize=None)
def _jit(name: str, fmt: str | None = None):
    from ..jit_cache import jit

    return jit(K.kernel_function(name, fmt))


_captured: list | None = None          # benchmark(): the prepared launches of one call, to time without Python


def _launch(api, name, fmt, lanes, info, *args, stream=0):
    """Launch kernel ``name`` once; under ``benchmark`` also keep the prepared launch to run it again.

    The launch keeps its arrays (``keep=args``): a ``PreparedLaunch`` holds raw device pointers only, and
    benchmark's launches outlive the call that prepared them, which drops its outputs (and quantize_nvfp4 its
    amax word) on return. Without it numba frees those buffers (its 11th pending free flushes them all, and each
    timing's 41 events are pending frees too) and the timed launches write into freed memory: benchmark(1 << 30)
    on the H200 stopped with CUDA_ERROR_ILLEGAL_ADDRESS at its first timing's first synchronize."""
    from ..host.launch import prepare_launch

    launch = prepare_launch(_jit(name, fmt), _grid(lanes, info), K.THREADS, *args, stream=stream, keep=args,
                            _once=_captured is None)
    launch()
    if _captured is not None:
        _captured.append(launch)


def _empty(shape, dtype, like_torch, device=None, torch_dtype=None, stream=0):
    """(the array returned, its numba view): a torch tensor for torch input, else a numba device array."""
    if like_torch:
        import torch

        t = torch.empty(shape, dtype=torch_dtype, device=device)
        return t, as_device_array("mx_codec", "out", torch_bits(t))
    a = cuda.device_array(shape, dtype, stream=stream or 0)
    return a, a


def _torch_dtype(name):
    import torch

    return getattr(torch, name)


# ------------------------------------------------------------------------------------------------
# MXFP8
# ------------------------------------------------------------------------------------------------
def quantize_mxfp8(x, fmt: str = "e4m3", *, stream=0):
    """``(codes, scales)``: MXFP8 (``fmt`` "e4m3" or "e5m2") of the bf16 ``x`` (..., K), K % 32 == 0 (module doc)."""
    api = "quantize_mxfp8"
    check_fmt(api, fmt)
    xa, _, torch_in, n = _checked(api, "x", x, mx.BLOCK, MX_SOURCE)
    info = _info(api)
    dev = x.device if torch_in else None
    codes, cv = _empty(tuple(xa.shape), np.uint8, torch_in, dev, torch_in and _torch_dtype(
        "float8_e4m3fn" if fmt == "e4m3" else "float8_e5m2"), stream)
    scales, sv = _empty(_blocks_shape(xa, mx.BLOCK), np.uint8, torch_in, dev,
                        torch_in and _torch_dtype("uint8"), stream)
    lanes = n // K.LANE_ELEMS["mxfp8_quantize"]
    _launch(api, "mxfp8_quantize", fmt, lanes, info, _flat(xa, np.uint32), _flat(cv, np.uint32), _flat(sv, np.uint8),
            np.int32(lanes), stream=stream)
    return codes, scales


def dequantize_mxfp8(codes, scales, fmt: str | None = None, *, stream=0):
    """bf16 values of MXFP8 ``codes`` (uint8, or torch float8) and their E8M0 ``scales``; ``fmt`` "e4m3" (the
    default for uint8) or "e5m2", taken from a torch float8 dtype when not given."""
    api = "dequantize_mxfp8"
    qa, kind, torch_in, n = _checked(api, "codes", codes, mx.BLOCK, MX_SOURCE, kinds=CODE_KINDS,
                                     rule="must be uint8 codes (or a torch float8_e4m3fn/float8_e5m2 tensor)")
    implied = {"float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"}.get(kind)
    fmt = check_fmt(api, fmt if fmt is not None else implied or "e4m3")
    check(implied in (None, fmt), api, "fmt must match the codes' dtype", f"fmt {fmt!r} for {kind} codes")
    sa = _scales_arg(api, scales, qa, mx.BLOCK)
    info = _info(api)
    out, ov = _empty(tuple(qa.shape), np.uint16, torch_in, torch_in and codes.device, torch_in and _torch_dtype("bfloat16"),
                     stream)
    lanes = n // K.LANE_ELEMS["mxfp8_dequantize"]
    _launch(api, "mxfp8_dequantize", fmt, lanes, info, _flat(qa, np.uint32), _flat(sa, np.uint8),
            _flat(ov, np.uint32), np.int32(lanes), stream=stream)
    return out


# ------------------------------------------------------------------------------------------------
# MXFP4
# ------------------------------------------------------------------------------------------------
PACKED_RULE = "must be uint8 bytes of two E2M1 codes each"


def _packed_shape(shape):
    shape = tuple(shape)
    return shape[:-1] + (shape[-1] // 2,)


def quantize_mxfp4(x, *, stream=0):
    """``(packed, scales)``: MXFP4 of the bf16 ``x`` (..., K), K % 32 == 0; packed (..., K/2) uint8."""
    api = "quantize_mxfp4"
    xa, _, torch_in, n = _checked(api, "x", x, mx.BLOCK, MX_SOURCE)
    info = _info(api)
    dev, u8 = (x.device, _torch_dtype("uint8")) if torch_in else (None, None)
    packed, pv = _empty(_packed_shape(xa.shape), np.uint8, torch_in, dev, u8, stream)
    scales, sv = _empty(_blocks_shape(xa, mx.BLOCK), np.uint8, torch_in, dev, u8, stream)
    lanes = n // K.LANE_ELEMS["mxfp4_quantize"]
    _launch(api, "mxfp4_quantize", None, lanes, info, _flat(xa, np.uint32), _flat(pv, np.uint32),
            _flat(sv, np.uint8), np.int32(lanes), stream=stream)
    return packed, scales


def _unpacked_shape(shape):
    shape = tuple(shape)
    return shape[:-1] + (shape[-1] * 2,)


def dequantize_mxfp4(packed, scales, *, stream=0):
    """bf16 values (..., 2 * packed.shape[-1]) of MXFP4 ``packed`` codes and their E8M0 ``scales``."""
    api = "dequantize_mxfp4"
    qa, _, torch_in, n = _checked(api, "packed", packed, mx.BLOCK, MX_SOURCE, kinds=("uint8",), rule=PACKED_RULE,
                                  per_byte=2)
    sa = _scales_arg(api, scales, qa, mx.BLOCK, per_byte=2)
    info = _info(api)
    out, ov = _empty(_unpacked_shape(qa.shape), np.uint16, torch_in, torch_in and packed.device,
                     torch_in and _torch_dtype("bfloat16"), stream)
    lanes = n // K.LANE_ELEMS["mxfp4_dequantize"]
    _launch(api, "mxfp4_dequantize", None, lanes, info, _flat(qa, np.uint32), _flat(sa, np.uint8),
            _flat(ov, np.uint32), np.int32(lanes), stream=stream)
    return out


# ------------------------------------------------------------------------------------------------
# NVFP4
# ------------------------------------------------------------------------------------------------
def quantize_nvfp4(x, tensor_scale=None, *, stream=0):
    """``(packed, scales, tensor_scale)``: NVFP4 of the bf16 ``x`` (..., K), K % 16 == 0; packed (..., K/2)
    uint8, scales (..., K/16) E4M3 bytes, tensor_scale a (1,) float32 device array (module doc)."""
    api = "quantize_nvfp4"
    given = np.float32(0) if tensor_scale is None else nvfp4._tensor_scale(tensor_scale, api)
    xa, _, torch_in, n = _checked(api, "x", x, nvfp4.BLOCK, NV_SOURCE)
    info = _info(api)
    dev, u8 = (x.device, _torch_dtype("uint8")) if torch_in else (None, None)
    packed, pv = _empty(_packed_shape(xa.shape), np.uint8, torch_in, dev, u8, stream)
    scales, sv = _empty(_blocks_shape(xa, nvfp4.BLOCK), np.uint8, torch_in, dev, u8, stream)
    ts, tv = _empty((1,), np.float32, torch_in, dev, torch_in and _torch_dtype("float32"), stream)
    words = _flat(xa, np.uint32)
    amax = cuda.to_device(np.zeros(1, np.uint32), stream=stream or 0)
    if tensor_scale is None:
        _launch(api, "finite_amax", None, words.size // 4, info, words, amax, np.int32(words.size), stream=stream)
    nblocks = n // nvfp4.BLOCK
    _launch(api, "nvfp4_quantize", None, -(-nblocks // 2), info, words, _flat(pv, np.uint32), _flat(sv, np.uint8),
            tv, amax, np.float32(given), np.int32(nblocks), stream=stream)
    return packed, scales, ts


def _tensor_scale_arg(api, tensor_scale, stream):
    """A (1,) float32 device array holding the tensor scale: given, or made from a positive finite float."""
    if cuda.is_cuda_array(tensor_scale):
        t, kind, _ = _arg(api, "tensor_scale", tensor_scale)
        check(kind == "float32" and t.size == 1, api, "tensor_scale must be a float32 scalar or a one-element float32 "
              "device array (what quantize_nvfp4 returns)", f"{kind} of shape {tuple(t.shape)}")
        return t.reshape(1)
    return cuda.to_device(np.array([nvfp4._tensor_scale(tensor_scale, api)], np.float32), stream=stream or 0)


def dequantize_nvfp4(packed, scales, tensor_scale, *, stream=0):
    """bf16 values of NVFP4 ``packed`` codes, their E4M3 ``scales`` and the tensor scale (a float, or the (1,)
    float32 device array quantize_nvfp4 returns)."""
    api = "dequantize_nvfp4"
    qa, _, torch_in, n = _checked(api, "packed", packed, nvfp4.BLOCK, NV_SOURCE, kinds=("uint8",), rule=PACKED_RULE,
                                  per_byte=2)
    sa = _scales_arg(api, scales, qa, nvfp4.BLOCK, per_byte=2, what="E4M3")
    ts = _tensor_scale_arg(api, tensor_scale, stream)
    info = _info(api)
    out, ov = _empty(_unpacked_shape(qa.shape), np.uint16, torch_in, torch_in and packed.device,
                     torch_in and _torch_dtype("bfloat16"), stream)
    lanes = n // K.LANE_ELEMS["nvfp4_dequantize"]
    _launch(api, "nvfp4_dequantize", None, lanes, info, _flat(qa, np.uint32), _flat(sa, np.uint8), ts,
            _flat(ov, np.uint32), np.int32(lanes), stream=stream)
    return out


# ------------------------------------------------------------------------------------------------
# numpy references of what each function returns
# ------------------------------------------------------------------------------------------------
def reference(kind: str, *args, fmt: str = "e4m3", tensor_scale=None):
    """What the function ``kind`` returns, computed by ``asyncpipe.formats`` (host arrays):

    - "quantize_mxfp8" (bits) -> (codes, scales); "quantize_mxfp4" (bits) -> (packed, scales);
      "quantize_nvfp4" (bits) -> (packed, scales, np.float32 tensor scale); ``bits``: bf16 as uint16;
    - "dequantize_mxfp8" (codes, scales), "dequantize_mxfp4" (packed, scales), "dequantize_nvfp4" (packed,
      scales, tensor scale) -> bf16 bits (uint16), the float32 reference rounded as the GPU rounds."""
    if kind.startswith("quantize"):
        x = bf16_to_float32(np.asarray(args[0]).view(np.uint16))
        if kind == "quantize_mxfp8":
            return mx.quantize(x, f"mxfp8_{fmt}")
        if kind == "quantize_mxfp4":
            codes, scales = mx.quantize(x, mx.MXFP4)
            return mx.pack_fp4(codes), scales
        codes, scales, s_t = nvfp4.quantize(x, tensor_scale)
        return mx.pack_fp4(codes), scales, s_t
    with np.errstate(over="ignore", invalid="ignore"):
        if kind == "dequantize_mxfp8":
            return gpu_bf16_bits(mx.dequantize(args[0], args[1], f"mxfp8_{fmt}"))
        if kind == "dequantize_mxfp4":
            return gpu_bf16_bits(mx.dequantize(mx.unpack_fp4(args[0]), args[1], mx.MXFP4))
        return gpu_bf16_bits(nvfp4.dequantize(mx.unpack_fp4(args[0]), args[1], args[2]))


# ------------------------------------------------------------------------------------------------
# Benchmark
# ------------------------------------------------------------------------------------------------
def _copy_gbps(src, reps):
    """GB/s (bytes read + written) of the device-to-device copy of ``src``, in this run."""
    from ..timing import gbps, time_ms

    dst = cuda.device_array_like(src)
    ms = time_ms(lambda: dst.copy_to_device(src), reps=reps)
    return gbps(2.0 * src.nbytes, ms)


def benchmark(nbytes: int = 1 << 30, *, reps: int = 20, seed: int = 0) -> list[dict]:
    """One record per codec at ``nbytes`` of bf16 (normal random data, rows of 4096): kernel (format and
    direction), ms, gbps (bytes read + written, scales included), and ``vs`` {"copy": gbps / the
    device-to-device copy's gbps (2 x nbytes moved), timed in the same run with CUDA events}. Each codec is
    called once (compilation, checks, output allocation), then its prepared launches are timed
    (``asyncpipe.timing.time_ms``), so host work and allocation are not in the figure."""
    from ..bf16 import bf16_bits
    from ..timing import gbps, time_ms

    k = 4096
    rows = max(1, nbytes // (2 * k))
    rng = np.random.default_rng(seed)
    x = cuda.to_device(bf16_bits(rng.standard_normal((rows, k), dtype=np.float32)))
    copy = _copy_gbps(x, reps)
    n = rows * k
    q8, s8 = quantize_mxfp8(x)
    p4, s4 = quantize_mxfp4(x)
    pn, sn, ts = quantize_nvfp4(x)
    runs = {
        "mxfp8_e4m3_quantize": (lambda: quantize_mxfp8(x, "e4m3"), 2 * n + n + n // 32),
        "mxfp8_e5m2_quantize": (lambda: quantize_mxfp8(x, "e5m2"), 2 * n + n + n // 32),
        "mxfp4_quantize": (lambda: quantize_mxfp4(x), 2 * n + n // 2 + n // 32),
        "nvfp4_quantize": (lambda: quantize_nvfp4(x, 1.0), 2 * n + n // 2 + n // 16),
        "nvfp4_quantize_with_amax": (lambda: quantize_nvfp4(x), 2 * n + 2 * n + n // 2 + n // 16),
        "mxfp8_e4m3_dequantize": (lambda: dequantize_mxfp8(q8, s8, "e4m3"), n + n // 32 + 2 * n),
        "mxfp4_dequantize": (lambda: dequantize_mxfp4(p4, s4), n // 2 + n // 32 + 2 * n),
        "nvfp4_dequantize": (lambda: dequantize_nvfp4(pn, sn, ts), n // 2 + n // 16 + 2 * n),
    }
    global _captured
    records = []
    for name, (fn, moved) in runs.items():
        _captured = []                                   # one call: compiles, checks, allocates its outputs once
        try:
            fn()
            launches = _captured
        finally:
            _captured = None
        ms = time_ms(lambda: [launch() for launch in launches], reps=reps)     # the kernels alone, same outputs
        rate = gbps(moved, ms)
        records.append({"kernel": name, "format": name.rsplit("_quantize", 1)[0].rsplit("_dequantize", 1)[0],
                        "shape": [rows, k], "bytes": 2 * n, "ms": ms, "gbps": rate, "copy_gbps": copy, "vs": {"copy": rate / copy}})
    return records


__all__ = ["quantize_mxfp8", "dequantize_mxfp8", "quantize_mxfp4", "dequantize_mxfp4", "quantize_nvfp4",
           "dequantize_nvfp4", "reference", "benchmark", "check_input", "check_scales", "check_fmt", "check_device"]
