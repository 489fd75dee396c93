"""The warp-specialized wgmma GEMM: host checks (no GPU), SASS offline, correctness on the GPU."""

import re

import numpy as np
import pytest
from numba import cuda

from asyncpipe.codegen import compile_kernel
from asyncpipe.errors import AsyncpipeError
from asyncpipe.kernels import wgmma_gemm as G
from asyncpipe.kernels.wgmma_gemm import bf16_bits, bf16_to_float32, check_wgmma_gemm, wgmma_gemm

H200_SMEM = 227 * 1024          # shared memory per block after opt-in on the H200 (docs/FACTS.md)


# ---------------------------------------------------------------------------------------------
# Host: every rule, each message
# ---------------------------------------------------------------------------------------------
def check(a=(512, 256), b=(256, 384), c=(512, 384), ad="uint16", bd="uint16", cd="uint16", stages=4, block_n=256,
          cluster=2, b_transposed=False, smem_limit=H200_SMEM, epilogue="direct"):
    return check_wgmma_gemm(a, ad, b, bd, c, cd, stages=stages, block_n=block_n, cluster=cluster,
                            b_transposed=b_transposed, smem_limit=smem_limit, epilogue=epilogue)


def test_check_accepts_and_reports():
    assert check() == (512, 384, 256, "bf16", True)
    assert check(ad="float16", bd="float16", cd="float32") == (512, 384, 256, "f16", False)
    assert check(b=(384, 256), b_transposed=True) == (512, 384, 256, "bf16", True)
    assert check(a=(1, 8), b=(8, 8), c=(1, 8), block_n=64, stages=8) == (1, 8, 8, "bf16", True)
    assert check(epilogue="tma") == (512, 384, 256, "bf16", True)
    assert check(a=(1, 8), b=(8, 8), c=(1, 8), block_n=64, stages=8, epilogue="tma") == (1, 8, 8, "bf16", True)


@pytest.mark.parametrize("kwargs, message", [
    (dict(a=(4, 8, 8)), "wgmma_gemm: A must be 2-D, got 3-D of shape (4, 8, 8)"),
    (dict(ad="float32", bd="float32"), "wgmma_gemm: A must hold float16, or bfloat16 as 16-bit integers "
                                       "(uint16/int16) [PTX ISA, wgmma.mma_async], got float32"),
    (dict(bd="float16"), "wgmma_gemm: B must have A's element type, got A uint16, B float16"),
    (dict(cd="float64"), "wgmma_gemm: C must hold float32, or bfloat16 as 16-bit integers (uint16/int16), "
                         "got float64"),
    (dict(b=(128, 384)), "wgmma_gemm: B must have K = A.shape[1] rows, got A (512, 256), B (128, 384)"),
    (dict(b=(384, 128), b_transposed=True), "wgmma_gemm: B (given transposed, N x K) must have K = A.shape[1] "
                                            "columns, got A (512, 256), B (384, 128)"),
    (dict(c=(512, 385)), "wgmma_gemm: C must be M x N, got C (512, 385) for M = 512, N = 384"),
    (dict(a=(512, 260), b=(260, 384)), "wgmma_gemm: K must be a positive multiple of 8 (TMA's global row "
                                       "strides are multiples of 16 bytes: K * 2 bytes) [cuTensorMapEncodeTiled], "
                                       "got K = 260"),
    (dict(b=(256, 100), c=(512, 100)), "wgmma_gemm: N must be a positive multiple of 8 (TMA's global row "
                                       "strides are multiples of 16 bytes: N * 2 bytes) [cuTensorMapEncodeTiled], "
                                       "got N = 100"),
    (dict(block_n=96), "wgmma_gemm: block_n (the wgmma N) must be one of (64, 128, 256) "
                       "[PTX ISA, wgmma.mma_async], got 96"),
    (dict(cluster=4), "wgmma_gemm: cluster must be one of (1, 2) (CTAs along M sharing B), got 4"),
    (dict(stages=2), "wgmma_gemm: stages must be an integer in 3..8, got 2"),
    (dict(stages=4.0), "wgmma_gemm: stages must be an integer in 3..8, got 4.0"),
    (dict(stages=5), "wgmma_gemm: stages x (stage bytes + 2 barriers) + 1024 alignment slack must fit the 232448 "
                     "bytes of shared memory per block [CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN], "
                     "got 5 x (49152 + 16) + 1024 = 246864 bytes for block_n=256"),
    (dict(epilogue="smem"), "wgmma_gemm: epilogue must be one of ('direct', 'tma'), got 'smem'"),
    (dict(block_n=128, stages=7, epilogue="tma"),
     "wgmma_gemm: stages x (stage bytes + 2 barriers) + the TMA epilogue's staging (2 warpgroups x 2 buffers x 8192 "
     "bytes, never aliasing the ring) + 1024 alignment slack must fit the 232448 bytes of shared memory per block "
     "[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN], got 7 x (32768 + 16) + 32768 + 1024 = 263280 bytes "
     "for block_n=128 (at most 6 stages fit)"),
])
def test_check_messages(kwargs, message):
    with pytest.raises(AsyncpipeError) as e:
        check(**kwargs)
    assert str(e.value) == message


@pytest.mark.parametrize("epilogue, fits", [("direct", [4, 7, 8]), ("tma", [4, 6, 8])])
def test_stage_budget(epilogue, fits):
    """What fits in 227 KB: 4 stages of 128 x 256, 7 of 128 x 128, 8 (the cap) of 128 x 64; beside the
    TMA epilogue's 32 KB of staging, 6 of 128 x 128 (the others keep theirs)."""
    assert [G.max_stages(bn, H200_SMEM, epilogue) for bn in (256, 128, 64)] == fits
    assert G.epilogue_bytes(epilogue) == (0 if epilogue == "direct" else 2 * 2 * 64 * 128)
    for bn in (256, 128, 64):
        stages = G.max_stages(bn, H200_SMEM, epilogue)
        check(block_n=bn, stages=stages, epilogue=epilogue)
        assert G.block_shared_bytes(bn, stages, epilogue) <= H200_SMEM
        if stages < G.MAX_STAGES:
            with pytest.raises(AsyncpipeError):
                check(block_n=bn, stages=stages + 1, epilogue=epilogue)


def test_host_arrays_are_refused_before_the_gpu_is_asked():
    with pytest.raises(AsyncpipeError) as e:
        wgmma_gemm(np.zeros((8, 8), np.uint16), np.zeros((8, 8), np.uint16))
    assert str(e.value).startswith("wgmma_gemm: A must be a CUDA device array (numba, CuPy, PyTorch), not host memory")


def test_bf16_round_trip():
    x = np.array([1.0, -2.5, 3.14159, 1e-3, 65504.0, np.inf, -0.0], np.float32)
    bits = bf16_bits(x)
    assert bits.dtype == np.uint16
    np.testing.assert_array_equal(bf16_to_float32(bits)[[0, 1, 5, 6]], x[[0, 1, 5, 6]])
    np.testing.assert_allclose(bf16_to_float32(bits), x, rtol=2**-8)
    assert np.isnan(bf16_to_float32(bf16_bits(np.float32(np.nan))))
    # ties go to even: 1 + 2**-8 is halfway between 1 and 1 + 2**-7
    assert bf16_to_float32(bf16_bits(np.float32(1 + 2**-8))) == 1.0


def test_register_budget():
    """setmaxnreg's counts fit the register file with one CTA of 384 threads per SM."""
    assert G.PRODUCER_REGS * 128 + G.CONSUMER_REGS * 256 <= G.REGISTER_FILE
    assert G.PRODUCER_REGS % 8 == 0 and G.CONSUMER_REGS % 8 == 0
    assert G.REGISTER_FILE // G.THREADS // 8 * 8 == 168


# ---------------------------------------------------------------------------------------------
# Offline SASS
# ---------------------------------------------------------------------------------------------
SASS_CONFIGS = {
    "bf16_bn256_cluster2_nmajor_bf16out": dict(block_n=256, stages=4, cluster=2, ab="bf16", b_kmajor=False,
                                               c_bf16=True),
    "f16_bn128_cluster1_kmajor_f32out": dict(block_n=128, stages=7, cluster=1, ab="f16", b_kmajor=True,
                                             c_bf16=False),
    "bf16_bn256_cluster2_nmajor_bf16out_tma": dict(block_n=256, stages=4, cluster=2, ab="bf16", b_kmajor=False,
                                                   c_bf16=True, epilogue="tma"),
    "f16_bn128_cluster1_kmajor_f32out_tma": dict(block_n=128, stages=6, cluster=1, ab="f16", b_kmajor=True,
                                                 c_bf16=False, epilogue="tma"),
}


@pytest.mark.sass
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow)   # a 20 s compile: gpu_check's slow step
                                  if n == "bf16_bn256_cluster2_nmajor_bf16out_tma" else n for n in sorted(SASS_CONFIGS)])
def test_kernel_sass(name):
    cfg = SASS_CONFIGS[name]
    cubin = compile_kernel(G.make_kernel(**cfg), G.kernel_argtypes(cfg["c_bf16"]), launch_bounds=G.LAUNCH_BOUNDS)
    sass, ops, n = cubin.sass, cubin.opcodes, cfg["block_n"]
    print(name, cubin.resources, "UTMASTG:", ops.count("UTMASTG.2D"), "STS:", sum(o.startswith("STS") for o in ops),
          "STG:", sum(o.startswith("STG") for o in ops))
    # four k16 wgmma per k-block, B's transpose bit as its layout says, the last one committed (gsb0)
    op = f"HGMMA.64x{n}x16.F32" + (".BF16" if cfg["ab"] == "bf16" else "")
    hgmma = [line for line in sass.splitlines() if re.search(rf"\b{re.escape(op)}\s", line)]
    assert len(hgmma) == G.K_STEPS, "\n".join(hgmma) or sass
    assert all(("tnspB" in line) != cfg["b_kmajor"] for line in hgmma)
    assert not any("tnspA" in line for line in hgmma)
    assert "gsb0" in hgmma[-1]
    assert re.search(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x1", sass) and re.search(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x0", sass)
    # the producer: TMA loads of A, and of B (multicast to the cluster when it has two CTAs)
    loads = [op for op in ops if op.startswith("UTMALDG")]
    if cfg["cluster"] == 2:
        assert loads.count("UTMALDG.2D") == 1
        assert loads.count("UTMALDG.2D.MULTICAST") == (1 if cfg["b_kmajor"] else n // G.BOX_N)
        assert "SYNCS.ARRIVE.TRANS64.RED.A1T0" in ops            # releases into the peer's empty barriers
        assert "UCGABAR_ARV" in ops and "UCGABAR_WAIT" in ops
    else:
        assert loads == ["UTMALDG.2D"] * (1 + (1 if cfg["b_kmajor"] else n // G.BOX_N))
    for prefix in ("SYNCS.PHASECHK.TRANS64.TRYWAIT", "SYNCS.ARRIVE.TRANS64", "SYNCS.EXCH.64"):
        assert any(o.startswith(prefix) for o in ops), prefix
    # slots go back with bare remote arrivals: the only GPU-scope fences are the cluster barriers' (at
    # the start and the end), none in the loop (a MEMBAR.ALL.GPU per release cost 0.4x of cuBLAS)
    assert ops.count("MEMBAR.ALL.GPU") == ops.count("UCGABAR_ARV"), [o for o in ops if o.startswith(("MEMBAR", "UCGA"))]
    # bf16 C: two accumulators to one word by one F2FP each (numba's scalar bf16 helpers linked a file
    # that kept the kernel out of the disk cache)
    assert ops.count("F2FP.BF16.F32.PACK_AB") == (G.W.accumulators(n) // 2 if cfg["c_bf16"] else 0)
    # the register hand-over: 40 for the producer, 232 for the consumers
    assert re.findall(r"USETMAXREG\.DEALLOC\.CTAPOOL (0x[0-9a-f]+)", sass) == [hex(G.PRODUCER_REGS)]
    assert re.findall(r"USETMAXREG\.TRY_ALLOC\.CTAPOOL UP\d, (0x[0-9a-f]+)", sass) == [hex(G.CONSUMER_REGS)]
    # everything inlined, nothing in local memory, 168 registers at launch (launch bounds 384 x 1)
    assert not any(o.startswith(("CALL", "LDL", "STL")) for o in ops)
    assert not cubin.spills, cubin.resources
    assert cubin.resources.registers == G.REGISTER_FILE // G.THREADS // 8 * 8
    # the epilogue: scattered global stores, or swizzled shared stores + TMA stores in bulk groups
    if cfg.get("epilogue", "direct") == "tma":
        chunks = n // (G.EPI_ROW_BYTES // (2 if cfg["c_bf16"] else 4))
        assert ops.count("UTMASTG.2D") == chunks, [o for o in ops if o.startswith("UTMA")]
        assert any(o.startswith("BAR.SYNC") for o in ops)          # the warpgroup's named barrier
        assert "FENCE.VIEW.ASYNC.S" in ops                           # fence.proxy.async.shared::cta
        assert any(o.startswith("UTMACMDFLUSH") for o in ops)       # cp.async.bulk.commit_group
        assert any(o.startswith("DEPBAR") for o in ops)             # cp.async.bulk.wait_group.read
        assert not any(o.startswith("STG") for o in ops)
        assert any(o.startswith("STS") for o in ops)
    else:
        assert not any(o.startswith("UTMASTG") for o in ops)
        assert any(o.startswith("STG") for o in ops)


# ---------------------------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------------------------
def random_operands(rng, m, n, k, ab, b_transposed):
    x = rng.standard_normal((m, k)).astype(np.float32)
    y = rng.standard_normal((k, n)).astype(np.float32)
    if ab == "bf16":
        xa, yb = bf16_bits(x), bf16_bits(y)
        x64, y64 = bf16_to_float32(xa).astype(np.float64), bf16_to_float32(yb).astype(np.float64)
    else:
        xa, yb = x.astype(np.float16), y.astype(np.float16)
        x64, y64 = xa.astype(np.float64), yb.astype(np.float64)
    b = np.ascontiguousarray(yb.T) if b_transposed else yb
    return xa, b, x64 @ y64


GPU_CONFIGS = {
    "default": dict(ab="bf16", out="bfloat16", kw=dict()),
    "bn128_c1_bt_f16_f32out": dict(ab="f16", out="float32", kw=dict(block_n=128, cluster=1, b_transposed=True,
                                                                   stages=7)),
    "bn64_c2_f32out_s8": dict(ab="bf16", out="float32", kw=dict(block_n=64, cluster=2, stages=8)),
    "bn256_c2_bt_s3": dict(ab="bf16", out="bfloat16", kw=dict(block_n=256, cluster=2, b_transposed=True, stages=3)),
}
SHAPES = [(256, 256, 64), (1000, 776, 520), (8, 8, 8), (1, 72, 24), (4096, 4096, 512)]


def with_epilogue(kw, epilogue):
    """``kw`` with the epilogue, and its stages cut to what fits beside the TMA epilogue's staging."""
    kw = dict(kw, epilogue=epilogue)
    kw["stages"] = min(kw.get("stages", 4), G.max_stages(kw.get("block_n", 256), H200_SMEM, epilogue))
    return kw


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("epilogue", G.EPILOGUES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("config", sorted(GPU_CONFIGS))
def test_wgmma_gemm_gpu(config, shape, epilogue, rng):
    cfg = GPU_CONFIGS[config]
    m, n, k = shape
    bt = cfg["kw"].get("b_transposed", False)
    a, b, want = random_operands(rng, m, n, k, cfg["ab"], bt)
    # C poisoned first (NaN): every element must be written
    poison = np.full((m, n), 0x7FC0, np.uint16) if cfg["out"] == "bfloat16" else np.full((m, n), np.nan, np.float32)
    c = cuda.to_device(poison)
    wgmma_gemm(cuda.to_device(a), cuda.to_device(b), c, **with_epilogue(cfg["kw"], epilogue))
    got = c.copy_to_host()
    got = bf16_to_float32(got) if cfg["out"] == "bfloat16" else got
    assert got.shape == (m, n)
    scale = np.abs(want).max()
    err = np.abs(got - want).max() / scale
    # bf16 output rounds each element to 8 bits of mantissa; fp32 output only sums in fp32
    assert err < (1e-2 if cfg["out"] == "bfloat16" else 1e-4), f"relative error {err:.3g} ({config}, {shape})"


@pytest.mark.gpu
@pytest.mark.hopper
def test_wgmma_gemm_from_torch_gpu(rng):
    """PyTorch tensors in and out: bf16 operands viewed as int16 (the documented way), C as a bf16
    tensor viewed as int16, filled in place."""
    torch = pytest.importorskip("torch")
    xa, b, want = random_operands(rng, 200, 136, 96, "bf16", False)
    a_t = torch.from_numpy(xa.view(np.int16)).cuda()
    b_t = torch.from_numpy(b.view(np.int16)).cuda()
    c_t = torch.full((200, 136), float("nan"), dtype=torch.bfloat16, device="cuda")
    wgmma_gemm(a_t, b_t, c_t.view(torch.int16))
    got = c_t.float().cpu().numpy().astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2 * np.abs(want).max())


@pytest.mark.gpu
@pytest.mark.hopper
def test_plans_are_reused_and_follow_the_arrays_gpu(rng):
    """A repeated call reuses its plan (no checks, no marshalling); a new C (another address) gets its
    own plan and its own result; a bad call after good ones is still refused."""
    G._plans.clear()
    xa, b, want = random_operands(rng, 256, 256, 128, "bf16", False)
    a, bd = cuda.to_device(xa), cuda.to_device(b)
    c1, c2 = (cuda.to_device(np.full((256, 256), 0x7FC0, np.uint16)) for _ in range(2))
    wgmma_gemm(a, bd, c1)
    wgmma_gemm(a, bd, c1)
    assert len(G._plans) == 1
    wgmma_gemm(a, bd, c2)
    assert len(G._plans) == 2
    for c in (c1, c2):
        got = bf16_to_float32(c.copy_to_host()).astype(np.float64)
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2 * np.abs(want).max())
    with pytest.raises(AsyncpipeError, match="stages must be an integer"):
        wgmma_gemm(a, bd, c1, stages=4.0)


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("epilogue", G.EPILOGUES)
def test_wgmma_gemm_stores_stay_inside_c_gpu(epilogue, rng):
    """Clipped stores: C is the head of a larger poisoned buffer, and the tail keeps its poison
    (M and N are not multiples of the tile; the TMA epilogue's boxes hang over both)."""
    m, n, k = 200, 136, 72
    a, b, want = random_operands(rng, m, n, k, "bf16", False)
    buf = cuda.to_device(np.full(m * n + 4096, np.float32(-7.0), np.float32))
    c = buf[:m * n].reshape(m, n)
    wgmma_gemm(cuda.to_device(a), cuda.to_device(b), c, epilogue=epilogue)
    got = buf.copy_to_host()
    assert np.abs(got[:m * n].reshape(m, n) - want).max() / np.abs(want).max() < 1e-4
    np.testing.assert_array_equal(got[m * n:], -7.0)


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("epilogue", G.EPILOGUES)
def test_benchmark_record_names_the_epilogue_gpu(epilogue):
    record = G.benchmark(512, epilogue=epilogue, reps=2)
    assert record["kernel"] == f"wgmma_gemm_bf16_bn256_s4_c2_{epilogue}" and record["epilogue"] == epilogue
    assert record["tflops"] > 0
