"""The chapter's SGEMM: C = alpha * A @ B + beta * C in float32, register-tiled.

Two kernels share one tile (BM = BN = 128, BK = 8, each of 256 threads owns an 8 x 8 block of C):

* ``v4``: the chapter's baseline. Loads go global -> registers -> shared, one buffer, two barriers
  per tile.
* ``cp_async``: the chapter's multi-stage pipeline. ``STAGES`` shared buffers; loads go straight
  from global to shared with ``cp.async`` and run ``STAGES - 1`` tiles ahead of the compute::

      prologue:  issue tiles 0 .. S-2, one commit_group each
      main loop: wait_group(S-2); syncthreads; issue tile kt+S-1 (if any); commit (always);
                 compute tile kt

  One reordering from the chapter: the copies of tile kt+S-1 (and the commit) go after the shared
  reads of the first four k-steps of tile kt rather than right after the barrier (``ISSUE_AFTER``;
  42.5 against 39.8 TFLOPS on the H200). The wait and the barrier stay where they were, and the
  copies still overwrite only the stage of tile kt-1, which every thread has finished.

Beyond the chapter: any M, N, K. Tiles hanging over an edge are loaded with cp.async's zero-fill
form (``src_size`` 0 reads nothing and writes zeros) and stores are predicated. Each operand moves
in 16-byte copies when its rows are 16-byte aligned (``VEC_A``/``VEC_B`` = 4), else in 4-byte ones.
Both tiles stay row-major as in the chapter; LLVM merges a thread's reads of A across the unrolled
``dot`` loop into 16-byte shared loads (``LDS.128``), so A needs no transposition.

Also beyond the chapter, two options of the cp.async kernel: ``bk=16`` (16-deep stages) and
``tile="8x16"`` (the same CTA tile and pipeline, 128 threads of 8 x 16 outputs: fewer shared-memory
bytes, LDS and barriers per FFMA; see ``TILES``). And a third, ``schedule="dbuf"`` (``sgemm_cp_async_dbuf``):
fragments double-buffered in registers, each tile's wait and barrier before its last k-step's FFMAs, so that the
next tile's first fragments load under them; its copies follow that barrier and take the stage just read. And
``schedule="kmajor"`` (``sgemm_cp_async_kmajor``): the dbuf loop on A transposed first by a second kernel
(``transpose``) into a workspace (one per stream, as large as A), so that both operands' tiles are k-major and a k-step's
fragments are all 16-byte shared loads: the fastest (0.98x cuBLAS on the H200 at 4096^3, the transpose included).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import cuda, float32

from .. import ptx
from ..errors import check
from ..host.plans import PlanCache
from ..jit_cache import jit
from . import transpose
from .unroll import kernel_part, registers, splice, unroll, unrolled
from .vector import load_shared_x2, load_x4, opaque_f32, store_x4

BM, BN, BK, TM, TN = 128, 128, 8, 8, 8
THREADS = (BM * BN) // (TM * TN)          # 256
TILE_FLOATS = BM * BK + BK * BN           # one stage of A and B tiles
STAGE_BYTES = TILE_FLOATS * 4             # 8 KiB: the chapter's exercise answer
MIN_STAGES, MAX_STAGES = 2, 8
BKS = (8, 16)                             # k-depths of a cp.async stage: the chapter's 8, or 16 (half the
                                          # barriers and commit groups per FFMA; 16 KiB a stage)
# A thread's 8 x 8 block of C: rows thread_row * TM + i as in the chapter, but columns
# thread_col * 4 + j and BN/2 + thread_col * 4 + j (j < 4) rather than 8 contiguous ones: a warp's
# 16-byte reads of a B-tile row then cover 256 contiguous bytes (two shared-memory wavefronts)
# instead of 512 bytes at a 32-byte stride (four).
# (maxntid[, minnctapersm]): two CTAs of 256 threads per SM need at most 128 registers a thread. The
# interior kernel gets there without being told (tests/kernels/test_sgemm.py checks it); capping it
# with minnctapersm 2, as before, made ptxas pack the accumulators into register banks that
# conflict (36-46 FFMA with three sources in one bank per tile against nvcc's 2-5). The edge
# kernel's bounds arithmetic would spill under the cap, so it gets one CTA.
LAUNCH_BOUNDS = (THREADS,)
CTAS_PER_SM = 2                           # what the interior kernel's 128 registers allow
LAUNCH_BOUNDS_EDGES = (THREADS, 1)


LAUNCH_BOUNDS_BK16 = (THREADS, CTAS_PER_SM)   # bk 16 takes 130 registers unless capped (no spills at 128)
# schedule="dbuf" (interior): uncapped, 177 registers (one CTA per SM); capped, 128 and nothing spilled, but ptxas
# then puts the three sources of 36 of the 512 FFMA a tile in one register bank (reg % 4; the plain kernel: 10)
LAUNCH_BOUNDS_DBUF = (THREADS, CTAS_PER_SM)


# ---- thread tiles of the cp.async kernel: the chapter's 8 x 8, or 8 x 16 (``sgemm(tile="8x16")``) ---------
# The same 128 x 128 CTA tile and the same stages, but 128 threads (four warps) each own 8 x 16 of C, as
# cuBLAS's own FFMA kernels do (a warp 32 x 128, two CTAs of 255 registers per SM). Per k-step a thread
# reads 8 floats of A and 16 of B for 128 FFMA (the chapter's 8 + 8 for 64): 0.75 bytes of shared memory
# per FFMA instead of 1, so the SM's 128 FP32 lanes at full rate want 96 of the 128 bytes a clock shared
# memory delivers, not all of them; the loop has 0.047 LDS.128 a FFMA instead of 0.0625 and one barrier
# per 1024 FFMA a thread (the chapter's bk 8: 512). Three CTAs per SM (168 registers) would spill.
# Layout inside a warp (lanes 8 columns x 4 rows), chosen so that every LDS.128 of the warp is one
# shared-memory wavefront at bk 8 (at bk 16 the A reads take two):
#   columns thread_col * 4 + (j // 4) * 32 + j % 4: eight lanes read 128 contiguous bytes of a B-tile row;
#   rows    the warp's 32 rows, interleaved: lane row r (0..3) owns rows r, r + 4, ..., r + 28 (RI = 4),
#           so four lanes read four consecutive A-tile rows (32 bytes apart: four distinct bank groups).
@dataclass(frozen=True)
class ThreadTile:
    tm: int              # rows of C a thread owns
    tn: int              # columns of C a thread owns (a multiple of 4: 16-byte reads)
    threads: int         # (BM * BN) // (tm * tn)
    ri: int              # row interleave: consecutive thread rows take every ri-th row (1: rows are contiguous)
    issue_after: dict    # bk -> ISSUE_AFTER in the kernel: -1, or the k-step after whose reads the next copies go
    bounds: tuple        # launch bounds of the interior kernel (the edge kernel's are (threads,) or less)
    bounds_edges: tuple


# ISSUE_AFTER as measured on the H200 at 4096^3 (scripts/sgemm_sweep.py, d479fb2; bench/h200.md): the
# chapter's tile at bk 8 and 3 stages made 37.3 / 39.8 / 42.5 / 38.9 TFLOPS with the copies after the
# barrier (-1) / after k-step 0 / 3 / 7; at bk 16 (4 stages) -1 gave 42.1 and 3 gave 40.5; the 8 x 16
# tile at bk 8 gave 38.8 with -1 and 41.2 with 3. After k-step 3 the first LDS.128 of A (k-steps 0-3)
# has left, so its latency runs under the copies' address arithmetic.
TILES = {
    "8x8": ThreadTile(TM, TN, THREADS, 1, {8: 3, 16: -1}, LAUNCH_BOUNDS, LAUNCH_BOUNDS_EDGES),  # the chapter's
    # two CTAs of 128 threads fit any register count (255 here, both kernels, nothing spilled)
    "8x16": ThreadTile(8, 16, 128, 4, {8: 3, 16: 3}, (128, 2), (128,)),
}
TILE = "8x8"
# main-loop schedules of the cp.async kernel: "plain" (sgemm_cp_async, the default), "dbuf" (sgemm_cp_async_dbuf:
# fragments double-buffered in registers, the barrier before the last k-step's FFMAs) or "kmajor" (the dbuf loop on
# A transposed first, so that A's tiles are k-major as B's are: see sgemm_cp_async_kmajor)
SCHEDULES = ("plain", "dbuf", "kmajor")
SCHEDULE = "plain"
A_KMAJOR = False                          # the kernels' default: A is read row-major (kmajor: True)
# LLVM_LOOPS: the register tile's loops (i, j; not the k-steps) left as range loops over cuda.local.array tiles,
# unrolled by LLVM (``unroll(N, llvm=...)``): numba types one body instead of 64 (or 128), so a cold compile costs
# seconds, not minutes: the chapter's 3-stage interior kernel 16.6 -> ~3.6 s offline, the 8 x 16 bk 16 kernels
# 100-500 s -> 9-15 s (bench/compile_experiments.md). Every configuration of ``kernel_source`` takes this form
# (``llvm_loops=False``, for experiments, expands the statements instead). Offline, against the expanded form, the
# main loop keeps its FFMA, LDS, copies, barriers and no spills; its length is the same or within 3 instructions of
# 1140-2245, the registers the same or fewer but for the chapter's edge kernel (+4 of 164: one CTA per SM either way).
LLVM_LOOPS = False
# COLS_OUTER: the plain loop's FFMAs in LLVM loops with the columns outer (``for j: for i:``, the kmajor loop's
# order) instead of rows outer (the expanded form's order). ptxas allocates the accumulators after the order it is
# given. Offline, conflicted FFMAs of the main loop (two registers of one bank, ``Cubin.ffma_bank_conflicts``), rows
# / columns outer (expanded): 8 x 8 bk 8 252 / 340 (259), 8 x 8 bk 16 711 / 520 (540), 8 x 16 bk 8 437 / 431 (437),
# 8 x 16 bk 16 827 / 818 (827); but on the H200 (bench/h200_llvm_ab.json) columns outer ran 2.4-3.8 % slower than
# the expanded kernels at 8 x 8 bk 16 and 8 x 16: fewer conflicts did not make it faster. The (tile, bk) of
# COLS_OUTER_TILES take columns outer; the dbuf loop stays rows outer (columns: 1151 conflicts against 666 of 2048),
# the kmajor loop columns outer (208 registers against 224, and +1.6 % on the H200).
COLS_OUTER = False
COLS_OUTER_TILES = frozenset()
# Floats of padding after each row of the A tile in shared memory, per schedule: its rows sit BK + A_PAD floats
# apart (``a_pitch``). Chosen by measurement: on the H200 at 4096^3 (8 x 16, bk 16, 3 stages; bench/h200.md, seventh
# session), against 44.6 TFLOPS for LDS.128 of four k-steps unpadded, the dbuf loop's A read two k-steps at a time
# (LDS.64) made 44.0 / 45.0 / 45.6 / 45.0 / 45.0 / 45.6 with padding 0 / 4 / 8 / 12 / 20 / 24; four k-steps with
# padding 8 made 44.1, one k-step at a time (LDS.32) 44.2 / 44.6 / 45.1 at 0 / 4 / 8. Why a pitch that is a multiple
# of 8 floats wins is not known: with 4 to 24 the four rows an LDS.64 of a warp reads fall in four bank pairs either
# way, and offline the loop's register-bank conflicts are the same (0.32 at 0 and 8). The plain loop keeps the
# chapter's unpadded tile.
A_PAD = {"plain": 0, "dbuf": 8, "kmajor": 0}


def launch_bounds(edges: bool, bk: int = 8, tile: str = TILE, schedule: str = SCHEDULE) -> tuple[int, ...]:
    if schedule != "plain" and tile == TILE and not edges:
        return LAUNCH_BOUNDS_DBUF
    if tile != TILE:
        t = TILES[tile]
        return t.bounds_edges if edges else t.bounds
    if edges:
        return LAUNCH_BOUNDS_EDGES
    return LAUNCH_BOUNDS_BK16 if bk == 16 else LAUNCH_BOUNDS


# ---- the pieces both cp.async kernels share, pasted into each by ``splice`` (``asyncpipe.kernels.unroll``): a
# part is the kernel's own code, reading and writing its variables (smem, tid, row0, col0, num_tiles, acc, ...)
@kernel_part
def ring_copies():
    """``issue`` (the copies of one tile), the prologue (tiles 0 .. AHEAD-1 in flight, one commit group each)
    and ``issue_next`` (an iteration's copies: tile kt + AHEAD). AHEAD is STAGES-1 in the chapter's loop; the
    dbuf loop's copies may run one tile further (see sgemm_cp_async_dbuf)."""
    # Element e of a row-major tile sits at row e // width, column e % width; each thread copies
    # VEC_A (VEC_B) consecutive elements of A (B) per step: 16 bytes when the matrix's rows allow it.
    # Outside the matrix a copy reads 0 bytes (zero fill) from element 0. In the interior the global
    # offsets of this thread's copies are kept in a_src, b_src and advanced by one tile per step
    # instead of being recomputed from kt (a 64-bit multiply per tile).
    # A's rows sit LDA floats apart in shared memory (BK, or BK plus padding: see A_PAD); B's are unpadded.
    # A_KMAJOR (schedule "kmajor"): A is At, A transposed (K x MP, MP = M rounded up to BM) and zero-padded by the
    # host (``transpose``), so its tile is BK x BM and copied as B's, with no edge: the padding holds zeros.
    if A_KMAJOR:
        MP = (M + BM - 1) // BM * BM                  # At's row length
    a_step = BK * MP if A_KMAJOR else BK              # from one k-tile of A to the next
    def issue(stage, kt, a_src, b_src):               # one tile of A (BM x BK) and B (BK x BN)
        k0 = kt * BK
        for r in unroll(BM * BK // (THREADS * VEC_A)):
            e = (r * THREADS + tid) * VEC_A
            dst = stage + e if LDA == BK else stage + (e // BK) * LDA + e % BK    # row e // BK, column e % BK
            if A_KMAJOR:                              # At's rows k0 .. k0+BK-1, columns row0 .. row0+BM-1
                ptx.cp_async_cg_shared_global_16(ptx.addr(smem, stage + e), ptx.addr(A, a_src + r * (THREADS * VEC_A // BM) * MP))
            elif EDGES:
                gr = row0 + e // BK
                gc = k0 + e % BK
                nbytes = max(0, min(VEC_A, K - gc)) * 4 if gr < M else 0
                src = gr * K + gc if nbytes > 0 else 0
                copy_a(ptx.addr(smem, dst), ptx.addr(A, src), nbytes)
            else:
                ptx.cp_async_cg_shared_global_16(ptx.addr(smem, dst), ptx.addr(A, a_src + r * (THREADS * VEC_A // BK) * K))
        for r in unroll(BK * BN // (THREADS * VEC_B)):
            e = (r * THREADS + tid) * VEC_B
            if EDGES:
                gr = k0 + e // BN
                gc = col0 + e % BN
                nbytes = max(0, min(VEC_B, N - gc)) * 4 if gr < K else 0
                src = gr * N + gc if nbytes > 0 else 0
                copy_b(ptx.addr(smem, stage + BM * LDA + e), ptx.addr(B, src), nbytes)
            else:
                ptx.cp_async_cg_shared_global_16(ptx.addr(smem, stage + BM * LDA + e), ptx.addr(B, b_src + r * (THREADS * VEC_B // BN) * N))

    # interior: this thread's first 16-byte copy of A and of B, at k0 = 0
    v = tid * 4
    a_src = (v // BM) * MP + row0 + v % BM if A_KMAJOR else (row0 + v // BK) * K + v % BK
    b_src = (v // BN) * N + col0 + v % BN
    # ---- prologue: tiles 0 .. AHEAD-1 in flight, one group each --------------------------------
    for s in range(AHEAD):
        if s < num_tiles:
            issue(s * TILE_FLOATS, s, a_src, b_src)
        ptx.cp_async_commit_group()
        a_src += a_step
        b_src += BK * N

    def issue_next(kt, write, a_src, b_src):          # tile kt + AHEAD into stage `write`, then the next offsets
        nxt = kt + AHEAD
        if nxt < num_tiles:
            issue(write, nxt, a_src, b_src)
        ptx.cp_async_commit_group()                   # even when empty: keeps group counts aligned
        return a_src + a_step, b_src + BK * N


@kernel_part
def store_c():
    """The epilogue: C = alpha * acc + beta * C over this thread's rows and columns, predicated at the edges. Under
    LLVM_LOOPS the rows are a loop only in the interior: at the edges LLVM does not unroll 8 rows of bounds-tested
    stores (8 x 16), and acc, indexed by a row variable, would go to local memory."""
    for i in unroll(TM, llvm=LLVM_LOOPS and not EDGES):
        r = row0 + row_base + ((i // 4) * ROW_STEP + i % 4 if A_KMAJOR else i * RI)
        for j in unroll(TN, llvm=LLVM_LOOPS):
            c = col0 + thread_col * 4 + (j // 4) * COL_STEP + j % 4
            if not EDGES or (r < M and c < N):
                if (opaque_f32(beta) if LLVM_LOOPS else beta) == 0:   # BLAS: C is not read when beta is 0
                    C[r * N + c] = alpha * acc[i, j]
                else:
                    C[r * N + c] = alpha * acc[i, j] + beta * C[r * N + c]


def sgemm_cp_async(M, N, K, alpha, A, B, beta, C):
    smem = cuda.shared.array(0, float32)              # STAGES x (A tile | B tile), dynamic
    tid = cuda.threadIdx.x
    thread_col = tid % (BN // TN)
    thread_row = tid // (BN // TN)
    # this thread's rows of C: row_base + i * RI (RI = 1: thread_row * TM + i, the chapter's); columns
    # thread_col * 4 + (j // 4) * COL_STEP + j % 4: runs of 4, COL_STEP apart
    row_base = (thread_row // RI) * (RI * TM) + thread_row % RI
    row0 = cuda.blockIdx.y * BM
    col0 = cuda.blockIdx.x * BN
    num_tiles = (K + BK - 1) // BK

    splice(ring_copies)                               # issue(), issue_next(); tiles 0 .. AHEAD-1 in flight

    acc = registers(TM, TN, dtype=float32, llvm=LLVM_LOOPS)
    # ---- main loop ------------------------------------------------------------------------------
    # Ring positions as element offsets into smem: tile kt sits at `read` (stage kt % STAGES); tile
    # kt + STAGES - 1 goes to the stage tile kt - 1 left, so `write` is the previous `read`. Counted
    # by a wrapping increment (a 64-bit modulo per tile costs about 25 instructions in SASS).
    # ISSUE_AFTER: where that tile's copies go in the iteration. -1 (the chapter's): right after the
    # barrier. d >= 0: after the shared-memory reads of k-steps 0..d, so that those reads leave at the
    # barrier and their latency runs under the copies' address arithmetic (the cp.async's memory clobber
    # keeps shared loads from moving across it, either way).
    read = 0
    write = (STAGES - 1) * TILE_FLOATS
    for kt in range(num_tiles):
        ptx.cp_async_wait_group(STAGES - 2)           # tile kt has landed (for this thread) ...
        cuda.syncthreads()                            # ... for every thread; tile kt-1 is consumed
        if ISSUE_AFTER < 0:
            a_src, b_src = issue_next(kt, write, a_src, b_src)
        a_base = read + row_base * BK
        b_base = read + BM * BK + thread_col * 4      # columns thread_col * 4 + j % 4 (+ COL_STEP * (j // 4))
        for dot in unroll(BK):
            reg_m = registers(TM, llvm=LLVM_LOOPS, init=False, local_dtype=float32)   # written before read
            reg_n = registers(TN, llvm=LLVM_LOOPS, init=False, local_dtype=float32)
            for i in unroll(TM, llvm=LLVM_LOOPS):
                reg_m[i] = smem[a_base + i * RI * BK + dot]   # LLVM merges these into LDS.128
            for j in unroll(TN, llvm=LLVM_LOOPS):
                reg_n[j] = smem[b_base + dot * BN + (j // 4) * COL_STEP + j % 4]
            if dot == ISSUE_AFTER:
                a_src, b_src = issue_next(kt, write, a_src, b_src)
            if LLVM_LOOPS and COLS_OUTER:             # the FFMA order ptxas allocates best (COLS_OUTER)
                for j in unroll(TN, llvm=True):
                    for i in unroll(TM, llvm=True):
                        acc[i, j] += reg_m[i] * reg_n[j]
            else:
                for i in unroll(TM, llvm=LLVM_LOOPS):
                    for j in unroll(TN, llvm=LLVM_LOOPS):
                        acc[i, j] += reg_m[i] * reg_n[j]
        write = read
        read = read + TILE_FLOATS if read < (STAGES - 1) * TILE_FLOATS else 0
    ptx.cp_async_wait_all()                           # nothing in flight at exit
    splice(store_c)                                   # C = alpha * acc + beta * C


# ---- schedule="dbuf": fragments double-buffered in registers, the barrier before the last k-step's FFMAs -----
# The plain loop waits, synchronises, then reads k-step 0's fragments: after every barrier each warp stalls on
# its first LDS before any FFMA (exposed with the 8 x 16 tile's 2 warps per scheduler). Here a k-step slot d
# reads the fragments of k-step d + 1 into one register set while the FFMAs of k-step d use the other; the last
# slot of tile kt waits for tile kt+1, synchronises and reads tile kt+1's k-step 0 instead, so those LDS run
# under tile kt's last FFMAs (128 with 8 x 16), whose operands are already in registers. (ptxas hoists part of
# them above the barrier: offline, 8 x 16 at bk 16, 45 of the 128 stay after it, the LDS among them.)
#
#     prologue:  issue tiles 0 .. AHEAD-1, one commit_group each; wait_group(AHEAD-1); syncthreads;
#                fragments of tile 0, k-step 0
#     tile kt:   slot d < BK-1: LDS k-step d+1 of tile kt; [copies]; FFMA k-step d
#                slot BK-1:     wait_group(STAGES-2); syncthreads; LDS k-step 0 of tile kt+1; [copies];
#                               FFMA k-step BK-1 of tile kt
#
# Stage reuse. The barrier in slot BK-1 of tile kt comes after every thread's shared reads of tile kt (its last
# k-step is in registers), so copies issued after it may overwrite tile kt's own stage, one stage later than the
# plain loop's copies (which, after the barrier between tiles kt-1 and kt, overwrite tile kt-1's):
#   * copies in a slot d < BK-1 of tile kt (the last barrier passed ended tile kt-1's reads) load tile
#     kt+STAGES-1 into tile kt-1's stage: AHEAD = STAGES-1, the plain loop's ring;
#   * copies in slot BK-1 (after the barrier ending tile kt's reads) load tile kt+STAGES into tile kt's stage:
#     AHEAD = STAGES. Before the loop no stage is being read, so the prologue fills all STAGES of them.
# In flight: either way the wait in slot BK-1 of tile kt needs tile kt+1 with tiles up to kt+STAGES-1 issued, so
# up to STAGES-1 tiles are in flight there and STAGES-2 may stay in flight, as in the plain loop: no deeper
# pipeline for the same STAGES. In steady state slot BK-1's copies are the plain ring's: the plain loop's
# iteration kt+1 issues the same tile kt+STAGES into the same stage after the same barrier (the one between the
# reads of tiles kt and kt+1). What changes is the prologue (STAGES tiles, not STAGES-1, and its wait) and where
# the copies sit: right after that barrier (the plain loop's ISSUE_AFTER = -1, slower there), but behind tile
# kt+1's first LDS and with tile kt's last FFMAs, not LDS-bound work, around them.
# Groups: one commit per prologue tile and per iteration (empty once tile kt+AHEAD >= num_tiles), group g holding
# tile g. At the wait of tile kt+1 (group kt+1) AHEAD + kt + 1 groups are committed with copies in a slot < BK-1,
# AHEAD + kt with copies after the barrier (this iteration's commit comes later): STAGES-2 may stay pending
# in both cases. Before the loop AHEAD are committed and group 0 is needed: AHEAD-1 may stay pending.
# The last iteration waits for and reads k-step 0 of a tile that does not exist (num_tiles): an empty group,
# and shared memory of a stage no copy is writing; the values go unused.
# DB_SLOT: the slot of the copies (0..BK-1); AHEAD: STAGES-1 if DB_SLOT < BK-1 else STAGES (``kernel_source``;
# the other pairings are wrong and tests/sim/test_programs.py checks that the simulator says so: STAGES before the
# barrier overwrites the stage being read, STAGES-1 after it leaves the wait one group short).
def sgemm_cp_async_dbuf(M, N, K, alpha, A, B, beta, C):
    smem = cuda.shared.array(0, float32)              # STAGES x (A tile | B tile), dynamic
    tid = cuda.threadIdx.x
    thread_col = tid % (BN // TN)
    thread_row = tid // (BN // TN)
    row_base = (thread_row // RI) * (RI * TM) + thread_row % RI     # as in sgemm_cp_async
    row0 = cuda.blockIdx.y * BM
    col0 = cuda.blockIdx.x * BN
    num_tiles = (K + BK - 1) // BK

    splice(ring_copies)                               # issue(), issue_next(); tiles 0 .. AHEAD-1 in flight

    acc = registers(TM, TN, dtype=float32, llvm=LLVM_LOOPS)
    # Fragments. B: two k-steps, [d % 2] holds k-step d's. A: two pairs of k-steps, [(d // 2) % 2, i, d % 2] holds
    # k-step d's, read two k-steps at a time (one LDS.64 a row: load_shared_x2, which LLVM does not merge into
    # LDS.128 of four k-steps as it does the plain loop's reads; see A_PAD for what that bought). BK is even, so
    # each tile starts with set 0 of both.
    frag_a = registers(2, TM, 2, dtype=float32, llvm=LLVM_LOOPS, init=False)
    frag_n = registers(2, TN, dtype=float32, llvm=LLVM_LOOPS, init=False)
    ptx.cp_async_wait_group(AHEAD - 1)                # tile 0 has landed ...
    cuda.syncthreads()                                # ... for every thread
    a_base = row_base * LDA
    b_base = BM * LDA + thread_col * 4
    for i in unroll(TM, llvm=LLVM_LOOPS):
        frag_a[0, i, 0], frag_a[0, i, 1] = load_shared_x2(smem, a_base + i * RI * LDA)
    for j in unroll(TN, llvm=LLVM_LOOPS):
        frag_n[0, j] = smem[b_base + (j // 4) * COL_STEP + j % 4]
    # ---- main loop ------------------------------------------------------------------------------
    # `read`: tile kt's stage; `write`: where this iteration's copies go (tile kt-1's stage, the previous
    # `read`, when AHEAD is STAGES-1; tile kt's own, `read`, when the copies follow slot BK-1's barrier).
    read = 0
    write = (STAGES - 1) * TILE_FLOATS
    for kt in range(num_tiles):
        a_base = read + row_base * LDA
        b_base = read + BM * LDA + thread_col * 4
        nread = read + TILE_FLOATS if read < (STAGES - 1) * TILE_FLOATS else 0
        for dot in unroll(BK):
            if dot < BK - 1:                          # k-step dot+1 of tile kt into the other set
                if (dot + 1) % 2 == 0:                # ... and its pair of A
                    for i in unroll(TM, llvm=LLVM_LOOPS):
                        frag_a[((dot + 1) // 2) % 2, i, 0], frag_a[((dot + 1) // 2) % 2, i, 1] = load_shared_x2(
                            smem, a_base + i * RI * LDA + dot + 1)
                for j in unroll(TN, llvm=LLVM_LOOPS):
                    frag_n[(dot + 1) % 2, j] = smem[b_base + (dot + 1) * BN + (j // 4) * COL_STEP + j % 4]
            else:                                     # tile kt+1's k-step 0 (and A's k-steps 0-1) into set 0
                ptx.cp_async_wait_group(STAGES - 2)   # tile kt+1 has landed (for this thread) ...
                cuda.syncthreads()                    # ... for every thread; tile kt is consumed
                for i in unroll(TM, llvm=LLVM_LOOPS):
                    frag_a[0, i, 0], frag_a[0, i, 1] = load_shared_x2(smem, nread + row_base * LDA + i * RI * LDA)
                for j in unroll(TN, llvm=LLVM_LOOPS):
                    frag_n[0, j] = smem[nread + BM * LDA + thread_col * 4 + (j // 4) * COL_STEP + j % 4]
            if dot == DB_SLOT:                        # tile kt + AHEAD into tile kt's stage or tile kt-1's
                a_src, b_src = issue_next(kt, read if AHEAD == STAGES else write, a_src, b_src)
            for i in unroll(TM, llvm=LLVM_LOOPS):
                for j in unroll(TN, llvm=LLVM_LOOPS):
                    acc[i, j] += frag_a[(dot // 2) % 2, i, dot % 2] * frag_n[dot % 2, j]
        write = read
        read = nread
    ptx.cp_async_wait_all()                           # nothing in flight at exit
    splice(store_c)                                   # C = alpha * acc + beta * C


# ---- schedule="kmajor": the dbuf loop on A transposed first ---------------------------------------------------
# Row-major A puts a thread's 8 A values of a k-step in 8 different rows of the tile: read two k-steps at a time
# (the dbuf loop), they land in every other register, so ptxas's allocation leaves a third of the FFMAs reading two
# sources from one register bank (bench/h200.md, seventh session). Here the host first transposes A into At (K x MP,
# zero-padded: ``transpose``, about 2 % of the time at 4096^3), so that A's tile sits k-major in shared memory
# (BK x BM) and is copied and read as B's is: a k-step's A fragment is two LDS.128 of 4 consecutive rows (a thread's
# rows are two runs of 4, ROW_STEP apart, as its columns are), a quarter fewer LDS than the pairs, 224 registers
# instead of 255, a quarter of the FFMAs with a bank conflict instead of a third. On the H200 at 4096^3: 50.3 TFLOPS
# with the transpose (0.98x cuBLAS), the dbuf loop 45.6 (bench/h200.md, eighth session).
# The loop is the dbuf loop (sgemm_cp_async_dbuf: k-step d+1's fragments read during k-step d, the wait and the
# barrier in the last slot, the copies after it), with both operands in two register sets [d % 2].
# cuBLAS's FFMA kernels keep A k-major in shared memory too, transposing with 4-byte copies; here those copies
# cost more than they gave back (branch sgemm-kmajor: 40.8 against 44.6 TFLOPS), the separate pass much less.
def sgemm_cp_async_kmajor(M, N, K, alpha, A, B, beta, C):
    smem = cuda.shared.array(0, float32)              # STAGES x (A tile, BK x BM | B tile, BK x BN), dynamic
    tid = cuda.threadIdx.x
    thread_col = tid % (BN // TN)
    thread_row = tid // (BN // TN)
    # this thread's rows of C: row_base + (i // 4) * ROW_STEP + i % 4; columns as in the other kernels
    row_base = thread_row * 4
    row0 = cuda.blockIdx.y * BM
    col0 = cuda.blockIdx.x * BN
    num_tiles = (K + BK - 1) // BK

    splice(ring_copies)                               # issue(), issue_next(); tiles 0 .. AHEAD-1 in flight

    acc = registers(TM, TN, dtype=float32, llvm=LLVM_LOOPS)
    frag_m = registers(2, TM, dtype=float32, llvm=LLVM_LOOPS, init=False)   # [d % 2]: k-step d's A values
    frag_n = registers(2, TN, dtype=float32, llvm=LLVM_LOOPS, init=False)   # [d % 2]: k-step d's B values
    ptx.cp_async_wait_group(AHEAD - 1)                # tile 0 has landed ...
    cuda.syncthreads()                                # ... for every thread
    for i in unroll(TM, llvm=LLVM_LOOPS):
        frag_m[0, i] = smem[row_base + (i // 4) * ROW_STEP + i % 4]
    for j in unroll(TN, llvm=LLVM_LOOPS):
        frag_n[0, j] = smem[BK * BM + thread_col * 4 + (j // 4) * COL_STEP + j % 4]
    # ---- main loop: as sgemm_cp_async_dbuf's --------------------------------------------------------------
    read = 0
    write = (STAGES - 1) * TILE_FLOATS
    for kt in range(num_tiles):
        a_base = read + row_base
        b_base = read + BK * BM + thread_col * 4
        nread = read + TILE_FLOATS if read < (STAGES - 1) * TILE_FLOATS else 0
        for dot in unroll(BK):
            if dot < BK - 1:                          # k-step dot+1 of tile kt into the other set
                for i in unroll(TM, llvm=LLVM_LOOPS):
                    frag_m[(dot + 1) % 2, i] = smem[a_base + (dot + 1) * BM + (i // 4) * ROW_STEP + i % 4]
                for j in unroll(TN, llvm=LLVM_LOOPS):
                    frag_n[(dot + 1) % 2, j] = smem[b_base + (dot + 1) * BN + (j // 4) * COL_STEP + j % 4]
            else:                                     # tile kt+1's k-step 0 into set 0
                ptx.cp_async_wait_group(STAGES - 2)   # tile kt+1 has landed (for this thread) ...
                cuda.syncthreads()                    # ... for every thread; tile kt is consumed
                for i in unroll(TM, llvm=LLVM_LOOPS):
                    frag_m[0, i] = smem[nread + row_base + (i // 4) * ROW_STEP + i % 4]
                for j in unroll(TN, llvm=LLVM_LOOPS):
                    frag_n[0, j] = smem[nread + BK * BM + thread_col * 4 + (j // 4) * COL_STEP + j % 4]
            if dot == DB_SLOT:                        # tile kt + AHEAD into tile kt's stage or tile kt-1's
                a_src, b_src = issue_next(kt, read if AHEAD == STAGES else write, a_src, b_src)
            if LLVM_LOOPS:                            # columns outer: 208 registers, not 224 (see COLS_OUTER)
                for j in unroll(TN, llvm=True):
                    for i in unroll(TM, llvm=True):
                        acc[i, j] += frag_m[dot % 2, i] * frag_n[dot % 2, j]
            else:
                for i in unroll(TM):
                    for j in unroll(TN):
                        acc[i, j] += frag_m[dot % 2, i] * frag_n[dot % 2, j]
        write = read
        read = nread
    ptx.cp_async_wait_all()                           # nothing in flight at exit
    splice(store_c)                                   # C = alpha * acc + beta * C


def sgemm_v4(M, N, K, alpha, A, B, beta, C):
    """The chapter's baseline: same tile, loads through registers, one buffer, no cp.async.

    Row-major tiles as in the chapter. In the interior (``EDGES`` false) each thread moves 16 bytes
    of A and 16 of B per tile with one vector load and one vector store each (the C++ ``float4``
    casts), from global offsets advanced by one tile per step; at the edges, element by element
    with bounds checks."""
    smem = cuda.shared.array(TILE_FLOATS, float32, alignment=16)
    tid = cuda.threadIdx.x
    thread_col = tid % (BN // TN)
    thread_row = tid // (BN // TN)
    row_base = thread_row * TM                        # this thread's rows of C: row_base + i, as in the chapter
    row0 = cuda.blockIdx.y * BM
    col0 = cuda.blockIdx.x * BN
    acc = registers(TM, TN, dtype=float32, llvm=LLVM_LOOPS)
    v = tid * 4                                       # interior: this thread's 16 bytes of each tile
    a_off = (row0 + v // BK) * K + v % BK             # ... of A at k0 = 0
    b_off = (v // BN) * N + col0 + v % BN             # ... of B at k0 = 0
    for k0 in range(0, K, BK):
        if EDGES:
            for r in unroll(BM * BK // THREADS):      # A tile
                e = r * THREADS + tid
                gr = row0 + e // BK
                gc = k0 + e % BK
                smem[e] = A[gr * K + gc] if gr < M and gc < K else float32(0)
            for r in unroll(BK * BN // THREADS):      # B tile
                e = r * THREADS + tid
                gr = k0 + e // BN
                gc = col0 + e % BN
                smem[BM * BK + e] = B[gr * N + gc] if gr < K and gc < N else float32(0)
        else:
            a = load_x4(A, a_off)
            store_x4(smem, v, a[0], a[1], a[2], a[3])
            b = load_x4(B, b_off)
            store_x4(smem, BM * BK + v, b[0], b[1], b[2], b[3])
            a_off += BK
            b_off += BK * N
        cuda.syncthreads()
        a_base = thread_row * TM * BK
        b_base = BM * BK + thread_col * 4             # columns thread_col * 4 + j % 4 (+ BN/2 for j >= 4)
        for dot in unroll(BK):
            reg_m = registers(TM, llvm=LLVM_LOOPS, init=False, local_dtype=float32)
            reg_n = registers(TN, llvm=LLVM_LOOPS, init=False, local_dtype=float32)
            for i in unroll(TM, llvm=LLVM_LOOPS):
                reg_m[i] = smem[a_base + i * BK + dot]   # LLVM merges these into LDS.128
            for j in unroll(TN, llvm=LLVM_LOOPS):
                reg_n[j] = smem[b_base + dot * BN + (j // 4) * (BN // 2) + j % 4]
            for i in unroll(TM, llvm=LLVM_LOOPS):
                for j in unroll(TN, llvm=LLVM_LOOPS):
                    acc[i, j] += reg_m[i] * reg_n[j]
        cuda.syncthreads()
    splice(store_c)                                   # C = alpha * acc + beta * C (RI = 1, COL_STEP = BN / 2)


# ------------------------------------------------------------------------------------------------
# Host side
# ------------------------------------------------------------------------------------------------
_kernels: dict = {}


_COPY = {4: ptx.cp_async_cg_shared_global_16_src_size, 1: ptx.cp_async_ca_shared_global_4_src_size}


def kernel_source(variant: str = "cp_async", stages: int = 3, vec_a: int = 4, vec_b: int = 4, edges: bool = True,
                  bk: int = BK, tile: str = TILE, issue_after: int | None = None, schedule: str = SCHEDULE,
                  llvm_loops: bool = True, cols_outer: bool | None = None):
    """The unrolled Python function of one configuration (what ``kernel`` compiles). With
    ``edges=False`` (M, N multiples of 128, K of ``bk``: the chapter's case) tiles never hang over an
    edge and the loads and stores drop their bounds arithmetic. ``bk`` (cp.async only): the k-depth
    of a stage, 8 (the chapter's) or 16. ``tile`` (cp.async only): the thread tile, ``"8x8"`` (the
    chapter's, 256 threads) or ``"8x16"`` (128 threads; see ``TILES``). ``issue_after`` (for
    experiments; None: the tile's own): where the next tile's copies go in an iteration (ISSUE_AFTER).
    ``schedule`` (cp.async only): the main loop, ``"plain"`` (``sgemm_cp_async``) or ``"dbuf"``
    (``sgemm_cp_async_dbuf``: fragments double-buffered in registers); for ``"dbuf"``, ``issue_after`` is the
    k-step slot of the copies, 0..bk-1 (None: bk-1, right after the barrier that ends the tile's reads).
    ``llvm_loops`` (for experiments): the register tile's loops left to LLVM (True, the default) or expanded
    statement by statement (False: the form before issue 17, minutes to compile at 8 x 16). ``cols_outer`` (for
    experiments; None: ``COLS_OUTER_TILES``): the plain loop's FFMAs in LLVM loops with the columns outer."""
    # Only the branches the constants take are kept (``static_ifs``): numba's closure inlining would
    # otherwise copy ``issue_next`` (and, at the edges, its bounds arithmetic) into every k-step of the
    # loop before pruning: 2 to 4 times the compile time, minutes at the edges. The SASS is the same
    # either way (bench/h200.md, "Compile time").
    if variant == "v4":
        return unrolled(sgemm_v4, EDGES=edges, RI=1, COL_STEP=BN // 2, LLVM_LOOPS=bool(llvm_loops), static_ifs=True)
    if not edges and (vec_a, vec_b) != (4, 4):
        raise ValueError("edges=False needs 16-byte copies (vec_a = vec_b = 4)")
    if schedule == "kmajor" and vec_a != 4:
        raise ValueError("schedule='kmajor' reads A transposed and padded (16-byte copies): vec_a must be 4")
    if bk not in BKS:
        raise ValueError(f"bk must be one of {BKS}")
    if tile not in TILES:
        raise ValueError(f"tile must be one of {tuple(TILES)}")
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}")
    t = TILES[tile]
    layout = {} if tile == TILE else dict(TM=t.tm, TN=t.tn, THREADS=t.threads)
    if schedule in ("dbuf", "kmajor"):
        slot = bk - 1 if issue_after is None else issue_after
        if not 0 <= slot < bk:
            raise ValueError(f"issue_after (the k-step slot of the copies) must be in 0..{bk - 1} for {schedule}")
        kmajor = dict(A_KMAJOR=True, ROW_STEP=BM // (t.tm // 4)) if schedule == "kmajor" else {}
        return unrolled(sgemm_cp_async_kmajor if kmajor else sgemm_cp_async_dbuf, STAGES=stages, VEC_A=vec_a,
                        LLVM_LOOPS=bool(llvm_loops),
                        VEC_B=vec_b, EDGES=edges, copy_a=_COPY[vec_a], copy_b=_COPY[vec_b], BK=bk,
                        LDA=a_pitch(bk, schedule), TILE_FLOATS=tile_floats(bk, schedule), RI=t.ri,
                        COL_STEP=BN // (t.tn // 4), DB_SLOT=slot, AHEAD=stages - 1 if slot < bk - 1 else stages,
                        static_ifs=True, **layout, **kmajor)
    return unrolled(sgemm_cp_async, STAGES=stages, AHEAD=stages - 1, VEC_A=vec_a, VEC_B=vec_b, EDGES=edges,
                    LLVM_LOOPS=bool(llvm_loops),
                    COLS_OUTER=(tile, bk) in COLS_OUTER_TILES if cols_outer is None else bool(cols_outer),
                    copy_a=_COPY[vec_a], copy_b=_COPY[vec_b], BK=bk, LDA=a_pitch(bk, schedule),
                    TILE_FLOATS=tile_floats(bk, schedule), RI=t.ri, COL_STEP=BN // (t.tn // 4),
                    ISSUE_AFTER=t.issue_after[bk] if issue_after is None else issue_after, static_ifs=True, **layout)


def kernel(variant: str = "cp_async", stages: int = 3, vec_a: int = 4, vec_b: int = 4, edges: bool = True,
           bk: int = BK, tile: str = TILE, issue_after: int | None = None, schedule: str = SCHEDULE):
    """The compiled-on-first-use ``cuda.jit`` dispatcher for one configuration."""
    key = (variant, stages, vec_a, vec_b, edges, bk, tile, issue_after, schedule)
    if key not in _kernels:
        fn = kernel_source(variant, stages, vec_a, vec_b, edges, bk, tile, issue_after, schedule)
        _kernels[key] = jit(fn, launch_bounds=launch_bounds(edges, bk, tile, schedule))
    return _kernels[key]


def threads(tile: str = TILE) -> int:
    """Threads of a CTA with this thread tile: 256 for the chapter's 8 x 8, 128 for 8 x 16."""
    return TILES[tile].threads


def a_pitch(bk: int = BK, schedule: str = SCHEDULE) -> int:
    """Floats from one row of a stage's A tile to the next: ``bk``, plus ``A_PAD`` for the schedule."""
    return bk + A_PAD[schedule]


def tile_floats(bk: int = BK, schedule: str = SCHEDULE) -> int:
    """Floats of one stage: the A tile (BM rows of ``a_pitch``) and the B tile (bk x BN)."""
    return BM * a_pitch(bk, schedule) + bk * BN


def shared_bytes(stages: int, bk: int = BK, schedule: str = SCHEDULE) -> int:
    """Dynamic shared memory of the cp.async kernel: the chapter's 8 KiB per stage (16 KiB with bk 16); the dbuf
    schedule's padded A rows add 4 KiB a stage."""
    return stages * tile_floats(bk, schedule) * 4


def sgemm(A, B, C=None, alpha=1.0, beta=0.0, stages=None, variant="cp_async", stream=0, bk=None, tile=None,
          schedule=None):
    """C = alpha * A @ B + beta * C for float32 row-major CUDA arrays (numba, CuPy, PyTorch...).

    ``C`` is allocated (and ``beta`` must be 0) when not given. Returns C as a numba device array
    view of the same memory. ``variant`` is ``"cp_async"`` (``stages`` 2..8; ``bk``, the k-depth of a
    stage, 8 as in the chapter or 16; ``tile``, the thread tile, ``"8x8"`` as in the chapter or
    ``"8x16"``: 128 threads of 8 x 16 outputs; ``schedule``, the main loop, ``"plain"`` as in the chapter,
    ``"dbuf"``: fragments double-buffered in registers, see ``sgemm_cp_async_dbuf``, or ``"kmajor"``: the dbuf loop
    on A transposed first into a workspace as large as A, one per stream, kept between calls, see
    ``sgemm_cp_async_kmajor``) or ``"v4"`` (``bk`` 8, ``tile`` "8x8", ``schedule`` "plain").
    For ``cp_async``, what is left None (``stages``, ``tile``, ``bk``, ``schedule``) comes from the tuner's
    fastest measured configuration on this GPU and problem that agrees with what was given
    (``python -m asyncpipe tune sgemm``; ``asyncpipe.tune`` registers its cache in ``asyncpipe.kernels.options``,
    this module never imports it), else from the chapter's: 3 stages, "8x8", 8, "plain". A repeated
    call with the same arrays and options reuses its launch plan (``asyncpipe.host.plans``): no
    checks, no argument handling.
    """
    from ..host.plans import array_key, option_key, run_plan
    from .checks import as_matrix

    c_given = C is not None
    if variant == "cp_async" and None in (stages, tile, bk, schedule):
        stages, tile, bk, schedule = _configuration(A, B, stages, tile, bk, schedule)
    tile, bk = TILE if tile is None else tile, BK if bk is None else bk
    schedule = SCHEDULE if schedule is None else schedule
    if not c_given:
        a, b = as_matrix("sgemm", "A", A), as_matrix("sgemm", "B", B)
        C = cuda.device_array((a.shape[0], b.shape[1]), np.float32, stream=stream)
    key = (array_key(A), array_key(B), array_key(C),
           *option_key(alpha, beta, stages, variant, c_given, bk, tile, schedule), id(stream) if stream else 0)
    run_plan(_plans, key, lambda: _plan(A, B, C, alpha, beta, stages, variant, stream, c_given, bk, tile, schedule))
    return C if not c_given else as_matrix("sgemm", "C", C)


CHAPTER_CONFIGURATION = {"stages": 3, "tile": TILE, "bk": BK, "schedule": SCHEDULE}


def _configuration(A, B, stages, tile, bk, schedule=None) -> tuple:
    """(stages, tile, bk, schedule) with the ones not given filled from the tuner's cache (``sgemm``'s doc)."""
    from ..host.plans import array_key
    from .options import choose

    given = {k: v for k, v in (("stages", stages), ("tile", tile), ("bk", bk), ("schedule", schedule))
             if v is not None}
    ka, kb = array_key(A), array_key(B)
    tuned = None
    if ka is not None and kb is not None and len(ka[1]) == len(kb[1]) == 2:
        tuned = choose("sgemm", (ka[1][0], kb[1][1], ka[1][1]), given)     # asyncpipe.tune's cache, registered
    chosen = CHAPTER_CONFIGURATION | (tuned or {}) | given
    return chosen["stages"], chosen["tile"], chosen["bk"], chosen["schedule"]


_plans = PlanCache()
_workspaces: dict = {}                    # stream -> the buffer its kmajor plans transpose A into (_at_workspace)


def _at_workspace(floats: int, stream):
    """The buffer schedule "kmajor" transposes A into, one per stream, shared by that stream's plans: their launches
    run in stream order, so each transpose comes after the previous GEMM has read the buffer. It grows to the largest
    problem seen; a plan keeps the one it was built with. (One buffer per plan would keep up to PLAN_CACHE_SIZE
    copies of A alive, one per call that lets sgemm allocate C.)"""
    key = id(stream) if stream else 0
    buf = _workspaces.get(key)
    if buf is None or buf.size < floats:
        buf = _workspaces[key] = cuda.device_array(floats, np.float32, stream=stream)
    return buf


def _plan(A, B, C, alpha, beta, stages, variant, stream, c_given, bk, tile=TILE, schedule=SCHEDULE):
    """The checks, the variant's kernel and the marshalled launch of one problem (``_plans``)."""
    from ..host.launch import LaunchSequence, prepare_launch
    from .checks import as_matrix, check_gemm

    a, b, c = as_matrix("sgemm", "A", A), as_matrix("sgemm", "B", B), as_matrix("sgemm", "C", C)
    M, K = a.shape
    N = b.shape[1]
    check_gemm("sgemm", a, b, c, beta if c_given else 0.0, stages, variant, not c_given and beta != 0)
    check(bk in (BKS if variant == "cp_async" else (BK,)), "sgemm",
          f"bk (the k-depth of a stage) must be one of {BKS} for cp_async, {BK} for v4", f"bk={bk!r} for {variant}")
    check(isinstance(tile, str) and tile in (TILES if variant == "cp_async" else (TILE,)), "sgemm",
          f"tile (the thread tile) must be one of {tuple(TILES)} for cp_async, {TILE!r} for v4",
          f"tile={tile!r} for {variant}")
    check(isinstance(schedule, str) and schedule in (SCHEDULES if variant == "cp_async" else (SCHEDULE,)), "sgemm",
          f"schedule (the main loop) must be one of {SCHEDULES} for cp_async, {SCHEDULE!r} for v4",
          f"schedule={schedule!r} for {variant}")
    # 16-byte copies need 16-byte aligned rows: K (N) a multiple of 4 and A (B) 16-byte aligned; kmajor copies A's
    # transposed and padded copy, whose rows always allow them
    vec_a = 4 if schedule == "kmajor" or (K % 4 == 0 and a.device_ctypes_pointer.value % 16 == 0) else 1
    vec_b = 4 if N % 4 == 0 and b.device_ctypes_pointer.value % 16 == 0 else 1
    edges = not (M % BM == 0 and N % BN == 0 and K % bk == 0 and vec_a == vec_b == 4)
    grid = ((N + BN - 1) // BN, (M + BM - 1) // BM)
    a_flat = a.reshape(M * K)
    if schedule == "kmajor":                          # the kernel reads At (K x MP, zero-padded) instead of A
        mp, kp = grid[1] * BM, (K + bk - 1) // bk * bk
        at = _at_workspace(kp * mp, stream)
        pre = transpose.prepare(a_flat, at, M, K, mp, kp, stream=stream)
        a_flat = at
    args = (np.int32(M), np.int32(N), np.int32(K), np.float32(alpha), a_flat, b.reshape(K * N),
            np.float32(beta), c.reshape(M * N))
    if variant == "v4":
        return prepare_launch(kernel("v4", edges=edges), grid, THREADS, *args, stream=stream)
    run = prepare_launch(kernel("cp_async", stages, vec_a, vec_b, edges, bk, tile, schedule=schedule), grid,
                         threads(tile), *args, shared_mem=shared_bytes(stages, bk, schedule), stream=stream)
    return LaunchSequence(pre, run, keep=(at,)) if schedule == "kmajor" else run
