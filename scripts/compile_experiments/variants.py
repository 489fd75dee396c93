"""Loop-based forms of the chapter's 3-stage interior cp.async SGEMM, for compile-time experiments.

Each function here is ``asyncpipe.kernels.sgemm.sgemm_cp_async`` with the register tile written differently;
``variant(name)`` passes it through ``unrolled`` with the chapter's constants, as ``kernel_source`` does.

* ``loops_ij``: k-steps (``dot``) still expanded by ``unroll``; the fragments and accumulators are
  ``cuda.local.array``s and the i/j loops are ``range`` loops that LLVM unrolls and promotes to registers.
(A third form, the k-step loop a ``range`` loop too, is measured in bench/compile_experiments.md: LLVM did not
unroll it fully, 128 FFMA in the loop instead of 512; it is not kept here.)
"""

from __future__ import annotations

from numba import cuda, float32

from asyncpipe import ptx
from asyncpipe.kernels.sgemm import (BK, BM, BN, TILE, TILES, _COPY, a_pitch, ring_copies, tile_floats)
from asyncpipe.kernels.unroll import kernel_part, splice, unroll, unrolled
from asyncpipe.kernels.vector import opaque_f32

TM, TN, THREADS = 8, 8, 256


@cuda.jit(device=True, inline="always")
def same_f32(x):
    return x


@kernel_part
def store_c_loops():
    """The epilogue with range loops, C = alpha * acc + beta * C, the beta test per element on ``BETA(beta)``:
    ``same_f32`` (LLVM unswitches the loops on it: two stores of the tile) or ``opaque_f32`` (it cannot: one store,
    the C load and FFMA predicated, as ptxas makes of the shipped unrolled epilogue)."""
    for i in range(TM):
        r = row0 + row_base + i * RI
        for j in range(TN):
            c = col0 + thread_col * 4 + (j // 4) * COL_STEP + j % 4
            if BETA(beta) == 0:
                C[r * N + c] = alpha * acc[i, j]
            else:
                C[r * N + c] = alpha * acc[i, j] + beta * C[r * N + c]


@kernel_part
def store_c_hoisted():
    """The beta test once, each branch an unrolled store of the tile (what LLVM's unswitching makes of loops)."""
    if beta == 0:
        for i in unroll(TM):
            for j in unroll(TN):
                C[(row0 + row_base + i * RI) * N + col0 + thread_col * 4 + (j // 4) * COL_STEP + j % 4] = alpha * acc[i, j]
    else:
        for i in unroll(TM):
            for j in unroll(TN):
                o = (row0 + row_base + i * RI) * N + col0 + thread_col * 4 + (j // 4) * COL_STEP + j % 4
                C[o] = alpha * acc[i, j] + beta * C[o]


def sgemm_loops_ij(M, N, K, alpha, A, B, beta, C):
    smem = cuda.shared.array(0, float32)
    tid = cuda.threadIdx.x
    thread_col = tid % (BN // TN)
    thread_row = tid // (BN // TN)
    row_base = (thread_row // RI) * (RI * TM) + thread_row % RI
    row0 = cuda.blockIdx.y * BM
    col0 = cuda.blockIdx.x * BN
    num_tiles = (K + BK - 1) // BK

    splice(ring_copies)

    acc = cuda.local.array((TM, TN), float32)
    reg_m = cuda.local.array(TM, float32)
    reg_n = cuda.local.array(TN, float32)
    for i in range(TM):
        for j in range(TN):
            acc[i, j] = float32(0.0)
    read = 0
    write = (STAGES - 1) * TILE_FLOATS
    for kt in range(num_tiles):
        ptx.cp_async_wait_group(STAGES - 2)
        cuda.syncthreads()
        if ISSUE_AFTER < 0:
            a_src, b_src = issue_next(kt, write, a_src, b_src)
        a_base = read + row_base * BK
        b_base = read + BM * BK + thread_col * 4
        for dot in unroll(BK):
            for i in range(TM):
                reg_m[i] = smem[a_base + i * RI * BK + dot]
            for j in range(TN):
                reg_n[j] = smem[b_base + dot * BN + (j // 4) * COL_STEP + j % 4]
            if dot == ISSUE_AFTER:
                a_src, b_src = issue_next(kt, write, a_src, b_src)
            for i in range(TM):
                for j in range(TN):
                    acc[i, j] += reg_m[i] * reg_n[j]
        write = read
        read = read + TILE_FLOATS if read < (STAGES - 1) * TILE_FLOATS else 0
    ptx.cp_async_wait_all()
    splice(STORE)


STORES = {"loops": store_c_loops, "opaque": store_c_loops, "hoisted": store_c_hoisted}
KERNELS = {"loops_ij": sgemm_loops_ij}


def variant(name: str, stages: int = 3, store: str = "loops"):
    """The unrolled Python function of variant ``name`` for the chapter's interior configuration."""
    from asyncpipe.kernels.sgemm import store_c

    t = TILES[TILE]
    return unrolled(KERNELS[name], STAGES=stages, AHEAD=stages - 1, VEC_A=4, VEC_B=4, EDGES=False,
                    copy_a=_COPY[4], copy_b=_COPY[4], BK=BK, LDA=a_pitch(BK), TILE_FLOATS=tile_floats(BK), RI=t.ri,
                    COL_STEP=BN // (t.tn // 4), ISSUE_AFTER=t.issue_after[BK], A_KMAJOR=False, TM=TM, TN=TN,
                    THREADS=THREADS, STORE=STORES[store] if store in STORES else store_c,
                    BETA=opaque_f32 if store == "opaque" else same_f32, static_ifs=True)
