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
          after the last k-block: wait_group 0, release, store the accumulators (clipped to M x N)

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
delivers its full bytes, so the expected tx-count is constant). The epilogue stores from registers,
predicated on row < M and col < N; N even keeps each thread's pair of columns together. Every TMA
coordinate is >= 0 and its innermost one a multiple of 64 elements (the two rules measured on the H200).

**Registers.** Compiled with launch bounds (384, 1) (168 registers per thread at launch); the producer
gives 128 x (168 - 40) registers back and the two consumers take 256 x (232 - 168): the 128 fp32
accumulators of m64n256k16 plus addressing fit in 232 without spills (see ``tests/kernels``).
"""

from __future__ import annotations

import functools
import math
from collections import OrderedDict

import numpy as np
from numba import cuda, float32, int32, uint8, uint32, uint64
from numba.cuda import bf16 as _bf16

from .. import ptx
from ..constants import BULK_SMEM_ALIGN_TENSOR
from ..errors import check
from ..pipeline import (advance, consumer_release, consumer_wait, pipeline_init, pipeline_state, producer_acquire,
                        producer_commit)
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

assert CONSUMER_REGS * CONSUMERS * W.WARPGROUP_THREADS + PRODUCER_REGS * W.WARPGROUP_THREADS <= REGISTER_FILE
assert BULK_SMEM_ALIGN_TENSOR <= SMEM_ALIGN


def stage_bytes(block_n: int) -> int:
    """Shared memory of one stage: A (BM x BK) and B (BK x BN), two bytes each."""
    return (BM + block_n) * BK * ELEM_BYTES


def shared_bytes(block_n: int, stages: int) -> int:
    """Dynamic shared memory of a launch: the stages, plus slack to align them to 1024 bytes."""
    return stages * stage_bytes(block_n) + SMEM_ALIGN


BARRIER_BYTES = 8                   # one mbarrier; the ring has 2 x stages of them in static shared memory


def block_shared_bytes(block_n: int, stages: int) -> int:
    """Shared memory a CTA needs: the dynamic stages and slack, and the static full/empty barriers."""
    return shared_bytes(block_n, stages) + 2 * stages * BARRIER_BYTES


# ------------------------------------------------------------------------------------------------
# The kernel. Compile-time constants (unrolled): BN, STAGES, CLUSTER, B_KMAJOR (0: B is K x N, N-major;
# 1: B^T is N x K, K-major), C_BF16 (1: C holds bf16 bit pairs as uint32; 0: fp32), MMA (the wgmma
# primitive for the input type).
# ------------------------------------------------------------------------------------------------
def wgmma_gemm_kernel(tma_a, tma_b, c, M, N, K, tiles_m, tiles_n):
    smem = cuda.shared.array(0, uint8)               # STAGES x (A tile | B tile), aligned below
    full = cuda.shared.array(STAGES, uint64)
    empty = cuda.shared.array(STAGES, uint64)
    tid = cuda.threadIdx.x
    wg = tid // 128                                  # warpgroup: 0 producer, 1..2 consumers
    rank = ptx.cluster_ctarank()                     # this CTA's 128-row block of the cluster tile
    base = ptx.cvta_to_shared_u32(ptx.addr(smem, 0))
    pad = (SMEM_ALIGN - (base & (SMEM_ALIGN - 1))) & (SMEM_ALIGN - 1)
    k_blocks = (K + BK - 1) // BK
    cluster = cuda.blockIdx.x // CLUSTER             # 1-D grid: a cluster is CLUSTER consecutive blocks
    clusters = cuda.gridDim.x // CLUSTER

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
            tm = cluster
            tn = 0
            while tm >= tiles_m:
                tm -= tiles_m
                tn += 1
            while tn < tiles_n:
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
                tm += clusters                               # the next cluster tile, M fastest
                while tm >= tiles_m:
                    tm -= tiles_m
                    tn += 1
    else:
        # ---- consumer warpgroups: take the registers, multiply, store -----------------------------
        ptx.setmaxnreg_inc_sync_aligned_u32(CONSUMER_REGS)
        t = tid - 128 * wg                           # thread in the warpgroup
        row_wg = (wg - 1) * W.WGMMA_M                # this warpgroup's 64 rows of the CTA's 128
        w = t // 32
        g = (t % 32) // 4
        q = t % 4
        lane0 = t % 32 == 0
        acc = cuda.local.array(N2, float32)          # N2 = BN / 2 accumulators: registers (constant indices)
        st = pipeline_state(0, 0)
        prev = st
        tm = cluster
        tn = 0
        while tm >= tiles_m:
            tm -= tiles_m
            tn += 1
        while tn < tiles_n:
            for kb in range(k_blocks):
                consumer_wait(full, st)
                a_addr = base + pad + st.stage * STAGE_BYTES + row_wg * W.SWIZZLE_128B_ROW_BYTES
                b_addr = base + pad + st.stage * STAGE_BYTES + A_BYTES
                ptx.wgmma_fence_sync_aligned()
                for s in unroll(K_STEPS):
                    a_desc = W.matrix_descriptor(a_addr + s * W.WGMMA_K * ELEM_BYTES, W.K_MAJOR_128B_LBO,
                                                 W.K_MAJOR_128B_SBO, W.SWIZZLE_128B, 0)
                    if B_KMAJOR:
                        b_desc = W.matrix_descriptor(b_addr + s * W.WGMMA_K * ELEM_BYTES, W.K_MAJOR_128B_LBO,
                                                     W.K_MAJOR_128B_SBO, W.SWIZZLE_128B, 0)
                    else:
                        b_desc = W.matrix_descriptor(b_addr + s * W.WGMMA_K * W.SWIZZLE_128B_ROW_BYTES,
                                                     BK * W.SWIZZLE_128B_ROW_BYTES, W.MN_MAJOR_128B_SBO,
                                                     W.SWIZZLE_128B, 0)
                    # scale_d 0 on a tile's first step: the accumulators start from the product alone
                    MMA(ptx.addr(acc, 0), a_desc, b_desc, 1 if s > 0 else int32(kb > 0), 0, 1 - B_KMAJOR)
                ptx.wgmma_commit_group_sync_aligned()
                ptx.wgmma_wait_group_sync_aligned(1)        # the previous k-block's mmas are done ...
                if kb > 0 and lane0:
                    consumer_release(empty, prev, CLUSTER)  # ... so its slot goes back, in every CTA
                prev = st
                st = advance(st, STAGES)
            ptx.wgmma_wait_group_sync_aligned(0)
            if lane0:
                consumer_release(empty, prev, CLUSTER)

            # ---- epilogue: this thread's accumulators to C, clipped to M x N ------------------------
            row = (tm * CLUSTER + rank) * BM + row_wg + 16 * w + g
            for j in unroll(BN // 8):
                col = tn * BN + 8 * j + 2 * q
                for h in unroll(2):
                    r = row + 8 * h
                    if r < M and col < N:
                        if C_BF16:
                            lo = _bf16.bfloat16_as_ushort(_bf16.float32_to_bfloat16_rn(acc[4 * j + 2 * h]))
                            hi = _bf16.bfloat16_as_ushort(_bf16.float32_to_bfloat16_rn(acc[4 * j + 2 * h + 1]))
                            c[(r * N + col) // 2] = uint32(lo) | (uint32(hi) << 16)
                        else:
                            c[r * N + col] = acc[4 * j + 2 * h]
                            c[r * N + col + 1] = acc[4 * j + 2 * h + 1]
            tm += clusters
            while tm >= tiles_m:
                tm -= tiles_m
                tn += 1

    # ---- no CTA exits while a peer may still multicast into it or release its slots ----------------
    if CLUSTER > 1:
        ptx.barrier_cluster_arrive()
        ptx.barrier_cluster_wait()


# ------------------------------------------------------------------------------------------------
# Configurations and compilation
# ------------------------------------------------------------------------------------------------
def kernel_constants(block_n=256, stages=4, cluster=2, ab="bf16", b_kmajor=False, c_bf16=True) -> dict:
    """The compile-time constants of one configuration (what ``unrolled`` substitutes)."""
    mma = getattr(ptx, f"wgmma_mma_async_sync_aligned_m64n{block_n}k16_f32_{ab}_{ab}_ss")
    b_share = (block_n // cluster if b_kmajor else BK // cluster) * W.SWIZZLE_128B_ROW_BYTES
    return dict(BN=block_n, N2=W.accumulators(block_n), STAGES=stages, CLUSTER=cluster, B_KMAJOR=int(b_kmajor),
                C_BF16=int(c_bf16), MMA=mma, STAGE_BYTES=stage_bytes(block_n), A_BYTES=BM * BK * ELEM_BYTES,
                B_SHARE_BYTES=b_share, CTA_MASK=np.uint16((1 << cluster) - 1), SMEM_ALIGN=SMEM_ALIGN)


def make_kernel(**config):
    """The kernel's Python function for one configuration (``kernel_constants``' arguments), unrolled."""
    return unrolled(wgmma_gemm_kernel, **kernel_constants(**config))


def kernel_argtypes(c_bf16=True):
    """numba argument types: two tensor maps (uint64[16]), C (uint32 pairs or fp32, flat), M, N, K, tiles."""
    from numba import types

    c = types.uint32[::1] if c_bf16 else types.float32[::1]
    return (types.uint64[::1], types.uint64[::1], c, types.int32, types.int32, types.int32, types.int32,
            types.int32)


@functools.lru_cache(maxsize=None)
def _jit(block_n, stages, cluster, ab, b_kmajor, c_bf16):
    return cuda.jit(make_kernel(block_n=block_n, stages=stages, cluster=cluster, ab=ab, b_kmajor=b_kmajor,
                                c_bf16=c_bf16), launch_bounds=LAUNCH_BOUNDS)


# ------------------------------------------------------------------------------------------------
# Host side: checks (pure, no GPU), then the launch
# ------------------------------------------------------------------------------------------------
_SRC_TMA = "cuTensorMapEncodeTiled"
_SRC_WGMMA = "PTX ISA, wgmma.mma_async"
_AB_DTYPES = {"float16": "f16", "uint16": "bf16", "int16": "bf16"}   # 16-bit bits of bf16 arrive as (u)int16
_C_DTYPES = {"uint16": True, "int16": True, "float32": False}        # True: bf16 bits


def check_wgmma_gemm(a_shape, a_dtype, b_shape, b_dtype, c_shape, c_dtype, *, stages, block_n, cluster,
                     b_transposed, smem_limit):
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
    check(isinstance(stages, (int, np.integer)) and not isinstance(stages, bool) and
          MIN_STAGES <= stages <= MAX_STAGES, API, f"stages must be an integer in {MIN_STAGES}..{MAX_STAGES}",
          repr(stages))
    need = block_shared_bytes(block_n, stages)
    check(need <= smem_limit, API,
          f"stages x (stage bytes + 2 barriers) + {SMEM_ALIGN} alignment slack must fit the {smem_limit} bytes of "
          "shared memory per block",
          f"{stages} x ({stage_bytes(block_n)} + {2 * BARRIER_BYTES}) + {SMEM_ALIGN} = {need} bytes for "
          f"block_n={block_n}", "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")
    return M, N, K, _AB_DTYPES[a_dtype], _C_DTYPES[c_dtype]


def max_stages(block_n: int, smem_limit: int) -> int:
    """The most stages of ``block_n`` that fit ``smem_limit`` bytes (capped at MAX_STAGES)."""
    return min(MAX_STAGES, (smem_limit - SMEM_ALIGN) // (stage_bytes(block_n) + 2 * BARRIER_BYTES))


def _matrix(name, x):
    from .checks import as_device_array

    d = as_device_array(API, name, x)
    check(d.ndim != 2 or d.is_c_contiguous(), API, f"{name} must be C-contiguous (row-major, unit stride)",
          f"strides {d.strides} for shape {d.shape}")
    return d


def wgmma_gemm(A, B, C=None, stages=4, *, block_n=256, cluster=2, b_transposed=False, out_dtype="bfloat16",
               stream=0):
    """C = A @ B on a Hopper GPU with the warp-specialized wgmma kernel; returns C.

    - ``A``: M x K device array (numba, CuPy, PyTorch), float16, or bfloat16 given as its 16-bit
      patterns in a uint16/int16 array (``bf16_bits``; a torch bf16 tensor: ``t.view(torch.int16)``).
    - ``B``: K x N of the same type, row-major (N-major for wgmma); with ``b_transposed=True`` the
      N x K matrix B^T instead (K-major for wgmma, one TMA box per stage).
    - ``C``: M x N, float32 or bfloat16 bits (uint16/int16); allocated with ``out_dtype``
      (``"bfloat16"`` or ``"float32"``) when None. Accumulation is fp32 either way.
    - ``stages`` (3..8, as shared memory allows: ``max_stages``), ``block_n`` (64, 128, 256),
      ``cluster`` (1, or 2: two CTAs along M share and multicast B).
    Any M; N and K multiples of 8. Bad input raises ``AsyncpipeError`` before anything runs.
    """
    from ..host import device_info, launch

    a, b = _matrix("A", A), _matrix("B", B)
    if C is None:
        check(out_dtype in ("bfloat16", "float32"), API, "out_dtype must be 'bfloat16' or 'float32'", repr(out_dtype))
        m = a.shape[0] if a.ndim == 2 else 0
        n = (b.shape[0] if b_transposed else b.shape[1]) if b.ndim == 2 else 0
        C = cuda.device_array((m, n), np.uint16 if out_dtype == "bfloat16" else np.float32, stream=stream or 0)
    c = _matrix("C", C)
    info = device_info(API)
    M, N, K, ab, c_bf16 = check_wgmma_gemm(a.shape, a.dtype.name, b.shape, b.dtype.name, c.shape, c.dtype.name,
                                           stages=stages, block_n=block_n, cluster=cluster,
                                           b_transposed=b_transposed, smem_limit=info.max_shared_per_block_optin)
    dtype = "bfloat16" if ab == "bf16" else "float16"
    tma_a = _tensor_map(a, (BM, BK), dtype)
    tma_b = _tensor_map(b, (block_n // cluster, BK) if b_transposed else (BK // cluster, BOX_N), dtype)
    tiles_m = math.ceil(M / (BM * cluster))
    tiles_n = math.ceil(N / block_n)
    clusters = max(1, min(tiles_m * tiles_n, info.sm_count // cluster))
    flat = c.reshape(M * N)
    out = flat.view(np.uint32) if c_bf16 else flat
    kernel = _jit(block_n, int(stages), cluster, ab, bool(b_transposed), c_bf16)
    launch(kernel, clusters * cluster, THREADS, tma_a, tma_b, out, np.int32(M), np.int32(N), np.int32(K),
           np.int32(tiles_m), np.int32(tiles_n), cluster=cluster if cluster > 1 else None,
           shared_mem=shared_bytes(block_n, int(stages)), stream=stream)
    return C


_maps: "OrderedDict[tuple, object]" = OrderedDict()
MAP_CACHE_SIZE = 16


def _tensor_map(d, box, dtype: str):
    """The 128B-swizzled tensor map of the device array ``d``, built once per (address, shape, strides,
    box, dtype): encoding one is a driver call and a synchronous 128-byte copy, which would stall the
    stream on every call. The cache holds maps only, never the arrays."""
    from ..host.tensor_map import TensorMap

    cai = d.__cuda_array_interface__
    key = (cai["data"][0], tuple(cai["shape"]), tuple(cai.get("strides") or ()), tuple(box), dtype)
    tmap = _maps.pop(key, None)
    if tmap is None:
        built = TensorMap.tiled(d, box, swizzle="128B", dtype=dtype)
        tmap = TensorMap(built.layout, built._words, None)
    _maps[key] = tmap
    while len(_maps) > MAP_CACHE_SIZE:
        _maps.popitem(last=False)
    return tmap


def benchmark(n: int, *, stages: int = 4, block_n: int = 256, cluster: int = 2, b_transposed: bool = False,
              reps: int = 20) -> dict:
    """TFLOPS of ``wgmma_gemm`` (bf16 in, bf16 out) at n x n x n beside cuBLAS bf16 (through torch, when
    installed), measured in the same call: a record for ``bench/h200.json`` (``kernel`` contains
    "wgmma"; ``vs.cublas_bf16`` is the ratio)."""
    from ..timing import time_ms, tflops

    rng = np.random.default_rng(0)
    a = cuda.to_device(bf16_bits(rng.standard_normal((n, n), dtype=np.float32)))
    b = cuda.to_device(bf16_bits(rng.standard_normal((n, n), dtype=np.float32)))
    c = cuda.device_array((n, n), np.uint16)
    run = functools.partial(wgmma_gemm, a, b, c, stages, block_n=block_n, cluster=cluster, b_transposed=b_transposed)
    run()                                            # compile and check outside the timing
    ms = time_ms(run, reps=reps)
    record = {"kernel": f"wgmma_gemm_bf16_bn{block_n}_s{stages}_c{cluster}" + ("_bt" if b_transposed else ""),
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


# ------------------------------------------------------------------------------------------------
# bfloat16 on the host (numpy has no bfloat16): bit patterns in uint16
# ------------------------------------------------------------------------------------------------
BF16_ROUND_BIAS = 0x7FFF      # round to nearest even: add 0x7FFF + the lowest kept bit, then truncate
BF16_QUIET_BIT = 0x40         # a NaN keeps a mantissa bit set after truncation


def bf16_bits(x) -> np.ndarray:
    """float32 values -> their bfloat16 bit patterns (uint16), rounded to nearest even; NaN stays NaN."""
    f = np.ascontiguousarray(x, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    rounded = ((u + BF16_ROUND_BIAS + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(f), ((u >> 16) | BF16_QUIET_BIT).astype(np.uint16), rounded)


def bf16_to_float32(bits) -> np.ndarray:
    """bfloat16 bit patterns (uint16) -> float32 values (exact)."""
    b = np.ascontiguousarray(bits, dtype=np.uint16)
    return (b.astype(np.uint32) << 16).view(np.float32)
