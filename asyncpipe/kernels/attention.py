"""``attention``: FlashAttention-3's forward pass on Hopper, O = softmax(Q K^T * scale) V and the row
log-sum-exp, with the warp-specialized ping-pong kernel of ``attention_kernel.py``.

    out, lse = attention(q, k, v, causal=True)

Layout as FlashAttention takes it: ``q`` (batch, seqlen_q, heads, head_dim), ``k`` and ``v`` (batch,
seqlen_k, heads_kv, head_dim) with heads_kv dividing heads (grouped-query attention; heads_kv = heads is
plain multi-head attention). bf16 or fp16, fp32 accumulation; head dims 64, 128, 256; any sequence
lengths (edges through TMA's zero fill and masks). ``causal`` aligns the last query with the last key, as
FlashAttention 2 and 3 do: query i sees keys j <= i + seqlen_k - seqlen_q. Returns ``out`` (q's shape and
type) and ``lse`` (batch, heads, seqlen_q) float32, the natural log of each row's sum of
exp(scale * q.k): -inf for a row that sees no key (its output is 0).

Inputs: PyTorch tensors (bf16 included: the CUDA array interface has no bf16, so a bf16 tensor is viewed
as int16, the same memory), or numba/CuPy device arrays: float16, or bfloat16 as its 16-bit patterns in
uint16/int16 (``dtype="bfloat16"``, the default for 16-bit integers). Every dimension but head_dim may be
strided (multiples of 16 bytes: TMA's rule); head_dim must be contiguous. Bad input raises
``AsyncpipeError`` (``UnsupportedDeviceError`` without a compute capability 9.0 GPU) before anything runs.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import cuda

from ..errors import AsyncpipeError, check
from ..host.plans import PlanCache, array_key, cached_tensor_map, option_key, run_plan
from ..jit_cache import jit
from . import attention_kernel as AK
from .checks import as_device_array, is_torch, torch_bits

API = "attention"
_SRC_TMA = "cuTensorMapEncodeTiled"
_DTYPES = {"float16": "f16", "bfloat16": "bf16"}
_BITS = {"uint16", "int16"}                # bf16 arrives as its bit patterns


def check_attention(q_shape, k_shape, v_shape, dtypes, strides, *, causal, smem_limit, stages=None):
    """Every rule of ``attention``'s inputs, with no GPU: shapes, element type names (after bf16 bit arrays
    are named "bfloat16"), strides in elements. Returns ``(batch, seqlen_q, seqlen_k, heads, heads_kv,
    head_dim, ab)``."""
    for name, shape in (("q", q_shape), ("k", k_shape), ("v", v_shape)):
        check(len(shape) == 4, API, f"{name} must be 4-D (batch, seqlen, heads, head_dim), as FlashAttention takes it",
              f"{len(shape)}-D of shape {tuple(shape)}")
    check(len(set(dtypes)) == 1, API, "q, k and v must have one element type", f"q {dtypes[0]}, k {dtypes[1]}, "
          f"v {dtypes[2]}")
    check(dtypes[0] in _DTYPES, API, "q, k, v must be bfloat16 or float16", dtypes[0])
    B, Sq, H, D = q_shape
    check(tuple(k_shape) == tuple(v_shape), API, "k and v must have one shape",
          f"k {tuple(k_shape)}, v {tuple(v_shape)}")
    Bk, Sk, Hkv, Dk = k_shape
    check(D in AK.HEAD_DIMS, API, f"head_dim must be one of {AK.HEAD_DIMS}", f"q's head_dim {D}")
    check(Dk == D, API, "k and v must have q's head_dim", f"q {D}, k {Dk}")
    check(Bk == B, API, "k and v must have q's batch", f"q {B}, k {Bk}")
    check(B >= 1 and Sq >= 1 and Sk >= 1 and H >= 1 and Hkv >= 1, API, "batch, sequence lengths and heads must be "
          "at least 1", f"q {tuple(q_shape)}, k {tuple(k_shape)}")
    check(H % Hkv == 0, API, "k's and v's heads must divide q's (grouped-query attention)", f"q {H}, k {Hkv}")
    check(isinstance(causal, (bool, np.bool_)), API, "causal must be True or False", repr(causal))
    for name, st in zip("qkvo", strides):
        check(st[3] == 1, API, f"{name}'s head_dim must be contiguous (stride 1)", f"strides {tuple(st)} (elements)")
        check(all(s % 8 == 0 for s in st[:3]), API, f"{name}'s strides must be multiples of 8 elements (16 bytes: "
              "TMA's global strides)", f"strides {tuple(st)} (elements)", _SRC_TMA)
    stages = AK.default_stages(D) if stages is None else stages
    check(isinstance(stages, (int, np.integer)) and not isinstance(stages, bool) and 1 <= stages <= 8, API,
          "stages (K/V blocks in the ring) must be an integer from 1 to 8", repr(stages))
    need = AK.shared_bytes(D, AK.block_n(D), stages) + (2 * stages + 1) * 8
    check(need <= smem_limit, API, f"Q, {stages} K/V stages and the barriers must fit the shared memory per block",
          f"{need} bytes for head_dim {D}, limit {smem_limit}", "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")
    return B, Sq, Sk, H, Hkv, D, _DTYPES[dtypes[0]]


def _view(name, x, dtype):
    """(numba device array of 16-bit elements, element type name) for ``x``."""
    if is_torch(x):
        import torch

        kinds = {torch.bfloat16: "bfloat16", torch.float16: "float16"}
        check(x.dtype in kinds, API, f"{name} must be bfloat16 or float16", str(x.dtype))
        check(x.is_cuda, API, f"{name} must be on a CUDA device", str(x.device))
        kind = kinds[x.dtype]
        return as_device_array(API, name, torch_bits(x)), kind
    a = as_device_array(API, name, x)
    if a.dtype.name in _BITS:
        check(dtype in (None, "bfloat16"), API, f"a 16-bit integer {name} holds bfloat16 bits (dtype='bfloat16')",
              repr(dtype))
        return a, "bfloat16"
    return a, a.dtype.name


def _strides(a) -> tuple:
    return tuple(s // a.dtype.itemsize for s in a.strides)


def attention(q, k, v, *, causal=False, softmax_scale=None, out=None, lse=None, dtype=None, stream=0,
              stages=None, pingpong=True, overlap=True):
    """O = softmax(q k^T * softmax_scale) v (see the module doc); returns ``(out, lse)``.

    ``softmax_scale``: default 1 / sqrt(head_dim). ``out``, ``lse``: arrays to write (q's shape and type;
    (batch, heads, seqlen_q) float32), allocated when None (torch tensors for torch inputs). ``dtype``:
    "bfloat16" for 16-bit integer arrays (the default). ``stream``: a numba or cuda.core stream.
    ``stages``: K/V blocks in flight (default: the pick of
    ``asyncpipe.tune.attention.attention_tuner(...).tune(problem)`` for this problem on this GPU when it was tuned,
    else ``attention_kernel.default_stages``: the most that fit; looked up when the call's plan is made, so a
    process keeps the plans it made before tuning).
    ``pingpong``, ``overlap``: False switches off one of FlashAttention-3's overlaps (for its ablation).
    """
    check(all(isinstance(x, (bool, np.bool_)) for x in (pingpong, overlap)), API, "pingpong and overlap must be "
          "True or False", f"pingpong={pingpong!r}, overlap={overlap!r}")
    torch_in = is_torch(q)
    if out is None or lse is None:
        qa, _ = _view("q", q, dtype)
        if len(qa.shape) != 4:
            _view("k", k, dtype)
            check(False, API, "q must be 4-D (batch, seqlen, heads, head_dim), as FlashAttention takes it",
                  f"{len(qa.shape)}-D of shape {tuple(qa.shape)}")
        B, Sq, H, _ = qa.shape
        if torch_in:
            import torch

            out = torch.empty_like(q) if out is None else out
            lse = torch.empty((B, H, Sq), dtype=torch.float32, device=q.device) if lse is None else lse
        else:
            out = cuda.device_array(qa.shape, qa.dtype) if out is None else out
            lse = cuda.device_array((B, H, Sq), np.float32) if lse is None else lse
    key = (array_key(q), array_key(k), array_key(v), array_key(out),
           array_key(lse), *option_key(bool(causal) if isinstance(causal, (bool, np.bool_)) else causal, softmax_scale,
                                       dtype, stages, pingpong, overlap), id(stream) if stream else 0)
    run_plan(_plans, key, lambda: _plan(q, k, v, out, lse, causal, softmax_scale, dtype, stream, stages, pingpong,
                                        overlap))
    return out, lse


_plans = PlanCache()


@functools.lru_cache(maxsize=None)
def _jit(head_dim, causal, ab, stages, pingpong=True, overlap=True):
    return jit(AK.make_kernel(head_dim=head_dim, stages=stages, causal=causal, ab=ab, pingpong=pingpong,
                              overlap=overlap), launch_bounds=AK.LAUNCH_BOUNDS)


def launch_parts(q, k, v, out, lse, causal=False, softmax_scale=None, dtype=None, stages=None, pingpong=True,
                 overlap=True) -> dict:
    """Everything one launch needs, every rule checked first: ``kernel``, ``grid``, ``block``, ``args`` (the
    tensor maps of q, k, v, out and the scalars), ``shared`` (dynamic shared memory) and ``problem`` (batch,
    seqlen_q, seqlen_k, heads, heads_kv). ``stages=None``: the pick of ``asyncpipe.tune.attention`` for this
    problem on this GPU when it was tuned, else ``attention_kernel.default_stages``. ``attention`` and its tuner
    both launch through it."""
    from ..host import device_info
    from ..spec.device import check_cc

    (qa, qt), (ka, kt), (va, vt), (oa, ot) = (_view(n, x, dtype) for n, x in
                                              (("q", q), ("k", k), ("v", v), ("out", out)))
    info = device_info(API)
    check_cc(info, API, (9, 0), "needs compute capability 9.0 (wgmma, TMA: sm_90a)")
    B, Sq, Sk, H, Hkv, D, ab = check_attention(qa.shape, ka.shape, va.shape, (qt, kt, vt), [_strides(a) for a in
                                               (qa, ka, va, oa)], causal=causal,
                                               smem_limit=info.max_shared_per_block_optin, stages=stages)
    problem = (B, Sq, Sk, H, Hkv)
    if stages is None:                           # the tuner's pick (asyncpipe.tune registers it), else the default
        from . import options

        picked = options.choose("attention", problem, dict(head_dim=D, causal=bool(causal), ab=ab))
        stages = picked["stages"] if picked else AK.default_stages(D)
    stages = int(stages)
    check(tuple(oa.shape) == tuple(qa.shape) and ot == qt, API, "out must have q's shape and element type",
          f"out {tuple(oa.shape)} {ot}, q {tuple(qa.shape)} {qt}")
    la = as_device_array(API, "lse", lse)
    check(tuple(la.shape) == (B, H, Sq) and la.dtype == np.float32 and la.is_c_contiguous(), API,
          "lse must be a contiguous float32 array of shape (batch, heads, seqlen_q)",
          f"{la.dtype.name} of shape {tuple(la.shape)}")
    scale = 1.0 / math.sqrt(D) if softmax_scale is None else softmax_scale
    check(isinstance(scale, (int, float, np.floating)) and math.isfinite(scale) and scale > 0, API,
          "softmax_scale must be a positive finite number", repr(softmax_scale))
    bn = AK.block_n(D)
    tdtype = "bfloat16" if ab == "bf16" else "float16"
    tma_q = cached_tensor_map(qa, (1, AK.BM, 1, AK.BOX_COLS), dtype=tdtype, swizzle="128B")
    tma_k = cached_tensor_map(ka, (1, bn, 1, AK.BOX_COLS), dtype=tdtype, swizzle="128B")
    tma_v = cached_tensor_map(va, (1, bn, 1, AK.BOX_COLS), dtype=tdtype, swizzle="128B")
    tma_o = cached_tensor_map(oa, (1, AK.BM // 2, 1, AK.BOX_COLS), dtype=tdtype, swizzle="128B")
    m_blocks = math.ceil(Sq / AK.BM)
    return dict(kernel=_jit(D, bool(causal), ab, stages, bool(pingpong), bool(overlap)), grid=m_blocks * H * B,
                block=AK.THREADS, shared=AK.shared_bytes(D, bn, stages), problem=problem, stages=stages,
                args=(tma_q, tma_k, tma_v, tma_o, la.reshape(la.size), np.int32(Sq), np.int32(Sk), np.int32(H),
                      np.int32(H // Hkv), np.int32(m_blocks), np.float32(scale * math.log2(math.e))))


def _plan(q, k, v, out, lse, causal, softmax_scale, dtype, stream, stages=None, pingpong=True, overlap=True):
    from ..host.launch import prepare_launch

    p = launch_parts(q, k, v, out, lse, causal, softmax_scale, dtype, stages, pingpong, overlap)
    return prepare_launch(p["kernel"], p["grid"], p["block"], *p["args"], shared_mem=p["shared"], stream=stream,
                          keep=p["args"][:4])


def reference(q, k, v, causal=False, softmax_scale=None):
    """float64 numpy O and lse of the same inputs (float arrays of the same shapes): what the tests compare with."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    B, Sq, H, D = q.shape
    Sk, Hkv = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(D) if softmax_scale is None else softmax_scale
    kh = np.repeat(k, H // Hkv, axis=2)
    vh = np.repeat(v, H // Hkv, axis=2)
    s = np.einsum("bqhd,bkhd->bhqk", q, kh) * scale
    if causal:
        visible = np.arange(Sk)[None, :] <= np.arange(Sq)[:, None] + (Sk - Sq)
        s = np.where(visible, s, -np.inf)
    mx = s.max(axis=-1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    e = np.exp(s - mx)
    total = e.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        o = np.einsum("bhqk,bkhd->bqhd", np.where(total > 0, e / total, 0.0), vh)
        lse = np.where(total[..., 0] > 0, np.log(total[..., 0]) + mx[..., 0], -np.inf)
    return o, lse


__all__ = ["API", "attention", "check_attention", "launch_parts", "reference", "AsyncpipeError"]
