"""The per-token FP8 quantizer of DeepGEMM-style GEMMs: bf16 -> e4m3 with one fp32 scale per 1 x 128 block.

    q, sa = quantize_fp8_rowwise_blocks(x)        # x: M x K bf16; q: M x K e4m3; sa: M x ceil(K/128) fp32

For each row ``m`` and block ``b`` (columns 128 b .. 128 b + 127, the last one clipped at K)::

    amax  = max(max |x[m, 128 b : 128 b + 128]|, AMAX_FLOOR)      (an all-zero block gets AMAX_FLOOR)
    scale = amax / 448                    sa[m, b], fp32 division (round to nearest)
    inv   = 448 / amax                    fp32 division (round to nearest)
    q     = e4m3_rn_satfinite(x * inv)    the fp32 product rounded once to nearest even, clamped to +-448

so ``q * sa`` reproduces ``x`` to e4m3's 4 significant bits. ``AMAX_FLOOR`` (2^-100, a bf16 value) keeps
``inv`` finite and ``scale`` a normal fp32 for a block of zeros (its codes are all 0, its scale 2^-100 / 448);
blocks with a smaller amax are still quantized to their own scale (DeepGEMM's reference clamps at 1e-4,
which would push blocks below 1e-4 into e4m3's subnormals: not done here). A NaN in a block makes its amax,
scale and every code of the block NaN (0x7F): ``amax`` is the integer maximum of the bf16 magnitudes, which
orders NaN above infinity; an infinity makes the scale infinite, ``inv`` 0, finite elements' codes 0 and its
own code NaN (inf * 0). ``quantize_reference`` is the same arithmetic in numpy (``asyncpipe.formats.minifloat``
does the e4m3 rounding); the kernel is bit-exact against it.

**The scales' layout** (DeepGEMM's "TMA-aligned, transposed" layout, what ``fp8_gemm`` takes): ``sa`` is an
M x KB array (KB = ceil(K / 128)) stored K-block-major: element (m, b) at ``b * ld + m`` with ``ld`` = M
rounded up to a multiple of 4 (``scale_ld``), so the 128 scales of one k-block and 128 rows are contiguous
(one 512-byte TMA box) and the row pitch ``ld * 4`` is a multiple of 16 bytes (TMA's global-stride rule).
Its strides are (1, ld) elements; ``sa_blocks(sa)`` is the KB x ld buffer itself. The columns M .. ld - 1 are
never written.

**The kernel** is bandwidth-bound: a warp takes one row's 512 columns (four 128-blocks; 8 lanes each), a lane
reads its 16 bf16 in two 16-byte loads, the 8 lanes of a block reduce the amax with three ``shfl.xor``, and
the lane writes its 16 codes in one 16-byte store (``cvt.rn.satfinite.e4m3x2.f32``, two values per
instruction: ``F2FP.SATFINITE.E4M3.F32.PACK_AB``); lane 0 of each block writes the scale. A grid of
(row blocks, 512-column groups) walks the rows. K must be a multiple of 16 (16-byte rows of codes), x C-contiguous
and 16-byte aligned.

The e4m3 conversion is the primitive ``ptx.cvt_rn_satfinite_e4m3x2_f32`` (its shim in ``ptx_shims/convert.cu``);
the bit cast from a bf16 pattern to float32 is a numba intrinsic (a register move, no instruction).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import cuda, float32, int32, uint32

from ..bf16 import bf16_to_float32
from ..errors import check
from ..formats.minifloat import E4M3, encode
from ..jit_cache import jit
from .. import ptx
from ..ptx._registry import simulating
from .vector import load_x4, store_x4

API = "quantize_fp8_rowwise_blocks"

BLOCK_K = 128                       # elements of K per scale: DeepGEMM's 1 x 128 blocks
E4M3_MAX = 448.0                    # OCP OFP8 E4M3's largest finite value (S.1111.110)
AMAX_FLOOR_BITS = 0x0D80            # bf16 bits of 2^-100: (127 - 100) << 7
AMAX_FLOOR = 2.0 ** -100
BF16_MAG_MASK = 0x7FFF              # bf16 bits without the sign
VECTOR_BYTES = 16                   # one LDG.128 / STG.128
ELEMS_PER_LANE = 16                 # 16 bf16 in (two 16-byte loads), 16 codes out (one 16-byte store)
LANES_PER_BLOCK = BLOCK_K // ELEMS_PER_LANE          # 8 lanes share a block's amax
BLOCKS_PER_WARP = 32 // LANES_PER_BLOCK              # 4: a warp covers 512 columns of one row
WARP_COLS = BLOCKS_PER_WARP * BLOCK_K
THREADS = 256                       # 8 warps per block
WARPS = THREADS // 32
BLOCKS_PER_SM = 8                   # persistent grid: 64 warps per SM (a 2048-thread SM's limit)
K_MULTIPLE = ELEMS_PER_LANE         # K % 16 == 0: each lane's 16 codes are one aligned 16-byte store
SCALE_LD_MULTIPLE = VECTOR_BYTES // 4                # the scales' row pitch: a multiple of 16 bytes

assert AMAX_FLOOR == float(bf16_to_float32(np.array([AMAX_FLOOR_BITS], np.uint16))[0])
assert LANES_PER_BLOCK * BLOCKS_PER_WARP == 32


def scale_ld(m: int) -> int:
    """The scales' row pitch in elements: M rounded up to a multiple of 4 (16 bytes)."""
    return -(-m // SCALE_LD_MULTIPLE) * SCALE_LD_MULTIPLE


def k_blocks(k: int) -> int:
    return -(-k // BLOCK_K)


# ------------------------------------------------------------------------------------------------
# The bit cast: a numba intrinsic on the GPU, numpy in the simulator
# ------------------------------------------------------------------------------------------------
def _gpu_intrinsics():
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    @intrinsic
    def f32_from_bits(typingctx, bits):
        """The float32 whose bit pattern is the low 32 bits of the integer ``bits`` (numba widens uint32
        arithmetic to 64 bits; a register move, no instruction)."""
        if not isinstance(bits, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            word = context.cast(builder, args[0], sig.args[0], types.uint32)
            return builder.bitcast(word, ir.FloatType())

        return types.float32(bits), codegen

    return f32_from_bits


def _f32_from_bits_sim(bits):
    return np.array([int(bits) & 0xFFFFFFFF], np.uint32).view(np.float32)[0]


f32_from_bits = _f32_from_bits_sim if simulating() else _gpu_intrinsics()
cvt_e4m3x2 = ptx.cvt_rn_satfinite_e4m3x2_f32


# ------------------------------------------------------------------------------------------------
# The kernel. x: M x K bf16 as uint32 pairs (flat, row-major); q: M x K codes as uint32 quads (flat);
# sa: the KB x ld scales (flat). Grid (row blocks, ceil(K / 512)): block (i, j) has 8 warps that walk rows
# i * 8 + w, then gridDim.x * 8 further, through column group j (no division anywhere).
# ------------------------------------------------------------------------------------------------
@cuda.jit(device=True, inline="always")
def _magnitude(w):
    """The larger bf16 magnitude (bits, sign cleared) of the pair in ``w``, as int32."""
    return int32(max(w & uint32(BF16_MAG_MASK), (w >> uint32(16)) & uint32(BF16_MAG_MASK)))


@cuda.jit(device=True, inline="always")
def _quad(w_lo, w_hi, inv):
    """Four bf16 (two words, lowest element in w_lo's low half) times ``inv`` -> four e4m3 codes in one
    word, lowest element in the lowest byte."""
    x0 = f32_from_bits((w_lo & uint32(0xFFFF)) << uint32(16)) * inv
    x1 = f32_from_bits(w_lo & uint32(0xFFFF0000)) * inv
    x2 = f32_from_bits((w_hi & uint32(0xFFFF)) << uint32(16)) * inv
    x3 = f32_from_bits(w_hi & uint32(0xFFFF0000)) * inv
    return cvt_e4m3x2(x1, x0) | (cvt_e4m3x2(x3, x2) << uint32(16))


def quantize_kernel(x, q, sa, M, K, ld):
    lane = cuda.threadIdx.x % 32
    sub = lane // LANES_PER_BLOCK                    # the warp's block 0..3
    part = lane % LANES_PER_BLOCK                    # 16 columns of it
    kb = cuda.blockIdx.y * BLOCKS_PER_WARP + sub     # grid y: the 512-column group
    col = kb * BLOCK_K + part * ELEMS_PER_LANE
    row = cuda.blockIdx.x * WARPS + cuda.threadIdx.x // 32
    while row < M:                                   # uniform in the warp: the shuffles see every lane
        valid = col < K                              # K % 16 == 0: a lane's 16 columns are all in or all out
        w0 = w1 = w2 = w3 = w4 = w5 = w6 = w7 = uint32(0)
        if valid:
            word = (row * K + col) // 2              # 16-byte aligned: K and col are multiples of 16
            w0, w1, w2, w3 = load_x4(x, word)
            w4, w5, w6, w7 = load_x4(x, word + 4)
        # ---- the block's amax: the 8 lanes' integer maximum of the bf16 magnitudes (NaN above inf)
        mag = max(max(max(_magnitude(w0), _magnitude(w1)), max(_magnitude(w2), _magnitude(w3))),
                  max(max(_magnitude(w4), _magnitude(w5)), max(_magnitude(w6), _magnitude(w7))))
        mag = max(mag, cuda.shfl_xor_sync(0xFFFFFFFF, mag, 1))
        mag = max(mag, cuda.shfl_xor_sync(0xFFFFFFFF, mag, 2))
        mag = max(mag, cuda.shfl_xor_sync(0xFFFFFFFF, mag, 4))
        amax = f32_from_bits(uint32(max(mag, int32(AMAX_FLOOR_BITS))) << uint32(16))
        if valid:
            inv = float32(E4M3_MAX) / amax
            store_x4(q, (row * K + col) // 4, _quad(w0, w1, inv), _quad(w2, w3, inv), _quad(w4, w5, inv),
                     _quad(w6, w7, inv))
            if part == 0:
                sa[kb * ld + row] = amax / float32(E4M3_MAX)
        row += cuda.gridDim.x * WARPS


@functools.lru_cache(maxsize=None)
def _jit():
    return jit(quantize_kernel)


def kernel_argtypes():
    """numba argument types: x (uint32 bf16 pairs), q (uint32 code quads), sa (float32), M, K, ld."""
    from numba import types

    return (types.uint32[::1], types.uint32[::1], types.float32[::1], types.int32, types.int32, types.int32)


# ------------------------------------------------------------------------------------------------
# Host: checks, the launch, the numpy reference
# ------------------------------------------------------------------------------------------------
_BF16_BITS = ("uint16", "int16")


def check_quantize(shape, dtype, contiguous, address) -> tuple[int, int]:
    """Every rule of the quantizer's input, with no GPU: ``dtype`` a numpy name ("bfloat16" for a torch
    tensor), ``address`` its device pointer. Returns ``(M, K)``."""
    check(len(shape) == 2, API, "x must be 2-D (M x K)", f"{len(shape)}-D of shape {tuple(shape)}")
    check(dtype in _BF16_BITS + ("bfloat16",), API, "x must hold bfloat16 (a torch bfloat16 tensor, or its bits in "
          "a uint16/int16 array)", dtype)
    M, K = shape
    check(M >= 1, API, "M (x's rows) must be at least 1", M)
    check(K >= K_MULTIPLE and K % K_MULTIPLE == 0, API, f"K (x's columns) must be a positive multiple of {K_MULTIPLE} "
          f"(each lane writes 16 codes in one 16-byte store)", f"K = {K}")
    check(contiguous, API, "x must be C-contiguous (row-major, unit stride)", f"shape {tuple(shape)}")
    check(address % VECTOR_BYTES == 0, API, f"x must start on a {VECTOR_BYTES}-byte boundary (16-byte vector loads)",
          f"address {address:#x} ({address % VECTOR_BYTES} bytes past one)")
    return M, K


class StridedView:
    """An object exposing a CUDA array interface with given shape and byte strides over ``owner``'s memory
    (``cuda.as_cuda_array`` of it is a strided device array view; it keeps ``owner`` alive)."""

    def __init__(self, owner, shape, strides, typestr):
        base = owner.__cuda_array_interface__
        self.owner = owner
        self.__cuda_array_interface__ = {"shape": tuple(shape), "strides": tuple(strides), "typestr": typestr,
                                         "data": (base["data"][0], False), "version": 3}


def scales_view(blocks, m: int):
    """The M x KB view (strides (1, ld) elements) of a KB x ld scale buffer (a numba/CuPy device array)."""
    kb, ld = blocks.shape
    return cuda.as_cuda_array(StridedView(blocks, (m, kb), (4, 4 * ld), "<f4"))


def quantize_fp8_rowwise_blocks(x, *, stream=0):
    """``(q, sa)`` of the M x K bf16 ``x`` (see the module doc): ``q`` M x K e4m3 codes (a uint8 device array;
    torch.float8_e4m3fn for a torch tensor), ``sa`` M x ceil(K/128) float32 scales stored K-block-major
    (strides (1, ld) elements, ld = ``scale_ld(M)``: what ``fp8_gemm`` takes as its A scales)."""
    from .checks import as_device_array, is_torch, torch_bits

    torch_in = is_torch(x)
    if torch_in:
        import torch

        check(x.dtype == torch.bfloat16, API, "x must hold bfloat16 (a torch bfloat16 tensor, or its bits in a "
              "uint16/int16 array)", str(x.dtype))
        check(x.is_cuda, API, "x must be on a CUDA device", str(x.device))
        xa, dtype = as_device_array(API, "x", torch_bits(x)), "bfloat16"
    else:
        xa = as_device_array(API, "x", x)
        dtype = xa.dtype.name
    address = xa.__cuda_array_interface__["data"][0]
    M, K = check_quantize(tuple(xa.shape), dtype, xa.ndim != 2 or xa.is_c_contiguous(), address)
    kb, ld = k_blocks(K), scale_ld(M)
    if torch_in:
        q_t = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
        blocks_t = torch.empty((kb, ld), dtype=torch.float32, device=x.device)
        q = as_device_array(API, "q", torch_bits(q_t))
        blocks = as_device_array(API, "sa", blocks_t)
    else:
        q = cuda.device_array((M, K), np.uint8, stream=stream or 0)
        blocks = cuda.device_array((kb, ld), np.float32, stream=stream or 0)
    _launch(xa, q, blocks, M, K, ld, stream)
    if torch_in:
        return q_t, blocks_t.t()[:M]
    return q, scales_view(blocks, M)


def _launch(xa, q, blocks, M, K, ld, stream):
    from ..host import device_info
    from ..host.launch import prepare_launch

    groups = math.ceil(K / WARP_COLS)
    rows = max(1, min(math.ceil(M / WARPS), device_info(API).sm_count * BLOCKS_PER_SM // groups))
    words = xa.reshape(M * K).view(np.uint32)
    prepare_launch(_jit(), (rows, groups), THREADS, words, q.reshape(M * K).view(np.uint32),
                   blocks.reshape(blocks.size), np.int32(M), np.int32(K), np.int32(ld), stream=stream, _once=True)()


def quantize_reference(x_bits) -> tuple[np.ndarray, np.ndarray]:
    """numpy ``(codes, sa)`` of an M x K bf16 array given as uint16 bits: codes M x K uint8, sa M x KB float32
    (plain row-major), by the module doc's arithmetic; what the kernel is compared with, bit for bit."""
    bits = np.asarray(x_bits).view(np.uint16)
    M, K = bits.shape
    kb = k_blocks(K)
    padded = np.zeros((M, kb * BLOCK_K), np.uint16)
    padded[:, :K] = bits
    mag = (padded & BF16_MAG_MASK).reshape(M, kb, BLOCK_K).max(axis=2)
    amax = bf16_to_float32(np.maximum(mag, AMAX_FLOOR_BITS).astype(np.uint16))
    sa = amax / np.float32(E4M3_MAX)
    inv = np.float32(E4M3_MAX) / amax
    x = bf16_to_float32(padded).reshape(M, kb, BLOCK_K)
    with np.errstate(invalid="ignore"):
        q = (x * inv[:, :, None]).astype(np.float32)
    codes = encode(q.reshape(M, kb * BLOCK_K)[:, :K], E4M3, saturate=True)
    return codes, sa.astype(np.float32)


def dequantize_reference(codes, sa) -> np.ndarray:
    """float64 values of e4m3 ``codes`` (M x K) times their 1 x 128 block scales ``sa`` (M x KB, any strides)."""
    from ..formats.minifloat import decode

    codes = np.asarray(codes)
    sa = np.asarray(sa, np.float64)
    K = codes.shape[1]
    return decode(codes, E4M3).astype(np.float64) * np.repeat(sa, BLOCK_K, axis=1)[:, :K]


__all__ = ["API", "quantize_fp8_rowwise_blocks", "quantize_reference", "dequantize_reference", "scale_ld",
           "k_blocks", "scales_view", "check_quantize"]
