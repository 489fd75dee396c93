"""asyncpipe.kernels.attention: FlashAttention-3's forward kernel. Offline: its SASS (HGMMA of both GEMMs, the
register hand-over, TMA in and out, nothing in local memory) and every input rule's message; on the GPU:
against a float64 reference on fresh random data at the issue's sequence lengths, head dims, causal and not,
GQA, bf16 and fp16, with torch's SDPA error on the same data as the bar."""

import math

import numpy as np
import pytest
from numba import cuda

from asyncpipe.bf16 import bf16_bits, bf16_to_float32
from asyncpipe.errors import AsyncpipeError
from asyncpipe.kernels import attention_kernel as AK
from asyncpipe.ptx import wgmma as W
from asyncpipe.kernels.attention import attention, check_attention, reference
from tests.sass import assert_sass

SMEM = 232448                                   # the H200's opt-in shared memory per block


@pytest.mark.sass
@pytest.mark.parametrize("head_dim, causal, ab", [pytest.param(64, False, "bf16", marks=pytest.mark.slow),
                                                  (128, True, "bf16"), (256, False, "f16")])
def test_kernel_sass(head_dim, causal, ab):
    bn = AK.block_n(head_dim)
    t = ".BF16" if ab == "bf16" else ""           # ptxas prints f16 HGMMA without a type suffix
    cubin = assert_sass(AK.make_kernel(head_dim=head_dim, causal=causal, ab=ab), AK.kernel_argtypes(),
                        has=(f"HGMMA.64x{bn}x16.F32{t}", f"HGMMA.64x{head_dim}x16.F32{t}", "USETMAXREG.DEALLOC",
                             "USETMAXREG.TRY_ALLOC", "UTMALDG.4D", "UTMASTG.4D", "MUFU.EX2", "SHFL.BFLY",
                             "BAR.ARV", f"F2FP.{ab.upper()}.F32.PACK_AB"),
                        lacks=("CALL", "LDL", "STL"), launch_bounds=AK.LAUNCH_BOUNDS)
    # nothing in local memory, head dim 256 included (O alone is 128 of a consumer's 240 registers there; before
    # the one-MUFU softmax, 19837d4, ptxas parked up to 32 bytes of loop-invariant values in local memory)
    assert cubin.resources.local == 0 and not cubin.spills
    # the softmax of a key block: one MUFU.EX2 per score and two for the rescale factors, with no fix-up around
    # them (the non-ftz ex2 adds a FSETP and two FMUL each); the masks' per-score compares sit in one branch
    loop = key_block_loop(cubin)
    assert sum(op.startswith("MUFU.EX2") for op in loop) == W.accumulators(bn) + 2
    assert sum(op.startswith("FSETP") for op in loop) <= 4
    # both GEMMs of a key block: S = Q K^T in head_dim / 16 k-steps, P V in block_n / 16; each twice (S: the
    # peeled first round and the loop; P V: the loop and the peeled last round)
    s_steps, pv_steps = head_dim // 16, bn // 16
    if bn == head_dim:                          # head dim 128: both GEMMs are m64n128k16
        assert cubin.count(f"HGMMA.64x{bn}x16.F32{t}") == 2 * (s_steps + pv_steps)
    else:
        assert cubin.count(f"HGMMA.64x{bn}x16.F32{t}") == 2 * s_steps
        assert cubin.count(f"HGMMA.64x{head_dim}x16.F32{t}") == 2 * pv_steps
    # not serialized: one WARPGROUP.ARRIVE per wgmma fence of the source (3), none inserted by ptxas before each
    # HGMMA (what it does, warning C7519, when a wgmma sits on a path it cannot prove warpgroup-uniform)
    assert cubin.count("WARPGROUP.ARRIVE") == 3
    # compiled for (384, 1): 168 registers at launch; setmaxnreg moves them (24 producer, 240 consumers)
    assert cubin.resources.registers == 168


def key_block_loop(cubin) -> list[str]:
    """The opcodes of the consumers' loop (the widest conditional backward branch: ``Cubin.main_loop``)."""
    loop = [i.opcode for i in cubin.main_loop(conditional=True)]
    assert any(op.startswith("HGMMA") for op in loop), "the widest conditional loop holds no HGMMA"
    return loop


def shapes(q=(1, 17, 2, 64), k=(1, 20, 2, 64), v=None):
    return q, k, v or k


def strides(*shapes_):
    return [tuple(int(np.prod(s[i + 1:])) for i in range(4)) for s in shapes_]


def check(q, k, v, dtypes=("bfloat16",) * 3, causal=False, st=None, smem=SMEM, stages=None):
    return check_attention(q, k, v, dtypes, st or strides(q, k, v, q), causal=causal, smem_limit=smem,
                           stages=stages)


def test_a_valid_problem_passes():
    assert check(*shapes()) == (1, 17, 20, 2, 2, 64, "bf16")
    assert check((2, 5, 8, 128), (2, 9, 2, 128), (2, 9, 2, 128), ("float16",) * 3, causal=True)[-1] == "f16"


@pytest.mark.parametrize("args, match", [
    (dict(q=(1, 17, 64)), r"q must be 4-D \(batch, seqlen, heads, head_dim\).*got 3-D of shape \(1, 17, 64\)"),
    (dict(dtypes=("bfloat16", "float16", "bfloat16")),
     r"q, k and v must have one element type, got q bfloat16, k float16"),
    (dict(dtypes=("float32",) * 3), r"q, k, v must be bfloat16 or float16, got float32"),
    (dict(q=(1, 17, 2, 96), k=(1, 20, 2, 96)), r"head_dim must be one of \(64, 128, 256\), got q's head_dim 96"),
    (dict(k=(1, 20, 2, 128)), r"k and v must have q's head_dim, got q 64, k 128"),
    (dict(v=(1, 21, 2, 64)), r"k and v must have one shape, got k \(1, 20, 2, 64\), v \(1, 21, 2, 64\)"),
    (dict(k=(2, 20, 2, 64)), r"k and v must have q's batch, got q 1, k 2"),
    (dict(q=(1, 17, 3, 64)), r"k's and v's heads must divide q's \(grouped-query attention\), got q 3, k 2"),
    (dict(q=(1, 0, 2, 64)), r"batch, sequence lengths and heads must be at least 1"),
    (dict(causal=1), r"causal must be True or False, got 1"),
    (dict(stages=0), r"stages \(K/V blocks in the ring\) must be an integer from 1 to 8, got 0"),
    (dict(stages=2.0), r"stages \(K/V blocks in the ring\) must be an integer from 1 to 8, got 2.0"),
    (dict(q=(1, 17, 2, 128), k=(1, 20, 2, 128), stages=4),
     r"Q, 4 K/V stages and the barriers must fit the shared memory per block \[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN\], got 296008 bytes for head_dim 128, "
     r"limit 232448"),
])
def test_bad_input_is_named(args, match):
    q, k, v = shapes(args.pop("q", (1, 17, 2, 64)), args.pop("k", (1, 20, 2, 64)), args.pop("v", None))
    with pytest.raises(AsyncpipeError, match=r"^attention: " + match):
        check(q, k, v, **args)


def test_default_stages_fill_the_h200s_shared_memory():
    """The most stages that fit 227 KB, up to 4: one more would not fit (head dims 128 and 256)."""
    for d in AK.HEAD_DIMS:
        n = AK.default_stages(d)
        assert check((1, 17, 2, d), (1, 20, 2, d), (1, 20, 2, d), stages=n)[-2] == d
        if n < 4:
            with pytest.raises(AsyncpipeError, match="must fit the shared memory per block"):
                check((1, 17, 2, d), (1, 20, 2, d), (1, 20, 2, d), stages=n + 1)


def test_strides_follow_tma():
    q, k, v = shapes()
    good = strides(q, k, v, q)
    with pytest.raises(AsyncpipeError, match=r"q's head_dim must be contiguous \(stride 1\), got strides"):
        check(q, k, v, st=[(2176, 128, 64, 2), *good[1:]])
    with pytest.raises(AsyncpipeError, match=r"k's strides must be multiples of 8 elements \(16 bytes: TMA's global "
                                             r"strides\) \[cuTensorMapEncodeTiled\], got strides \(2560, 132, 64, 1\)"):
        check(q, k, v, st=[good[0], (2560, 132, 64, 1), *good[2:]])
    with pytest.raises(AsyncpipeError, match=r"must fit the shared memory per block.*limit 100000"):
        check((1, 17, 2, 256), (1, 20, 2, 256), (1, 20, 2, 256), smem=100000)


def test_host_arrays_are_refused_before_the_gpu_is_asked():
    x = np.zeros((1, 17, 2, 64), np.uint16)
    with pytest.raises(AsyncpipeError, match=r"attention: q must be a CUDA device array"):
        attention(x, x, x)
    with pytest.raises(AsyncpipeError, match=r"attention: pingpong and overlap must be True or False, got "
                                             r"pingpong=1, overlap=True"):
        attention(x, x, x, pingpong=1)


def test_the_reference_is_softmax_attention():
    """The float64 reference against a direct loop, GQA and causal with seqlen_q != seqlen_k, a row with no key."""
    rng = np.random.default_rng(3)
    q, k, v = rng.standard_normal((1, 5, 4, 8)), rng.standard_normal((1, 3, 2, 8)), rng.standard_normal((1, 3, 2, 8))
    o, lse = reference(q, k, v, causal=True)
    for h in range(4):
        for i in range(5):
            keys = [j for j in range(3) if j <= i + 3 - 5]
            if not keys:
                assert np.all(o[0, i, h] == 0) and lse[0, h, i] == -np.inf
                continue
            s = np.array([q[0, i, h] @ k[0, j, h // 2] / math.sqrt(8) for j in keys])
            w = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
            np.testing.assert_allclose(o[0, i, h], sum(wj * v[0, j, h // 2] for wj, j in zip(w, keys)))
            np.testing.assert_allclose(lse[0, h, i], np.log(np.exp(s).sum()))


# ---------------------------------------------------------------------------------------------
# On the GPU
# ---------------------------------------------------------------------------------------------
def random_inputs(rng, b, sq, sk, h, hkv, d, dtype):
    x = [rng.standard_normal(shape).astype(np.float32) for shape in ((b, sq, h, d), (b, sk, hkv, d), (b, sk, hkv, d))]
    if dtype == "bfloat16":
        bits = [bf16_bits(a) for a in x]
        return bits, [bf16_to_float32(a) for a in bits]
    halves = [a.astype(np.float16) for a in x]
    return halves, [a.astype(np.float32) for a in halves]


def run(rng, b, sq, sk, h, hkv, d, dtype, causal):
    (q, k, v), (qf, kf, vf) = random_inputs(rng, b, sq, sk, h, hkv, d, dtype)
    poison = np.full(q.shape, 0x7FC0, np.uint16) if dtype == "bfloat16" else np.full(q.shape, np.nan, np.float16)
    out = cuda.to_device(poison)
    lse = cuda.to_device(np.full((b, h, sq), np.nan, np.float32))
    attention(cuda.to_device(q), cuda.to_device(k), cuda.to_device(v), causal=causal, out=out, lse=lse)
    o = out.copy_to_host()
    o = bf16_to_float32(o) if dtype == "bfloat16" else o.astype(np.float32)
    want_o, want_lse = reference(qf, kf, vf, causal=causal)
    return o, lse.copy_to_host(), want_o, want_lse


CASES = [  # batch, seqlen_q, seqlen_k, heads, heads_kv
    (1, 1, 1, 1, 1), (2, 17, 17, 3, 3), (1, 128, 128, 2, 1), (1, 1000, 1000, 2, 2), (1, 4097, 4097, 1, 1),
    (2, 17, 1000, 4, 2), (1, 1000, 17, 2, 2), (1, 128, 4097, 8, 2),
]


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", AK.HEAD_DIMS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_attention_against_float64_gpu(case, head_dim, causal, dtype, rng):
    b, sq, sk, h, hkv = case
    o, lse, want_o, want_lse = run(rng, b, sq, sk, h, hkv, head_dim, dtype, causal)
    assert not np.isnan(o).any() and not np.isnan(lse).any(), "an output was not written"
    np.testing.assert_array_equal(np.isinf(lse), np.isinf(want_lse))
    finite = np.isfinite(want_lse)
    assert np.abs(lse[finite] - want_lse[finite]).max(initial=0) < 2e-3
    # P and O round to the 16-bit type: the error bound of bf16 (8 bits) or fp16 (11 bits) on values of size ~1
    bound = 2.0 ** -7 if dtype == "bfloat16" else 2.0 ** -9
    err = np.abs(o - want_o).max()
    assert err < 4 * bound, f"max |O - reference| {err:.3g}"


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("causal", [False, True])
def test_error_is_within_torch_sdpa_error_gpu(causal, rng):
    """On the same bf16 data, the error against float64 is at most twice what torch's SDPA makes."""
    torch = pytest.importorskip("torch")
    b, sq, sk, h, hkv, d = 2, 1000, 1000, 4, 4, 128
    (q, k, v), (qf, kf, vf) = random_inputs(rng, b, sq, sk, h, hkv, d, "bfloat16")
    tq, tk, tv = (torch.from_numpy(x.astype(np.float32)).to("cuda", torch.bfloat16) for x in (qf, kf, vf))
    out, _ = attention(tq, tk, tv, causal=causal)
    want, _ = reference(qf, kf, vf, causal=causal)
    sdpa = torch.nn.functional.scaled_dot_product_attention(tq.transpose(1, 2), tk.transpose(1, 2),
                                                            tv.transpose(1, 2), is_causal=causal).transpose(1, 2)
    ours = np.abs(out.float().cpu().numpy() - want).max()
    theirs = np.abs(sdpa.float().cpu().numpy() - want).max()
    assert ours <= 2 * theirs + 1e-6, f"ours {ours:.3g}, torch SDPA {theirs:.3g}"


@pytest.mark.gpu
@pytest.mark.hopper
def test_strided_torch_views_gpu(rng):
    """q, k, v as views of one packed (batch, seqlen, 3, heads, head_dim) tensor, as many models keep them."""
    torch = pytest.importorskip("torch")
    qkv = torch.randn(2, 300, 3, 4, 64, device="cuda", dtype=torch.float16)
    q, k, v = qkv.unbind(2)
    out, lse = attention(q, k, v, causal=True)
    want, want_lse = reference(*(x.float().cpu().numpy() for x in (q, k, v)), causal=True)
    assert np.abs(out.float().cpu().numpy() - want).max() < 4 * 2.0 ** -9
    assert np.abs(lse.cpu().numpy() - want_lse).max() < 2e-3
