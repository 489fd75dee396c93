"""Hopper's warp-specialized GEMM: C = A @ B with bf16 or fp16 A and B, fp32 accumulation, bf16 or fp32 C.

The chapter's Hopper structure, written with ``asyncpipe.ptx`` and ``asyncpipe.pipeline``::

    a CTA = 3 warpgroups (384 threads), clusters of CLUSTER CTAs along M
    ├── warpgroup 0, the producer: setmaxnreg.dec 40; one thread loops over its tiles and k-blocks:
    │     producer_acquire(empty, st)                 wait until slot st.stage is free in every CTA
    │     producer_commit(full, st, STAGE_BYTES)      expect A's and B's bytes on full[st.stage]
    │     TMA A (this CTA's 128 rows)                 128B swizzle, complete_tx on full[st.stage]
    │     TMA B (its 1/CLUSTER share, multicast)      lands in every CTA of the cluster
    └── warpgroups 1 and 2, the consumers: setmaxnreg.inc 232; each owns 64 rows of the 128 x BN tile:
          consumer_wait(full, st); 4 x wgmma m64nBNk16 (k16 steps of the 64-wide k-block); commit;
          wgmma.wait_group 1 (the previous k-block's mmas are done) -> consumer_release(previous slot)
          after the last k-block: wait_group 0, release, then the epilogue stores the accumulators

Tiles: a CTA computes 128 x BN of C (BM = 128: two consumer warpgroups of 64 rows); the CLUSTER CTAs of a
cluster take adjacent 128-row blocks of one BM*CLUSTER x BN "cluster tile" and share its B tile, which
each CTA loads 1/CLUSTER of and multicasts to all (the shared operand is loaded once per cluster).
Persistent: grid = min(cluster tiles, SMs / CLUSTER) clusters; cluster c walks cluster tiles c,
c + clusters, ... in M-fastest order. Each stage holds A (128 x 64) and B (64 x BN), 64 = BK = one
128-byte swizzle row of 2-byte elements.

**B's layout.** ``C = A @ B`` with numpy's row-major B (K x N) makes B *N-major* for wgmma
(``imm-trans-b = 1``): TMA loads boxes of 64 K-rows x 64 N-columns (128 bytes), one per 64 columns of
the tile, stacked in shared memory; the descriptor's stride byte offset is 1024 (8 K-rows) and its
leading byte offset the distance between two column boxes (64 * 128 bytes); the k16 step j starts
j * 16 * 128 bytes in. With ``b_transposed=True`` the caller passes B^T (N x K, row-major), which is
*K-major* (``imm-trans-b = 0``): one box of BN/CLUSTER rows x 64 K per CTA; stride byte offset 1024,
the k16 step j starts 32 * j bytes into each swizzled row. A (M x K, row-major) is always K-major.

**Edges.** Any M >= 1; N and K multiples of 8 (TMA's global strides are multiples of 16 bytes). Boxes
that hang over M, N or K are zero-filled by TMA (zeros add nothing to the dot products; every box still
delivers its full bytes, so the expected tx-count is constant). Every TMA coordinate is >= 0 and its
innermost one a multiple of 32 or 64 elements, 128 bytes (the two rules measured on the H200: a multiple
of 16 bytes, non-negative store coordinates).

**Epilogues** (``epilogue=``), each in its own function, inlined into the kernel:

- ``"direct"``: every thread stores its accumulators straight from registers (a pair of columns per
  store: 4 bytes of bf16 or 8 of fp32, rows 8 apart), predicated on row < M and col < N.
- ``"tma"``: each consumer warpgroup converts its 64 x BN accumulators chunk by chunk (128 bytes of C
  per row: 64 bf16 or 32 fp32 columns) into a 64 x 128-byte staging buffer in shared memory, written
  in the 128B swizzle (16-byte chunk ``c`` of row ``r`` at ``c ^ (r % 8)``: a warp's 4-byte stores hit
  32 different banks), then ``fence.proxy.async.shared::cta``, ``bar.sync wg, 128`` (its own named
  barrier) and one thread issues the TMA store of the box (the C tensor map un-swizzles it and clips it
  at M and N) and commits it as a bulk group. Two buffers per warpgroup alternate: before a buffer is
  written again the issuing thread waits until the store that used it has read it
  (``cp.async.bulk.wait_group.read``: 1 group left in flight, 0 at a tile's first chunk) and a
  ``bar.sync`` tells the warpgroup. The staging buffers (2 warpgroups x 2 x 8 KB = 32 KB) sit after the
  ring and never alias its stages: with 128 x 256 tiles 4 stages still fit in 227 KB (``max_stages``).

**Registers.** Compiled with launch bounds (384, 1) (168 registers per thread at launch); the producer
gives 128 x (168 - 40) registers back and the two consumers take 256 x (232 - 168): the 128 fp32
accumulators of m64n256k16 plus addressing fit in 232 without spills (see ``tests/kernels``).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import cuda, float32, int32, uint8, uint32, uint64

from .. import ptx
from ..bf16 import bf16_bits, bf16_to_float32  # noqa: F401 - the host side of bf16 C, re-exported
from ..constants import BULK_SMEM_ALIGN_TENSOR
from ..errors import check
from ..host.plans import PlanCache, cached_tensor_map
from ..jit_cache import jit
from ..pipeline import (advance, consumer_release, consumer_wait, pipeline_init, pipeline_state, producer_acquire,
                        producer_commit, unit_coords, warpgroup_index)
from ..ptx import wgmma as W
from .unroll import unroll, unrolled

API = "wgmma_gemm"

# ---- the tile ------------------------------------------------------------------------------------------
BM = 2 * W.WGMMA_M                  # rows of C per CTA: two consumer warpgroups of 64
BK = W.SWIZZLE_128B_ROW_BYTES // 2  # 64 two-byte elements = one 128-byte swizzle row
K_STEPS = BK // W.WGMMA_K           # k16 wgmma steps per k-block
BOX_N = BK                          # N-major B: one TMA box per 64 columns (one 128-byte row)
ELEM_BYTES = 2                      # bf16 / fp16
CONSUMERS = 2                       # consumer warpgroups
THREADS = (1 + CONSUMERS) * W.WARPGROUP_THREADS   # 384
CONSUMER_WARPS = CONSUMERS * W.WARPGROUP_THREADS // 32
LAUNCH_BOUNDS = (THREADS, 1)        # one CTA per SM: 65536 / 384 -> 168 registers per thread at launch
PRODUCER_REGS = 40                  # setmaxnreg.dec for the producer warpgroup
CONSUMER_REGS = 232                 # setmaxnreg.inc for the consumers: 128*40 + 256*232 = 64512 <= 65536
REGISTER_FILE = 65536               # 32-bit registers per SM (and per CTA) on sm_90
BLOCK_NS = W.WGMMA_N                # BN = the wgmma N: 64, 128 or 256
CLUSTERS = (1, 2)                   # CTAs per cluster along M (2: B multicast)
MIN_STAGES, MAX_STAGES = 3, 8
SMEM_ALIGN = W.SWIZZLE_ATOM_BYTES["128B"]   # 128B-swizzled tiles start on 1024-byte boundaries
DIM_MULTIPLE = 8                    # N, K: TMA global strides are multiples of 16 bytes = 8 elements
EPILOGUES = ("direct", "tma")
EPI_ROWS = W.WGMMA_M                # a consumer warpgroup's rows: one staging buffer is 64 rows ...
EPI_ROW_BYTES = W.SWIZZLE_128B_ROW_BYTES    # ... of one 128-byte swizzle row of C (64 bf16 / 32 fp32)
EPI_BUFS = 2                        # staging buffers per consumer warpgroup (one filling, one being stored)
EPI_BUF_BYTES = EPI_ROWS * EPI_ROW_BYTES    # 8 KB, a multiple of the 1024-byte swizzle atom
WORD_BYTES = 4                      # the staging buffers are written in 32-bit words

assert CONSUMER_REGS * CONSUMERS * W.WARPGROUP_THREADS + PRODUCER_REGS * W.WARPGROUP_THREADS <= REGISTER_FILE
assert BULK_SMEM_ALIGN_TENSOR <= SMEM_ALIGN


def stage_bytes(block_n: int) -> int:
    """Shared memory of one stage: A (BM x BK) and B (BK x BN), two bytes each."""
    return (BM + block_n) * BK * ELEM_BYTES


def epilogue_bytes(epilogue: str) -> int:
    """Shared memory of the epilogue: none for "direct", the staging buffers for "tma" (after the ring:
    they must not alias a stage the producer may be filling for the next tile)."""
    return CONSUMERS * EPI_BUFS * EPI_BUF_BYTES if epilogue == "tma" else 0


def shared_bytes(block_n: int, stages: int, epilogue: str = "direct") -> int:
    """Dynamic shared memory of a launch: the stages, the epilogue's staging buffers, plus slack to
    align them to 1024 bytes."""
    return stages * stage_bytes(block_n) + epilogue_bytes(epilogue) + SMEM_ALIGN


BARRIER_BYTES = 8                   # one mbarrier; the ring has 2 x stages of them in static shared memory


def block_shared_bytes(block_n: int, stages: int, epilogue: str = "direct") -> int:
    """Shared memory a CTA needs: the dynamic stages, staging and slack, and the static full/empty barriers."""
    return shared_bytes(block_n, stages, epilogue) + 2 * stages * BARRIER_BYTES


# ------------------------------------------------------------------------------------------------
# The kernel. Compile-time constants (unrolled): BN, STAGES, CLUSTER, B_KMAJOR (0: B is K x N, N-major;
# 1: B^T is N x K, K-major), C_BF16 (1: C holds bf16 bit pairs as uint32; 0: fp32), MMA (the wgmma
# primitive for the input type), EPILOGUE (epilogue_direct or epilogue_tma, unrolled and inlined),
# EPI_TMA (1 for the TMA epilogue), C_WORD (uint32 or float32: a 32-bit word of C).
# ------------------------------------------------------------------------------------------------
def wgmma_gemm_kernel(tma_a, tma_b, tma_c, c, M, N, K, tiles_m, tiles_n):
    smem = cuda.shared.array(0, uint8)               # STAGES x (A tile | B tile) | staging, aligned below
    staging = cuda.shared.array(0, C_WORD)           # the same dynamic shared memory, as words of C
    full = cuda.shared.array(STAGES, uint64)
    empty = cuda.shared.array(STAGES, uint64)
    tid = cuda.threadIdx.x
    wg = warpgroup_index()                           # warpgroup: 0 producer, 1..2 consumers (warp-uniform)
    rank = ptx.cluster_ctarank()                     # this CTA's 128-row block of the cluster tile
    base = ptx.cvta_to_shared_u32(ptx.addr(smem, 0))
    pad = (SMEM_ALIGN - (base & (SMEM_ALIGN - 1))) & (SMEM_ALIGN - 1)
    k_blocks = (K + BK - 1) // BK
    cluster = cuda.blockIdx.x // CLUSTER             # 1-D grid: a cluster is CLUSTER consecutive blocks
    clusters = cuda.gridDim.x // CLUSTER
    tiles = tiles_m * tiles_n                        # cluster tiles, M fastest (unit_coords)

    # ---- prologue: the ring's barriers, visible to TMA and to the peer CTAs -----------------------
    if tid == 0:
        # full: this CTA's producer arrives once (plus the bytes); empty: each consumer warp of every
        # CTA that receives this CTA's multicast releases once
        pipeline_init(full, empty, STAGES, 1, CONSUMER_WARPS * CLUSTER)
    if CLUSTER == 1:
        cuda.syncthreads()
    else:
        ptx.barrier_cluster_arrive()
        ptx.barrier_cluster_wait()

    if wg == 0:
        # ---- producer warpgroup: gives its registers away, one thread issues every copy ----------
        ptx.setmaxnreg_dec_sync_aligned_u32(PRODUCER_REGS)
        if tid == 0:
            ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tma_a, 0))   # the host wrote the maps
            ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tma_b, 0))
            st = pipeline_state(0, 0)
            tile = cluster                               # this cluster's first tile, then every clusters-th
            while tile < tiles:
                tm, _, tn = unit_coords(tile, tiles_m, 1)
                m0 = (tm * CLUSTER + rank) * BM
                n0 = tn * BN
                for kb in range(k_blocks):
                    k0 = kb * BK
                    producer_acquire(empty, st)                      # free in every CTA it feeds
                    producer_commit(full, st, STAGE_BYTES)           # A + the whole B, from all CTAs
                    a_off = pad + st.stage * STAGE_BYTES
                    b_off = a_off + A_BYTES
                    bar = ptx.addr(full, st.stage)
                    ptx.cp_async_bulk_tensor_2d_shared_global(ptx.addr(smem, a_off), ptx.addr(tma_a, 0),
                                                              k0, m0, bar)
                    if B_KMAJOR:   # B^T rows n0 + rank * BN/CLUSTER .. : this CTA's share of the tile
                        dst = b_off + rank * B_SHARE_BYTES
                        if CLUSTER == 1:
                            ptx.cp_async_bulk_tensor_2d_shared_global(ptx.addr(smem, dst), ptx.addr(tma_b, 0),
                                                                      k0, n0, bar)
                        else:
                            ptx.cp_async_bulk_tensor_2d_shared_global_multicast(
                                ptx.addr(smem, dst), ptx.addr(tma_b, 0), k0, n0 + rank * (BN // CLUSTER), bar,
                                CTA_MASK)
                    else:          # B rows k0 + rank * BK/CLUSTER ..: its share of every 64-column box
                        for j in unroll(BN // BOX_N):
                            dst = b_off + j * BK * W.SWIZZLE_128B_ROW_BYTES + rank * B_SHARE_BYTES
                            if CLUSTER == 1:
                                ptx.cp_async_bulk_tensor_2d_shared_global(ptx.addr(smem, dst), ptx.addr(tma_b, 0),
                                                                          n0 + j * BOX_N, k0, bar)
                            else:
                                ptx.cp_async_bulk_tensor_2d_shared_global_multicast(
                                    ptx.addr(smem, dst), ptx.addr(tma_b, 0), n0 + j * BOX_N,
                                    k0 + rank * (BK // CLUSTER), bar, CTA_MASK)
                    st = advance(st, STAGES)
                tile += clusters
    else:
        # ---- consumer warpgroups: take the registers, multiply, store -----------------------------
        ptx.setmaxnreg_inc_sync_aligned_u32(CONSUMER_REGS)
        t = tid - 128 * wg                           # thread in the warpgroup
        row_wg = (wg - 1) * W.WGMMA_M                # this warpgroup's 64 rows of the CTA's 128
        lane0 = t % 32 == 0
        acc = cuda.local.array(N2, float32)          # N2 = BN / 2 accumulators: registers (constant indices)
        staged = (pad + STAGES * STAGE_BYTES + (wg - 1) * EPI_BUFS * EPI_BUF_BYTES) // WORD_BYTES  # its buffers
        if EPI_TMA and t == 0:
            ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tma_c, 0))   # this thread issues C's stores
        st = pipeline_state(0, 0)
        prev = st
        tile = cluster
        while tile < tiles:
            tm, _, tn = unit_coords(tile, tiles_m, 1)
            for kb in range(k_blocks):
                consumer_wait(full, st)
                a_addr = base + pad + st.stage * STAGE_BYTES + row_wg * W.SWIZZLE_128B_ROW_BYTES
                b_addr = base + pad + st.stage * STAGE_BYTES + A_BYTES
                a_desc = W.matrix_descriptor(a_addr, W.K_MAJOR_128B_LBO, W.K_MAJOR_128B_SBO, W.SWIZZLE_128B, 0)
                if B_KMAJOR:
                    b_desc = W.matrix_descriptor(b_addr, W.K_MAJOR_128B_LBO, W.K_MAJOR_128B_SBO, W.SWIZZLE_128B, 0)
                else:
                    b_desc = W.matrix_descriptor(b_addr, BK * W.SWIZZLE_128B_ROW_BYTES, W.MN_MAJOR_128B_SBO,
                                                 W.SWIZZLE_128B, 0)
                ptx.wgmma_fence_sync_aligned()
                for s in unroll(K_STEPS):
                    # the k16 step s: 32 bytes along a K-major row, 16 rows of 128 bytes down an N-major B
                    b_step = s * W.WGMMA_K * (ELEM_BYTES if B_KMAJOR else W.SWIZZLE_128B_ROW_BYTES)
                    # scale_d 0 on a tile's first step: the accumulators start from the product alone
                    MMA(ptx.addr(acc, 0), W.advance_descriptor(a_desc, s * W.WGMMA_K * ELEM_BYTES),
                        W.advance_descriptor(b_desc, b_step), 1 if s > 0 else int32(kb > 0), 0, 1 - B_KMAJOR)
                ptx.wgmma_commit_group_sync_aligned()
                ptx.wgmma_wait_group_sync_aligned(1)        # the previous k-block's mmas are done ...
                if kb > 0 and lane0:
                    consumer_release(empty, prev, CLUSTER)  # ... so its slot goes back, in every CTA
                prev = st
                st = advance(st, STAGES)
            ptx.wgmma_wait_group_sync_aligned(0)
            if lane0:
                consumer_release(empty, prev, CLUSTER)

            # ---- epilogue: this warpgroup's 64 x BN accumulators to C, clipped to M x N -------------
            EPILOGUE(acc, c, tma_c, staging, staged, M, N, (tm * CLUSTER + rank) * BM + row_wg, tn * BN, t, wg)
            tile += clusters
        if EPI_TMA and t == 0:
            ptx.cp_async_bulk_wait_group_read(0)    # the last stores have read the staging buffers

    # ---- no CTA exits while a peer may still multicast into it or release its slots ----------------
    if CLUSTER > 1:
        ptx.barrier_cluster_arrive()
        ptx.barrier_cluster_wait()


# ------------------------------------------------------------------------------------------------
# The epilogues: one consumer warpgroup's 64 x BN tile of C, rows m0.., columns n0.. (both inlined into the
# kernel, same arguments). The m64nNk16 accumulator layout: thread t of the warpgroup (warp w = t // 32,
# g = lane // 4, q = lane % 4) holds acc[4 j + 2 h + e] = C[16 w + 8 h + g, 8 j + 2 q + e] of the tile.
# Compile-time constants: BN, C_BF16, C_ITEM (bytes per element of C), EPI_COLS (columns of C per 128-byte
# staging row), EPI_CHUNKS.
# ------------------------------------------------------------------------------------------------
def epilogue_direct(acc, c, tma_c, staging, staged, M, N, m0, n0, t, wg):
    """Every thread stores its accumulators to C (flat: uint32 bf16 pairs or fp32), clipped to M x N."""
    row = m0 + 16 * (t // 32) + (t % 32) // 4
    q = t % 4
    for j in unroll(BN // 8):
        col = n0 + 8 * j + 2 * q
        for h in unroll(2):
            r = row + 8 * h
            if r < M and col < N:
                if C_BF16:   # the column pair as one word: col in the lower half, col + 1 in the upper
                    c[(r * N + col) // 2] = ptx.cvt_rn_bf16x2_f32(acc[4 * j + 2 * h + 1], acc[4 * j + 2 * h])
                else:
                    c[r * N + col] = acc[4 * j + 2 * h]
                    c[r * N + col + 1] = acc[4 * j + 2 * h + 1]


def epilogue_tma(acc, c, tma_c, staging, staged, M, N, m0, n0, t, wg):
    """Chunks of 128 bytes of C per row through this warpgroup's two swizzled staging buffers (words
    ``staged`` ..) and TMA stores issued by thread 0 of the warpgroup; named barrier ``wg`` (1 or 2)
    synchronises the warpgroup's 128 threads only. Whole-warpgroup branches only (m0, n0 are uniform)."""
    g = (t % 32) // 4
    q = t % 4
    row = 16 * (t // 32) + g                          # rows row and row + 8 of the 64: both are g mod 8
    if m0 < M:
        for ch in unroll(EPI_CHUNKS):
            if n0 + ch * EPI_COLS < N:
                buf = staged + (ch % EPI_BUFS) * (EPI_BUF_BYTES // WORD_BYTES)
                # ---- the buffer is free: the store that used it (two chunks ago, or the last tile) has read it
                if t == 0:
                    ptx.cp_async_bulk_wait_group_read(EPI_BUFS - 1 if ch > 0 else 0)
                ptx.bar_sync(wg, W.WARPGROUP_THREADS)
                # ---- registers -> staging, 128B-swizzled: 16-byte chunk k of row r lands at k ^ (r % 8)
                for jj in unroll(EPI_COLS // 8):
                    j = ch * (EPI_COLS // 8) + jj
                    cb = (8 * jj + 2 * q) * C_ITEM      # byte of the column pair in the 128-byte row
                    for h in unroll(2):                 # word: its 16-byte chunk (cb >> 4) swizzled, word in it
                        word = buf + (row + 8 * h) * (EPI_ROW_BYTES // WORD_BYTES) + (((cb >> 4) ^ g) << 2) + \
                            ((cb & 15) >> 2)
                        if C_BF16:
                            staging[word] = ptx.cvt_rn_bf16x2_f32(acc[4 * j + 2 * h + 1], acc[4 * j + 2 * h])
                        else:
                            staging[word] = acc[4 * j + 2 * h]
                            staging[word + 1] = acc[4 * j + 2 * h + 1]
                # ---- the threads' writes, visible to the TMA (async proxy), then one thread stores the box
                ptx.fence_proxy_async_shared_cta()
                ptx.bar_sync(wg, W.WARPGROUP_THREADS)
                if t == 0:
                    ptx.cp_async_bulk_tensor_2d_global_shared(ptx.addr(tma_c, 0), n0 + ch * EPI_COLS, m0,
                                                              ptx.addr(staging, buf))
                    ptx.cp_async_bulk_commit_group()


_EPILOGUE_FNS = {"direct": epilogue_direct, "tma": epilogue_tma}


# ------------------------------------------------------------------------------------------------
# Configurations and compilation
# ------------------------------------------------------------------------------------------------
def kernel_constants(block_n=256, stages=4, cluster=2, ab="bf16", b_kmajor=False, c_bf16=True,
                     epilogue="direct") -> dict:
    """The compile-time constants of one configuration (what ``unrolled`` substitutes), with the
    epilogue's device function (unrolled with the same constants, inlined) as ``EPILOGUE``."""
    mma = getattr(ptx, f"wgmma_mma_async_sync_aligned_m64n{block_n}k16_f32_{ab}_{ab}_ss")
    b_share = (block_n // cluster if b_kmajor else BK // cluster) * W.SWIZZLE_128B_ROW_BYTES
    c_item = 2 if c_bf16 else 4
    epi_cols = EPI_ROW_BYTES // c_item
    consts = dict(BN=block_n, N2=W.accumulators(block_n), STAGES=stages, CLUSTER=cluster, B_KMAJOR=int(b_kmajor),
                  C_BF16=int(c_bf16), MMA=mma, STAGE_BYTES=stage_bytes(block_n), A_BYTES=BM * BK * ELEM_BYTES,
                  B_SHARE_BYTES=b_share, CTA_MASK=np.uint16((1 << cluster) - 1), SMEM_ALIGN=SMEM_ALIGN,
                  EPI_TMA=int(epilogue == "tma"), C_WORD=uint32 if c_bf16 else float32, C_ITEM=c_item,
                  EPI_COLS=epi_cols,
                  EPI_CHUNKS=block_n // epi_cols)
    consts["EPILOGUE"] = cuda.jit(device=True, inline="always")(unrolled(_EPILOGUE_FNS[epilogue], **consts))
    return consts


def make_kernel(**config):
    """The kernel's Python function for one configuration (``kernel_constants``' arguments), unrolled."""
    return unrolled(wgmma_gemm_kernel, **kernel_constants(**config))


def kernel_argtypes(c_bf16=True):
    """numba argument types: three tensor maps (A, B, C: ptx.tensor_map_type.tensormap), C (uint32 pairs or fp32, flat),
    M, N, K, tiles. Both epilogues take the same arguments ("direct" ignores C's tensor map)."""
    from numba import types

    from ..ptx.tensor_map_type import tensormap

    c = types.uint32[::1] if c_bf16 else types.float32[::1]
    return (tensormap, tensormap, tensormap, c, types.int32, types.int32, types.int32,
            types.int32, types.int32)


@functools.lru_cache(maxsize=None)
def _jit(block_n, stages, cluster, ab, b_kmajor, c_bf16, epilogue):
    return jit(make_kernel(block_n=block_n, stages=stages, cluster=cluster, ab=ab, b_kmajor=b_kmajor,
                           c_bf16=c_bf16, epilogue=epilogue), launch_bounds=LAUNCH_BOUNDS)


# ------------------------------------------------------------------------------------------------
# Host side: checks (pure, no GPU), then the launch
# ------------------------------------------------------------------------------------------------
_SRC_TMA = "cuTensorMapEncodeTiled"
_SRC_WGMMA = "PTX ISA, wgmma.mma_async"
_AB_DTYPES = {"float16": "f16", "uint16": "bf16", "int16": "bf16"}   # 16-bit bits of bf16 arrive as (u)int16
_C_DTYPES = {"uint16": True, "int16": True, "float32": False}        # True: bf16 bits


def check_wgmma_gemm(a_shape, a_dtype, b_shape, b_dtype, c_shape, c_dtype, *, stages, block_n, cluster,
                     b_transposed, smem_limit, epilogue="direct"):
    """Every rule of ``wgmma_gemm``'s inputs, with no GPU: shapes as tuples, dtypes as numpy names,
    ``smem_limit`` the device's shared memory per block after opt-in. Returns ``(M, N, K, ab, c_bf16)``
    or raises ``AsyncpipeError('wgmma_gemm: <rule> [<source>], got <value>')``."""
    for name, shape in (("A", a_shape), ("B", b_shape), ("C", c_shape)):
        check(len(shape) == 2, API, f"{name} must be 2-D", f"{len(shape)}-D of shape {tuple(shape)}")
    check(a_dtype in _AB_DTYPES, API, "A must hold float16, or bfloat16 as 16-bit integers (uint16/int16)",
          a_dtype, _SRC_WGMMA)
    check(b_dtype == a_dtype, API, "B must have A's element type", f"A {a_dtype}, B {b_dtype}")
    check(c_dtype in _C_DTYPES, API, "C must hold float32, or bfloat16 as 16-bit integers (uint16/int16)", c_dtype)
    M, K = a_shape
    N, kb = (b_shape[0], b_shape[1]) if b_transposed else (b_shape[1], b_shape[0])
    b_rule = "B (given transposed, N x K) must have K = A.shape[1] columns" if b_transposed else \
        "B must have K = A.shape[1] rows"
    check(kb == K, API, b_rule, f"A {tuple(a_shape)}, B {tuple(b_shape)}")
    check(tuple(c_shape) == (M, N), API, "C must be M x N", f"C {tuple(c_shape)} for M = {M}, N = {N}")
    check(M >= 1, API, "M must be at least 1", M)
    for name, v in (("N", N), ("K", K)):
        check(v >= DIM_MULTIPLE and v % DIM_MULTIPLE == 0, API,
              f"{name} must be a positive multiple of {DIM_MULTIPLE} (TMA's global row strides are multiples "
              f"of 16 bytes: {name} * 2 bytes)", f"{name} = {v}", _SRC_TMA)
    check(block_n in BLOCK_NS, API, f"block_n (the wgmma N) must be one of {BLOCK_NS}", repr(block_n), _SRC_WGMMA)
    check(cluster in CLUSTERS, API, f"cluster must be one of {CLUSTERS} (CTAs along M sharing B)", repr(cluster))
    check(epilogue in EPILOGUES, API, f"epilogue must be one of {EPILOGUES}", repr(epilogue))
    check(isinstance(stages, (int, np.integer)) and not isinstance(stages, bool) and
          MIN_STAGES <= stages <= MAX_STAGES, API, f"stages must be an integer in {MIN_STAGES}..{MAX_STAGES}",
          repr(stages))
    need = block_shared_bytes(block_n, stages, epilogue)
    if epilogue == "direct":
        check(need <= smem_limit, API,
              f"stages x (stage bytes + 2 barriers) + {SMEM_ALIGN} alignment slack must fit the {smem_limit} bytes "
              "of shared memory per block",
              f"{stages} x ({stage_bytes(block_n)} + {2 * BARRIER_BYTES}) + {SMEM_ALIGN} = {need} bytes for "
              f"block_n={block_n}", "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")
    else:
        check(need <= smem_limit, API,
              f"stages x (stage bytes + 2 barriers) + the TMA epilogue's staging ({CONSUMERS} warpgroups x "
              f"{EPI_BUFS} buffers x {EPI_BUF_BYTES} bytes, never aliasing the ring) + {SMEM_ALIGN} alignment slack "
              f"must fit the {smem_limit} bytes of shared memory per block",
              f"{stages} x ({stage_bytes(block_n)} + {2 * BARRIER_BYTES}) + {epilogue_bytes(epilogue)} + "
              f"{SMEM_ALIGN} = {need} bytes for block_n={block_n} (at most "
              f"{max_stages(block_n, smem_limit, epilogue)} stages fit)",
              "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")
    return M, N, K, _AB_DTYPES[a_dtype], _C_DTYPES[c_dtype]


def max_stages(block_n: int, smem_limit: int, epilogue: str = "direct") -> int:
    """The most stages of ``block_n`` that fit ``smem_limit`` bytes beside ``epilogue``'s staging
    (capped at MAX_STAGES)."""
    free = smem_limit - SMEM_ALIGN - epilogue_bytes(epilogue)
    return min(MAX_STAGES, free // (stage_bytes(block_n) + 2 * BARRIER_BYTES))


def _matrix(name, x):
    from .checks import as_device_array

    d = as_device_array(API, name, x)
    check(d.ndim != 2 or d.is_c_contiguous(), API, f"{name} must be C-contiguous (row-major, unit stride)",
          f"strides {d.strides} for shape {d.shape}")
    return d


def wgmma_gemm(A, B, C=None, stages=4, *, block_n=256, cluster=2, b_transposed=False, out_dtype="bfloat16",
               epilogue="direct", stream=0):
    """C = A @ B on a Hopper GPU with the warp-specialized wgmma kernel; returns C.

    - ``A``: M x K device array (numba, CuPy, PyTorch), float16, or bfloat16 given as its 16-bit
      patterns in a uint16/int16 array (``bf16_bits``; a torch bf16 tensor: ``t.view(torch.int16)``).
    - ``B``: K x N of the same type, row-major (N-major for wgmma); with ``b_transposed=True`` the
      N x K matrix B^T instead (K-major for wgmma, one TMA box per stage).
    - ``C``: M x N, float32 or bfloat16 bits (uint16/int16); allocated with ``out_dtype``
      (``"bfloat16"`` or ``"float32"``) when None. Accumulation is fp32 either way.
    - ``stages`` (3..8, as shared memory allows: ``max_stages``), ``block_n`` (64, 128, 256),
      ``cluster`` (1, or 2: two CTAs along M share and multicast B).
    - ``epilogue``: ``"direct"`` (each thread stores its accumulators) or ``"tma"`` (through swizzled
      shared-memory staging buffers and TMA stores; 32 KB beside the ring: ``max_stages(block_n, limit,
      "tma")``).
    Any M; N and K multiples of 8. Bad input raises ``AsyncpipeError`` before anything runs.
    """
    from ..host.plans import array_key, option_key, run_plan

    if C is None:
        a, b = _matrix("A", A), _matrix("B", B)
        check(out_dtype in ("bfloat16", "float32"), API, "out_dtype must be 'bfloat16' or 'float32'", repr(out_dtype))
        m = a.shape[0] if a.ndim == 2 else 0
        n = (b.shape[0] if b_transposed else b.shape[1]) if b.ndim == 2 else 0
        C = cuda.device_array((m, n), np.uint16 if out_dtype == "bfloat16" else np.float32, stream=stream or 0)
    key = (array_key(A), array_key(B), array_key(C),
           *option_key(stages, block_n, cluster, b_transposed, epilogue), id(stream) if stream else 0)
    run_plan(_plans, key, lambda: _plan(A, B, C, stages, block_n, cluster, b_transposed, epilogue, stream))
    return C


_plans = PlanCache()


def _plan(A, B, C, stages, block_n, cluster, b_transposed, epilogue, stream):
    """Every check, the tensor maps, the grid and the marshalled launch of one problem (a
    ``PreparedLaunch``, kept in ``_plans`` for the next call with the same arrays and options)."""
    from ..host import device_info
    from ..host.launch import persistent_grid, prepare_launch

    a, b, c = _matrix("A", A), _matrix("B", B), _matrix("C", C)
    info = device_info(API)
    M, N, K, ab, c_bf16 = check_wgmma_gemm(a.shape, a.dtype.name, b.shape, b.dtype.name, c.shape, c.dtype.name,
                                           stages=stages, block_n=block_n, cluster=cluster,
                                           b_transposed=b_transposed, smem_limit=info.max_shared_per_block_optin,
                                           epilogue=epilogue)
    dtype = "bfloat16" if ab == "bf16" else "float16"
    tma_a = cached_tensor_map(a, (BM, BK), dtype=dtype, swizzle="128B")
    tma_b = cached_tensor_map(b, (block_n // cluster, BK) if b_transposed else (BK // cluster, BOX_N), dtype=dtype,
                              swizzle="128B")
    # C's boxes: a warpgroup's 64 rows x one 128-byte swizzle row. "direct" never reads the argument (A's
    # map stands in), so it keeps accepting any C, without TMA's address and stride rules.
    tma_c = cached_tensor_map(c, (EPI_ROWS, EPI_ROW_BYTES // c.dtype.itemsize), dtype="bfloat16" if c_bf16 else
                              "float32", swizzle="128B") if epilogue == "tma" else tma_a
    tiles_m = math.ceil(M / (BM * cluster))
    tiles_n = math.ceil(N / block_n)
    flat = c.reshape(M * N)
    out = flat.view(np.uint32) if c_bf16 else flat
    kernel = _jit(block_n, int(stages), cluster, ab, bool(b_transposed), c_bf16, epilogue)
    args = (tma_a, tma_b, tma_c, out, np.int32(M), np.int32(N), np.int32(K), np.int32(tiles_m), np.int32(tiles_n))
    launch = dict(cluster=cluster if cluster > 1 else None, shared_mem=shared_bytes(block_n, int(stages), epilogue),
                  stream=stream)
    grid = persistent_grid(kernel, tiles_m * tiles_n, THREADS, *args, **launch)
    return prepare_launch(kernel, grid, THREADS, *args, **launch, keep=(tma_a, tma_b, tma_c))


def benchmark(n: int, *, stages: int = 4, block_n: int = 256, cluster: int = 2, b_transposed: bool = False,
              epilogue: str = "direct", reps: int = 20) -> dict:
    """TFLOPS of ``wgmma_gemm`` (bf16 in, bf16 out) at n x n x n beside cuBLAS bf16 (through torch, when
    installed), measured in the same call: a record for ``bench/h200.json`` (``kernel`` contains
    "wgmma" and the epilogue, e.g. ``wgmma_gemm_bf16_bn256_s4_c2_tma``; ``vs.cublas_bf16`` is the ratio)."""
    from ..timing import time_ms, tflops

    rng = np.random.default_rng(0)
    a = cuda.to_device(bf16_bits(rng.standard_normal((n, n), dtype=np.float32)))
    b = cuda.to_device(bf16_bits(rng.standard_normal((n, n), dtype=np.float32)))
    c = cuda.device_array((n, n), np.uint16)
    run = functools.partial(wgmma_gemm, a, b, c, stages, block_n=block_n, cluster=cluster, b_transposed=b_transposed,
                            epilogue=epilogue)
    run()                                            # compile and check outside the timing
    ms = time_ms(run, reps=reps)
    record = {"kernel": f"wgmma_gemm_bf16_bn{block_n}_s{stages}_c{cluster}" + ("_bt" if b_transposed else "") +
              f"_{epilogue}", "epilogue": epilogue,
              "shape": [n, n, n], "ms": ms, "tflops": tflops(2.0 * n**3, ms), "vs": {}}
    yard = _cublas_bf16_tflops(n, reps)
    if yard:
        record["vs"]["cublas_bf16"] = record["tflops"] / yard
        record["cublas_bf16_tflops"] = yard
    return record


def _cublas_bf16_tflops(n: int, reps: int) -> float | None:
    from ..timing import time_ms, tflops

    try:
        import torch

        x = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        y = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        return tflops(2.0 * n**3, time_ms(lambda: torch.mm(x, y), reps=reps))
    except ImportError:
        return None
