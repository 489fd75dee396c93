"""wgmma and setmaxnreg on the simulator: every rule as a broken kernel that must raise its error
(naming the rule, the group and the kernel line) and its corrected twin that must give numpy's
answer; and the descriptor decoding against the TMA's 128-byte swizzle, with no kernel at all."""

import numpy as np
import pytest
from numba import cuda, float32, uint16

from asyncpipe import ptx, sim
from asyncpipe.kernels.wgmma_gemm import bf16_bits, bf16_to_float32
from asyncpipe.ptx import wgmma as W
from asyncpipe.sim.prim import wgmma as S
from asyncpipe.sim.tensor_map import SWIZZLE_MASK

pytestmark = pytest.mark.sim

N = 64                       # m64n64k16: 32 accumulators per thread
N2 = N // 2
ROW = 64                     # 16-bit elements per 128-byte swizzle row
MMA = ptx.wgmma_mma_async_sync_aligned_m64n64k16_f32_bf16_bf16_ss
LINE = r"test_wgmma.py:\d+ \(kernel\): "


def operands(rng):
    a = bf16_bits(rng.standard_normal((64, 16), dtype=np.float32))
    bt = bf16_bits(rng.standard_normal((N, 16), dtype=np.float32))          # B^T: N x K (K-major)
    want = bf16_to_float32(a).astype(np.float64) @ bf16_to_float32(bt).astype(np.float64).T
    return a.ravel(), bt.ravel(), want


def make_kernel(mistake=None):
    """One m64n64k16 product, A and B K-major in the 128B swizzle; ``mistake`` breaks one rule."""

    @cuda.jit
    def kernel(a, bt, out):
        sa = cuda.shared.array(64 * ROW, uint16, alignment=1024)
        sb = cuda.shared.array(N * ROW, uint16, alignment=1024)
        t = cuda.threadIdx.x
        for e in range(t, 64 * 16, 128):
            r = e // 16
            k = e % 16
            sa[r * ROW + (((k >> 3) ^ (r & 7)) << 3) + (k & 7)] = a[e]
            sb[r * ROW + (((k >> 3) ^ (r & 7)) << 3) + (k & 7)] = bt[e]
        if mistake != "no_proxy_fence":
            ptx.fence_proxy_async_shared_cta()
        cuda.syncthreads()
        a_desc = W.matrix_descriptor(ptx.cvta_to_shared_u32(ptx.addr(sa, 0)), W.K_MAJOR_128B_LBO,
                                     W.K_MAJOR_128B_SBO, W.SWIZZLE_128B, 0)
        b_desc = W.matrix_descriptor(ptx.cvta_to_shared_u32(ptx.addr(sb, 0)), W.K_MAJOR_128B_LBO,
                                     W.K_MAJOR_128B_SBO, W.SWIZZLE_128B, 0)
        acc = cuda.local.array(N2, float32)
        for i in range(N2):
            acc[i] = float32(1.0)                  # the mma adds to them (scale_d 1)
        if mistake == "touched_after_fence":
            ptx.wgmma_fence_sync_aligned()
            acc[0] = float32(1.0)                  # a register access after the fence
        elif mistake != "no_fence":
            ptx.wgmma_fence_sync_aligned()
        MMA(ptx.addr(acc, 0), a_desc, b_desc, 1, 0, 0)
        ptx.wgmma_commit_group_sync_aligned()
        if mistake == "overwrite_operand":
            sb[t] = uint16(0)
        if mistake == "wait_one":
            ptx.wgmma_wait_group_sync_aligned(1)
        elif mistake == "exit_pending":
            return
        elif mistake != "no_wait":
            ptx.wgmma_wait_group_sync_aligned(0)
        w = t // 32
        g = (t % 32) // 4
        q = t % 4
        for i in range(N2):
            out[(16 * w + g + 8 * ((i >> 1) & 1)) * N + 8 * (i >> 2) + 2 * q + (i & 1)] = acc[i]

    return kernel


def run(mistake, rng):
    a, bt, want = operands(rng)
    out = np.full(64 * N, np.nan, np.float32)
    make_kernel(mistake)[1, 128](a, bt, out)
    return out.reshape(64, N), want + 1.0


def test_correct_mma_matches_numpy(rng):
    got, want = run(None, rng)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_exit_with_pending_mma_is_not_an_error(rng):
    """ptxas waits for every pending wgmma before a thread exits (WARPGROUP.DEPBAR.LE gsb0, 0 before
    EXIT), so returning with an mma pending is legal: its results are simply never stored."""
    got, _ = run("exit_pending", rng)
    assert np.isnan(got).all()


@pytest.mark.parametrize("mistake, match", [
    ("no_wait", "(?s)accumulator registers of a wgmma.mma_async must not be read or written until a wgmma_wait_group "
                r"retires its group .*in wgmma-group 0, which no wgmma_wait_group has retired yet.*" + LINE + "out"),
    ("wait_one", r"(?s)in wgmma-group 0; the last wgmma_wait_group\(1\) at test_wgmma.py:\d+ \(kernel\): "
                 r"ptx.wgmma_wait_group_sync_aligned\(1\) retired none of the 1 committed then, leaving the "
                 "newest 1 pending.*" + LINE + "out"),
    ("overwrite_operand", "(?s)shared memory a wgmma.mma_async reads must not be overwritten until a wgmma_wait_group "
                          r"retires the mma's group .*" + LINE + r"sb\[t\] = uint16\(0\)"),
])
def test_pending_mma_is_caught(mistake, match, rng):
    with pytest.raises(sim.WgmmaPendingError, match=match):
        run(mistake, rng)


@pytest.mark.parametrize("mistake, match", [
    ("no_fence", "wgmma_fence_sync_aligned must come before a warpgroup's first wgmma.mma_async"),
    ("touched_after_fence", "(?s)a wgmma_fence_sync_aligned must come between a thread's accesses to accumulator "
                            r"registers and the next wgmma.mma_async that uses them .*accessed its accumulators "
                            r"\(d\) at " + LINE + r"acc\[0\] = float32\(1.0\) .*after its warpgroup's last "
                            "wgmma.fence.*" + LINE + "MMA"),
])
def test_missing_wgmma_fence_is_caught(mistake, match, rng):
    with pytest.raises(sim.WgmmaFenceError, match=match):
        run(mistake, rng)


def test_missing_proxy_fence_is_caught(rng):
    """wgmma reads shared memory through the async proxy: threads' stores need fence.proxy.async."""
    with pytest.raises(sim.ProxyFenceError, match=r"(?s)fence_proxy_async_shared_cta.*wgmma.*" + LINE + "MMA"):
        run("no_proxy_fence", rng)


# ---------------------------------------------------------------------------------------------
# .sync.aligned: the whole warpgroup, together, with uniform operands
# ---------------------------------------------------------------------------------------------
def make_fences(divergent):
    @cuda.jit
    def kernel(out):
        t = cuda.threadIdx.x
        if divergent and t % 128 < 64:
            ptx.wgmma_fence_sync_aligned()       # half the warpgroup here ...
        else:
            ptx.wgmma_fence_sync_aligned()       # ... the other half at another instruction
        ptx.wgmma_commit_group_sync_aligned()
        ptx.wgmma_wait_group_sync_aligned(0)
        out[t] = t
    return kernel


def test_divergent_warpgroup_is_caught():
    with pytest.raises(sim.WarpgroupError, match=r"the 128 threads of a warpgroup must execute the same \.sync\.aligned "
                       r"instruction together \(a divergent warpgroup\).*warpgroup [01]"):
        make_fences(True)[1, 256](np.zeros(256, np.int32))


def test_converged_warpgroups_pass():
    out = np.zeros(256, np.int32)
    make_fences(False)[1, 256](out)
    np.testing.assert_array_equal(out, np.arange(256))


def test_incomplete_warpgroup_is_caught():
    with pytest.raises(sim.WarpgroupError, match=r"a warpgroup is four whole warps .* got warpgroup 0 of a block of "
                       "96 threads"):
        make_fences(False)[1, 96](np.zeros(96, np.int32))


def make_setmaxnreg(dec, inc, skew=0):
    @cuda.jit
    def kernel(out):
        t = cuda.threadIdx.x
        if t < 128:
            ptx.setmaxnreg_dec_sync_aligned_u32(dec)
        else:
            ptx.setmaxnreg_inc_sync_aligned_u32(inc + (8 if skew and t == 300 else 0))
        out[t] = t // 128
    return kernel


@pytest.mark.parametrize("dec, inc, got", [(36, 232, "got 36"), (16, 232, "got 16"), (40, 264, "got 264")])
def test_bad_setmaxnreg_count_is_caught(dec, inc, got):
    with pytest.raises(sim.WarpgroupError, match=r"imm-reg-count must be in 24..256 and a multiple of 8 "
                       rf"\[PTX ISA, setmaxnreg\], {got}"):
        make_setmaxnreg(dec, inc)[1, 384](np.zeros(384, np.int32))


def test_non_uniform_setmaxnreg_is_caught():
    with pytest.raises(sim.WarpgroupError, match="imm-reg-count must be the same in every thread of the warpgroup"):
        make_setmaxnreg(40, 224, skew=1)[1, 384](np.zeros(384, np.int32))


def test_setmaxnreg_hand_over_passes():
    out = np.full(384, -1, np.int32)
    make_setmaxnreg(40, 232)[1, 384](out)
    np.testing.assert_array_equal(out, np.repeat(np.arange(3), 128))


# ---------------------------------------------------------------------------------------------
# Descriptors and fragments, no kernel
# ---------------------------------------------------------------------------------------------
class _Layout:
    def __init__(self, rows, row_bytes, swizzle):
        self.box_bytes, self.swizzle = rows * row_bytes, swizzle


@pytest.mark.parametrize("swizzle, width", [("128B", 128), ("64B", 64), ("32B", 32)])
def test_k_major_operand_reads_what_tma_wrote(swizzle, width):
    """A TMA box of rows x width bytes (one row per M/N index) at a pattern-aligned address: the
    descriptor of k16 step s (start + 32 s, SBO = 8 rows) finds element (mn, 16 s + k) where TMA put it."""
    rows, base = 64, 0x2000
    tma = SWIZZLE_MASK[swizzle]
    assert tma == {"128B": 7, "64B": 3, "32B": 1}[swizzle]
    box = (base + np.arange(rows * width)) ^ ((((base + np.arange(rows * width)) >> 7) & tma) << 4)
    code = W.SWIZZLE_CODES[swizzle]
    for s in range(width // 32):
        desc = int(W.matrix_descriptor.py_func(base + 32 * s, 16, 8 * width, code, 0))
        offs = S.operand_offsets(desc, rows, mn_major=False)
        mn, k = np.meshgrid(np.arange(rows), np.arange(16), indexing="ij")
        np.testing.assert_array_equal(offs, box[mn * width + 2 * (16 * s + k)])


def test_mn_major_operand_reads_what_tma_wrote():
    """B as K x N row-major in 64-column boxes of 64 K-rows (the GEMM's N-major B): LBO = one box."""
    base, n = 0x4000, 256
    lin = base + np.arange(n // 64 * 64 * 128)
    tma = lin ^ (((lin >> 7) & 7) << 4)
    for s in range(4):
        desc = int(W.matrix_descriptor.py_func(base + s * 16 * 128, 64 * 128, 1024, W.SWIZZLE_128B, 0))
        offs = S.operand_offsets(desc, n, mn_major=True)
        nn, k = np.meshgrid(np.arange(n), np.arange(16), indexing="ij")
        np.testing.assert_array_equal(offs, tma[(nn // 64) * 8192 + (16 * s + k) * 128 + 2 * (nn % 64)])


def test_interleaved_operands_are_core_matrices():
    """No swizzle: 8 x 16-byte core matrices; K-major steps LBO along K and SBO along M/N, MN-major
    the other way round."""
    desc = int(W.matrix_descriptor.py_func(0x100, 0x400, 0x80, W.SWIZZLE_NONE, 0))
    k_major = S.operand_offsets(desc, 64, mn_major=False)
    assert k_major[0, 0] == 0x100 and k_major[1, 0] == 0x110 and k_major[0, 1] == 0x102
    assert k_major[8, 0] == 0x180 and k_major[0, 8] == 0x500
    mn_major = S.operand_offsets(desc, 64, mn_major=True)
    assert mn_major[1, 0] == 0x102 and mn_major[0, 1] == 0x110 and mn_major[8, 0] == 0x180
    assert mn_major[0, 8] == 0x500


def test_descriptor_decodes_what_matrix_descriptor_encodes():
    desc = int(W.matrix_descriptor.py_func(0x2C00, 8192, 1024, W.SWIZZLE_128B, 0))
    assert S.decode_descriptor(desc) == {"start": 0x2C00, "lbo": 8192, "sbo": 1024, "base_offset": 0,
                                         "swizzle": 128}


# ---------------------------------------------------------------------------------------------
# Operands the instruction refuses
# ---------------------------------------------------------------------------------------------
def make_operand_kernel(mistake=None):
    @cuda.jit
    def kernel(out):
        sb = cuda.shared.array(64 * ROW, uint16, alignment=1024)
        t = cuda.threadIdx.x
        for e in range(t, 64 * ROW, 128):
            sb[e] = uint16(0x3F80)                     # bf16 1.0
        ptx.fence_proxy_async_shared_cta()
        cuda.syncthreads()
        start = ptx.cvta_to_shared_u32(ptx.addr(sb, 0))
        if mistake == "non_uniform":
            start += 32 * (t // 64)                    # two k16 steps: half the warpgroup each
        desc = W.matrix_descriptor(start, W.K_MAJOR_128B_LBO, W.K_MAJOR_128B_SBO, W.SWIZZLE_128B,
                                   1 if mistake == "base_offset" else 0)
        acc = cuda.local.array(N2, float32)
        ptx.wgmma_fence_sync_aligned()
        MMA(ptx.addr(out, 0) if mistake == "global_d" else ptx.addr(acc, 0), desc, desc, 0, 0, 0)
        ptx.wgmma_commit_group_sync_aligned()
        ptx.wgmma_wait_group_sync_aligned(0)
        out[t] = acc[0]
    return kernel


@pytest.mark.parametrize("mistake, error, match", [
    ("non_uniform", sim.WarpgroupError, "a-desc must be the same in every thread of the warpgroup"),
    ("base_offset", sim.SimUsageError, "the simulator models matrix descriptors with base offset 0 only"),
    ("global_d", sim.SimUsageError, r"d must be addr\(acc, 0\) of a cuda.local.array\(32, float32\)"),
])
def test_refused_operands_are_caught(mistake, error, match):
    with pytest.raises(error, match=match):
        make_operand_kernel(mistake)[1, 128](np.zeros(128, np.float32))


def test_uniform_operands_pass():
    out = np.zeros(128, np.float32)
    make_operand_kernel()[1, 128](out)
    np.testing.assert_array_equal(out, 16.0)          # a row of 16 ones times a column of 16 ones
