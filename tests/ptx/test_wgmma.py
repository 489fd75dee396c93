"""wgmma, setmaxnreg and matrix descriptors: registry vs shim, descriptor bits, SASS offline, tiles on the GPU.

The GPU tests compute one 64 x N x (16 * K_STEPS) product per form against numpy in float64, with the
operands laid out in shared memory exactly as TMA's 128-byte swizzle writes them (16-byte chunk j of
128-byte row r at chunk j ^ (r % 8)), so that they also check the descriptor conventions the GEMM
kernel relies on (K-major and MN-major, the k16 step's start-address advance).
"""

import re
from pathlib import Path

import numpy as np
import pytest
from numba import cuda, float32, types, uint8, uint16, uint32, uint64

from asyncpipe import ptx
from asyncpipe.backend import simulating
from asyncpipe.errors import AsyncpipeError
from asyncpipe.formats.minifloat import E4M3, E5M2, decode
from asyncpipe.kernels.unroll import unroll, unrolled
from asyncpipe.kernels.wgmma_gemm import bf16_bits, bf16_to_float32
from asyncpipe.ptx import wgmma as W
from tests.sass import assert_sass

STEM = "wgmma"
NS = (64, 128, 256)
NS8 = (64, 128, 192, 256)    # the FP8 forms add 192 (the block-scaled FP8 GEMM's widest tile)
ABS = ("bf16", "f16")
FP8 = ("e4m3", "e5m2")      # the 8-bit input types of m64nNk32 (K-major only: no trans operands)
FP8_FORMATS = {"e4m3": E4M3, "e5m2": E5M2}
TILE_K = 64                 # shared tiles are 64 elements (128 bytes) wide along K: one swizzle row
SW_ROW = 64                 # elements per 128-byte swizzle row
THREADS = W.WARPGROUP_THREADS


# every mma primitive, by (N, input type, form): SS = A and B from shared memory, RS = A from registers
MMA = {
    (64, "bf16", "ss"): ptx.wgmma_mma_async_sync_aligned_m64n64k16_f32_bf16_bf16_ss,
    (64, "bf16", "rs"): ptx.wgmma_mma_async_sync_aligned_m64n64k16_f32_bf16_bf16_rs,
    (128, "bf16", "ss"): ptx.wgmma_mma_async_sync_aligned_m64n128k16_f32_bf16_bf16_ss,
    (128, "bf16", "rs"): ptx.wgmma_mma_async_sync_aligned_m64n128k16_f32_bf16_bf16_rs,
    (256, "bf16", "ss"): ptx.wgmma_mma_async_sync_aligned_m64n256k16_f32_bf16_bf16_ss,
    (256, "bf16", "rs"): ptx.wgmma_mma_async_sync_aligned_m64n256k16_f32_bf16_bf16_rs,
    (64, "f16", "ss"): ptx.wgmma_mma_async_sync_aligned_m64n64k16_f32_f16_f16_ss,
    (64, "f16", "rs"): ptx.wgmma_mma_async_sync_aligned_m64n64k16_f32_f16_f16_rs,
    (128, "f16", "ss"): ptx.wgmma_mma_async_sync_aligned_m64n128k16_f32_f16_f16_ss,
    (128, "f16", "rs"): ptx.wgmma_mma_async_sync_aligned_m64n128k16_f32_f16_f16_rs,
    (256, "f16", "ss"): ptx.wgmma_mma_async_sync_aligned_m64n256k16_f32_f16_f16_ss,
    (256, "f16", "rs"): ptx.wgmma_mma_async_sync_aligned_m64n256k16_f32_f16_f16_rs,
}


# the FP8 forms: (N, input type, form)
MMA8 = {
    (64, "e4m3", "ss"): ptx.wgmma_mma_async_sync_aligned_m64n64k32_f32_e4m3_e4m3_ss,
    (64, "e4m3", "rs"): ptx.wgmma_mma_async_sync_aligned_m64n64k32_f32_e4m3_e4m3_rs,
    (128, "e4m3", "ss"): ptx.wgmma_mma_async_sync_aligned_m64n128k32_f32_e4m3_e4m3_ss,
    (128, "e4m3", "rs"): ptx.wgmma_mma_async_sync_aligned_m64n128k32_f32_e4m3_e4m3_rs,
    (192, "e4m3", "ss"): ptx.wgmma_mma_async_sync_aligned_m64n192k32_f32_e4m3_e4m3_ss,
    (192, "e4m3", "rs"): ptx.wgmma_mma_async_sync_aligned_m64n192k32_f32_e4m3_e4m3_rs,
    (256, "e4m3", "ss"): ptx.wgmma_mma_async_sync_aligned_m64n256k32_f32_e4m3_e4m3_ss,
    (256, "e4m3", "rs"): ptx.wgmma_mma_async_sync_aligned_m64n256k32_f32_e4m3_e4m3_rs,
    (64, "e5m2", "ss"): ptx.wgmma_mma_async_sync_aligned_m64n64k32_f32_e5m2_e5m2_ss,
    (64, "e5m2", "rs"): ptx.wgmma_mma_async_sync_aligned_m64n64k32_f32_e5m2_e5m2_rs,
    (128, "e5m2", "ss"): ptx.wgmma_mma_async_sync_aligned_m64n128k32_f32_e5m2_e5m2_ss,
    (128, "e5m2", "rs"): ptx.wgmma_mma_async_sync_aligned_m64n128k32_f32_e5m2_e5m2_rs,
    (192, "e5m2", "ss"): ptx.wgmma_mma_async_sync_aligned_m64n192k32_f32_e5m2_e5m2_ss,
    (192, "e5m2", "rs"): ptx.wgmma_mma_async_sync_aligned_m64n192k32_f32_e5m2_e5m2_rs,
    (256, "e5m2", "ss"): ptx.wgmma_mma_async_sync_aligned_m64n256k32_f32_e5m2_e5m2_ss,
    (256, "e5m2", "rs"): ptx.wgmma_mma_async_sync_aligned_m64n256k32_f32_e5m2_e5m2_rs,
}


def mma(n, ab, form):
    return MMA8[n, ab, form] if ab in FP8 else MMA[n, ab, form]


def hgmma_lines(sass: str, n: int, ab: str) -> list[str]:
    """The HGMMA instructions of shape 64 x n x 16 with fp32 accumulators and ``ab`` inputs (fp16 is
    SASS's default type and carries no suffix)."""
    op = W._hgmma(n, ab)[0]
    return [line for line in sass.splitlines() if re.search(rf"\b{re.escape(op)}\s", line)]


def qgmma_lines(sass: str, n: int, ab: str) -> list[str]:
    """The QGMMA instructions (FP8 inputs) of shape 64 x n x 32 with fp32 accumulators and ``ab`` inputs."""
    op = W._qgmma(n, ab)[0]
    return [line for line in sass.splitlines() if re.search(rf"\b{re.escape(op)}\s", line)]


# ---------------------------------------------------------------------------------------------
# Registry and shim agree
# ---------------------------------------------------------------------------------------------
def test_registry_matches_shim():
    names = {n for n, p in ptx.REGISTRY.items() if p.stem == STEM}
    assert len(names) == 3 + 2 * len(NS) * len(ABS) + 2 * len(NS8) * len(FP8) + 2 + 1
    text = (Path(ptx.shim_dir()) / f"{STEM}.cu").read_text()
    shims = set(re.findall(r'extern "C" __device__ \w+(?: \w+)* ap_(\w+)\(', text))
    assert shims == names
    flat = " ".join(line.lstrip("/ ").strip() for line in text.splitlines() if line.startswith("//"))
    for name in names:
        p = ptx.REGISTRY[name]
        assert " ".join(p.ptx.split()) in flat, f"{name}: its PTX line is not a comment of the shim"
        assert p.arch_specific == (name != "cvta_to_shared_u32"), name
        assert p.isa == (80 if p.arch_specific else 20) and p.sm == (90 if p.arch_specific else 20)


def test_every_mma_form_is_declared():
    for n in NS:
        for ab in ABS:
            for form, ptx_tail in (("ss", W._SS_PTX), ("rs", W._RS_PTX)):
                p = mma(n, ab, form).primitive
                assert p.ptx == f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ab}.{ab}" + ptx_tail
                assert p.signature == (W._SS if form == "ss" else W._RS)
                assert p.sass == W._hgmma(n, ab)


def test_every_fp8_mma_form_is_declared():
    """The FP8 forms: k32, no imm-trans operands (8-bit A and B are K-major), QGMMA in the SASS."""
    assert set(MMA8) == {(n, ab, form) for n in NS8 for ab in FP8 for form in ("ss", "rs")}
    for (n, ab, form), fn in MMA8.items():
        p = fn.primitive
        assert p.name == f"wgmma_mma_async_sync_aligned_m64n{n}k32_f32_{ab}_{ab}_{form}"
        assert p.ptx == f"wgmma.mma_async.sync.aligned.m64n{n}k32.f32.{ab}.{ab}" + (
            W._SS8_PTX if form == "ss" else W._RS8_PTX)
        assert "imm-trans" not in p.ptx
        assert p.signature == (W._SS8 if form == "ss" else W._RS8)
        assert p.sass == W._qgmma(n, ab)


# ---------------------------------------------------------------------------------------------
# Matrix descriptor: the PTX ISA's bit layout
# ---------------------------------------------------------------------------------------------
def fields(desc: int) -> dict:
    """Decode a descriptor by the PTX ISA's table (Matrix Descriptor Format)."""
    return {
        "start": (desc & 0x3FFF) << 4,            # bits 13-0
        "lbo": ((desc >> 16) & 0x3FFF) << 4,      # bits 29-16
        "sbo": ((desc >> 32) & 0x3FFF) << 4,      # bits 45-32
        "base_offset": (desc >> 49) & 0x7,        # bits 51-49
        "swizzle": (desc >> 62) & 0x3,            # bits 63-62
        "reserved": desc & ~((0x3FFF) | (0x3FFF << 16) | (0x3FFF << 32) | (0x7 << 49) | (0x3 << 62)),
    }


DESC = W.matrix_descriptor.py_func


@pytest.mark.parametrize("start, lbo, sbo, swizzle, base", [
    (0x400, W.K_MAJOR_128B_LBO, W.K_MAJOR_128B_SBO, "128B", 0),
    (0x400 + 32 * 3, W.K_MAJOR_128B_LBO, W.K_MAJOR_128B_SBO, "128B", 0),
    (0x2C00, 8192, 1024, "128B", 0),
    (0x3FFF0, 0x3FFF0, 0x3FFF0, "32B", 7),
    (0, 0, 0, "none", 0),
    (0x1200, 256, 512, "64B", 2),
])
def test_descriptor_fields(start, lbo, sbo, swizzle, base):
    code = W.check_matrix_descriptor(start, lbo, sbo, swizzle, base)
    desc = int(DESC(start, lbo, sbo, code, base))
    assert fields(desc) == {"start": start, "lbo": lbo, "sbo": sbo, "base_offset": base,
                            "swizzle": {"none": 0, "128B": 1, "64B": 2, "32B": 3}[swizzle], "reserved": 0}


def test_descriptor_known_value():
    # 128B swizzle, start 0x400, LBO 8192, SBO 1024: 1 << 62 | (1024 >> 4) << 32 | (8192 >> 4) << 16 | 0x400 >> 4
    assert int(DESC(0x400, 8192, 1024, W.SWIZZLE_128B, 0)) == 0x4000_0040_0200_0040


def test_descriptor_keeps_only_the_cta_window():
    """matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4: bits above 18 (the CTA id in a .shared::cta
    address on sm_90) do not reach the descriptor."""
    assert int(DESC((5 << 24) | 0x1400, 16, 1024, W.SWIZZLE_128B, 0)) == int(DESC(0x1400, 16, 1024, 1, 0))


def test_advancing_a_descriptor_is_building_it_further_on(rng):
    """advance_descriptor(desc(a), off) == desc(a + off) for every shared address a + off below 228 KiB (the
    kernels' k-step descriptors; the simulator's body, which is the GPU intrinsic's add plus the rule's check)."""
    smem = 228 * 1024
    for _ in range(300):
        a = 16 * int(rng.integers(0, smem // 16))
        off = 16 * int(rng.integers(0, (smem - a) // 16 + 1))
        for lbo, sbo in ((W.K_MAJOR_128B_LBO, W.K_MAJOR_128B_SBO), (8192, W.MN_MAJOR_128B_SBO)):
            desc = DESC(a, lbo, sbo, W.SWIZZLE_128B, 0)
            assert int(W._advance_descriptor_sim(desc, off)) == int(DESC(a + off, lbo, sbo, W.SWIZZLE_128B, 0))


@pytest.mark.parametrize("start, off, got", [(0x3FF00, 0x100, "start address 261888 + byte_offset 256"),
                                             (0x400, 40, "start address 1024 + byte_offset 40")])
def test_advance_descriptor_refuses_a_carry_or_a_ragged_offset(start, off, got):
    from asyncpipe.sim.errors import SimUsageError

    with pytest.raises(SimUsageError) as e:
        W._advance_descriptor_sim(DESC(start, 16, 1024, W.SWIZZLE_128B, 0), off)
    assert str(e.value) == f"advance_descriptor: {W.ADVANCE_RULE} [PTX ISA, wgmma matrix descriptor format], got {got}"


@pytest.mark.parametrize("args, message", [
    ((0x404, 16, 1024, "128B"), "matrix_descriptor: start_address must be a multiple of 16 bytes "
                                "[PTX ISA, wgmma matrix descriptor format], got 1028 = 16 * 64 + 4"),
    ((0x400, 8, 1024, "128B"), "matrix_descriptor: leading_byte_offset must be a multiple of 16 bytes "
                               "[PTX ISA, wgmma matrix descriptor format], got 8 = 16 * 0 + 8"),
    ((0x400, 16, 1 << 18, "128B"), "matrix_descriptor: stride_byte_offset must be 0..0x3ffff (18 bits) "
                                   "[PTX ISA, wgmma matrix descriptor format], got 262144"),
    ((0x400, 16, 1024, "256B"), "matrix_descriptor: swizzle must be one of 'none', '128B', '64B', '32B' "
                                "[PTX ISA, wgmma matrix descriptor format], got '256B'"),
    ((0x400, 16, 1024, "128B", 8), "matrix_descriptor: base_offset must be 0..7 "
                                   "[PTX ISA, wgmma matrix descriptor format], got 8"),
])
def test_descriptor_checks(args, message):
    with pytest.raises(AsyncpipeError) as e:
        W.check_matrix_descriptor(*args)
    assert str(e.value) == message


def test_fragment_maps_cover_the_tiles():
    """d_row_col and a_row_col are bijections onto the 64 x N accumulator and the 64 x 16 A tile."""
    for n in NS8:
        seen = {W.d_row_col(t, i) for t in range(THREADS) for i in range(W.accumulators(n))}
        assert seen == {(r, c) for r in range(64) for c in range(n)}
    seen = {W.a_row_col(t, e) for t in range(THREADS) for e in range(8)}
    assert seen == {(r, c) for r in range(64) for c in range(16)}
    assert W.d_row_col(37, 5) == (16 + 1 + 8 * 0, 8 * 1 + 2 * 1 + 1)


def test_fp8_fragment_map_covers_the_tile():
    """a_row_col_8bit is a bijection onto the 64 x 32 A tile of m64nNk32; each register holds four
    consecutive K of one row (a0: row g, a1: row g + 8, a2/a3: the same 16 columns further)."""
    seen = {W.a_row_col_8bit(t, e) for t in range(THREADS) for e in range(16)}
    assert seen == {(r, c) for r in range(64) for c in range(32)}
    # thread 37: warp 1, lane 5 -> g = 1, q = 1
    assert [W.a_row_col_8bit(37, e) for e in range(0, 16, 4)] == [(17, 4), (25, 4), (17, 20), (25, 20)]
    assert [W.a_row_col_8bit(37, e)[1] for e in range(4)] == [4, 5, 6, 7]


# ---------------------------------------------------------------------------------------------
# Offline SASS
# ---------------------------------------------------------------------------------------------
F32 = types.float32[::1]
U64 = types.uint64[::1]
U32 = types.uint32[::1]


def forms_kernel(out, descs, regs):
    """Both forms of one shape: SS with (trans_a, trans_b) = (0, 1) and (1, 0), RS with trans_b 0."""
    acc = cuda.local.array(N2, float32)
    for i in unroll(N2):
        acc[i] = float32(descs[3 + i])          # run-time values: nothing folds to zero
    ptx.wgmma_fence_sync_aligned()
    SS(ptx.addr(acc, 0), descs[0], descs[1], 1, 0, 1)
    SS(ptx.addr(acc, 0), descs[0], descs[1], 1, 1, 0)
    RS(ptx.addr(acc, 0), regs[0], regs[1], regs[2], regs[3], descs[2], 1, 0)
    ptx.wgmma_commit_group_sync_aligned()
    ptx.wgmma_wait_group_sync_aligned(0)
    t = cuda.threadIdx.x
    for i in unroll(N2):
        out[t * N2 + i] = acc[i]


@pytest.mark.sass
@pytest.mark.parametrize("ab", ABS)
@pytest.mark.parametrize("n", NS)
def test_mma_forms_sass(n, ab):
    kernel = unrolled(forms_kernel, N2=n // 2, SS=mma(n, ab, "ss"), RS=mma(n, ab, "rs"))
    used = (ptx.wgmma_fence_sync_aligned, mma(n, ab, "ss"), mma(n, ab, "rs"), ptx.wgmma_commit_group_sync_aligned,
            ptx.wgmma_wait_group_sync_aligned)
    cubin = assert_sass(kernel, (F32, U64, U32), has=tuple(op for f in used for op in f.primitive.sass),
                        lacks=("CALL", "LDL", "STL"))
    lines = hgmma_lines(cubin.sass, n, ab)
    assert len(lines) == 3, f"three {W._hgmma(n, ab)[0]} expected:\n{cubin.sass}"
    ss_b = [s for s in lines if re.search(r"gdesc\[UR\d+\]\.tnspB,", s) and not re.search(r", R\d+, gdesc", s)]
    ss_a = [s for s in lines if re.search(r"gdesc\[UR\d+\]\.tnspA,", s)]
    rs = [s for s in lines if re.search(r"\sR\d+, R\d+, gdesc\[UR\d+\], R\d+", s)]
    assert len(ss_b) == 1 and len(ss_a) == 1 and len(rs) == 1, "\n".join(lines)
    assert "gsb0" in lines[-1], "the committed group's last HGMMA carries the gsb0 scoreboard"
    assert re.search(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x0", cubin.sass)
    # the accumulators are registers: no local frame at all (the largest shape has 128 per thread)
    assert cubin.resources.local == 0 and cubin.resources.stack == 0


def forms8_kernel(out, descs, regs):
    """Both FP8 forms of one shape: SS twice (the second one k32 step further), RS once."""
    acc = cuda.local.array(N2, float32)
    for i in unroll(N2):
        acc[i] = float32(descs[3 + i])          # run-time values: nothing folds to zero
    ptx.wgmma_fence_sync_aligned()
    SS(ptx.addr(acc, 0), descs[0], descs[1], 1)
    SS(ptx.addr(acc, 0), descs[0] + uint64(2), descs[1] + uint64(2), 1)
    RS(ptx.addr(acc, 0), regs[0], regs[1], regs[2], regs[3], descs[2], 1)
    ptx.wgmma_commit_group_sync_aligned()
    ptx.wgmma_wait_group_sync_aligned(0)
    t = cuda.threadIdx.x
    for i in unroll(N2):
        out[t * N2 + i] = acc[i]


@pytest.mark.sass
@pytest.mark.parametrize("ab", FP8)
@pytest.mark.parametrize("n", NS8)
def test_fp8_mma_forms_sass(n, ab):
    kernel = unrolled(forms8_kernel, N2=n // 2, SS=mma(n, ab, "ss"), RS=mma(n, ab, "rs"))
    # not commit_group's registry opcode: it names HGMMA (the group's last mma carries gsb0), here a QGMMA
    used = (ptx.wgmma_fence_sync_aligned, mma(n, ab, "ss"), mma(n, ab, "rs"), ptx.wgmma_wait_group_sync_aligned)
    cubin = assert_sass(kernel, (F32, U64, U32), has=tuple(op for f in used for op in f.primitive.sass),
                        lacks=("CALL", "LDL", "STL"))
    lines = qgmma_lines(cubin.sass, n, ab)
    assert len(lines) == 3, f"three {W._qgmma(n, ab)[0]} expected:\n{cubin.sass}"
    assert not any("tnsp" in s for s in lines), "8-bit operands are K-major: no transpose flag\n" + "\n".join(lines)
    rs = [s for s in lines if re.search(r"\sR\d+, R\d+, gdesc\[UR\d+\], R\d+", s)]
    ss = [s for s in lines if re.search(r"\sR\d+, gdesc\[UR\d+\], R\d+", s) and not re.search(r", R\d+, gdesc", s)]
    assert len(rs) == 1 and len(ss) == 2, "\n".join(lines)
    assert "gsb0" in lines[-1], "the committed group's last QGMMA carries the gsb0 scoreboard"
    assert cubin.resources.local == 0 and cubin.resources.stack == 0


def accumulate_loop_kernel(out, descs, nk):
    """The GEMM's inner loop shape: 4 k16 steps per k-block, one group per k-block, at most one group
    in flight, N/2 accumulators live across a run-time trip count."""
    acc = cuda.local.array(N2, float32)
    for i in unroll(N2):
        acc[i] = float32(0)
    for kb in range(nk):
        ptx.wgmma_fence_sync_aligned()
        for s in unroll(4):
            SS(ptx.addr(acc, 0), descs[2 * kb] + uint64(s * 2), descs[2 * kb + 1] + uint64(s * 128), 1, 0, 1)
        ptx.wgmma_commit_group_sync_aligned()
        ptx.wgmma_wait_group_sync_aligned(1)
    ptx.wgmma_wait_group_sync_aligned(0)
    t = cuda.threadIdx.x
    for i in unroll(N2):
        out[t * N2 + i] = acc[i]


@pytest.mark.sass
def test_accumulators_stay_in_registers_across_a_loop():
    kernel = unrolled(accumulate_loop_kernel, N2=128, SS=mma(256, "bf16", "ss"))
    cubin = assert_sass(kernel, (F32, U64, types.int32), has=("HGMMA",),
                        lacks=("CALL", "LDL", "STL"))
    assert len(hgmma_lines(cubin.sass, 256, "bf16")) >= 4
    assert re.search(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x1", cubin.sass), cubin.sass
    assert cubin.resources.registers <= 255 and cubin.resources.local == 0


def wait_group_kernel(out):
    ptx.wgmma_commit_group_sync_aligned()
    ptx.wgmma_wait_group_sync_aligned(N)
    out[cuda.threadIdx.x] = 1


@pytest.mark.sass
def test_wait_group_immediates_fold():
    """Each constant N becomes one WARPGROUP.DEPBAR.LE gsb0, N; out of range waits as for 0 or 7.
    (ptxas adds a wait for everything before the exit when N > 0.)"""
    for n, want in ((0, 0), (1, 1), (5, 5), (7, 7), (9, 7), (-3, 0)):
        cubin = assert_sass(unrolled(wait_group_kernel, N=n), (U32,),
                            has=ptx.wgmma_wait_group_sync_aligned.primitive.sass)
        deps = re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x[0-9a-f]+)", cubin.sass)
        assert deps[0] == hex(want) and set(deps[1:]) <= {"0x0"}, (n, deps)


def setmaxnreg_kernel(out):
    wg = cuda.threadIdx.x // 128
    if wg == 0:
        ptx.setmaxnreg_dec_sync_aligned_u32(DEC)
        out[cuda.threadIdx.x] = 0
    else:
        ptx.setmaxnreg_inc_sync_aligned_u32(INC)
        out[cuda.threadIdx.x] = wg


@pytest.mark.sass
@pytest.mark.parametrize("dec, inc", [(40, 232), (24, 256), (56, 200)])
def test_setmaxnreg_sass(dec, inc):
    kernel = unrolled(setmaxnreg_kernel, DEC=dec, INC=inc)
    cubin = assert_sass(kernel, (U32,), has=(*ptx.setmaxnreg_dec_sync_aligned_u32.primitive.sass,
                                            *ptx.setmaxnreg_inc_sync_aligned_u32.primitive.sass),
                        launch_bounds=(384, 1))
    assert re.findall(r"USETMAXREG\.DEALLOC\.CTAPOOL (0x[0-9a-f]+)", cubin.sass) == [hex(dec)]
    assert re.findall(r"USETMAXREG\.TRY_ALLOC\.CTAPOOL UP\d, (0x[0-9a-f]+)", cubin.sass) == [hex(inc)]
    # launch bounds of 384 threads, one block per SM: 65536 / 384 rounded down to a multiple of 8
    assert cubin.resources.registers == 168


def cvta_kernel(out):
    smem = cuda.shared.array(64, uint32)
    t = cuda.threadIdx.x
    smem[t % 64] = t
    out[t] = ptx.cvta_to_shared_u32(ptx.addr(smem, t % 64)) + smem[(t + 1) % 64]


@pytest.mark.sass
def test_cvta_to_shared_sass():
    assert_sass(cvta_kernel, (U32,), has=ptx.cvta_to_shared_u32.primitive.sass)


# ---------------------------------------------------------------------------------------------
# GPU: one 64 x N x (16 * K_STEPS) product per form, operands swizzled as TMA's 128B mode writes them
# ---------------------------------------------------------------------------------------------
def tile_kernel(a, b, out, poison):
    """a: 64 x K (row-major, 16-bit bits), b: K x N; out: 64 x N fp32. Shared tiles in the 128B swizzle:
    A K-major (64 rows of 64 K) or M-major (64 rows of K, 64 M each); B N-major (N // 64 blocks of 64
    K-rows x 64 N) or K-major (N rows of 64 K)."""
    sa = cuda.shared.array(64 * TILE_K, uint16, alignment=1024)
    sb = cuda.shared.array(NB * TILE_K, uint16, alignment=1024)
    t = cuda.threadIdx.x
    e = t
    while e < 64 * K:                                    # A[r, k]
        r = e // K
        k = e % K
        if TRANS_A == 0:
            sa[r * SW_ROW + (((k >> 3) ^ (r & 7)) << 3) + (k & 7)] = a[e]
        else:
            sa[k * SW_ROW + (((r >> 3) ^ (k & 7)) << 3) + (r & 7)] = a[e]
        e += THREADS
    e = t
    while e < K * N:                                     # B[k, n]
        k = e // N
        n = e % N
        if TRANS_B == 1:
            sb[(n >> 6) * TILE_K * SW_ROW + k * SW_ROW + ((((n & 63) >> 3) ^ (k & 7)) << 3) + (n & 7)] = b[e]
        else:
            sb[n * SW_ROW + (((k >> 3) ^ (n & 7)) << 3) + (k & 7)] = b[e]
        e += THREADS
    ptx.fence_proxy_async_shared_cta()                   # generic-proxy writes, visible to wgmma
    cuda.syncthreads()

    base_a = ptx.cvta_to_shared_u32(ptx.addr(sa, 0))
    base_b = ptx.cvta_to_shared_u32(ptx.addr(sb, 0))
    w = t // 32
    g = (t % 32) // 4
    q = t % 4
    acc = cuda.local.array(N2, float32)
    for i in unroll(N2):
        acc[i] = poison[0]                               # scale_d = 0 on the first step must ignore it
    ptx.wgmma_fence_sync_aligned()
    for s in unroll(K_STEPS):
        if TRANS_B == 1:   # N-major: the next 16 K-rows; LBO = one 64-column block of TILE_K rows
            b_desc = W.matrix_descriptor(base_b + s * 16 * 128, TILE_K * 128, W.MN_MAJOR_128B_SBO,
                                         W.SWIZZLE_128B, 0)
        else:              # K-major: 32 bytes further along each swizzled row
            b_desc = W.matrix_descriptor(base_b + s * 32, W.K_MAJOR_128B_LBO, W.K_MAJOR_128B_SBO,
                                         W.SWIZZLE_128B, 0)
        if FORM == 0:
            if TRANS_A == 0:
                a_desc = W.matrix_descriptor(base_a + s * 32, W.K_MAJOR_128B_LBO, W.K_MAJOR_128B_SBO,
                                             W.SWIZZLE_128B, 0)
            else:
                a_desc = W.matrix_descriptor(base_a + s * 16 * 128, TILE_K * 128, W.MN_MAJOR_128B_SBO,
                                             W.SWIZZLE_128B, 0)
            MMA(ptx.addr(acc, 0), a_desc, b_desc, 1 if s > 0 else 0, TRANS_A, TRANS_B)
        else:              # A from registers: a_row_col's map, two 16-bit values per register
            r0 = 16 * w + g
            c0 = 16 * s + 2 * q
            a0 = uint32(a[r0 * K + c0]) | (uint32(a[r0 * K + c0 + 1]) << 16)
            a1 = uint32(a[(r0 + 8) * K + c0]) | (uint32(a[(r0 + 8) * K + c0 + 1]) << 16)
            a2 = uint32(a[r0 * K + c0 + 8]) | (uint32(a[r0 * K + c0 + 9]) << 16)
            a3 = uint32(a[(r0 + 8) * K + c0 + 8]) | (uint32(a[(r0 + 8) * K + c0 + 9]) << 16)
            MMA(ptx.addr(acc, 0), a0, a1, a2, a3, b_desc, 1 if s > 0 else 0, TRANS_B)
        ptx.wgmma_commit_group_sync_aligned()            # one group per k16 step
    ptx.wgmma_wait_group_sync_aligned(0)
    for i in unroll(N2):                                 # d_row_col's map
        out[(16 * w + g + 8 * ((i >> 1) & 1)) * N + 8 * (i >> 2) + 2 * q + (i & 1)] = acc[i]


def make_tile_kernel(n, ab, form, trans_a=0, trans_b=1, k_steps=4):
    return unrolled(tile_kernel, N=n, N2=n // 2, NB=max(n, 64), K=16 * k_steps, K_STEPS=k_steps,
                    TRANS_A=trans_a, TRANS_B=trans_b, FORM=0 if form == "ss" else 1, MMA=mma(n, ab, form),
                    TILE_K=TILE_K, SW_ROW=SW_ROW, THREADS=THREADS)


TILE_ARGS = (types.uint16[::1], types.uint16[::1], F32, F32)


def random_bits(rng, shape, ab):
    """Fresh random 16-bit operands (bits) and their exact values in float64."""
    x = rng.standard_normal(shape).astype(np.float32)
    if ab == "bf16":
        bits = bf16_bits(x)
        return bits, bf16_to_float32(bits).astype(np.float64)
    h = x.astype(np.float16)
    return h.view(np.uint16), h.astype(np.float64)


def run_tile(rng, n, ab, form, trans_a=0, trans_b=1, k_steps=4):
    k = 16 * k_steps
    a_bits, a = random_bits(rng, (64, k), ab)
    b_bits, b = random_bits(rng, (k, n), ab)
    out = cuda.to_device(np.full((64, n), np.nan, np.float32))
    poison = cuda.to_device(np.array([1e30], np.float32))
    kernel = cuda.jit(make_tile_kernel(n, ab, form, trans_a, trans_b, k_steps))
    kernel[1, THREADS](cuda.to_device(a_bits.ravel()), cuda.to_device(b_bits.ravel()), out.reshape(-1), poison)
    got = out.copy_to_host()
    want = a @ b                                         # float64 of the exact 16-bit inputs
    # products of 16-bit values are exact in fp32; only the fp32 sums round
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(k))


@pytest.mark.sass
@pytest.mark.parametrize("n, ab, form, trans_a, trans_b", [
    pytest.param(256, "bf16", "ss", 0, 1, marks=pytest.mark.slow), (128, "f16", "rs", 0, 0), (64, "bf16", "ss", 1, 0)])
def test_tile_kernels_compile(n, ab, form, trans_a, trans_b):
    """The GPU tests' kernels compile offline: shims inlined, accumulators in registers."""
    cubin = assert_sass(make_tile_kernel(n, ab, form, trans_a, trans_b), TILE_ARGS, has=("HGMMA",),
                        lacks=("CALL", "LDL", "STL"))
    assert len(hgmma_lines(cubin.sass, n, ab)) == 4


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("ab", ABS)
@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("form", ["ss", "rs"])
def test_tile_gpu(form, n, ab, rng):
    """Every mma primitive: A K-major (SS) or in registers (RS), B N-major (B as K x N, row-major)."""
    run_tile(rng, n, ab, form)


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("trans_a, trans_b", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("k_steps", [1, 4])
def test_tile_majorness_gpu(trans_a, trans_b, k_steps, rng):
    run_tile(rng, 64, "bf16", "ss", trans_a, trans_b, k_steps)


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("trans_b", [0, 1])
def test_tile_registers_majorness_gpu(trans_b, rng):
    run_tile(rng, 128, "f16", "rs", 0, trans_b, 1)


@pytest.mark.gpu
@pytest.mark.hopper
def test_setmaxnreg_gpu():
    """Three warpgroups trade registers (40 down, 232 up, as the GEMM does) and all run to the end."""
    out = cuda.to_device(np.full(384, 0xFFFFFFFF, np.uint32))
    cuda.jit(unrolled(setmaxnreg_kernel, DEC=40, INC=232), launch_bounds=(384, 1))[1, 384](out)
    np.testing.assert_array_equal(out.copy_to_host(), np.repeat(np.arange(3, dtype=np.uint32), 128) * (
        np.repeat(np.arange(3), 128) > 0))


def cvta_offsets_kernel(out):
    smem = cuda.shared.array(256, uint32, alignment=1024)
    t = cuda.threadIdx.x
    out[t] = ptx.cvta_to_shared_u32(ptx.addr(smem, t)) - ptx.cvta_to_shared_u32(ptx.addr(smem, 0))
    out[256 + t] = ptx.cvta_to_shared_u32(ptx.addr(smem, 0)) % 1024


@pytest.mark.gpu
@pytest.mark.hopper
def test_cvta_to_shared_gpu():
    out = cuda.to_device(np.full(512, 12345, np.uint32))
    cuda.jit(cvta_offsets_kernel)[1, 256](out)
    got = out.copy_to_host()
    np.testing.assert_array_equal(got[:256], np.arange(256) * 4)
    np.testing.assert_array_equal(got[256:], 0)      # alignment=1024 reaches the .shared::cta address


# ---------------------------------------------------------------------------------------------
# FP8 (m64nNk32, e4m3 / e5m2): one 64 x N x (32 * K_STEPS) product per form, A and B K-major in the 128B swizzle
# ---------------------------------------------------------------------------------------------
FP8_ROW = 128               # bytes = 8-bit elements of K in one 128-byte swizzle row (K up to 128 per tile)


def tile8_kernel(a, bt, out, poison):
    """a: 64 x K codes (row-major), bt: N x K codes (B transposed, row-major: B K-major); out: 64 x N fp32.
    Shared tiles K-major in the 128B swizzle, as TMA writes a box of 128-byte rows: the 16-byte chunk j of
    row r at chunk j ^ (r % 8); the k-th k32 step's descriptors start 32 bytes further."""
    sa = cuda.shared.array(64 * FP8_ROW, uint8, alignment=1024)
    sb = cuda.shared.array(N * FP8_ROW, uint8, alignment=1024)
    t = cuda.threadIdx.x
    e = t
    while e < 64 * K:                                    # A[r, k]
        r = e // K
        k = e % K
        sa[r * FP8_ROW + (((k >> 4) ^ (r & 7)) << 4) + (k & 15)] = a[e]
        e += THREADS
    e = t
    while e < N * K:                                     # B^T[n, k] = B[k, n]
        n = e // K
        k = e % K
        sb[n * FP8_ROW + (((k >> 4) ^ (n & 7)) << 4) + (k & 15)] = bt[e]
        e += THREADS
    ptx.fence_proxy_async_shared_cta()                   # generic-proxy writes, visible to wgmma
    cuda.syncthreads()

    base_a = ptx.cvta_to_shared_u32(ptx.addr(sa, 0))
    base_b = ptx.cvta_to_shared_u32(ptx.addr(sb, 0))
    w = t // 32
    g = (t % 32) // 4
    q = t % 4
    acc = cuda.local.array(N2, float32)
    for i in unroll(N2):
        acc[i] = poison[0]                               # scale_d = 0 on the first step must ignore it
    ptx.wgmma_fence_sync_aligned()
    for s in unroll(K_STEPS):
        b_desc = W.matrix_descriptor(base_b + s * 32, W.K_MAJOR_128B_LBO, W.K_MAJOR_128B_SBO, W.SWIZZLE_128B, 0)
        if FORM == 0:
            a_desc = W.matrix_descriptor(base_a + s * 32, W.K_MAJOR_128B_LBO, W.K_MAJOR_128B_SBO,
                                         W.SWIZZLE_128B, 0)
            MMA(ptx.addr(acc, 0), a_desc, b_desc, 1 if s > 0 else 0)
        else:              # A from registers: a_row_col_8bit's map, four codes per register, lowest byte first
            i0 = (16 * w + g) * K + 32 * s + 4 * q       # row r0, columns 32 s + 4 q ..
            i1 = i0 + 8 * K                              # row r0 + 8
            a0 = uint32(a[i0]) | (uint32(a[i0 + 1]) << 8) | (uint32(a[i0 + 2]) << 16) | (uint32(a[i0 + 3]) << 24)
            a1 = uint32(a[i1]) | (uint32(a[i1 + 1]) << 8) | (uint32(a[i1 + 2]) << 16) | (uint32(a[i1 + 3]) << 24)
            a2 = (uint32(a[i0 + 16]) | (uint32(a[i0 + 17]) << 8) | (uint32(a[i0 + 18]) << 16)
                  | (uint32(a[i0 + 19]) << 24))
            a3 = (uint32(a[i1 + 16]) | (uint32(a[i1 + 17]) << 8) | (uint32(a[i1 + 18]) << 16)
                  | (uint32(a[i1 + 19]) << 24))
            MMA(ptx.addr(acc, 0), a0, a1, a2, a3, b_desc, 1 if s > 0 else 0)
        ptx.wgmma_commit_group_sync_aligned()            # one group per k32 step
    ptx.wgmma_wait_group_sync_aligned(0)
    for i in unroll(N2):                                 # d_row_col's map (the same for k32)
        out[(16 * w + g + 8 * ((i >> 1) & 1)) * N + 8 * (i >> 2) + 2 * q + (i & 1)] = acc[i]


def make_tile8_kernel(n, ab, form, k_steps=2):
    return unrolled(tile8_kernel, N=n, N2=n // 2, K=32 * k_steps, K_STEPS=k_steps, FORM=0 if form == "ss" else 1,
                    MMA=mma(n, ab, form), FP8_ROW=FP8_ROW, THREADS=THREADS)


TILE8_ARGS = (types.uint8[::1], types.uint8[::1], F32, F32)


def fp8_codes(rng, shape, ab, values="all"):
    """Random codes of ``ab`` and their exact values (float64). ``values`` "all": every finite code
    equally likely (both zeros, subnormals, negatives), the smallest subnormal and +-max always
    present; "small": only codes whose magnitude is below 0x18 (subnormals and the lowest normal
    binades), so that their decoding is what the sums are made of."""
    fmt = FP8_FORMATS[ab]
    finite = np.flatnonzero(np.isfinite(fmt.table)).astype(np.uint8)
    if values == "small":
        finite = finite[(finite & 0x7F) < 0x18]
    codes = rng.choice(finite, size=shape).astype(np.uint8)
    if values == "all":
        codes.flat[:3] = (fmt.max_code, 0x80 | fmt.max_code, 0x01)
        codes.flat[:] = rng.permutation(codes.ravel())
    return codes, decode(codes, fmt).astype(np.float64)


def fp8_tolerance(k_steps: int) -> float:
    """|got - want| <= tolerance * (|A| @ |B|), elementwise. Every product of two 8-bit values is exact
    in fp32 (at most 8 significant bits; 2^-32 .. 2^32 for e5m2), so only the accumulation rounds.
    The simulator sums each k32 step in float64 and rounds (D + step) to fp32 once: at most 2^-24 of
    |A| @ |B| per step, 2^-21 covers four steps. The GPU: Hopper's FP8 tensor cores are reported to
    accumulate with about 13-14 mantissa bits, not fp32's 23 (DeepSeek-V3's report, "around 14 bits";
    others measure e8m13). If each of a step's 33 addends (32 products and D) loses under 2^-13 of
    the largest, a step errs by under 33 * 2^-13 of |A| @ |B|. That bound is unverified on a GPU.
    A wrong layout or decode misses the dominant products, an O(1) share of |A| @ |B|."""
    return 2.0 ** -21 if simulating() else k_steps * 33 * 2.0 ** -13


def run_tile8(rng, n, ab, form, k_steps=2, values="all"):
    k = 32 * k_steps
    a_codes, a = fp8_codes(rng, (64, k), ab, values)
    bt_codes, bt = fp8_codes(rng, (n, k), ab, values)
    out = cuda.to_device(np.full((64, n), np.nan, np.float32))
    poison = cuda.to_device(np.array([1e30], np.float32))
    kernel = cuda.jit(make_tile8_kernel(n, ab, form, k_steps))
    kernel[1, THREADS](cuda.to_device(a_codes.ravel()), cuda.to_device(bt_codes.ravel()), out.reshape(-1), poison)
    got = out.copy_to_host().astype(np.float64)
    want = a @ bt.T                                      # float64 of the exactly decoded inputs
    tol = fp8_tolerance(k_steps) * (np.abs(a) @ np.abs(bt).T)
    err = np.abs(got - want)
    worst = np.unravel_index(np.argmax(err - tol), err.shape)
    assert (err <= tol).all(), (f"{int((err > tol).sum())} of {err.size} outside the tolerance; worst D{worst}: got "
                                f"{got[worst]!r}, want {want[worst]!r}, tolerance {tol[worst]!r}")


@pytest.mark.sass
@pytest.mark.parametrize("n, ab, form", [pytest.param(256, "e4m3", "ss", marks=pytest.mark.slow), (64, "e5m2", "rs")])
def test_fp8_tile_kernels_compile(n, ab, form):
    """The FP8 GPU tests' kernels compile offline: shims inlined, accumulators in registers, one QGMMA
    per k32 step."""
    cubin = assert_sass(make_tile8_kernel(n, ab, form, 4), TILE8_ARGS, has=("QGMMA",),
                        lacks=("CALL", "LDL", "STL"))
    assert len(qgmma_lines(cubin.sass, n, ab)) == 4


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("ab", FP8)
@pytest.mark.parametrize("n", NS8)
@pytest.mark.parametrize("form", ["ss", "rs"])
@pytest.mark.parametrize("k_steps", [1, 4])
def test_fp8_tile_gpu(k_steps, form, n, ab, rng):
    """Every FP8 mma primitive, one k32 step (scale_d 0 only) or four (a whole 128-byte swizzle row of
    K, chained), random codes over every finite value."""
    run_tile8(rng, n, ab, form, k_steps)


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("ab", FP8)
@pytest.mark.parametrize("form", ["ss", "rs"])
def test_fp8_tile_small_values_gpu(form, ab, rng):
    """Four k32 steps of subnormals and small normals only."""
    run_tile8(rng, 64, ab, form, k_steps=4, values="small")
