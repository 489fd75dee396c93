"""The block-scaled FP8 GEMM kernel (DeepGEMM's scheme on Hopper): D = (A * sa) (B * sb)^T in bf16.

A is M x K e4m3 (K contiguous) with one fp32 scale per 1 x 128 block (``sa``, stored K-block-major: the 128
row scales of a k-block are contiguous, see ``fp8_quant``); B is N x K e4m3 (K-major) with one fp32 scale
per 128 x 128 block (``sb``, ceil(N/128) x ceil(K/128), row-major). The host side is ``fp8_gemm.py``.

    a CTA = 3 warpgroups (384 threads), one 128 x BN tile of D at a time (persistent), in clusters of
    CM x CN CTAs that own a (CM * 128) x (CN * BN) cluster tile and share its operands by multicast
    ├── warpgroup 0, the producer: setmaxnreg.dec 40; one thread, per tile and 128-wide k-block:
    │     producer_acquire(empty, st); producer_commit(full, st, STAGE_TX)
    │     TMA A   its 1/CN of the tile's 128 rows x 128 K (128B swizzle: one 128-byte row = 128 e4m3),
    │             multicast to the CN CTAs of the cluster's row that use the same A rows
    │     TMA B   its 1/CM of the tile's BN rows x 128 K (128B swizzle), multicast to the CM CTAs of its column
    │     TMA sa  this k-block's 128 row scales (one 512-byte box of the K-block-major scales)
    │     TMA sb  at 192 wide: the 16-byte boxes of flat sb that hold the tile's two B scales of this k-block
    └── warpgroups 1 and 2, the consumers: setmaxnreg.inc 232; each owns 64 rows of the tile:
          at most 128 wide: sb_k = shfl(lane kb % 32 of the warp's chunk of sb), loaded a chunk ahead
          consumer_wait(full, st)
          4 x wgmma m64nBNk32 e4m3 into acc_blk            scale-d 0 on the first: a fresh fp32 block sum
          commit; syncwarp -> release(the last k-block's slot)            its mmas and scale reads are done,
                                                           and releasing it here keeps the release off the path
                                                           from the promotion to these mmas (LATE_RELEASE)
          read the thread's two row scales (at 192 wide, B's two too) from the stage; poll the next slot's full
          barrier (POLL: the wait before the next mmas is then skipped, as cuBLAS orders it)
          wgmma.wait_group 0
          acc += acc_blk * (sa[row, kb] * sb_k)            the promotion, in fp32 registers (FFMA); a 192-wide
                                                           tile takes each column's block's scale
          after the last k-block: D = bf16(acc), each warp's 16 rows into 128B-swizzled staging and out by TMA
          stores that drain during the next tile (EPI_TMA), or straight from registers predicated on row < M
          (with K slices: the sums into the workspace, and the tile's last slice adds them and stores D);
          DEFER: once the next unit's first k-block's mmas are issued, while they run

**B's scales.** At 192 wide (``sb_by_tma``) the producer loads, with each k-block, the 16-byte boxes of flat sb
that hold the tile's two B scales (TMA's boxes start on 16-byte boundaries: the scale is word (row + kb) % 4 of its
box) into the stage past sa, counted by the full barrier, and the consumers read them with a shared load each after
their wait (sb must then start on a 16-byte boundary). At most 128 wide each consumer warp holds 32 k-blocks' scales,
one a lane, loaded a chunk ahead and read with shfl (``b_scales_from_chunk``). Measured on an H100 on 2026-12-07
(bench/h100_fp8_ab_b_scales_2026-12-07.json, interleaved processes against the chunks everywhere): the boxes take 30
SASS instructions out of the 192-wide k-loop (199 -> 169) and run 0.8 % faster at 4096 x 24576 x 1536, 0.6 % at
4096 x 2112 x 7168 and 0.3-3 % at 8192^3; at 128 wide the same boxes ran 6-9 % slower at 4096^3 and 4-6 % at
4096 x 7168 x 2048, and so did the scales stored into the stage by the producer thread (4 %), or main's kernel
given one more 512-byte TMA load a stage (3 %): there a stage's loads have no time to spare.

**The late release.** A slot is handed back after the next k-block's mmas are issued, not right after its own
mmas complete: the release (a branch and up to three cluster arrivals by lane 0) then runs while the tensor core
works, not between the promotion and the next mmas, where every instruction delays them. It holds one more slot
per warpgroup, so it needs two slots per warpgroup (``LATE_RELEASE``: STAGES // KSPLIT >= 2; KSPLIT 2 with two
stages gives each warpgroup one slot, and waiting for its next k-block there would wait for itself).

**Two block sums (DACC).** With one block sum a warpgroup's tensor-core work stops at every k-block: its mmas,
their wait, the promotion, then the next mmas; only the other warpgroup's mmas fill the gap. At <= 128 wide with
KSPLIT 1, a third set of registers is free (3 x 64 fp32 accumulators), so k-blocks go in
pairs: the first into ``acc_blk``, the second into ``acc_blk1``; wait_group 1 and the first's promotion while the
second's mmas run, then wait_group 0 and the second's. No wgmma or wait sits under a branch inside the loop (ptxas
then serialises every wgmma of the kernel, C7514): an odd unit's last k-block follows the loop.

**The deferred store (DEFER).** Both consumer warpgroups finish a tile together, so while they convert and stage
its D the tensor core has nothing of theirs to run. With DEFER the unit's first k-block is peeled out of the k-loop:
its mmas are issued, then the tile before is stored (``store_tile``), then they are waited for; the walk's last tile
is stored after the walk. The peeled k-block's promotion starts from zeroed sums. With two block sums (DACC) the
peeled k-block's B scale is a load of its own, asked for at the end of the unit before (no store lies between to
wait it out), and read after the mmas' wait; the chunks then start at the next k-block (``kb_c``). DEFER is on
where ``defer_fits``: KSPLIT 1, no pingpong, and two block sums or 192-wide tiles (one block sum with chunks would
want the peeled scale the same way; not done).

**TRACE (a diagnostic build, never shipped).** With TRACE = B > 0 (one block sum, KSPLIT 1, no K slices), thread 0
of each consumer warpgroup writes the low 32 bits of ``ptx.clock64`` for each of its first B k-blocks when it wants
the k-block's data, when the data is there (it issues the mmas) and when their wait ends, into ``counters`` (words
((CTA x 2 + warpgroup - 1) x B + j) x TRACE_WORDS + e, which the host sizes for it: ``scripts/fp8_trace.py``). With
TRACE 0 the SASS is the shipped kernel's.

**Why promote every 128 of K.** The tensor core's FP8 accumulation keeps fewer bits than fp32 (about 13-14
measured by DeepSeek); summed over all of K the error would grow with K. Each k-block's sum covers 128
products only (4 wgmma of 32), then goes into a true fp32 accumulator, scaled: the error stays bounded by
that of one 128-long block. Waiting for every k-block's mmas (wait_group 0) idles this warpgroup's share of
the tensor core during its promotion; the other consumer warpgroup's mmas fill it (DeepGEMM's schedule).

**Small M: KSPLIT 2.** With M <= 64 one warpgroup of a 128-row tile has no rows, and the other runs the
whole k-loop alone: each k-block's wgmmas, their wait and the promotion one after the other, with nothing to
fill the gaps. With KSPLIT 2 both warpgroups take the tile's first 64 rows, warpgroup 1 the k-blocks that land in
the even ring slots and warpgroup 2 those in the odd ones (STAGES even, so that each slot has one owner: a slot
shared by both could run two phases past one of them, and a parity wait cannot tell phase p from p + 2), and
each releases only its own slots (the empty barriers count 4 warps, not 8). After the k-loop warpgroup 2 writes
its sums to shared memory past the ring (64 x BN fp32, word i * 128 + t) and arrives on named barrier 1;
warpgroup 1 waits there, adds them and stores the tile, then arrives on named barrier 2, which warpgroup 2 waits
on before it writes the next tile's. A stage then holds A's 64 rows only (``a_rows``), not 128 of which 64 would be
TMA's zeros: 17 KB instead of 25 at 64 wide, 12 stages instead of 8, so more of B is in flight where the loads wait
on DRAM (at 64 x 7168 x 8192 on an H100: 45 us with 2 stages, 35 with 8; the 12 of 17 KB ran 1.10-1.25x the 8
of 25 KB at M = 64, bench/h100_fp8_ab_split_k_stages_bb1573f.json).

**Few tiles: K slices.** At 64 x 2112 x 7168 the 64-wide tiles are 33, a quarter of the H200's SMs, each walking
all 56 k-blocks: the GPU idles while B's 15 MB could stream in a fifth of the time. With KSLICES S the persistent walk
runs over S units per tile (``tail_coords``: the tiles fastest, then the slice), slice s taking k-blocks
[s kb / S, (s + 1) kb / S). **The last round's tiles only** (``whole`` > 0, stream-K's remedy for wave
quantization): at 4096^3 the 704 tiles of 128 x 192 make 5.33 rounds on 132 SMs, the last keeping 44 SMs busy for a
whole tile's time; walking the first 660 tiles whole and the last 44 in 3 slices each fills the last round with
132 units of a third of a tile.
After its k-loop a unit's holders of sums write them to an fp32 workspace (the tile's slot s), fence, and one thread
adds 1 to the tile's counter; the unit that finds S - 1 there is the last: it fences, adds the S slots in the order
0 .. S - 1 (its own too, from the workspace: with the registers' copy beside the sums ptxas spilled at 192 wide), so
the result does not depend on which unit came last, stores the tile and sets the counter back to 0. No unit waits for another: nothing can hang, however the CTAs are scheduled.

**Clusters** (DeepGEMM's TMA multicast). With 128 x 128 tiles every CTA reads 32 KB from L2 per k-block, and
ncu on the H200 found the kernel waiting on L2 (6.2 TB/s, tensor pipe idle half the time). The CM CTAs of a
cluster column compute adjacent M tiles with the same B tile, the CN CTAs of a cluster row adjacent N tiles with
the same A tile: each CTA loads 1/CM of its B and 1/CN of its A and multicasts them, so a 2 x 1 cluster reads
24 KB per CTA and k-block, a 2 x 2 cluster 16 KB. Every CTA's full barrier still expects a whole stage (its
peers' copies complete bytes on it too). A slot's empty barrier counts the consumer warps of every CTA that
shares copies with this one (its column for B, its row for A: CM + CN - 1 CTAs, itself once), and each
consumer warp releases the slot in each of those, lane i in the i-th at once (one predicated arrival). Rank r of
the cluster is (r % CM, r // CM) in the cluster tile. A CTA whose tile lies past M or N (the cluster tile
overhangs) still loads and multicasts its share (TMA zero-fills it) and stores nothing.

**The epilogue.** Stored straight from registers, a warp instruction writes 16 bytes of each of 8 rows, and both
consumer warpgroups stall on the stores for about a fifth of a 16-k-block tile (on an H100 the kernel without them
ran 1.25x at 4096 x 7168 x 2048, ``bench/h100_fp8_diag_noepi_1bce508.json``). With EPI_TMA each warp writes its 16 x 64
chunks into EPI_BUFS swizzled staging buffers past the ring and its lane 0 stores them by TMA (``fp8_gemm.
default_epilogue`` says where that is the default).

**Edges.** Any M >= 1, N a multiple of 8, K a multiple of 16 (``fp8_gemm`` checks them). TMA zero-fills
what lies past the tensor: A's and sa's rows past M, B's rows past N, A's and B's columns past K (a zero
product adds nothing, so the last, partial k-block needs no code of its own); every box still delivers its
full bytes (the expected tx-count is constant). The stores are predicated on row < M and column < N; the
scales of a partial block are ordinary entries of sa and sb (ceil(K/128) of them per row).

**Registers.** acc (total) and acc_blk: BN / 2 fp32 each, 128 per thread at BN = 128, plus addressing,
within the consumers' 232. Launch bounds (384, 1): 168 at launch; 128 x 40 + 256 x 232 = 64512 <= 65536.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32, int32, int64, uint8, uint16, uint32, uint64

from .. import ptx
from ..constants import BULK_SMEM_ALIGN_TENSOR
from ..pipeline import (advance, consumer_wait, pipeline_init, pipeline_state, producer_acquire,
                        producer_commit, tail_coords, warp_index, warpgroup_index)
from ..ptx import wgmma as W
from .unroll import kernel_part, splice, unroll, unrolled

# ---- the tile ------------------------------------------------------------------------------------------
WGMMA_ROWS = W.WGMMA_M              # a consumer warpgroup's rows
BM = 2 * W.WGMMA_M                  # rows of D per CTA: two consumer warpgroups of 64
BK = W.SWIZZLE_128B_ROW_BYTES       # 128 one-byte e4m3 = one 128-byte swizzle row = one scale block of K
SCALE_BLOCK = 128                   # sa: 1 x 128 blocks; sb: 128 x 128 blocks (DeepGEMM's granularity)
K_STEPS = BK // W.WGMMA_K_8BIT      # 4 k32 wgmma per k-block
BLOCK_NS = (64, 128, 192)           # 64 and 128 divide sb's 128: one B scale per tile and k-block; a 192-wide
                                    # tile meets two (its columns below SPLIT = 128 - n0 % 128 the first). 64
                                    # doubles the tiles of a small-M problem; 192 cuts A's share of the traffic
                                    # and makes 24576 columns 128 tiles (one wave); 256 would need 2 x 128
                                    # accumulators per thread beside the addressing: over 232
ELEM_BYTES = 1                      # e4m3
SCALE_BYTES = 4                     # fp32 scales
CONSUMERS = 2
THREADS = (1 + CONSUMERS) * W.WARPGROUP_THREADS   # 384
CONSUMER_WARPS = CONSUMERS * W.WARPGROUP_THREADS // 32
LAUNCH_BOUNDS = (THREADS, 1)
PRODUCER_REGS = 40
CONSUMER_REGS = 232
REGISTER_FILE = 65536
SMEM_ALIGN = W.SWIZZLE_ATOM_BYTES["128B"]   # 128B-swizzled tiles start on 1024-byte boundaries
BARRIER_BYTES = 8
MIN_STAGES, MAX_STAGES = 2, 12     # 12: 64-wide tiles with split_k 2 (17 KB stages)
SB_CHUNK = 32                       # at most 128 wide: B's scales a warp holds at once, one per lane (and k-block)
SB_BOX = 4                          # B's scales a TMA box of flat sb holds: 16 bytes, TMA's least, starting on a
                                    # 16-byte boundary (constants.TMA_COORD_ALIGN): the k-block's scale is word
                                    # (row + kb) % 4 of it (the others, neighbours' or zeros past sb, go unread)
SB_PITCH = 128                      # the second box of a 192-wide tile's stage: TMA writes to 128-byte boundaries
TRACE_WORDS = 3                     # TRACE's readings a k-block: data wanted, data there (issue), mmas done
DACC_MAX_BLOCK_N = 128              # two block sums and the promoted sums: 3 x 64 fp32 registers a thread at 128
FULL_MASK = 0xFFFFFFFF
CLUSTERS = ((1, 1), (2, 1), (1, 2), (2, 2))  # (CM, CN): CTAs of a cluster along M (sharing B) and N (sharing A)
KSPLITS = (1, 2)                    # 2: both consumer warpgroups take the same 64 rows, the k-blocks of the even
                                    # and of the odd slots (M <= 64, STAGES even)
KSPLIT_MAX_BLOCK_N = 128            # at 192 wide KSPLIT 2's reduction makes ptxas spill
REDUCE_FULL, REDUCE_FREE = 1, 2     # KSPLIT 2's named barriers: warpgroup 2's sums written / read (0: syncthreads)
SLICE_SYNC = 3                      # k_slices' named barrier: the holders of a tile's sums
TURN = 4                            # PINGPONG's named barriers: TURN + w - 1 is warpgroup w's turn to issue (4, 5)
MAX_KSLICES = 16                    # K slices of a tile (each a unit of the persistent walk): at most
SLICES_IN_BYTES = 8                 # k_slices' static shared word (the count a slice found), as numba pads it
N_MULTIPLE = 8                      # D's rows: whole 16-byte lines of bf16 (the stores write bf16 pairs)
K_MULTIPLE = 16                     # A's and B's rows: TMA's 16-byte global stride rule (e4m3: 1 byte)

SA_BYTES = BM * SCALE_BYTES         # 512: the k-block's scales of the tile's 128 rows
EPILOGUES = ("tma", "direct")       # D through swizzled staging buffers and TMA stores, or straight from registers
EPI_COLS = W.SWIZZLE_128B_ROW_BYTES // 2    # 64 bf16 columns of D: one 128-byte swizzle row, a staging chunk
EPI_BUF_BYTES = W.WGMMA_M * W.SWIZZLE_128B_ROW_BYTES   # 8 KB: a consumer warpgroup's 64 rows of a chunk
EPI_WARP_ROWS = 16                  # the TMA epilogue stores warp by warp: 16 rows x 64 columns a box
WORD_BYTES = 4

assert CONSUMER_REGS * CONSUMERS * W.WARPGROUP_THREADS + PRODUCER_REGS * W.WARPGROUP_THREADS <= REGISTER_FILE
assert BULK_SMEM_ALIGN_TENSOR <= SMEM_ALIGN and BK == SCALE_BLOCK


def a_rows(ksplit: int = 1) -> int:
    """A's rows in a stage: the tile's 128, or with KSPLIT 2 (M <= 64) the 64 both warpgroups multiply, so that
    the stages are smaller and more of them, more of B in flight, fit (the loads at small M wait on DRAM)."""
    return BM // ksplit


def a_bytes(ksplit: int = 1) -> int:
    return a_rows(ksplit) * BK * ELEM_BYTES      # 16 KB, or 8 KB with KSPLIT 2


def b_bytes(block_n: int) -> int:
    return block_n * BK * ELEM_BYTES


def sb_by_tma(block_n: int) -> bool:
    """Whether B's scales come through the ring by TMA: at 192 wide (two 16-byte boxes a stage). At most 128 wide
    the consumer warps read them from chunks of their own (SB_CHUNK): one more TMA load a stage costs more there
    than the chunks' bookkeeping (an H100, 2026-12-07, bench/h200.md)."""
    return block_n > SCALE_BLOCK


def sb_boxes(block_n: int) -> int:
    """B's scale boxes a stage holds: two at 192 wide (a tile meets two 128-blocks of B's rows), none below."""
    return 2 if sb_by_tma(block_n) else 0


def sb_offset(block_n: int, ksplit: int = 1) -> int:
    """Where a stage's B scales start: past A, B and sa (512 bytes past a multiple of 1024: 128-byte aligned)."""
    return a_bytes(ksplit) + b_bytes(block_n) + SA_BYTES


def stage_tx(block_n: int, ksplit: int = 1) -> int:
    """The bytes TMA delivers into one stage: A, B, the 128 scales of A and B's scale box(es)."""
    return a_bytes(ksplit) + b_bytes(block_n) + SA_BYTES + sb_boxes(block_n) * SB_BOX * SCALE_BYTES


def stage_bytes(block_n: int, ksplit: int = 1) -> int:
    """One stage: A | B | sa | sb, rounded up to 1024 bytes so that the next stage's A starts on a swizzle atom
    (at 192 wide sb's two boxes, SB_PITCH apart, fit in the slack the rounding leaves)."""
    end = stage_tx(block_n, ksplit)
    if sb_boxes(block_n):
        end = sb_offset(block_n, ksplit) + (sb_boxes(block_n) - 1) * SB_PITCH + SB_BOX * SCALE_BYTES
    return -(-end // SMEM_ALIGN) * SMEM_ALIGN


def reduce_bytes(block_n: int, ksplit: int = 1) -> int:
    """KSPLIT 2's buffer past the ring: warpgroup 2's 64 x BN fp32 sums (none with KSPLIT 1)."""
    return W.WGMMA_M * block_n * SCALE_BYTES if ksplit == 2 else 0


def epilogue_bytes(epi_bufs: int) -> int:
    """The TMA epilogue's staging past the ring (and KSPLIT 2's buffer): ``epi_bufs`` 8 KB chunk buffers per
    consumer warpgroup (none with the direct epilogue: ``epi_bufs`` 0)."""
    return CONSUMERS * epi_bufs * EPI_BUF_BYTES


def shared_bytes(block_n: int, stages: int, ksplit: int = 1, epi_bufs: int = 0) -> int:
    """Dynamic shared memory of a launch: the stages, KSPLIT 2's buffer, the epilogue's staging, slack to align
    them to 1024 bytes."""
    return stages * stage_bytes(block_n, ksplit) + reduce_bytes(block_n, ksplit) + epilogue_bytes(epi_bufs) + SMEM_ALIGN


def block_shared_bytes(block_n: int, stages: int, ksplit: int = 1, epi_bufs: int = 0) -> int:
    """Dynamic plus the static: the full/empty barriers and k_slices' word."""
    return shared_bytes(block_n, stages, ksplit, epi_bufs) + 2 * stages * BARRIER_BYTES + SLICES_IN_BYTES


def max_stages(block_n: int, smem_limit: int, ksplit: int = 1, epi_bufs: int = 0) -> int:
    """The most stages that fit; with KSPLIT 2 an even number (each consumer warpgroup owns every other slot)."""
    fit = min(MAX_STAGES, (smem_limit - SMEM_ALIGN - SLICES_IN_BYTES - reduce_bytes(block_n, ksplit) -
                           epilogue_bytes(epi_bufs)) // (stage_bytes(block_n, ksplit) + 2 * BARRIER_BYTES))
    return fit - fit % ksplit


def dacc_fits(block_n: int, ksplit: int = 1, pingpong: bool = False) -> bool:
    """Whether k-blocks may go in pairs into two block sums (DACC): KSPLIT 1, at most ``DACC_MAX_BLOCK_N`` wide
    (three sets of fp32 sums in registers), no pingpong."""
    return ksplit == 1 and block_n in BLOCK_NS and block_n <= DACC_MAX_BLOCK_N and not pingpong


def defer_fits(block_n: int, stages: int, ksplit: int = 1, pingpong: bool = False, dacc: bool = False) -> bool:
    """Whether a tile's epilogue waits for the next unit's first mmas (DEFER): KSPLIT 1, no pingpong, and either
    two block sums (DACC) or, with one, the late release and B's scales from the stage (192 wide)."""
    return ksplit == 1 and not pingpong and (dacc or sb_by_tma(block_n) and stages >= 2)


def epilogue_chunks(block_n: int) -> int:
    """The TMA epilogue's chunks of a warpgroup's tile: 64 columns each (a 192-wide tile: 3)."""
    return -(-block_n // EPI_COLS)


# ------------------------------------------------------------------------------------------------
# The kernel. Compile-time constants (unrolled): BN, N2 (BN / 2 accumulators), STAGES, MMA (the e4m3 wgmma of
# N = BN), STAGE_BYTES, STAGE_TX, SB_TMA, SB_OFF, SB_PITCH, A_BYTES, A_ROWS, B_BYTES, CM, CN, KSPLIT, KSLICES, HOLDERS,
# EPI_TMA, EPI_BUFS, EPI_CHUNKS, REDUCE_BYTES (``kernel_constants``).
# Arguments: tensor maps of A (M x K e4m3 as uint8), B (N x K), the scales of A (ceil(K/128) x M fp32 view), B's
# scales (SB_TMA: flat ceil(N/128) x k_blocks fp32, boxes of SB_BOX; A's map stands in below 192 wide) and D (M x N
# bf16, boxes of 16 x 64: the TMA epilogue's; A's map stands in with the direct one); sb flat (the chunks' below 192
# wide); d: D's bf16 pairs as uint32, flat M x N / 2 (the direct epilogue's); ws and counters: k_slices' workspace
# (``workspace_words``) and one counter per sliced CTA tile, zero before the launch and after
# it; M, N, K; tiles_m, tiles_n: cluster tiles; whole: the tiles walked whole before the sliced ones (KSLICES > 1).
# ------------------------------------------------------------------------------------------------
@cuda.jit(device=True, inline="always")
def slice_k_blocks(k_slice, k_blocks, slices):
    """K slice ``k_slice``'s k-blocks [lo, hi) of ``slices``: every one at least one k-block (slices <= k_blocks)."""
    return k_slice * k_blocks // slices, (k_slice + 1) * k_blocks // slices



@kernel_part
def b_scales_from_chunk():
    """At most 128 wide: B's scale of k-block ``kb`` (``sb_k``) from the warp's chunk of SB_CHUNK k-blocks' scales,
    one a lane, read with shfl; the next chunk asked for a chunk ahead, so that the load's latency is paid once every
    32 k-blocks."""
    j = (kb - kb_c) & (SB_CHUNK - 1)                # chunks start at the unit's first k-block of the loop (kb_c)
    if j == 0 and kb > kb_c:                        # the chunk asked for 31 k-blocks ago
        sb_cur = sb_nxt
    if j == 1 and kb - 1 + SB_CHUNK < kb_hi:
        sb_nxt = sb_chunk(sb_row, kb - 1 + SB_CHUNK)
    sb_k = cuda.shfl_sync(FULL_MASK, sb_cur, j)


@kernel_part
def b_scales_from_stage():
    """At 192 wide: B's scales of slot ``st``'s k-block ``kb`` (``sb_k``, and ``sb_k2``, the next 128-block's) from
    the stage's two boxes, once its data is in: a shared load each, the same word for every lane."""
    sb_addr = sb_addr0 + st.stage * STAGE_BYTES
    sb_k = ptx.ld_shared_f32(sb_addr + ((sb_row + kb) & (SB_BOX - 1)) * SCALE_BYTES)
    sb_k2 = ptx.ld_shared_f32(sb_addr + SB_PITCH + ((sb_row2 + kb) & (SB_BOX - 1)) * SCALE_BYTES)


@kernel_part
def issue_mmas():
    """Slot ``st``'s k-block once its data is in: its 4 k32 mmas into block sum ``h`` (acc_blk, or DACC's acc_blk1),
    committed as one group."""
    # TRACE (a diagnostic build): thread 0 records this k-block (none past the trace's share or the buffer) when
    # its data was wanted, when it was there, and (k_block_promote) when its mmas were done
    tracing = TRACE and t == 0 and traced < TRACE and trace0 + TRACE_WORDS * TRACE <= counters.size
    if tracing:
        counters[trace0 + TRACE_WORDS * traced] = int32(ptx.clock64() & uint64(0xFFFFFFFF))
    if not ready:                                   # (the poll before the last promotion found it incomplete)
        consumer_wait(full, st)
    if tracing:
        counters[trace0 + TRACE_WORDS * traced + 1] = int32(ptx.clock64() & uint64(0xFFFFFFFF))
    a_desc, b_desc = stage_descriptors(st)
    # (A warpgroup whose rows all lie past M still runs its mmas on TMA's zeros: skipping them by a branch here cost
    # 15-23 % at 64 and 128 wide where no warpgroup is idle, on the H100, 2026-12-05; M <= 64 takes KSPLIT 2 instead.)
    if PINGPONG:                                    # wait for the other warpgroup's mmas to be issued
        ptx.bar_sync(TURN + wg - 1, 2 * W.WARPGROUP_THREADS)
    ptx.wgmma_fence_sync_aligned()                  # the block sum was read by its last promotion
    for s in unroll(K_STEPS):
        # K-major, 128B swizzle: the k32 step s starts 32 bytes further along each row; scale-d 0 on the first
        # step: the block's sum starts from its first product
        step = s * W.WGMMA_K_8BIT * ELEM_BYTES
        MMA(ptx.addr(acc_blk if h == 0 else acc_blk1, 0), W.advance_descriptor(a_desc, step),
            W.advance_descriptor(b_desc, step), 0 if s == 0 else 1)
    ptx.wgmma_commit_group_sync_aligned()
    if PINGPONG:                                    # the other warpgroup's turn: its mmas queue behind these
        ptx.bar_arrive(TURN + 2 - wg, 2 * W.WARPGROUP_THREADS)


@kernel_part
def k_block_issue():
    """One block sum (no DACC): slot ``st``'s k-block ``kb``, its mmas issued, the last k-block's slot released
    (LATE_RELEASE), its scales read (s, t, u: the columns' products of A's and B's), the next slot polled."""
    for h in unroll(1):
        splice(issue_mmas)
    if LATE_RELEASE:
        # the last k-block's slot goes back now that this one's mmas are queued: off the path from its promotion
        # to these mmas (its mmas and scale reads are done: wait_group 0 and the promotion)
        if kb > first:
            release(held)
        held = st
    if SB_TMA:
        splice(b_scales_from_stage)
    sa_addr = sa_addr0 + st.stage * STAGE_BYTES
    sa0 = ptx.ld_shared_f32(sa_addr)                # the scales of rows row_t and row_t + 8
    sa1 = ptx.ld_shared_f32(sa_addr + 8 * SCALE_BYTES)
    s0 = sa0 * sb_k                                 # columns of B's first 128-block
    s1 = sa1 * sb_k
    if BN > SCALE_BLOCK:                            # columns 64 .. 127 of the tile: either block; 128 ..: the next
        t0 = sa0 * sb_k2
        t1 = sa1 * sb_k2
        u0 = s0 if split == SCALE_BLOCK else t0
        u1 = s1 if split == SCALE_BLOCK else t1
    if not LATE_RELEASE:
        ptx.wgmma_wait_group_sync_aligned(0)        # this k-block's mmas are done ...
        release(st)                                 # ... so the slot goes back
    st = advance(st, STAGES)
    if POLL:
        # the next k-block's data, polled while the mmas run: from the promotion to the next mmas then only what
        # must be (cuBLAS's order; KSPLIT 1 only, where the next slot in the ring is this warpgroup's next)
        ready = ptx.mbarrier_test_wait_parity(ptx.addr(full, st.stage), st.phase) != 0


@kernel_part
def k_block_promote():
    """One block sum: the k-block's mmas waited for (LATE_RELEASE) and its sum promoted into ``acc``."""
    if LATE_RELEASE:
        ptx.wgmma_wait_group_sync_aligned(0)        # this k-block's mmas are done
    if TRACE:                                       # a diagnostic build: when they were done
        if tracing:
            counters[trace0 + TRACE_WORDS * traced + 2] = int32(ptx.clock64() & uint64(0xFFFFFFFF))
        traced += 1
    # ---- promotion: acc[4 j + 2 h + e] is row row_t + 8 h, columns 8 j + 2 q + e (d_row_col)
    for i in unroll(N2, llvm=LLVM_LOOPS, nest=8):
        if BN <= SCALE_BLOCK or i < 32:              # columns 0 .. 63: the first block
            if (i >> 1) & 1:
                acc[i] += acc_blk[i] * s1
            else:
                acc[i] += acc_blk[i] * s0
        elif i < 64:                                 # columns 64 .. 127
            if (i >> 1) & 1:
                acc[i] += acc_blk[i] * u1
            else:
                acc[i] += acc_blk[i] * u0
        else:                                        # columns 128 .. 191: the next block
            if (i >> 1) & 1:
                acc[i] += acc_blk[i] * t1
            else:
                acc[i] += acc_blk[i] * t0


@kernel_part
def store_tile():
    """The epilogue: the warpgroup's 64 x BN of D (rows em0 + row_wg .., columns en0 ..) from the promoted sums
    ``acc``, in bf16."""
    if EPI_TMA:
        # through this warpgroup's EPI_BUFS swizzled staging buffers of 64 columns, EPI_BUFS chunks a round,
        # each warp on its own 16 rows: its lane 0 waits until the warp's earlier stores have read the
        # buffers (wait_group.read 0), syncwarp, every lane writes its bf16 pairs (16-byte chunk c of row r at
        # c ^ (r % 8): a warp's word stores hit 32 banks), fence.proxy.async, syncwarp, and lane 0 stores each
        # chunk's 16 x 64 box (the map clips it at M and N), one bulk group. The next tile's k-loop runs while
        # the stores drain. (Warp by warp: with the warpgroup's named barrier around them ptxas spilled at
        # 192 wide.)
        g = lane // 4
        q = lane % 4
        r16 = warp_rows                          # the warp's rows r16 + g and r16 + g + 8 of the 64: the
        # test below on a warp-uniform value (warp_index): on t // 32 it made ptxas take the whole persistent
        # loop as divergent, the k-loop's descriptors out of uniform registers (16 R2UR a k-block, a spill at
        # 192 wide)
        staged = (pad + STAGES * STAGE_BYTES + REDUCE_BYTES + (wg - 1) * EPI_BUFS * EPI_BUF_BYTES) // WORD_BYTES
        if em0 + row_wg + r16 < M:
            for rnd in unroll(EPI_ROUNDS):
                if en0 + rnd * EPI_BUFS * EPI_COLS < N:
                    if lane0:
                        ptx.cp_async_bulk_wait_group_read(0)
                    cuda.syncwarp()
                    for b in unroll(EPI_BUFS):
                        ch = rnd * EPI_BUFS + b
                        if ch < EPI_CHUNKS and en0 + ch * EPI_COLS < N:
                            buf = staged + b * (EPI_BUF_BYTES // WORD_BYTES)
                            for h in unroll(2, llvm=LLVM_LOOPS):
                                line = buf + (r16 + g + 8 * h) * (W.SWIZZLE_128B_ROW_BYTES // WORD_BYTES) + q
                                for jj in unroll(EPI_COLS // 8, llvm=LLVM_LOOPS, nest=8):
                                    j = ch * (EPI_COLS // 8) + jj   # columns 8 jj + 2 q, + 1 of the chunk
                                    smem_u32[line + ((jj ^ g) << 2)] = ptx.cvt_rn_bf16x2_f32(
                                        acc[4 * j + 2 * h + 1], acc[4 * j + 2 * h])
                    ptx.fence_proxy_async_shared_cta()
                    cuda.syncwarp()
                    if lane0:
                        for b in unroll(EPI_BUFS):
                            ch = rnd * EPI_BUFS + b
                            if ch < EPI_CHUNKS and en0 + ch * EPI_COLS < N:
                                ptx.cp_async_bulk_tensor_2d_global_shared(
                                    ptx.addr(tma_d, 0), en0 + ch * EPI_COLS, em0 + row_wg + r16,
                                    ptx.addr(smem_u32, staged + b * (EPI_BUF_BYTES // WORD_BYTES) +
                                             r16 * (W.SWIZZLE_128B_ROW_BYTES // WORD_BYTES)))
                        ptx.cp_async_bulk_commit_group()
    else:
        # bf16 pairs straight from registers, rows < M (columns en0 + 8 j + 2 q and + 1 are the word
        # (en0 + 8 j + 2 q) / 2 of the row's N / 2)
        for h in unroll(2, llvm=LLVM_LOOPS):
            r = em0 + row_t + 8 * h
            if r < M:
                col = en0 + 2 * (t % 4)          # the thread's first column; N is even: pairs are whole
                word = r * (N >> 1) + (col >> 1)
                for j in unroll(BN // 8, llvm=LLVM_LOOPS, nest=8):
                    if col + 8 * j < N:
                        d[word + 4 * j] = ptx.cvt_rn_bf16x2_f32(acc[4 * j + 2 * h + 1], acc[4 * j + 2 * h])


@kernel_part
def issue_k_block():
    """DACC: k-block ``kb``'s B scale (from the warp's chunk), its mmas into block sum ``h`` (acc_blk or acc_blk1),
    and its scales (p or r) read from its slot, ``held`` or ``held1``, which goes back after its mmas."""
    splice(b_scales_from_chunk)
    splice(issue_mmas)
    splice(k_block_scales)


@kernel_part
def k_block_scales():
    """DACC: the products of k-block ``kb``'s row scales and B's (p or r), its slot held (``held`` or ``held1``),
    the next slot polled."""
    sa_addr = sa_addr0 + st.stage * STAGE_BYTES
    if h == 0:
        p0 = ptx.ld_shared_f32(sa_addr) * sb_k
        p1 = ptx.ld_shared_f32(sa_addr + 8 * SCALE_BYTES) * sb_k
        held = st
    else:
        r0 = ptx.ld_shared_f32(sa_addr) * sb_k
        r1 = ptx.ld_shared_f32(sa_addr + 8 * SCALE_BYTES) * sb_k
        held1 = st
    st = advance(st, STAGES)
    if POLL:
        ready = ptx.mbarrier_test_wait_parity(ptx.addr(full, st.stage), st.phase) != 0


def fp8_gemm_kernel(tma_a, tma_b, tma_sa, tma_sb, tma_d, sb, d, ws, counters, M, N, K, tiles_m, tiles_n, whole):
    smem = cuda.shared.array(0, uint8)               # STAGES x (A | B | sa | sb), aligned below
    smem_f32 = cuda.shared.array(0, float32)         # the same dynamic shared memory, as fp32 (the scales)
    smem_u32 = cuda.shared.array(0, uint32)          # ... and as 32-bit words (the TMA epilogue's bf16 pairs)
    full = cuda.shared.array(STAGES, uint64)
    empty = cuda.shared.array(STAGES, uint64)
    slices_in = cuda.shared.array(1, int32)          # k_slices: the K slices of the tile counted before this one
    tid = cuda.threadIdx.x
    wg = warpgroup_index()                           # 0 producer, 1..2 consumers; warp-uniform: A's descriptors
                                                     # stay in uniform registers (roles.py)
    base = ptx.cvta_to_shared_u32(ptx.addr(smem, 0))
    pad = (SMEM_ALIGN - (base & (SMEM_ALIGN - 1))) & (SMEM_ALIGN - 1)
    k_blocks = (K + BK - 1) // BK                    # the last one may be partial (zero-filled past K)
    rank = ptx.cluster_ctarank()
    rank_m = rank % CM                               # this CTA's place in the cluster tile
    rank_n = rank // CM
    cluster = cuda.blockIdx.x // CLUSTER             # 1-D grid: a cluster is CLUSTER consecutive blocks
    clusters = cuda.gridDim.x // CLUSTER
    tiles = tiles_m * tiles_n
    units = whole + (tiles - whole) * KSLICES        # the walk (tail_coords): tiles [0, whole) whole, then the K
                                                     # slices of the rest (whole = 0: every tile sliced)

    def walk(unit):
        """(tile_m, k_slice, tile_n, slot) of ``unit``: slot -1 for a whole tile, else the sliced tile's number."""
        # (a unit past the walk, which a loop's first fetch may be, meets a tail of at least 1: no division by 0)
        return tail_coords(unit, tiles_m, whole if KSLICES > 1 else units, max(tiles - whole, 1))

    def k_range(k_slice, slot):
        """The unit's k-blocks [lo, hi): a whole tile's all, a slice's share."""
        if KSLICES > 1 and slot >= 0:
            lo, hi = slice_k_blocks(k_slice, k_blocks, KSLICES)
            return int32(lo), int32(hi)
        return int32(0), int32(k_blocks)

    def sb_rows(tile_n):
        """The offsets in flat sb of the rows of B's scales that tile ``tile_n``'s columns meet: BN <= 128 divides
        128, one row (a tile past N reads the last row's); a 192-wide tile (n0 a multiple of 64) meets two 128-blocks
        of B's rows: columns below ``split`` are the first's, the rest the next's (the last block's where that lies
        past N)."""
        n0 = (tile_n * CN + rank_n) * BN
        return ((min(n0, N - 1) // SCALE_BLOCK) * k_blocks,
                (min(n0 + SCALE_BLOCK - n0 % SCALE_BLOCK, N - 1) // SCALE_BLOCK) * k_blocks)

    # ---- prologue: the ring's barriers, visible to TMA and to the cluster --------------------------
    if tid == 0:
        # full: the producer arrives once (plus the bytes); empty: each consumer warp of every CTA that
        # writes into this one releases once (with KSPLIT 2 only the warps of the k-block's warpgroup)
        pipeline_init(full, empty, STAGES, 1, CONSUMER_WARPS // KSPLIT * (CM + CN - 1))
    if CLUSTER == 1:
        cuda.syncthreads()
    else:
        ptx.barrier_cluster_arrive()
        ptx.barrier_cluster_wait()

    if wg == 0:
        # ---- producer warpgroup: gives its registers away, one thread issues every copy ----------
        ptx.setmaxnreg_dec_sync_aligned_u32(PRODUCER_REGS)
        if tid == 0:
            if MAP_FENCES:                                   # the host wrote the maps
                ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tma_a, 0))
                ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tma_b, 0))
                ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tma_sa, 0))
                if SB_TMA:
                    ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tma_sb, 0))
            st = pipeline_state(0, 0)
            unit = cluster                                   # units cluster, + clusters, ... (tail_coords)
            while unit < units:
                tm, ks, tn, slot = walk(unit)
                m0 = (tm * CM + rank_m) * BM
                n0 = (tn * CN + rank_n) * BN
                kb_lo, kb_hi = k_range(ks, slot)
                sb_row, sb_row2 = sb_rows(tn)
                for kb in range(kb_lo, kb_hi):
                    producer_acquire(empty, st)                      # free in every CTA this one writes into
                    producer_commit(full, st, STAGE_TX)              # A + B + sa (+ sb) of this k-block, from all
                    a_off = pad + st.stage * STAGE_BYTES
                    bar = ptx.addr(full, st.stage)
                    a_dst = ptx.addr(smem, a_off + rank_n * A_SHARE_BYTES)
                    b_dst = ptx.addr(smem, a_off + A_BYTES + rank_m * B_SHARE_BYTES)
                    if CN == 1:
                        ptx.cp_async_bulk_tensor_2d_shared_global(a_dst, ptx.addr(tma_a, 0), kb * BK, m0, bar)
                    else:   # A rows m0 + rank_n * A_ROWS / CN ..: its share, to the CTAs of its cluster row
                        ptx.cp_async_bulk_tensor_2d_shared_global_multicast(
                            a_dst, ptx.addr(tma_a, 0), kb * BK, m0 + rank_n * (A_ROWS // CN), bar,
                            uint16(A_MASK << rank_m))
                    if CM == 1:
                        ptx.cp_async_bulk_tensor_2d_shared_global(b_dst, ptx.addr(tma_b, 0), kb * BK, n0, bar)
                    else:   # B rows n0 + rank_m * BN / CM ..: its share, to the CTAs of its cluster column
                        ptx.cp_async_bulk_tensor_2d_shared_global_multicast(
                            b_dst, ptx.addr(tma_b, 0), kb * BK, n0 + rank_m * (BN // CM), bar,
                            uint16(B_MASK << (rank_n * CM)))
                    # the scales: row kb of the K-block-major view, columns m0 .. m0 + 127 (zeros past M)
                    ptx.cp_async_bulk_tensor_2d_shared_global(ptx.addr(smem, a_off + A_BYTES + B_BYTES),
                                                              ptx.addr(tma_sa, 0), m0, kb, bar)
                    if SB_TMA:  # B's scales: the 16-byte boxes of flat sb that hold the k-block's (each CTA its own)
                        sb_dst = a_off + SB_OFF
                        ptx.cp_async_bulk_tensor_1d_shared_global(ptx.addr(smem, sb_dst), ptx.addr(tma_sb, 0),
                                                                  (sb_row + kb) & ~(SB_BOX - 1), bar)
                        ptx.cp_async_bulk_tensor_1d_shared_global(ptx.addr(smem, sb_dst + SB_PITCH), ptx.addr(tma_sb, 0),
                                                                  (sb_row2 + kb) & ~(SB_BOX - 1), bar)
                    st = advance(st, STAGES)
                unit += clusters
    else:
        # ---- consumer warpgroups: take the registers, multiply, promote, store -------------------
        ptx.setmaxnreg_inc_sync_aligned_u32(CONSUMER_REGS)
        t = tid - 128 * wg                           # thread in the warpgroup
        row_wg = 0 if KSPLIT == 2 else (wg - 1) * W.WGMMA_M   # this warpgroup's 64 rows of the CTA's 128
        row_t = row_wg + 16 * (t // 32) + (t % 32) // 4   # the thread's rows row_t and row_t + 8 (d_row_col)
        lane = int32(tid % 32)
        lane0 = lane == 0
        warp_rows = 16 * (warp_index() - 4 * wg)    # the warp's 16 rows of its warpgroup's 64 (d_row_col), warp-uniform
        parity = uint32(wg - 1)                      # KSPLIT 2: the parity of this warpgroup's ring slots
        # lane i < PEERS hands a slot back in peer i of the CTAs that write into this one: the CM CTAs of its cluster
        # column (they multicast B to it, itself included), then the other CN - 1 of its row (A), all at once
        peer_m = lane if lane < CM else rank_m
        peer_n = rank_n if lane < CM else lane - CM + int32(lane - CM >= rank_n)
        peer = peer_n * CM + peer_m
        releaser = lane < int32(PEERS)               # (decided once: in the k-loop the test was redone in 64 bits)
        # slot 0's empty barrier in that peer (lanes past PEERS: their own CTA's, never arrived on); slot s's is 8 s
        # bytes further, so the k-loop adds an offset to a register instead of asking mapa again. Without a cluster,
        # this CTA's own (a .shared::cta address is one of .shared::cluster's): from the generic address in the loop,
        # ptxas rebuilt the CTA's shared window (S2UR SR_CgaCtaId, ULEA) at every release, and the arrival waited
        # on it (3.8 % of the warp stall samples at 8192^3, H100, bench/h100_ncu_fp8_stalls_8192_8defe38.txt)
        empty_peer = ptx.mapa_shared_cluster(ptx.addr(empty, 0), peer if releaser else rank) if CLUSTER > 1 \
            else ptx.cvta_to_shared_u32(ptx.addr(empty, 0))

        def release(st):
            """A consumer warp: slot ``st`` is free, in every CTA that fills it. The syncwarp first: an arrival
            releases only what its lane did, and every lane has read its scales from the slot."""
            cuda.syncwarp()
            if lane0 if CLUSTER == 1 else releaser:     # (the same lane at 1 x 1; `releaser` alone compiles to
                # other SASS, a k-loop 1 longer or shorter by configuration, not the one timed)
                ptx.mbarrier_arrive_shared_cluster(empty_peer + uint32(st.stage * 8))

        if MAP_FENCES and EPI_TMA and lane0:         # the TMA epilogue's storing threads: the host wrote D's map
            ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tma_d, 0))
        reduce_word = (pad + STAGES * STAGE_BYTES) // SCALE_BYTES   # KSPLIT 2: warpgroup 2's sums, past the ring
        acc = cuda.local.array(N2, float32)          # the promoted fp32 sums: registers (constant indices)
        acc_blk = cuda.local.array(N2, float32)      # one k-block's wgmma sums
        acc_blk1 = cuda.local.array(N2 if DACC else 1, float32)   # DACC: the other k-block's
        # stage 0's operands (a stage's are STAGE_BYTES further: advance_descriptor) and scales of rows row_t, + 8
        a_desc0 = W.matrix_descriptor(base + pad + row_wg * W.SWIZZLE_128B_ROW_BYTES, W.K_MAJOR_128B_LBO,
                                      W.K_MAJOR_128B_SBO, W.SWIZZLE_128B, 0)
        b_desc0 = W.matrix_descriptor(base + pad + A_BYTES, W.K_MAJOR_128B_LBO, W.K_MAJOR_128B_SBO, W.SWIZZLE_128B, 0)
        # stage 0's scales (rows row_t and row_t + 8 of sa; SB_TMA: B's boxes), read in the k-loops by 32-bit
        # .shared::cta addresses computed here (ld_shared_f32): by smem_f32[...] ptxas rebuilt the shared window's
        # base every k-block (S2UR SR_CgaCtaId, ULEA). SASS instructions a k-block: 169 -> 164 at 192 wide, 123 -> 120
        # at 64 with split_k 2; a DACC pair 262 -> 256 at 128 wide, 191 -> 185 at 64
        sa_addr0 = base + uint32(pad + A_BYTES + B_BYTES + row_t * SCALE_BYTES)
        sb_addr0 = base + uint32(pad + SB_OFF)

        # At most 128 wide, B's scales a chunk of SB_CHUNK k-blocks at a time: lane i holds k-block (chunk + i)'s, and
        # the warp reads the k-block's with shfl. A chunk is loaded a chunk ahead, at the chunk's second k-block, and a
        # tile's first chunk at the end of the tile before: a load per k-block, even one k-block ahead, had ptxas move
        # its value into a uniform register right after the load, before the block's wgmmas, which then waited for an
        # L2 round trip every k-block (and a load issued where a chunk starts shares a scoreboard with the copy of the
        # last).
        def sb_chunk(row, first):
            return sb[row + first + lane] if first + lane < k_blocks else float32(0.0)
        st = pipeline_state(0, 0)

        def stage_descriptors(st):
            """Slot ``st``'s A and B: stage 0's, STAGE_BYTES per stage further."""
            stage_off = uint32(st.stage * STAGE_BYTES)
            return W.advance_descriptor(a_desc0, stage_off), W.advance_descriptor(b_desc0, stage_off)

        ready = False                                # the slot's data seen complete by a poll
        pending = False                              # DEFER: a tile's sums in acc, stored during the next unit's mmas
        em0 = int32(0)                               # the origin of the tile store_tile stores
        en0 = int32(0)
        unit = cluster
        tm, ks, tn, slot = walk(unit)
        tiles_done = 0
        traced = int32(0)                            # TRACE: this warpgroup's k-blocks recorded so far
        trace0 = (cuda.blockIdx.x * CONSUMERS + wg - 1) * TRACE_WORDS * TRACE   # its first word (in counters)
        if PINGPONG and wg == 2:
            ptx.bar_arrive(TURN, 2 * W.WARPGROUP_THREADS)     # warpgroup 1 issues first
        kb_lo, kb_hi = k_range(ks, slot)
        sb_row, sb_row2 = sb_rows(tn)
        kb_c = int32(kb_lo + DEFER)                  # the chunks' first k-block: DEFER's peeled one has its own
        sb_cur = float32(0.0) if SB_TMA else sb_chunk(sb_row, kb_c)
        sb_first = float32(0.0)
        if DEFER and not SB_TMA and kb_lo < k_blocks:   # (a unit past the walk may have no k-block)
            sb_first = sb[sb_row + kb_lo]
        while unit < units:
            m0 = (tm * CM + rank_m) * BM
            n0 = (tn * CN + rank_n) * BN
            sliced = KSLICES > 1 and slot >= 0               # a K slice of one of the last tiles
            cta_slot = slot * CLUSTER + rank                 # its CTA's counter and part of the workspace
            k_slice = ks
            split = SCALE_BLOCK - n0 % SCALE_BLOCK
            if not DEFER:                            # (DEFER: zeroed at the first k-block, once a pending tile is stored)
                for i in unroll(N2, llvm=LLVM_LOOPS, nest=8):
                    acc[i] = float32(0.0)
            held = st                                # the slot of the last k-block, released after the next's mmas
            sb_nxt = float32(0.0)
            first = kb_lo + int32(KSPLIT == 2 and (st.stage & uint32(1)) != parity)   # the unit's first k-block here
            if DACC:
                # k-blocks in pairs, the first into acc_blk and the second into acc_blk1: the first's promotion
                # runs while the second's mmas do, the second's while the other warpgroup's do. No wgmma or wait
                # under a branch in the loop (ptxas serialises every wgmma then, C7514); an odd unit's last k-block
                # comes after it
                p0 = p1 = r0 = r1 = float32(0.0)
                held1 = st
                if DEFER:
                    # the unit's first k-block alone, peeled: the last tile's D is stored while its mmas run
                    kb = kb_lo
                    for h in unroll(1):
                        splice(issue_mmas)
                    held = st
                    st = advance(st, STAGES)
                    if POLL:
                        ready = ptx.mbarrier_test_wait_parity(ptx.addr(full, st.stage), st.phase) != 0
                    if pending:
                        splice(store_tile)
                    for i in unroll(N2, llvm=LLVM_LOOPS, nest=8):
                        acc[i] = float32(0.0)
                    ptx.wgmma_wait_group_sync_aligned(0)
                    # its scales after the wait (B's asked for at the end of the unit before: no store between to
                    # wait out the load, and before the wait its product held the store back)
                    sa_addr = sa_addr0 + held.stage * STAGE_BYTES
                    p0 = ptx.ld_shared_f32(sa_addr) * sb_first
                    p1 = ptx.ld_shared_f32(sa_addr + 8 * SCALE_BYTES) * sb_first
                    release(held)
                    for i in unroll(N2, llvm=LLVM_LOOPS, nest=8):
                        acc[i] += acc_blk[i] * (p1 if (i >> 1) & 1 else p0)
                for o in range(0, kb_hi - 1 - kb_c, 2):
                    for h in unroll(2):
                        kb = kb_c + o + h
                        splice(issue_k_block)
                    ptx.wgmma_wait_group_sync_aligned(1)   # the first k-block's mmas are done
                    release(held)
                    for i in unroll(N2, llvm=LLVM_LOOPS, nest=8):
                        acc[i] += acc_blk[i] * (p1 if (i >> 1) & 1 else p0)
                    ptx.wgmma_wait_group_sync_aligned(0)   # and the second's
                    release(held1)
                    for i in unroll(N2, llvm=LLVM_LOOPS, nest=8):
                        acc[i] += acc_blk1[i] * (r1 if (i >> 1) & 1 else r0)
                if (kb_hi - kb_lo - DEFER) & 1:
                    kb = kb_hi - 1
                    for h in unroll(1):
                        splice(issue_k_block)
                    ptx.wgmma_wait_group_sync_aligned(0)
                    release(held)
                    for i in unroll(N2, llvm=LLVM_LOOPS, nest=8):
                        acc[i] += acc_blk[i] * (p1 if (i >> 1) & 1 else p0)
            else:
                if DEFER:
                    # the unit's first k-block, peeled: the last tile's D is stored while its mmas run (in the
                    # loop, the store's registers made ptxas spill at 192 wide)
                    kb = kb_lo
                    splice(k_block_issue)
                    if pending:
                        splice(store_tile)
                    for i in unroll(N2, llvm=LLVM_LOOPS, nest=8):
                        acc[i] = float32(0.0)
                    splice(k_block_promote)
                for kb in range(int32(kb_lo + DEFER), kb_hi):
                    if not SB_TMA:
                        splice(b_scales_from_chunk)
                    if KSPLIT == 2 and (st.stage & uint32(1)) != parity:
                        # the other warpgroup's slot: each waits only on its own (STAGES is even), so that no slot's
                        # barrier runs two phases past a warpgroup (a parity wait cannot tell phase p from p + 2)
                        st = advance(st, STAGES)
                        continue
                    splice(k_block_issue)
                    splice(k_block_promote)
                if LATE_RELEASE and first < kb_hi:       # the unit's last slot
                    release(held)

            unit += clusters
            tm, ks, tn, slot = walk(unit)
            tiles_done += 1
            kb_lo, kb_hi = k_range(ks, slot)
            sb_row, sb_row2 = sb_rows(tn)
            if not SB_TMA:                           # the next unit's first chunk, in flight during the epilogue
                kb_c = int32(kb_lo + DEFER)
                sb_cur = sb_chunk(sb_row, kb_c)
                if DEFER and kb_lo < k_blocks:       # (a unit past the walk may have no k-block: k_slices)
                    sb_first = sb[sb_row + kb_lo]

            if KSPLIT == 2:
                # ---- the two warpgroups' halves of K meet: warpgroup 2's sums, thread by thread, into warpgroup
                # 1's through shared memory past the ring (word i * 128 + t: a warp's accesses are 32 consecutive)
                if wg == 2:
                    if tiles_done > 1:               # warpgroup 1 has added the last tile's sums
                        ptx.bar_sync(REDUCE_FREE, 2 * W.WARPGROUP_THREADS)
                    for i in unroll(N2, llvm=LLVM_LOOPS, nest=8):
                        smem_f32[reduce_word + i * W.WARPGROUP_THREADS + t] = acc[i]
                    ptx.bar_arrive(REDUCE_FULL, 2 * W.WARPGROUP_THREADS)
                    continue                         # warpgroup 1 stores the tile
                ptx.bar_sync(REDUCE_FULL, 2 * W.WARPGROUP_THREADS)
                for i in unroll(N2, llvm=LLVM_LOOPS, nest=8):
                    acc[i] += smem_f32[reduce_word + i * W.WARPGROUP_THREADS + t]
                if unit < units:                     # warpgroup 2 writes again after the next tile
                    ptx.bar_arrive(REDUCE_FREE, 2 * W.WARPGROUP_THREADS)

            pending = False                          # (set here, not in the k-loop: one value less live in it)
            if sliced:
                # ---- the tile's K slices meet (k_slices): every holder of sums (both consumer warpgroups, or
                # warpgroup 1 after KSPLIT 2's reduction) writes them to the workspace, slot k_slice of the tile,
                # word i * HOLDERS + h (a warp's stores are 32 consecutive words); then one thread counts the slice
                # in the tile's counter. The last of the KSLICES to count adds every slot in the order 0, 1, ..
                # (its own too), so D does not depend on which came last, stores the tile and resets the counter
                # for the next launch. No CTA waits on another: nothing can hang. The count is a release and an
                # acquire at GPU scope by its one thread, for all: the barrier before it gives that thread the
                # holders' stores, the barrier after it gives them what it acquired (the "last block" pattern).
                h = tid - W.WARPGROUP_THREADS if KSPLIT == 1 else t
                live = m0 + row_wg < M               # a warpgroup wholly past M writes and reads nothing
                slot0 = cta_slot * KSLICES * N2 * HOLDERS + h
                if live:
                    for i in unroll(N2, llvm=LLVM_LOOPS, nest=8):
                        ws[slot0 + (k_slice * N2 + i) * HOLDERS] = acc[i]
                ptx.bar_sync(SLICE_SYNC, HOLDERS)    # every holder's sums are stored ...
                if h == 0:
                    ptx.fence_acq_rel_gpu()          # ... released with the count ...
                    slices_in[0] = cuda.atomic.add(counters, cta_slot, 1)
                    ptx.fence_acq_rel_gpu()          # ... which acquires the slices counted before it
                ptx.bar_sync(SLICE_SYNC, HOLDERS)
                if slices_in[0] != KSLICES - 1:
                    continue                         # another slice of the tile comes later and stores it
                if h == 0:
                    counters[cta_slot] = 0
                if live:
                    for i in unroll(N2, llvm=LLVM_LOOPS, nest=8):
                        acc[i] = ws[slot0 + i * HOLDERS]
                    for s in range(1, KSLICES):
                        for i in unroll(N2, llvm=LLVM_LOOPS, nest=8):
                            acc[i] += ws[slot0 + (s * N2 + i) * HOLDERS]

            # ---- epilogue: the warpgroup's 64 x BN of D. DEFER: after the next unit's first mmas are issued, while
            # they run (the store's conversions and shared stores then no longer hold both warpgroups' mmas back)
            em0 = m0
            en0 = n0
            if DEFER:
                pending = True
            else:
                splice(store_tile)
        if DEFER and pending:                        # the walk's last tile
            splice(store_tile)
        if EPI_TMA and lane0:
            ptx.cp_async_bulk_wait_group_read(0)     # the last stores have read the staging buffers
        if PINGPONG and wg == 1:
            ptx.bar_sync(TURN, 2 * W.WARPGROUP_THREADS)   # warpgroup 2's last turn given back: none left pending

    # ---- no CTA exits while a peer may still multicast into it or release its slots ----------------
    if CLUSTER > 1:
        ptx.barrier_cluster_arrive()
        ptx.barrier_cluster_wait()


# ------------------------------------------------------------------------------------------------
# Configurations and compilation
# ------------------------------------------------------------------------------------------------
def holders(ksplit: int = 1) -> int:
    """Threads that hold a tile's sums after the k-loop: both consumer warpgroups, or with KSPLIT 2 the first."""
    return CONSUMERS * W.WARPGROUP_THREADS // ksplit


def workspace_words(cta_tiles: int, block_n: int, k_slices: int, ksplit: int = 1) -> int:
    """k_slices' fp32 workspace: each sliced CTA tile's (``cta_tiles`` of them) K slices' sums as their holders keep
    them, word (slice * N2 + i) * HOLDERS + h of the tile's part (one word, unused, without k_slices)."""
    return cta_tiles * k_slices * W.accumulators(block_n) * holders(ksplit) if k_slices > 1 else 1


def kernel_constants(block_n=128, stages=6, cluster=(1, 1), llvm_loops=True, ksplit=1, k_slices=1, epi_bufs=0,
                     pingpong=False, dacc=None, trace=0, map_fences=True) -> dict:
    """The compile-time constants of one configuration (what ``unrolled`` substitutes). ``llvm_loops``: the
    accumulators' zeroing, promotion and epilogue loops left to LLVM (nested 8 deep, ``unroll(..., nest=8)``)
    instead of expanded statement by statement (False). Offline at 192 wide: 37.9 -> 9.0 s cold, 168 registers, no
    local memory, 1024 instructions against 1072. On the H200 (9b0fab2): the 88 GPU tests and memcheck/racecheck/
    synccheck pass, speed 0.995-1.033x the expanded form's committed ratios to torch (bench/h200_fp8_speed_9b0fab2.json).
    ``map_fences=False``: a diagnostic build without the tensor maps' acquire fences (what they cost a launch,
    ``scripts/fp8_small_m_floor.py``); never shipped: the host writes the maps into global memory, and the CUDA
    guide asks for the fence before the tensormap proxy reads them."""
    assert block_n in BLOCK_NS and tuple(cluster) in CLUSTERS and ksplit in KSPLITS, (block_n, cluster, ksplit)
    assert 1 <= k_slices <= MAX_KSLICES, k_slices
    assert 0 <= epi_bufs <= epilogue_chunks(block_n), (epi_bufs, block_n)
    assert not (pingpong and ksplit == 2), "KSPLIT 2's warpgroups take turns by ring slot already"
    if dacc is None:      # the host's default (fp8_gemm.default_dacc)
        dacc = dacc_fits(block_n, ksplit, pingpong)
    assert not trace or (not dacc and ksplit == 1 and k_slices == 1), \
        "TRACE (a diagnostic build: scripts/fp8_trace.py): one block sum, KSPLIT 1, no K slices (counters holds it)"
    assert not dacc or dacc_fits(block_n, ksplit, pingpong), \
        "DACC: KSPLIT 1, at most 128 wide (three sums of registers), no pingpong"
    cm, cn = cluster
    mma = getattr(ptx, f"wgmma_mma_async_sync_aligned_m64n{block_n}k32_f32_e4m3_e4m3_ss")
    col_mask = sum(1 << (j * cm) for j in range(cn))       # ranks (0, j): the CTAs of rank_m 0's cluster row
    return dict(BN=block_n, N2=W.accumulators(block_n), STAGES=stages, MMA=mma,
                STAGE_BYTES=stage_bytes(block_n, ksplit), STAGE_TX=stage_tx(block_n, ksplit),
                SB_OFF=sb_offset(block_n, ksplit), SB_PITCH=SB_PITCH, SB_TMA=sb_by_tma(block_n),
                A_BYTES=a_bytes(ksplit),
                A_ROWS=a_rows(ksplit), B_BYTES=b_bytes(block_n), SMEM_ALIGN=SMEM_ALIGN, CM=cm, CN=cn,
                CLUSTER=cm * cn, PEERS=cm + cn - 1, A_SHARE_BYTES=a_bytes(ksplit) // cn,
                B_SHARE_BYTES=b_bytes(block_n) // cm,
                A_MASK=np.uint16(col_mask), B_MASK=np.uint16((1 << cm) - 1), LLVM_LOOPS=int(bool(llvm_loops)),
                KSPLIT=ksplit, KSLICES=k_slices, HOLDERS=holders(ksplit), EPI_TMA=int(epi_bufs > 0),
                EPI_BUFS=max(1, epi_bufs), EPI_CHUNKS=epilogue_chunks(block_n),
                EPI_ROUNDS=-(-epilogue_chunks(block_n) // max(1, epi_bufs)), REDUCE_BYTES=reduce_bytes(block_n, ksplit),
                PINGPONG=int(bool(pingpong)), LATE_RELEASE=int(stages // ksplit >= 2),
                POLL=int(ksplit == 1), DACC=int(bool(dacc)),
                DEFER=int(defer_fits(block_n, stages, ksplit, pingpong, dacc)), TRACE=int(trace), MAP_FENCES=int(bool(map_fences)))


def make_kernel(**config):
    """The kernel's Python function for one configuration (``kernel_constants``' arguments), unrolled."""
    return unrolled(fp8_gemm_kernel, **kernel_constants(**config))


def kernel_argtypes():
    """numba argument types: five tensor maps (A, B, A's scales, B's scales flat, D), sb (float32, flat), D (uint32
    bf16 pairs, flat), k_slices' workspace (float32) and counters (int32, one per sliced CTA tile), M, N, K, tiles_m,
    tiles_n, whole (the cluster tiles walked whole before the sliced ones)."""
    from numba import types

    from ..ptx.tensor_map_type import tensormap

    return (tensormap, tensormap, tensormap, tensormap, tensormap, types.float32[::1], types.uint32[::1],
            types.float32[::1], types.int32[::1], types.int32, types.int32, types.int32, types.int32, types.int32, types.int32)


__all__ = ["BM", "BK", "BLOCK_NS", "TRACE_WORDS", "DACC_MAX_BLOCK_N", "dacc_fits", "CLUSTERS", "THREADS", "LAUNCH_BOUNDS", "make_kernel", "kernel_argtypes", "kernel_constants",
           "a_rows", "a_bytes", "stage_bytes", "stage_tx", "sb_by_tma", "sb_boxes", "sb_offset", "shared_bytes", "epilogue_bytes", "epilogue_chunks", "EPILOGUES", "block_shared_bytes", "max_stages", "holders", "workspace_words"]
