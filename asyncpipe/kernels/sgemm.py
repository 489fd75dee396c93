"""The chapter's SGEMM: C = alpha * A @ B + beta * C in float32, register-tiled.

Two kernels share one tile (BM = BN = 128, BK = 8, each of 256 threads owns an 8 x 8 block of C):

* ``v4``: the chapter's baseline. Loads go global -> registers -> shared, one buffer, two barriers
  per tile.
* ``cp_async``: the chapter's multi-stage pipeline. ``STAGES`` shared buffers; loads go straight
  from global to shared with ``cp.async`` and run ``STAGES - 1`` tiles ahead of the compute::

      prologue:  issue tiles 0 .. S-2, one commit_group each
      main loop: wait_group(S-2); syncthreads; issue tile kt+S-1 (if any); commit (always);
                 compute tile kt

Beyond the chapter: any M, N, K. Tiles hanging over an edge are loaded with cp.async's zero-fill
form (``src_size`` 0 reads nothing and writes zeros) and stores are predicated. A's tile is kept
k-major in shared memory (each thread's 8 values of A for one k are contiguous); A moves in 4-byte
copies, B in 16-byte copies when N is a multiple of 4 (``VEC=4``), else 4-byte ones (``VEC=1``).
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32

from .. import ptx
from .unroll import registers, unroll, unrolled

BM, BN, BK, TM, TN = 128, 128, 8, 8, 8
THREADS = (BM * BN) // (TM * TN)          # 256
TILE_FLOATS = BM * BK + BK * BN           # one stage of A and B tiles
STAGE_BYTES = TILE_FLOATS * 4             # 8 KiB: the chapter's exercise answer
MIN_STAGES, MAX_STAGES = 2, 8
LAUNCH_BOUNDS = (THREADS, 2)              # maxntid, minnctapersm


def sgemm_cp_async(M, N, K, alpha, A, B, beta, C):
    smem = cuda.shared.array(0, float32)              # STAGES x (A tile | B tile), dynamic
    tid = cuda.threadIdx.x
    thread_col = tid % (BN // TN)
    thread_row = tid // (BN // TN)
    row0 = cuda.blockIdx.y * BM
    col0 = cuda.blockIdx.x * BN
    num_tiles = (K + BK - 1) // BK

    # A's tile is stored transposed (k-major, As[k][m]) so that a thread's 8 values of A for one k
    # are contiguous (two 16-byte shared loads), like B's. cp.async cannot transpose a 16-byte
    # chunk, so A moves in 4-byte copies; B in VEC-element copies (16 bytes when rows allow).
    # Outside the matrix a copy reads 0 bytes (zero fill) from element 0.
    def issue(stage, kt):                             # one tile of A (BM x BK) and B (BK x BN)
        k0 = kt * BK
        base = stage * TILE_FLOATS
        for r in unroll(BM * BK // (THREADS * 4)):
            e = (r * THREADS + tid) * 4               # 4 consecutive k of one row m of A
            m = e // BK
            gr = row0 + m
            for c in unroll(4):
                gc = k0 + e % BK + c
                ok = gr < M and gc < K
                ptx.cp_async_ca_shared_global_4_src_size(ptx.addr(smem, base + (e % BK + c) * BM + m),
                                                         ptx.addr(A, gr * K + gc if ok else 0), 4 if ok else 0)
        for r in unroll(BK * BN // (THREADS * VEC)):
            e = (r * THREADS + tid) * VEC
            gr = k0 + e // BN
            gc = col0 + e % BN
            nbytes = max(0, min(VEC, N - gc)) * 4 if gr < K else 0
            src = gr * N + gc if nbytes > 0 else 0
            copy_zfill(ptx.addr(smem, base + BM * BK + e), ptx.addr(B, src), nbytes)

    # ---- prologue: tiles 0 .. STAGES-2 in flight, one group each --------------------------------
    for s in range(STAGES - 1):
        if s < num_tiles:
            issue(s, s)
        ptx.cp_async_commit_group()

    acc = registers(TM, TN, dtype=float32)
    # ---- main loop ------------------------------------------------------------------------------
    for kt in range(num_tiles):
        ptx.cp_async_wait_group(STAGES - 2)           # tile kt has landed (for this thread) ...
        cuda.syncthreads()                            # ... for every thread; tile kt-1 is consumed
        nxt = kt + STAGES - 1
        if nxt < num_tiles:
            issue(nxt % STAGES, nxt)                  # overwrites the buffer of tile kt-1
        ptx.cp_async_commit_group()                   # even when empty: keeps group counts aligned
        a_base = (kt % STAGES) * TILE_FLOATS + thread_row * TM
        b_base = (kt % STAGES) * TILE_FLOATS + BM * BK + thread_col * TN
        for dot in unroll(BK):
            reg_m = registers(TM)
            reg_n = registers(TN)
            for i in unroll(TM):
                reg_m[i] = smem[a_base + dot * BM + i]
            for j in unroll(TN):
                reg_n[j] = smem[b_base + dot * BN + j]
            for i in unroll(TM):
                for j in unroll(TN):
                    acc[i, j] += reg_m[i] * reg_n[j]
    ptx.cp_async_wait_all()                           # nothing in flight at exit

    # ---- epilogue: C = alpha * acc + beta * C, predicated at the edges ------------------------
    for i in unroll(TM):
        r = row0 + thread_row * TM + i
        for j in unroll(TN):
            c = col0 + thread_col * TN + j
            if r < M and c < N:
                if beta == 0:                         # BLAS: C is not read when beta is 0
                    C[r * N + c] = alpha * acc[i, j]
                else:
                    C[r * N + c] = alpha * acc[i, j] + beta * C[r * N + c]


def sgemm_v4(M, N, K, alpha, A, B, beta, C):
    """The chapter's baseline: same tile, loads through registers, one buffer, no cp.async."""
    smem = cuda.shared.array(TILE_FLOATS, float32)
    tid = cuda.threadIdx.x
    thread_col = tid % (BN // TN)
    thread_row = tid // (BN // TN)
    row0 = cuda.blockIdx.y * BM
    col0 = cuda.blockIdx.x * BN
    acc = registers(TM, TN, dtype=float32)
    for k0 in range(0, K, BK):
        for r in unroll(BM * BK // THREADS):          # A tile, through registers, stored k-major
            e = r * THREADS + tid
            gr = row0 + e // BK
            gc = k0 + e % BK
            smem[(e % BK) * BM + e // BK] = A[gr * K + gc] if gr < M and gc < K else float32(0)
        for r in unroll(BK * BN // THREADS):          # B tile
            e = r * THREADS + tid
            gr = k0 + e // BN
            gc = col0 + e % BN
            smem[BM * BK + e] = B[gr * N + gc] if gr < K and gc < N else float32(0)
        cuda.syncthreads()
        for dot in unroll(BK):
            reg_m = registers(TM)
            reg_n = registers(TN)
            for i in unroll(TM):
                reg_m[i] = smem[dot * BM + thread_row * TM + i]
            for j in unroll(TN):
                reg_n[j] = smem[BM * BK + dot * BN + thread_col * TN + j]
            for i in unroll(TM):
                for j in unroll(TN):
                    acc[i, j] += reg_m[i] * reg_n[j]
        cuda.syncthreads()
    for i in unroll(TM):
        r = row0 + thread_row * TM + i
        for j in unroll(TN):
            c = col0 + thread_col * TN + j
            if r < M and c < N:
                if beta == 0:
                    C[r * N + c] = alpha * acc[i, j]
                else:
                    C[r * N + c] = alpha * acc[i, j] + beta * C[r * N + c]


# ------------------------------------------------------------------------------------------------
# Host side
# ------------------------------------------------------------------------------------------------
_kernels: dict = {}


def kernel(variant: str = "cp_async", stages: int = 3, vec: int = 4):
    """The compiled-on-first-use ``cuda.jit`` dispatcher for one configuration."""
    key = (variant, stages, vec)
    if key not in _kernels:
        if variant == "v4":
            fn = unrolled(sgemm_v4)
        else:
            copy = ptx.cp_async_cg_shared_global_16_src_size if vec == 4 else ptx.cp_async_ca_shared_global_4_src_size
            fn = unrolled(sgemm_cp_async, STAGES=stages, VEC=vec, copy_zfill=copy)
        # 2 CTAs of 256 threads per SM: at most 128 registers each (129 would leave one CTA per SM)
        _kernels[key] = cuda.jit(fn, launch_bounds=LAUNCH_BOUNDS)
    return _kernels[key]


def shared_bytes(stages: int) -> int:
    """Dynamic shared memory of the cp.async kernel: the chapter's 8 KiB per stage."""
    return stages * STAGE_BYTES


def sgemm(A, B, C=None, alpha=1.0, beta=0.0, stages=3, variant="cp_async", stream=0):
    """C = alpha * A @ B + beta * C for float32 row-major CUDA arrays (numba, CuPy, PyTorch...).

    ``C`` is allocated (and ``beta`` must be 0) when not given. Returns C as a numba device array
    view of the same memory. ``variant`` is ``"cp_async"`` (``stages`` 2..8) or ``"v4"``.
    """
    from ..host.launch import launch
    from .checks import as_matrix, check_gemm

    a, b = as_matrix("sgemm", "A", A), as_matrix("sgemm", "B", B)
    M, K = a.shape
    N = b.shape[1]
    c = cuda.device_array((M, N), np.float32, stream=stream) if C is None else as_matrix("sgemm", "C", C)
    check_gemm("sgemm", a, b, c, beta if C is not None else 0.0, stages, variant, C is None and beta != 0)
    vec = 4 if K % 4 == 0 and N % 4 == 0 and a.device_ctypes_pointer.value % 16 == 0 and \
        b.device_ctypes_pointer.value % 16 == 0 else 1
    grid = ((N + BN - 1) // BN, (M + BM - 1) // BM)
    args = (np.int32(M), np.int32(N), np.int32(K), np.float32(alpha), a.reshape(M * K), b.reshape(K * N),
            np.float32(beta), c.reshape(M * N))
    if variant == "v4":
        kernel("v4")[grid, THREADS, stream](*args)
    else:
        launch(kernel("cp_async", stages, vec), grid, THREADS, *args, shared_mem=shared_bytes(stages), stream=stream)
    return c
