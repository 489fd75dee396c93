"""How the FP8 wgmma adds, as measured on the H200, and the error bound of ``fp8_gemm`` that follows from it.

**The tensor core's sum** (``scripts/fp8_accumulator_probe.py``, 2026-12-02; checked again by the GPU test
``test_accumulator_model_gpu``): one ``wgmma ... k32 .e4m3`` forms each output as one sum of 33 terms, the
incoming accumulator and the 32 exact products. Every term is first truncated toward zero to a multiple of
2^(E - 13), E the exponent of the largest term (|t| in [2^E, 2^(E+1))); the truncated terms then add exactly.
So a term smaller than 2^-13 of the largest is lost, a 1.5-ulp term keeps 1 ulp, a -0.75-ulp term becomes 0
(toward zero, not down), and products added after a large one are cut against it for the rest of the chain
(the accumulator is a term of every later step). That is DeepSeek's "about 14 bits" in detail, and why the
kernel restarts the chain every 128 of K and promotes it into fp32 registers.

**The bound.** Truncating a term loses less than one unit, 2^(E-13), and never more than the term, so one k32
step is off by at most sum over its terms of min(|t|, 2^(E-13)). Over a 128-long k-block the four steps add up
(the accumulator term taken at the exact partial sum, inflated 2^-6 for the steps' own error; a larger E is
only a looser bound); the block sum is then scaled by sa * sb in fp32 (relative 2^-24 for the scale product and
for each FFMA of the promotion, K/128 of them) and the result rounded to bf16 (2^-8 of its magnitude).
"""

from __future__ import annotations

import numpy as np

MANTISSA_BITS = 13          # the fraction bits a term keeps below the largest term's leading bit
STEP_K = 32                 # products per wgmma (k32 for 8-bit inputs)
ACC_INFLATE = 1.0 + 2.0 ** -6
FP32_ULP = 2.0 ** -24
BF16_HALF_ULP = 2.0 ** -8


def _unit(largest):
    """2^(E - 13) for the largest |term| (0 where it is 0)."""
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(largest))
    return np.where(largest > 0, np.exp2(e - MANTISSA_BITS), 0.0)


def step_model(acc, products):
    """The measured k32 step: ``acc`` (...) plus ``products`` (..., 32) with every term truncated toward zero to
    a multiple of 2^(E - 13). float64 in and out (the sums are exact in float64 for e4m3 products)."""
    terms = np.concatenate([np.asarray(acc, np.float64)[..., None], np.asarray(products, np.float64)], axis=-1)
    unit = _unit(np.abs(terms).max(axis=-1))[..., None]
    safe = np.where(unit > 0, unit, 1.0)
    return (np.trunc(terms / safe) * safe).sum(axis=-1)


def block_model(a_vals, b_vals):
    """One k-block of the kernel (a fresh chain of k32 steps): a_vals R x k, b_vals C x k (e4m3 values, k <= 128,
    zero-padded to whole steps like TMA's fill) -> R x C as the tensor core sums them."""
    k = a_vals.shape[1]
    pad = -k % STEP_K
    a = np.pad(np.asarray(a_vals, np.float64), ((0, 0), (0, pad)))
    b = np.pad(np.asarray(b_vals, np.float64), ((0, 0), (0, pad)))
    acc = np.zeros((a.shape[0], b.shape[0]))
    for s in range(0, a.shape[1], STEP_K):
        acc = step_model(acc, a[:, None, s:s + STEP_K] * b[None, :, s:s + STEP_K])
    return acc


def block_error_bound(a_vals, b_vals):
    """R x C bound of |block_model - exact| for one k-block, without running the model (see the module doc)."""
    k = a_vals.shape[1]
    pad = -k % STEP_K
    a = np.pad(np.asarray(a_vals, np.float64), ((0, 0), (0, pad)))
    b = np.pad(np.asarray(b_vals, np.float64), ((0, 0), (0, pad)))
    partial = np.zeros((a.shape[0], b.shape[0]))
    bound = np.zeros_like(partial)
    for s in range(0, a.shape[1], STEP_K):
        p = a[:, None, s:s + STEP_K] * b[None, :, s:s + STEP_K]
        acc = np.abs(partial) * ACC_INFLATE
        unit = _unit(np.maximum(np.abs(p).max(axis=-1), acc))
        bound += np.minimum(acc, unit) + np.minimum(np.abs(p), unit[..., None]).sum(axis=-1)
        partial += p.sum(axis=-1)
    return bound


def gemm_model(a_vals, sa, b_vals, sb, block=128):
    """D as the kernel forms it under the measured model: block sums by ``block_model``, promoted with fp32
    scales (sa * sb rounded to fp32, then one fused multiply-add per block), rounded to bf16. float32 M x N
    (bf16 values). For the GPU test that counts how many outputs the model gets bit for bit."""
    from ..bf16 import bf16_bits, bf16_to_float32

    a = np.asarray(a_vals, np.float64)
    b = np.asarray(b_vals, np.float64)
    N, K = b.shape
    col_block = np.arange(N) // block
    acc = np.zeros((a.shape[0], N), np.float32)
    for j in range(-(-K // block)):
        ks = slice(j * block, min(K, (j + 1) * block))
        scale = np.asarray(sa, np.float32)[:, j][:, None] * np.asarray(sb, np.float32)[col_block, j][None, :]
        blk = block_model(a[:, ks], b[:, ks])                  # exact in fp32 (at most 20 significant bits)
        acc = (acc.astype(np.float64) + blk * scale.astype(np.float64)).astype(np.float32)   # the FFMA
    return bf16_to_float32(bf16_bits(acc))


def error_bound(a_vals, sa, b_vals, sb, rows, block=128):
    """The bound of |fp8_gemm - float64 reference| for ``rows`` of D (float64, len(rows) x N): e4m3 values (not
    codes) of A (M x K) and B (N x K), fp32 scales sa (M x KB), sb (ceil(N/128) x KB). Costs len(rows) x N x K
    products: the tests take every row of small problems and a sample of large ones."""
    a = np.asarray(a_vals, np.float64)[rows]
    b = np.asarray(b_vals, np.float64)
    N, K = b.shape
    col_block = np.arange(N) // block
    acc_bound = np.zeros((len(rows), N))
    ref = np.zeros((len(rows), N))
    absolute = np.zeros((len(rows), N))
    for j in range(-(-K // block)):
        ks = slice(j * block, min(K, (j + 1) * block))
        scale = np.asarray(sa, np.float64)[rows, j][:, None] * np.asarray(sb, np.float64)[col_block, j][None, :]
        ref += scale * (a[:, ks] @ b[:, ks].T)
        acc_bound += np.abs(scale) * block_error_bound(a[:, ks], b[:, ks])
        absolute += np.abs(scale) * (np.abs(a[:, ks]) @ np.abs(b[:, ks]).T)
    blocks = -(-K // block)
    total = acc_bound + 2 * blocks * FP32_ULP * (absolute + acc_bound)   # sa * sb's rounding, each block's FFMA
    return BF16_HALF_ULP * (np.abs(ref) + total) + total


__all__ = ["MANTISSA_BITS", "step_model", "block_model", "block_error_bound", "gemm_model", "error_bound"]
