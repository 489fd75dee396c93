"""FlashAttention-3's forward kernel, written with asyncpipe's primitives (``attention.py`` is its host side).

One CTA computes O = softmax(Q K^T * scale) V for 128 query rows of one (batch, head)::

    3 warpgroups (384 threads)
    ├── warpgroup 0, the producer: setmaxnreg.dec 24; one thread
    │     Q: HD/64 TMA boxes (128 rows x 64 columns, 128B swizzle) on q_bar, once
    │     for each key block j (BN keys): producer_acquire(empty, st); producer_commit(full, st, K + V bytes)
    │         K_j, V_j: HD/64 boxes each (BN rows x 64 columns), completing full[st.stage]
    └── warpgroups 1 and 2, the consumers: setmaxnreg.inc 240; each owns 64 of the 128 query rows
          round j = 0 .. n_blocks (ping-pong: bar_sync(PING + c) before issuing, bar_arrive(PING + other) after;
          round 0 issues S_0 alone and round n_blocks P V alone, peeled off the loop so no wgmma is under a branch)
              issue S_j = Q K_j^T        wgmma m64nBNk16, A = Q and B = K_j from shared memory (K-major both)
              issue O += P_{j-1} V_{j-1} wgmma m64nHDk16, A = P in registers, B = V (N-major)
              wait for S_j; online softmax of S_j (row max of the raw scores, then exp2(S * scale * log2 e - max)
              as one FFMA and one MUFU per score; row sum in registers)
              wait for PV_{j-1}; release its stage; O *= exp2(m_old - m_new); P_j = S_j as bf16/fp16 pairs
          O /= l; the row log-sum-exp; O through this warpgroup's half of Q's shared memory, TMA stores

The overlaps FlashAttention-3 names: the next S GEMM is issued before the current softmax (within a
warpgroup, S_j and PV_{j-1} are in flight while the softmax of S_j runs ... once S_j is in), and the two
consumer warpgroups take turns issuing their GEMMs (named barriers PING, PING + 1), so that one's softmax
runs while the other's GEMMs do.

**Register fragments** (``asyncpipe.wgmma_layout``): thread t of a consumer warpgroup (warp w, g = lane // 4,
q = lane % 4) holds S[16w + g + 8((i >> 1) & 1), 8(i >> 2) + 2q + (i & 1)] in s[i], the same for O; a
row's 4 threads (q = 0..3) share its max and sum through shuffles. The A fragment of the k16 step kk of
P V is exactly s[8kk .. 8kk + 7] (m64nNk16's accumulator layout is the _rs form's A layout), converted
in pairs: a_r = cvt(s[8kk + 2r + 1], s[8kk + 2r]).

**Masks.** Keys at or past seqlen_k (TMA fills them with zeros) and, with CAUSAL, keys past
row + seqlen_k - seqlen_q (FlashAttention's alignment of the last query with the last key) get -inf;
only blocks that cross a limit pay for the test. A row with no visible key gives O = 0 and lse = -inf.

Compile-time constants (``kernel_constants``): HD, BN, STAGES, CAUSAL, PINGPONG, OVERLAP (both 1 but for the
ablations), MMA_S, MMA_O, CVT, and the sizes derived from them.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32, uint8, uint32, uint64

from .. import ptx
from ..pipeline import (advance, consumer_release, consumer_wait, pipeline_init, pipeline_state, producer_acquire,
                        producer_commit, warpgroup_index)
from ..ptx import wgmma as W
from .unroll import kernel_part, splice, unroll, unrolled

BM = 2 * W.WGMMA_M                  # query rows per CTA: two consumer warpgroups of 64
BOX_COLS = W.SWIZZLE_128B_ROW_BYTES // 2    # 64 two-byte elements: one 128-byte swizzle row
ELEM_BYTES = 2
CONSUMERS = 2
THREADS = (1 + CONSUMERS) * W.WARPGROUP_THREADS
CONSUMER_WARPS = CONSUMERS * W.WARPGROUP_THREADS // 32
LAUNCH_BOUNDS = (THREADS, 1)
PRODUCER_REGS = 24                  # FlashAttention-3's split: 128 x 24 + 256 x 240 = 64512 <= 65536
CONSUMER_REGS = 240
SMEM_ALIGN = W.SWIZZLE_ATOM_BYTES["128B"]
PING = 1                            # named barriers 1, 2: the consumers' turns; 3, 4: each one's epilogue
EPI_BAR = 3
HEAD_DIMS = (64, 128, 256)
NEG_INF = float32(-math.inf)
LN2 = float32(math.log(2.0))
WORD_BYTES = 4

assert PRODUCER_REGS * W.WARPGROUP_THREADS + CONSUMER_REGS * CONSUMERS * W.WARPGROUP_THREADS <= 65536


def block_n(head_dim: int) -> int:
    """Keys per block: 128 (FlashAttention-3's tile for head dims 64 and 128); 64 for 256, where O alone
    takes 128 of a consumer's 240 registers."""
    return 64 if head_dim == 256 else 128


def sizes(head_dim: int, bn: int, stages: int) -> dict:
    d_boxes = head_dim // BOX_COLS
    q_box = BM * W.SWIZZLE_128B_ROW_BYTES
    kv_box = bn * W.SWIZZLE_128B_ROW_BYTES
    return dict(D_BOXES=d_boxes, Q_BOX_BYTES=q_box, Q_BYTES=d_boxes * q_box, KV_BOX_BYTES=kv_box,
                K_BYTES=d_boxes * kv_box, STAGE_BYTES=2 * d_boxes * kv_box)


def default_stages(head_dim: int) -> int:
    """K/V stages in the ring: the most that fit the H100/H200's 227 KB of shared memory per block, up to 4
    (head dim 64: 4, 128: 3, 256: 2)."""
    return {64: 4, 128: 3, 256: 2}[head_dim]


def shared_bytes(head_dim: int, bn: int, stages: int) -> int:
    """Dynamic shared memory: Q, the K/V stages, slack to align them to 1024 bytes."""
    s = sizes(head_dim, bn, stages)
    return s["Q_BYTES"] + stages * s["STAGE_BYTES"] + SMEM_ALIGN


def attention_kernel(tma_q, tma_k, tma_v, tma_o, lse, seqlen_q, seqlen_k, heads, group, m_blocks, scale_log2):
    smem = cuda.shared.array(0, uint8)               # Q | STAGES x (K | V), 1024-aligned below
    words = cuda.shared.array(0, uint32)             # the same memory as 32-bit words (the O staging)
    full = cuda.shared.array(STAGES, uint64)
    empty = cuda.shared.array(STAGES, uint64)
    q_bar = cuda.shared.array(1, uint64)
    tid = cuda.threadIdx.x
    wg = warpgroup_index()                           # warp-uniform to ptxas (roles.py)
    if tid == 0:
        ptx.mbarrier_init(ptx.addr(q_bar, 0), 1)
        pipeline_init(full, empty, STAGES, 1, CONSUMER_WARPS)   # its fence publishes q_bar's init too
    cuda.syncthreads()

    if wg == 0:
        # ---- producer: Q once, then K and V block by block through the ring -----------------------
        ptx.setmaxnreg_dec_sync_aligned_u32(PRODUCER_REGS)
        splice(cta_coords)
        if tid == 0 and n_blocks > 0:
            ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tma_q, 0))
            ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tma_k, 0))
            ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tma_v, 0))
            ptx.mbarrier_arrive_expect_tx(ptx.addr(q_bar, 0), Q_BYTES)
            for k in unroll(D_BOXES):                # coordinates innermost first: (d, head, row, batch)
                ptx.cp_async_bulk_tensor_4d_shared_global(ptx.addr(smem, pad + k * Q_BOX_BYTES), ptx.addr(tma_q, 0),
                                                          k * BOX_COLS, h, m0, b, ptx.addr(q_bar, 0))
            st = pipeline_state(0, 0)
            for j in range(n_blocks):
                producer_acquire(empty, st)
                producer_commit(full, st, STAGE_BYTES)
                k_off = pad + Q_BYTES + st.stage * STAGE_BYTES
                bar = ptx.addr(full, st.stage)
                for k in unroll(D_BOXES):
                    ptx.cp_async_bulk_tensor_4d_shared_global(ptx.addr(smem, k_off + k * KV_BOX_BYTES),
                                                              ptx.addr(tma_k, 0), k * BOX_COLS, kvh, j * BN, b, bar)
                for k in unroll(D_BOXES):
                    ptx.cp_async_bulk_tensor_4d_shared_global(ptx.addr(smem, k_off + K_BYTES + k * KV_BOX_BYTES),
                                                              ptx.addr(tma_v, 0), k * BOX_COLS, kvh, j * BN, b, bar)
                st = advance(st, STAGES)
    else:
        # ---- consumers: 64 query rows each ---------------------------------------------------------
        ptx.setmaxnreg_inc_sync_aligned_u32(CONSUMER_REGS)
        splice(cta_coords)
        c = wg - 1                                   # 0 or 1: rows 64c .. 64c + 63 of the CTA's 128
        t = tid - 128 * wg
        lane = t % 32
        g = lane // 4
        q4 = lane % 4
        row0 = m0 + 64 * c + 16 * (t // 32) + g      # this thread's rows: row0 and row0 + 8
        o = cuda.local.array(O_REGS, float32)
        s = cuda.local.array(S_REGS, float32)
        p = cuda.local.array(P_REGS, uint32)
        for i in unroll(O_REGS, llvm=LLVM_LOOPS, nest=8):
            o[i] = float32(0)
        run_max0 = NEG_INF                           # row maxima so far, in log2 units (scale folded in)
        run_max1 = NEG_INF
        run_sum0 = float32(0)                        # this thread's part of the rows' sums of exp2
        run_sum1 = float32(0)
        st = pipeline_state(0, 0)
        prev = st
        q_addr = base + pad + 64 * c * W.SWIZZLE_128B_ROW_BYTES
        corr0 = float32(1)
        corr1 = float32(1)
        # Every wgmma is issued on a path with no branch around it: the first round (S_0 alone) and the last
        # (P V of the last block alone) are peeled off the loop. A wgmma under a condition that ptxas cannot
        # prove warpgroup-uniform (`if j > 0:`) makes it serialize every wgmma of the kernel (C7519).
        if n_blocks > 0:
            ptx.mbarrier_wait_parity(ptx.addr(q_bar, 0), 0)
            if PINGPONG and c == 1:
                ptx.bar_arrive(PING, 2 * W.WARPGROUP_THREADS)        # the first consumer issues first
            j = 0
            consumer_wait(full, st)
            splice(take_turn)                        # this warpgroup's turn to issue
            ptx.wgmma_fence_sync_aligned()
            splice(issue_s)
            splice(pass_turn)                        # the other's turn
            ptx.wgmma_wait_group_sync_aligned(0)
            splice(softmax)
            splice(convert_p)
            prev = st
            st = advance(st, STAGES)
            for j in range(uint32(1), n_blocks):
                consumer_wait(full, st)
                splice(take_turn)
                ptx.wgmma_fence_sync_aligned()
                splice(issue_s)
                splice(issue_pv)
                splice(pass_turn)
                ptx.wgmma_wait_group_sync_aligned(1 if OVERLAP else 0)   # S_j is in (P V_{j-1} may run on)
                splice(softmax)
                ptx.wgmma_wait_group_sync_aligned(0)                 # P V_{j-1} is done: its stage goes back
                if lane == 0:
                    consumer_release(empty, prev, 1)
                splice(rescale_o)
                splice(convert_p)
                prev = st
                st = advance(st, STAGES)
            splice(take_turn)
            ptx.wgmma_fence_sync_aligned()
            splice(issue_pv)
            if PINGPONG and c == 0:                  # the second consumer's last turn is not awaited
                ptx.bar_arrive(PING + 1, 2 * W.WARPGROUP_THREADS)
            ptx.wgmma_wait_group_sync_aligned(0)
            if lane == 0:
                consumer_release(empty, prev, 1)

        # ---- epilogue: O / l through shared memory (this warpgroup's half of Q) and TMA stores; lse ------
        run_sum0 += cuda.shfl_xor_sync(0xFFFFFFFF, run_sum0, 1)
        run_sum0 += cuda.shfl_xor_sync(0xFFFFFFFF, run_sum0, 2)
        run_sum1 += cuda.shfl_xor_sync(0xFFFFFFFF, run_sum1, 1)
        run_sum1 += cuda.shfl_xor_sync(0xFFFFFFFF, run_sum1, 2)
        # 1 / l as exp2(-log2 l): two MUFU instructions (an IEEE division would call its slow path)
        inv0 = math.exp2(-math.log2(run_sum0)) if run_sum0 > float32(0) else float32(0)
        inv1 = math.exp2(-math.log2(run_sum1)) if run_sum1 > float32(0) else float32(0)
        if q4 == 0:
            out = (b * heads + h) * seqlen_q
            if row0 < seqlen_q:
                lse[out + row0] = (run_max0 + math.log2(run_sum0)) * LN2 if run_sum0 > float32(0) else NEG_INF
            if row0 + 8 < seqlen_q:
                lse[out + row0 + 8] = (run_max1 + math.log2(run_sum1)) * LN2 if run_sum1 > float32(0) else NEG_INF
        r_in = 16 * (t // 32) + g                    # rows r_in and r_in + 8 of the warpgroup's 64: both g mod 8
        for k in unroll(D_BOXES, llvm=LLVM_LOOPS):
            staged = (pad + k * Q_BOX_BYTES + 64 * c * W.SWIZZLE_128B_ROW_BYTES) // WORD_BYTES
            for jj in unroll(BOX_COLS // 8, llvm=LLVM_LOOPS):
                i = 4 * (k * (BOX_COLS // 8) + jj)   # o[i .. i + 3]: columns 8 jj + 2 q4 (+1), rows r_in, r_in + 8
                cb = (8 * jj + 2 * q4) * ELEM_BYTES
                word = staged + r_in * (W.SWIZZLE_128B_ROW_BYTES // WORD_BYTES) + (((cb >> 4) ^ g) << 2) + \
                    ((cb & 15) >> 2)
                words[word] = CVT(o[i + 1] * inv0, o[i] * inv0)
                words[word + 8 * (W.SWIZZLE_128B_ROW_BYTES // WORD_BYTES)] = CVT(o[i + 3] * inv1, o[i + 2] * inv1)
        ptx.fence_proxy_async_shared_cta()           # the threads' writes, visible to the TMA store
        ptx.bar_sync(EPI_BAR + c, W.WARPGROUP_THREADS)
        if t == 0 and m0 + 64 * c < seqlen_q:
            ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tma_o, 0))
            for k in unroll(D_BOXES):
                ptx.cp_async_bulk_tensor_4d_global_shared(ptx.addr(tma_o, 0), k * BOX_COLS, h, m0 + 64 * c, b,
                                                          ptx.addr(smem, pad + k * Q_BOX_BYTES +
                                                                   64 * c * W.SWIZZLE_128B_ROW_BYTES))
            ptx.cp_async_bulk_commit_group()
            ptx.cp_async_bulk_wait_group_read(0)     # the stores have read shared memory before the CTA ends


# ---------------------------------------------------------------------------------------------
# The consumers' steps, spliced into the kernel (they use its names: st, prev, j, s, o, p, ...)
# ---------------------------------------------------------------------------------------------
@kernel_part
def cta_coords():
    """The CTA's query block, head, batch and key blocks, and its shared memory's base, computed in each
    warpgroup after its setmaxnreg so that nothing lives across the register hand-over. (Measured at head dim
    256: it moved where ptxas parks its few spilled values, out of the region before the hand-over, not how
    many; the barrier ids as immediates, ``take_turn``, are what took the spill loads out of the loop.)"""
    base = ptx.cvta_to_shared_u32(ptx.addr(smem, 0))
    pad = (SMEM_ALIGN - (base & (SMEM_ALIGN - 1))) & (SMEM_ALIGN - 1)
    bid = uint32(cuda.blockIdx.x)                    # 32-bit unsigned: the divisions stay inline (no 64-bit call)
    mb = bid % uint32(m_blocks)                      # query block fastest: the CTAs of one head share K and V
    bh = bid // uint32(m_blocks)
    h = bh % uint32(heads)
    b = bh // uint32(heads)
    kvh = h // uint32(group)                         # grouped-query attention: a K/V head per `group` heads
    m0 = mb * BM
    k_end = seqlen_k                                 # keys the CTA's rows may see: [0, k_end)
    if CAUSAL:
        k_end = min(seqlen_k, m0 + BM + seqlen_k - seqlen_q)
    # 32-bit and unsigned: numba's int64 floor division would keep a 64-bit pair live through the loop
    n_blocks = uint32(k_end + BN - 1) // uint32(BN) if k_end > 0 else uint32(0)



@kernel_part
def take_turn():
    """Ping-pong: wait for this warpgroup's turn to issue its GEMMs (barrier ids as immediates: a register
    holding PING + c would stay live, and spill, through the loop at head dim 256)."""
    if PINGPONG:
        if c == 0:
            ptx.bar_sync(PING, 2 * W.WARPGROUP_THREADS)
        else:
            ptx.bar_sync(PING + 1, 2 * W.WARPGROUP_THREADS)


@kernel_part
def pass_turn():
    """Ping-pong: the other warpgroup's turn."""
    if PINGPONG:
        if c == 0:
            ptx.bar_arrive(PING + 1, 2 * W.WARPGROUP_THREADS)
        else:
            ptx.bar_arrive(PING, 2 * W.WARPGROUP_THREADS)


@kernel_part
def issue_s():
    """S_j = Q K_j^T: HD / 16 wgmma k-steps, A = Q and B = K_j from shared memory (K-major both)."""
    k_addr = base + pad + Q_BYTES + st.stage * STAGE_BYTES
    a_desc = W.matrix_descriptor(q_addr, W.K_MAJOR_128B_LBO, W.K_MAJOR_128B_SBO, W.SWIZZLE_128B, 0)
    b_desc = W.matrix_descriptor(k_addr, W.K_MAJOR_128B_LBO, W.K_MAJOR_128B_SBO, W.SWIZZLE_128B, 0)
    for kk in unroll(HD // W.WGMMA_K):
        off = (kk // 4) * Q_BOX_BYTES + (kk % 4) * W.WGMMA_K * ELEM_BYTES
        koff = (kk // 4) * KV_BOX_BYTES + (kk % 4) * W.WGMMA_K * ELEM_BYTES
        MMA_S(ptx.addr(s, 0), W.advance_descriptor(a_desc, off), W.advance_descriptor(b_desc, koff),
              1 if kk > 0 else 0, 0, 0)
    ptx.wgmma_commit_group_sync_aligned()


@kernel_part
def issue_pv():
    """O += P_{j-1} V_{j-1}: BN / 16 k-steps, A = P from registers, B = V (N-major) from shared memory."""
    v_addr = base + pad + Q_BYTES + prev.stage * STAGE_BYTES + K_BYTES
    b_desc = W.matrix_descriptor(v_addr, KV_BOX_BYTES, W.MN_MAJOR_128B_SBO, W.SWIZZLE_128B, 0)
    for kk in unroll(BN // W.WGMMA_K):
        MMA_O(ptx.addr(o, 0), p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3],
              W.advance_descriptor(b_desc, kk * W.WGMMA_K * W.SWIZZLE_128B_ROW_BYTES), 1, 1)
    ptx.wgmma_commit_group_sync_aligned()


@kernel_part
def softmax():
    """The online softmax of S_j, in place: s holds exp2(S * scale * log2(e) - max) after it; corr0/1 the
    factors that take O and the sums to the new maxima."""
    masked = (j + 1) * BN > seqlen_k
    if CAUSAL:
        masked = masked or (j + 1) * BN - 1 > m0 + seqlen_k - seqlen_q
    # One branch around all of the block's mask tests, taken only by blocks that cross a limit: a test per
    # score (`if masked: ...` inside the loop over scores) is turned into selects that every block pays for.
    if masked:
        lim0 = seqlen_k
        lim1 = seqlen_k
        if CAUSAL:
            lim0 = min(seqlen_k, row0 + 1 + seqlen_k - seqlen_q)
            lim1 = min(seqlen_k, row0 + 9 + seqlen_k - seqlen_q)
        for i in unroll(S_REGS, llvm=LLVM_LOOPS, nest=8):
            col = j * BN + 8 * (i >> 2) + 2 * q4 + (i & 1)
            if (i >> 1) & 1:
                if col >= lim1:
                    s[i] = NEG_INF
            else:
                if col >= lim0:
                    s[i] = NEG_INF
    mx0 = NEG_INF                                        # maxima of the raw scores (the scale is positive)
    mx1 = NEG_INF
    for i in unroll(S_REGS, llvm=LLVM_LOOPS, nest=8):
        if (i >> 1) & 1:
            mx1 = max(mx1, s[i])
        else:
            mx0 = max(mx0, s[i])
    mx0 = max(mx0, cuda.shfl_xor_sync(0xFFFFFFFF, mx0, 1))
    mx0 = max(mx0, cuda.shfl_xor_sync(0xFFFFFFFF, mx0, 2))
    mx1 = max(mx1, cuda.shfl_xor_sync(0xFFFFFFFF, mx1, 1))
    mx1 = max(mx1, cuda.shfl_xor_sync(0xFFFFFFFF, mx1, 2))
    new0 = max(run_max0, mx0 * scale_log2)               # running maxima in log2 units
    new1 = max(run_max1, mx1 * scale_log2)
    base0 = float32(0) if new0 == NEG_INF else new0      # a row with nothing visible yet
    base1 = float32(0) if new1 == NEG_INF else new1
    corr0 = ptx.ex2_approx_ftz_f32(run_max0 - base0)
    corr1 = ptx.ex2_approx_ftz_f32(run_max1 - base1)
    sum0 = float32(0)
    sum1 = float32(0)
    for i in unroll(S_REGS, llvm=LLVM_LOOPS, nest=8):   # exp2(S * scale_log2 - max): one FFMA and one MUFU each
        if (i >> 1) & 1:
            e = ptx.ex2_approx_ftz_f32(s[i] * scale_log2 - base1)
            sum1 += e
        else:
            e = ptx.ex2_approx_ftz_f32(s[i] * scale_log2 - base0)
            sum0 += e
        s[i] = e
    run_sum0 = run_sum0 * corr0 + sum0
    run_sum1 = run_sum1 * corr1 + sum1
    run_max0 = new0
    run_max1 = new1


@kernel_part
def rescale_o():
    """O, to the new maxima."""
    for i in unroll(O_REGS, llvm=LLVM_LOOPS, nest=8):
        if (i >> 1) & 1:
            o[i] = o[i] * corr1
        else:
            o[i] = o[i] * corr0


@kernel_part
def convert_p():
    """P_j as bf16/fp16 pairs: the A fragments of P V."""
    for r in unroll(P_REGS, llvm=LLVM_LOOPS, nest=8):
        p[r] = CVT(s[2 * r + 1], s[2 * r])


def kernel_constants(head_dim=128, stages=None, causal=False, ab="bf16", bn=None, pingpong=True, overlap=True,
                     llvm_loops=True) -> dict:
    """The compile-time constants of one configuration. ``pingpong=False``: the consumers issue their GEMMs
    without taking turns; ``overlap=False``: each round waits for both GEMMs before the softmax (the
    ablations of FlashAttention-3's two overlaps)."""
    bn = bn or block_n(head_dim)
    stages = stages or default_stages(head_dim)
    mma_s = getattr(ptx, f"wgmma_mma_async_sync_aligned_m64n{bn}k16_f32_{ab}_{ab}_ss")
    mma_o = getattr(ptx, f"wgmma_mma_async_sync_aligned_m64n{head_dim}k16_f32_{ab}_{ab}_rs")
    cvt = ptx.cvt_rn_bf16x2_f32 if ab == "bf16" else ptx.cvt_rn_f16x2_f32
    return dict(HD=head_dim, BN=bn, STAGES=stages, CAUSAL=int(bool(causal)), PINGPONG=int(bool(pingpong)),
                OVERLAP=int(bool(overlap)), LLVM_LOOPS=int(bool(llvm_loops)), MMA_S=mma_s, MMA_O=mma_o, CVT=cvt,
                S_REGS=W.accumulators(bn), O_REGS=W.accumulators(head_dim), P_REGS=bn // 4,
                **sizes(head_dim, bn, stages))


def make_kernel(**config):
    """The kernel's Python function for one configuration, unrolled (constant branches pruned)."""
    return unrolled(attention_kernel, static_ifs=True, **kernel_constants(**config))


def kernel_argtypes():
    from numba import types

    from ..ptx.tensor_map_type import tensormap

    return (tensormap, tensormap, tensormap, tensormap, types.float32[::1], types.int32, types.int32, types.int32,
            types.int32, types.int32, types.float32)


__all__ = ["BM", "HEAD_DIMS", "LAUNCH_BOUNDS", "THREADS", "attention_kernel", "block_n", "kernel_argtypes",
           "default_stages", "kernel_constants", "make_kernel", "shared_bytes", "np"]
