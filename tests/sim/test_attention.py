"""asyncpipe.kernels.attention on the simulator, at tiny sizes with every protocol check on: the producer's TMA
ring, both consumers' wgmma (S from shared memory, P V with P in registers), the ping-pong named barriers, the
online softmax and the TMA-store epilogue, against the float64 reference. A block of keys past seqlen_k, a
causal mask with seqlen_q != seqlen_k (rows that see no key), grouped-query heads."""

import numpy as np
import pytest
from numba import cuda

from asyncpipe.bf16 import bf16_bits, bf16_to_float32
from asyncpipe.kernels.attention import attention, reference

pytestmark = pytest.mark.sim


@pytest.mark.parametrize("b, sq, sk, h, hkv, d, dtype, causal", [
    (1, 17, 20, 2, 1, 64, "bfloat16", False),   # one key block, mostly past seqlen_k; 111 rows past seqlen_q; GQA
    pytest.param(1, 20, 150, 1, 1, 64, "bfloat16", True, marks=pytest.mark.slow),  # two key blocks, causal
    (1, 130, 40, 1, 1, 64, "bfloat16", True),   # two query blocks, rows 0..89 see no key: O = 0, lse = -inf
    (1, 17, 140, 1, 1, 128, "float16", True),   # two 64-column boxes per row of Q, K, V, O; fp16 P and O
])
def test_attention_matches_float64(b, sq, sk, h, hkv, d, dtype, causal, rng):
    enc = bf16_bits if dtype == "bfloat16" else (lambda a: a.astype(np.float16))
    dec = bf16_to_float32 if dtype == "bfloat16" else (lambda a: a.astype(np.float32))
    q, k, v = (enc(rng.standard_normal(s).astype(np.float32)) for s in
               ((b, sq, h, d), (b, sk, hkv, d), (b, sk, hkv, d)))
    poison = np.full(q.shape, 0x7FC0, np.uint16) if dtype == "bfloat16" else np.full(q.shape, np.nan, np.float16)
    out = cuda.to_device(poison)                                       # NaN: every element must be written
    lse = cuda.to_device(np.full((b, h, sq), np.nan, np.float32))
    attention(cuda.to_device(q), cuda.to_device(k), cuda.to_device(v), causal=causal, out=out, lse=lse)
    o, got_lse = dec(out.copy_to_host()), lse.copy_to_host()
    want, want_lse = reference(dec(q), dec(k), dec(v), causal=causal)
    assert not np.isnan(o).any() and not np.isnan(got_lse).any()
    np.testing.assert_array_equal(np.isinf(got_lse), np.isinf(want_lse))
    finite = np.isfinite(want_lse)
    assert np.abs(got_lse[finite] - want_lse[finite]).max() < 1e-4
    assert np.abs(o - want).max() < 4 * (2.0 ** -7 if dtype == "bfloat16" else 2.0 ** -9)   # 16-bit P and O


@pytest.mark.parametrize("pingpong, overlap", [(False, False)])   # each switch alone: by hand, the same
def test_the_ablations_give_the_same_answer(pingpong, overlap, rng):
    """Without ping-pong, without the intra-warpgroup overlap, without both: two key blocks, causal."""
    q, k, v = (bf16_bits(rng.standard_normal(s).astype(np.float32)) for s in ((1, 20, 1, 64), (1, 150, 1, 64),
                                                                              (1, 150, 1, 64)))
    out, lse = attention(cuda.to_device(q), cuda.to_device(k), cuda.to_device(v), causal=True, pingpong=pingpong,
                         overlap=overlap)
    want, want_lse = reference(bf16_to_float32(q), bf16_to_float32(k), bf16_to_float32(v), causal=True)
    assert np.abs(bf16_to_float32(out.copy_to_host()) - want).max() < 4 * 2.0 ** -7
    assert np.abs(lse.copy_to_host() - want_lse).max() < 1e-4
