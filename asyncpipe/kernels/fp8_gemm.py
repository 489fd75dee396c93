"""``fp8_gemm``: DeepGEMM-style block-scaled FP8 GEMM on Hopper, D = (A * sa) (B * sb)^T in bf16.

    q, sa = quantize_fp8_rowwise_blocks(x)            # fp8_quant: A and its 1 x 128 scales from bf16
    d = fp8_gemm(q, sa, b, sb)                        # b: N x K e4m3, sb: its 128 x 128 block scales

- ``a``: M x K e4m3, row-major: a torch.float8_e4m3fn tensor, or a numba/CuPy uint8 array of e4m3 codes.
- ``sa``: fp32, M x ceil(K/128), one scale per 1 x 128 block of A, stored K-block-major (DeepGEMM's
  TMA-aligned transposed layout): element (m, b) at ``b * ld + m``, strides (1, ld) elements with
  ``ld >= M`` a multiple of 4 (16 bytes). ``quantize_fp8_rowwise_blocks`` returns it so; from a KB x ld
  buffer ``fp8_quant.scales_view(buffer, M)`` makes it (torch: ``buffer.t()[:M]``).
- ``b``: N x K e4m3 (K-major: row n holds B[n, :], the ``B^T`` of ``D = A B``), row-major.
- ``sb``: fp32, ceil(N/128) x ceil(K/128), row-major: one scale per 128 x 128 block of B; at block_n 192 starting
  on a 16-byte boundary (the kernel loads it by TMA there).
- ``out``: M x N bf16 (a torch bfloat16 tensor, or its bits in a uint16/int16 array); allocated when None.

Any M >= 1, N a multiple of 8 and K of 16: partial tiles and k-blocks are handled (TMA zero-fills them). The kernel is
``fp8_gemm_kernel.py``; bad input raises ``AsyncpipeError`` (``UnsupportedDeviceError`` without an sm_90
GPU) naming the rule and the value before anything runs. ``reference`` is the float64 product of the
dequantized operands; ``benchmark`` times the kernel beside ``torch._scaled_mm``.
"""

from __future__ import annotations

import functools
import math
import statistics

import numpy as np
from numba import cuda

from ..errors import check
from ..host.plans import PlanCache, array_key, cached_tensor_map, option_key, run_plan
from ..jit_cache import jit
from . import fp8_gemm_kernel as FK
from .checks import as_device_array, is_torch, torch_bits
from .fp8_quant import StridedView, dequantize_reference, k_blocks, scale_ld

API = "fp8_gemm"
_SRC_TMA = "cuTensorMapEncodeTiled"
_SRC_WGMMA = "PTX ISA, wgmma.mma_async"
_E4M3 = ("uint8", "float8_e4m3fn")          # e4m3 codes: numba/CuPy uint8, or torch's float8_e4m3fn
_BF16 = ("uint16", "int16", "bfloat16")     # bf16: its bits, or torch's bfloat16
_TYPE_RULES = {name: (allowed, f"{name} must {what}") for name, allowed, what in (
    ("A", _E4M3, "hold float8 e4m3 (torch.float8_e4m3fn, or its codes in a uint8 array)"),
    ("B", _E4M3, "hold float8 e4m3 (torch.float8_e4m3fn, or its codes in a uint8 array)"),
    ("sa", ("float32",), "be float32"), ("sb", ("float32",), "be float32"),
    ("D", _BF16, "hold bfloat16 (torch.bfloat16, or its bits in a uint16/int16 array)"))}
TMA_ALIGN = 16                              # TMA global addresses and strides: multiples of 16 bytes
SCALE_ITEM = 4


def check_fp8_gemm(a_shape, a_dtype, sa_shape, sa_strides, sa_dtype, b_shape, b_dtype, sb_shape, sb_dtype,
                   d_shape, d_dtype, *, contiguous, addresses, stages, block_n, smem_limit, cluster=(1, 1),
                   split_k=1, k_slices=1, tail_slices=1, epilogue="direct", epilogue_buffers=1, pingpong=False,
                   dacc=False):
    """Every rule of ``fp8_gemm``'s inputs, with no GPU: shapes as tuples, dtypes as names ("float8_e4m3fn",
    "bfloat16" for torch tensors), ``sa_strides`` in elements, ``contiguous`` a dict name -> bool for A, B, sb
    and D, ``addresses`` name -> device address. Returns ``(M, N, K, ld)`` (``ld``: sa's K-block stride)."""
    for name, shape in (("A", a_shape), ("sa", sa_shape), ("B", b_shape), ("sb", sb_shape), ("D", d_shape)):
        check(len(shape) == 2, API, f"{name} must be 2-D", f"{len(shape)}-D of shape {tuple(shape)}")
    for name, dt in (("A", a_dtype), ("sa", sa_dtype), ("B", b_dtype), ("sb", sb_dtype), ("D", d_dtype)):
        allowed, rule = _TYPE_RULES[name]
        check(dt in allowed, API, rule, dt, _SRC_WGMMA if name in ("A", "B") else None)
    M, K = a_shape
    N = b_shape[0]
    check(M >= 1, API, "M (A's rows) must be at least 1", M)
    check(b_shape[1] == K, API, "B (N x K, K-major) must have K = A.shape[1] columns",
          f"A {tuple(a_shape)}, B {tuple(b_shape)}")
    check(N >= FK.N_MULTIPLE and N % FK.N_MULTIPLE == 0, API,
          f"N must be a positive multiple of {FK.N_MULTIPLE} (D's rows are stored as whole 16-byte lines)", f"N = {N}")
    check(K >= FK.K_MULTIPLE and K % FK.K_MULTIPLE == 0, API,
          f"K must be a positive multiple of {FK.K_MULTIPLE} (TMA: A's and B's row pitch, K bytes, a multiple of 16)",
          f"K = {K}", _SRC_TMA)
    kb = k_blocks(K)
    check(tuple(sa_shape) == (M, kb), API, "sa must be M x ceil(K/128) (one scale per 1 x 128 block of A)",
          f"sa {tuple(sa_shape)} for M = {M}, K = {K}")
    check(tuple(sb_shape) == (k_blocks(N), kb), API, "sb must be ceil(N/128) x ceil(K/128) (one scale per "
          "128 x 128 block of B)", f"sb {tuple(sb_shape)} for N = {N}, K = {K}")
    check(tuple(d_shape) == (M, N), API, "D must be M x N", f"D {tuple(d_shape)} for M = {M}, N = {N}")
    s_m, s_k = sa_strides
    ld = s_k if kb > 1 else scale_ld(M)
    check((s_m == 1 or M == 1) and (kb == 1 or (ld >= M and ld % (TMA_ALIGN // SCALE_ITEM) == 0)), API,
          "sa must be stored K-block-major: strides (1, ld) elements with ld >= M a multiple of 4 (DeepGEMM's "
          "TMA-aligned transposed layout, what quantize_fp8_rowwise_blocks returns)",
          f"strides {tuple(sa_strides)} for shape {tuple(sa_shape)}", _SRC_TMA)
    for name in ("A", "B", "sb", "D"):
        check(contiguous[name], API, f"{name} must be C-contiguous (row-major, unit stride)", f"a strided {name}")
    check(epilogue in FK.EPILOGUES, API, f"epilogue must be one of {FK.EPILOGUES}", repr(epilogue))
    tma_epilogue = epilogue == "tma"
    sb_tma = block_n in FK.BLOCK_NS and FK.sb_by_tma(block_n)      # B's scales by TMA at 192 wide
    for name, align in (("A", TMA_ALIGN), ("B", TMA_ALIGN), ("sa", TMA_ALIGN),
                        ("sb", TMA_ALIGN if sb_tma else SCALE_ITEM), ("D", TMA_ALIGN if tma_epilogue else 4)):
        addr = addresses[name]
        check(addr % align == 0, API, f"{name} must start on a {align}-byte boundary" +
              (f" at block_n {block_n}" if name == "sb" and sb_tma else "") +
              (" (TMA's global address rule)" if align == TMA_ALIGN else ""),
              f"address {addr:#x} ({addr % align} bytes past one)", _SRC_TMA if align == TMA_ALIGN else None)
    check(block_n in FK.BLOCK_NS, API, f"block_n must be one of {FK.BLOCK_NS} (tile widths whose B scales the promotion selects)",
          repr(block_n))
    if tma_epilogue:
        chunks = FK.epilogue_chunks(block_n) if block_n in FK.BLOCK_NS else 1
        check(isinstance(epilogue_buffers, (int, np.integer)) and not isinstance(epilogue_buffers, bool) and
              1 <= epilogue_buffers <= chunks, API,
              f"epilogue_buffers must be an integer in 1..{chunks} (the TMA epilogue's 64-column staging buffers per "
              f"consumer warpgroup, at most one per chunk of block_n = {block_n})", repr(epilogue_buffers))
    check(_is_pair(cluster) and tuple(cluster) in FK.CLUSTERS, API,
          f"cluster must be one of {FK.CLUSTERS} (CTAs along M sharing B, along N sharing A)", repr(cluster))
    check(isinstance(stages, (int, np.integer)) and not isinstance(stages, bool) and
          FK.MIN_STAGES <= stages <= FK.MAX_STAGES, API,
          f"stages must be an integer in {FK.MIN_STAGES}..{FK.MAX_STAGES}", repr(stages))
    check(split_k in FK.KSPLITS and not isinstance(split_k, bool), API,
          f"split_k must be one of {FK.KSPLITS} (2: both consumer warpgroups on the same 64 rows, each with the "
          "k-blocks of its slots)", repr(split_k))
    check(split_k == 1 or M <= FK.WGMMA_ROWS, API,
          f"split_k 2 gives the tile's two consumer warpgroups the same {FK.WGMMA_ROWS} rows: M must be at most "
          f"{FK.WGMMA_ROWS}", f"M = {M}")
    check(split_k == 1 or not isinstance(stages, (int, np.integer)) or stages % 2 == 0, API,
          "split_k 2 needs an even number of stages (each consumer warpgroup owns every other slot: a slot both used "
          "could pass one of them by two phases, which a parity wait cannot tell apart)", f"stages = {stages}")
    check(split_k == 1 or block_n <= FK.KSPLIT_MAX_BLOCK_N, API,
          f"split_k 2 needs block_n at most {FK.KSPLIT_MAX_BLOCK_N} (at 192 its reduction makes ptxas spill)",
          f"block_n = {block_n}")
    check(isinstance(k_slices, (int, np.integer)) and not isinstance(k_slices, bool) and
          1 <= k_slices <= FK.MAX_KSLICES, API,
          f"k_slices must be an integer in 1..{FK.MAX_KSLICES} (the K slices of a tile, each a unit of the persistent "
          "walk)", repr(k_slices))
    check(k_slices <= kb, API, "k_slices must be at most ceil(K/128), the k-blocks (every slice takes at least one)",
          f"k_slices = {k_slices} for K = {K} ({kb} k-blocks)")
    check(isinstance(tail_slices, (int, np.integer)) and not isinstance(tail_slices, bool) and
          1 <= tail_slices <= FK.MAX_KSLICES, API,
          f"tail_slices must be an integer in 1..{FK.MAX_KSLICES} (the K slices of each tile of the persistent walk's "
          "last, partial round)", repr(tail_slices))
    check(tail_slices <= kb, API,
          "tail_slices must be at most ceil(K/128), the k-blocks (every slice takes at least one)",
          f"tail_slices = {tail_slices} for K = {K} ({kb} k-blocks)")
    check(k_slices == 1 or tail_slices == 1, API,
          "k_slices (every tile sliced) and tail_slices (the last round's tiles) exclude each other: one may be above 1",
          f"k_slices = {k_slices}, tail_slices = {tail_slices}")
    check(isinstance(pingpong, (bool, np.bool_)), API, "pingpong must be True or False", repr(pingpong))
    check(not pingpong or split_k == 1, API,
          "pingpong (the consumer warpgroups take turns issuing their k-block's mmas) needs split_k 1: with split_k 2 "
          "they take alternate ring slots already", f"split_k = {split_k}")
    check(isinstance(dacc, (bool, np.bool_)), API, "dacc must be True or False", repr(dacc))
    check(not dacc or FK.dacc_fits(block_n, split_k, pingpong),
          API, f"dacc (two block sums, k-blocks in pairs) needs split_k 1, block_n at most {FK.DACC_MAX_BLOCK_N} (three "
          "sets of fp32 sums in registers) and pingpong off", f"split_k = {split_k}, block_n = {block_n}, "
          f"pingpong = {pingpong}")
    bufs = epilogue_buffers if tma_epilogue else 0
    need = FK.block_shared_bytes(block_n, stages, split_k, bufs)
    reduce, staging = FK.reduce_bytes(block_n, split_k), FK.epilogue_bytes(bufs)
    check(need <= smem_limit, API,
          f"stages x (stage bytes + 2 barriers) + {FK.SMEM_ALIGN} alignment slack + {FK.SLICES_IN_BYTES} (k_slices' "
          "count)" + (" + split_k 2's 64 x block_n fp32 sums" if reduce else "") +
          (f" + the TMA epilogue's staging ({FK.CONSUMERS} warpgroups x epilogue_buffers x {FK.EPI_BUF_BYTES})"
           if staging else "") + f" must fit the {smem_limit} bytes of shared memory per block",
          f"{stages} x ({FK.stage_bytes(block_n, split_k)} + {2 * FK.BARRIER_BYTES}) + {FK.SMEM_ALIGN} + "
          f"{FK.SLICES_IN_BYTES}"
          + (f" + {reduce}" if reduce else "") + (f" + {staging}" if staging else "") + f" = {need} bytes (at most "
          f"{FK.max_stages(block_n, smem_limit, split_k, bufs)} stages fit)",
          "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")
    return M, N, K, ld


def _is_pair(x) -> bool:
    return isinstance(x, (tuple, list)) and len(x) == 2 and all(isinstance(v, (int, np.integer)) and
                                                              not isinstance(v, bool) for v in x)


def _view(name, x):
    """(numba device array with x's bytes, element type name): torch float8 as uint8, torch bf16 as int16; a
    torch dtype that has no place here is refused by its rule (it may have no CUDA array interface at all)."""
    if is_torch(x):
        check(x.is_cuda, API, f"{name} must be on a CUDA device", str(x.device))
        kind = str(x.dtype).removeprefix("torch.")
        allowed, rule = _TYPE_RULES[name]
        check(kind in allowed, API, rule, kind, _SRC_WGMMA if name in ("A", "B") else None)
        return as_device_array(API, name, torch_bits(x)), kind
    a = as_device_array(API, name, x)
    return a, a.dtype.name


def _strides(a) -> tuple:
    return tuple(s // a.dtype.itemsize for s in a.strides)


def _address(a) -> int:
    return a.__cuda_array_interface__["data"][0] if hasattr(a, "__cuda_array_interface__") else 0


# A tile's speed relative to the 192-wide one's when every SM is busy, measured on an H100 at 4096 x 24576 x 1536 (every
# width fills the SMs there) with the TMA epilogue, in 1 x 1 clusters, 128 wide in pairs of k-blocks (dacc):
# 702, 1,160 and 1,193 TFLOPS over wave efficiencies 0.99, 0.99, 0.97 (bench/h100_fp8_width_cluster_sweep_a80e8d1.json,
# 2026-12-07). On the H200 on 2026-12-03, before dacc and the uniform k-loop: 0.68 and 0.85.
TILE_SPEED = {64: 0.58, 128: 0.95, 192: 1.0}


def wave_efficiency(m: int, n: int, block_n: int, sm_count: int) -> float:
    """The share of the SMs' tile slots that hold D's elements: M N over waves x SMs x 128 x block_n, where a wave
    is one tile per SM (the persistent grid walks ceil(tiles / SMs) of them) and a partial tile counts whole."""
    tiles = math.ceil(m / FK.BM) * math.ceil(n / block_n)
    return m * n / (math.ceil(tiles / sm_count) * sm_count * FK.BM * block_n)


def choose_block_n(m: int, n: int, sm_count: int) -> int:
    """The tile width ``fp8_gemm`` takes by default. M one tile deep (M <= 128): the narrowest, 64. There the GEMM
    streams B, and the most CTAs keep the most of it in flight: 64 wide ran fastest at 64 and 128 x 7168 x 2048,
    128 x 2112 x 7168 and 64 and 128 x 24576 x 1536 (by 2-4 % at 24576 columns, 1.3-1.9x at 7168). Deeper M: the
    width whose tiles keep the SMs busiest (``wave_efficiency``), weighed by how fast a tile of that width runs
    (``TILE_SPEED``): 192 where its tiles fill whole waves (8192^3, 4096 x 2112 x 7168, 4096 x 24576 x 1536), 128
    where 192 would leave the last wave part empty (4096^3: 5.3 waves of 192-wide tiles; 4096 x 7168 x 2048;
    512 x 7168 x 2048), 64 where even 128-wide tiles are too few (512 x 2112 x 7168: 4 x 33 tiles, one whole wave).
    Against the H100 sweep of 2026-12-07 (``bench/h100_fp8_width_cluster_sweep_a80e8d1.json``) it picks the fastest
    width at every shape measured but 512 x 24576 x 1536 (192; 128 ran 5 % faster there)."""
    if m <= FK.BM:
        return min(FK.BLOCK_NS)
    return max(FK.BLOCK_NS, key=lambda bn: TILE_SPEED[bn] * wave_efficiency(m, n, bn, sm_count))


def choose_cluster(m: int, n: int, block_n: int, sm_count: int) -> tuple:
    """The cluster ``fp8_gemm`` takes by default: none, (1, 1). On an H100 on 2026-12-07, with the k-loop in uniform
    registers and the TMA epilogue, 1 x 1 ran at least as fast as (2, 1) and (1, 2) at every shape and width measured
    (``bench/h100_fp8_width_cluster_sweep_a80e8d1.json``; (2, 1) at M = 4096 in ``bench/h100_fp8_ab_epilogue_nsplit_
    17a303e.json``): equal to (2, 1) at 4096^3, 4096 x 2112 x 7168 and 4096 x 24576 x 1536 (128 wide), 1.11x it at
    512 x 7168 x 2048, 1.00-1.24x (1, 2) at M = 64 to 512 (64, 128 and 192 wide). Multicast saves L2 reads the
    kernel is no longer short of; the cluster's shared ring ties a CTA to its slowest peer. (The H200's sweep of
    2026-12-03, with the older kernel, had (1, 2) up to 9 % and (2, 1) up to 5 % ahead; 2 x 2 never.) ``cluster=``
    still takes any of (1, 1), (2, 1), (1, 2), (2, 2); the arguments stay for a rule that needs them."""
    return (1, 1)


MIN_SLICE_K_BLOCKS = 4      # k_slices' default gives each slice at least this many k-blocks (the ring's fill and the
                            # slices' sums cost about one tile's worth of k-blocks)


def choose_k_slices(m: int, n: int, k: int, block_n: int, cluster: tuple, sm_count: int) -> int:
    """The K slices ``fp8_gemm`` takes by default: as many as keep every SM busy where the tiles are fewer than half
    the SMs (64 x 2112 x 7168: 33 tiles of 64 wide, 4 slices), each of at least ``MIN_SLICE_K_BLOCKS`` k-blocks;
    1 otherwise (the slices' sums are traffic and work that only idle SMs make worth paying)."""
    cm, cn = cluster
    cluster_tiles = math.ceil(m / (FK.BM * cm)) * math.ceil(n / (block_n * cn))
    slots = sm_count // (cm * cn)
    if 2 * cluster_tiles > slots:
        return 1
    return max(1, min(FK.MAX_KSLICES, slots // cluster_tiles, k_blocks(k) // MIN_SLICE_K_BLOCKS))


def choose_tail_slices(m: int, n: int, k: int, block_n: int, cluster: tuple, sm_count: int) -> int:
    """A ``tail_slices`` that fills the last round: with T cluster tiles on P slots (SMs over the cluster size) and a
    last round of r = T % P tiles, as many slices as fill P with r S units, each of at least ``MIN_SLICE_K_BLOCKS``
    k-blocks (4096^3 at 192 wide: 704 tiles on 132 SMs, 44 in the last round, 3 slices); 1 where the tiles fill
    whole rounds, make one round (``choose_k_slices``' case) or the last round is more than half full.

    Not ``fp8_gemm``'s default, by measurement: on an H100 (2026-12-06, ``bench/h100_fp8_tail_sweep_1bce508.json``) this
    count ran 0.96-0.99x the unsliced walk at the bench's default configurations (4096^3: 0.985x, where the rounds
    promised 1.12x: the SMs of a short last round run faster, as the sgemm's split last wave found) and 1.09x only
    with 128-wide tiles at 4096 x 2112 x 7168 (56 k-blocks a tile, 4.1 rounds), which the 192-wide tiles beat
    unsliced."""
    cm, cn = cluster
    tiles = math.ceil(m / (FK.BM * cm)) * math.ceil(n / (block_n * cn))
    slots = max(1, sm_count // (cm * cn))
    tail = tiles % slots
    if tiles <= slots or tail == 0:
        return 1
    return max(1, min(FK.MAX_KSLICES, slots // tail, k_blocks(k) // MIN_SLICE_K_BLOCKS))


def walked_whole(tiles: int, slots: int, k_slices: int, tail_slices: int) -> int:
    """The cluster tiles the persistent walk takes whole before the sliced ones: all of them without slices, none
    with ``k_slices``, and with ``tail_slices`` those of the full rounds on ``slots`` resident clusters."""
    if tail_slices > 1:
        return tiles // slots * slots
    return 0 if k_slices > 1 else tiles


def fp8_gemm(a, sa, b, sb, out=None, *, stages=None, block_n=None, cluster=None, split_k=None, k_slices=None,
             tail_slices=None, epilogue=None, epilogue_buffers=None, pingpong=None, dacc=None, stream=0):
    """D = (A * sa) (B * sb)^T in bf16 (see the module doc); returns ``out``. ``block_n``: the tile's width, one of
    ``fp8_gemm_kernel.BLOCK_NS``, by default ``choose_block_n``'s. ``stages``: ring depth, by default the most
    that fit (``fp8_gemm_kernel.max_stages``: 6 at 128 wide on the H200, 9 at 64, 12 at 64 with split_k 2).
    ``cluster``: (CM, CN), one of ``fp8_gemm_kernel.CLUSTERS``: CM CTAs along M share each B tile and CN along N
    each A tile, every CTA
    loading its share and multicasting it (TMA multicast: less L2 traffic); by default ``choose_cluster``'s.
    ``split_k``: 2 gives a tile's two consumer warpgroups the same 64 rows, each the k-blocks of every other ring
    slot, summed at the end through shared memory (M <= 64, block_n <= 128, stages even); by default 2 where it
    may be. ``k_slices``: S splits each tile's k-blocks into S units that different CTAs run, the last to finish
    adding the others' fp32 sums (through a workspace the plan keeps: launches of one plan must not overlap, which
    launches on one stream never do); by default ``choose_k_slices``'. The result does not depend on S's schedule:
    the slices are always added in the same order. ``tail_slices``: S slices of only the tiles of the persistent
    walk's last, partial round (stream-K's remedy for wave quantization: the tiles that would keep a few SMs busy
    while the rest idle become S times as many units of 1/S of a tile; ``choose_tail_slices`` gives the S that fills
    the round); by default 1 (measured: it rarely pays, see ``choose_tail_slices``). At most one of the two is
    above 1. ``epilogue``: "tma" (D through swizzled shared-memory staging and TMA stores, which drain while the
    next tile's k-loop runs; D 16-byte aligned) or "direct" (each thread stores its bf16 pairs); by default
    ``default_epilogue``'s. ``epilogue_buffers``: the TMA epilogue's 8 KB staging buffers per consumer
    warpgroup, 1 to block_n / 64 (more: fewer waits on the stores, fewer stages), by default
    ``default_epilogue_buffers``' (where ``stages`` is given and they leave it no room: fewer, then, unless
    ``epilogue`` is given, the direct epilogue; ``fitting_epilogue``). ``pingpong``: the two consumer warpgroups take turns issuing each k-block's
    mmas (named barriers), so that one promotes while the other's mmas run (FlashAttention-3's scheduling); split_k
    1 only; by default ``default_pingpong``'s. ``dacc``: two block sums, k-blocks in pairs, the first's promotion
    while the second's mmas run (split_k 1, block_n <= 128, no pingpong); by default ``default_dacc``'s: wherever it
    may."""
    if out is None:
        aa, _ = _view("A", a)
        ba, _ = _view("B", b)
        m = aa.shape[0] if len(aa.shape) == 2 else 0
        n = ba.shape[0] if len(ba.shape) == 2 else 0
        if is_torch(a):
            import torch

            out = torch.empty((m, n), dtype=torch.bfloat16, device=a.device)
        else:
            out = cuda.device_array((m, n), np.uint16, stream=stream or 0)
    key = (array_key(a), array_key(sa), array_key(b), array_key(sb), array_key(out),
           *option_key(stages, block_n, cluster, split_k, k_slices, tail_slices, epilogue, epilogue_buffers,
                      pingpong, dacc),
           id(stream) if stream else 0)
    run_plan(_plans, key, lambda: _plan(a, sa, b, sb, out, stages, block_n, cluster, split_k, k_slices, tail_slices,
                                        epilogue, epilogue_buffers, pingpong, dacc, stream))
    return out


_plans = PlanCache()


@functools.lru_cache(maxsize=None)
def _jit(block_n, stages, cluster, split_k=1, k_slices=1, epi_bufs=0, pingpong=False, dacc=False, **diagnostic):
    """The compiled kernel of one configuration. ``diagnostic``: further ``kernel_constants`` options of a diagnostic
    build (``trace``, ``map_fences``), which scripts pass by swapping in ``functools.partial(_jit, ...)``."""
    return jit(FK.make_kernel(block_n=block_n, stages=stages, cluster=cluster, ksplit=split_k, k_slices=k_slices,
                              epi_bufs=epi_bufs, pingpong=pingpong, dacc=dacc, **diagnostic),
               launch_bounds=FK.LAUNCH_BOUNDS)


def slice_workspace(cta_tiles: int, block_n: int, k_slices: int, split_k: int) -> tuple:
    """The slices' fp32 workspace and one int32 counter per sliced CTA tile (``cta_tiles``), zero (every launch leaves
    them zero): a plan's own (one word each without slices)."""
    ws = cuda.device_array(max(1, FK.workspace_words(cta_tiles, block_n, k_slices, split_k)), np.float32)
    return ws, cuda.to_device(np.zeros(max(1, cta_tiles) if k_slices > 1 else 1, np.int32))


def _plan(a, sa, b, sb, out, stages, block_n, cluster, split_k, k_slices, tail_slices, epilogue, epilogue_buffers,
          pingpong, dacc, stream):
    """Every check, the tensor maps, the grid and the marshalled launch of one problem."""
    from ..host import device_info
    from ..host.launch import persistent_grid, prepare_launch, resident_blocks
    from ..spec.device import check_cc

    (aa, at), (saa, sat), (ba, bt), (sba, sbt), (da, dt) = (_view(nm, x) for nm, x in
                                                           (("A", a), ("sa", sa), ("B", b), ("sb", sb), ("D", out)))
    info = device_info(API)
    check_cc(info, API, (9, 0), "needs compute capability 9.0 (FP8 wgmma, TMA: sm_90a)")
    if block_n is None and len(aa.shape) == 2 and len(ba.shape) == 2:
        block_n = choose_block_n(aa.shape[0], ba.shape[0], info.sm_count)
    if cluster is None and len(aa.shape) == 2 and len(ba.shape) == 2:
        cluster = choose_cluster(aa.shape[0], ba.shape[0], block_n, info.sm_count)
    if split_k is None and len(aa.shape) == 2 and isinstance(block_n, int):
        split_k = default_split_k(aa.shape[0], block_n)
    epilogue_given = epilogue is not None
    if epilogue is None:
        epilogue = default_epilogue(block_n, _address(da))
    if epilogue_buffers is None and block_n in FK.BLOCK_NS:
        epilogue_buffers = default_epilogue_buffers(block_n)
        if isinstance(stages, (int, np.integer)) and split_k in FK.KSPLITS:   # the defaults yield to given stages
            epilogue, epilogue_buffers = fitting_epilogue(epilogue, epilogue_buffers, block_n, int(stages), split_k,
                                                          info.max_shared_per_block_optin, explicit=epilogue_given)
    bufs = epilogue_buffers if epilogue == "tma" and isinstance(epilogue_buffers, (int, np.integer)) else 0
    if stages is None and block_n in FK.BLOCK_NS:
        stages = FK.max_stages(block_n, info.max_shared_per_block_optin, split_k if split_k in FK.KSPLITS else 1, bufs)
    if k_slices is None and len(aa.shape) == 2 and len(ba.shape) == 2 and _is_pair(cluster):
        k_slices = choose_k_slices(aa.shape[0], ba.shape[0], aa.shape[1], block_n, tuple(cluster), info.sm_count)
    if pingpong is None:
        pingpong = default_pingpong(split_k)
    if dacc is None:
        dacc = default_dacc(block_n, split_k, pingpong)
    arrays = {"A": aa, "B": ba, "sb": sba, "D": da}
    M, N, K, ld = check_fp8_gemm(
        tuple(aa.shape), at, tuple(saa.shape), _strides(saa), sat,
        tuple(ba.shape), bt, tuple(sba.shape), sbt, tuple(da.shape), dt,
        contiguous={k: v.is_c_contiguous() for k, v in arrays.items()},
        addresses={"sa": _address(saa), **{k: _address(v) for k, v in arrays.items()}},
        stages=stages, block_n=block_n, smem_limit=info.max_shared_per_block_optin, cluster=cluster, split_k=split_k,
        k_slices=1 if k_slices is None else k_slices, tail_slices=1 if tail_slices is None else tail_slices,
        epilogue=epilogue, epilogue_buffers=epilogue_buffers, pingpong=pingpong, dacc=dacc)
    cm, cn = (int(v) for v in cluster)
    kb = k_blocks(K)
    # A's scales as TMA sees them: the K-block-major KB x M view (row pitch ld), one box = 128 rows' scales
    sa_t = StridedView(saa, (kb, M), (SCALE_ITEM * ld, SCALE_ITEM), "<f4")
    # each CTA of a cluster loads 1/CN of its A tile's rows and 1/CM of its B tile's (and multicasts them)
    tma_a = cached_tensor_map(aa, (FK.a_rows(split_k) // cn, FK.BK), dtype="uint8", swizzle="128B")
    tma_b = cached_tensor_map(ba, (block_n // cm, FK.BK), dtype="uint8", swizzle="128B")
    tma_sa = cached_tensor_map(sa_t, (1, FK.BM), dtype="float32")
    # B's scales by TMA at 192 wide, 16-byte boxes of flat sb (A's map stands in below, where the warps load chunks)
    tma_sb = cached_tensor_map(sba.reshape(sba.size), (FK.SB_BOX,), dtype="float32") if FK.sb_by_tma(block_n) else tma_a
    # D's boxes: a warp's 16 rows x 64 bf16 columns (one 128-byte swizzle row); A's map stands in for "direct"
    tma_d = cached_tensor_map(da, (FK.EPI_WARP_ROWS, FK.EPI_COLS), dtype="bfloat16", swizzle="128B") if bufs else tma_a
    # cluster tiles (CM * 128) x (CN * block_n); persistent: as many clusters as the GPU holds at once
    tiles_m, tiles_n = math.ceil(M / (FK.BM * cm)), math.ceil(N / (block_n * cn))
    k_slices, tail_slices = int(k_slices or 1), int(tail_slices or 1)
    slices = max(k_slices, tail_slices)
    words = da.reshape(M * N).view(np.uint32)
    kernel = _jit(block_n, int(stages), (cm, cn), split_k, slices, bufs, bool(pingpong), bool(dacc))
    launch = dict(cluster=cm * cn if cm * cn > 1 else None,
                  shared_mem=FK.shared_bytes(block_n, int(stages), split_k, bufs), stream=stream)

    def arguments(whole, ws, counters):
        return (tma_a, tma_b, tma_sa, tma_sb, tma_d, sba.reshape(sba.size), words, ws, counters, np.int32(M),
                np.int32(N), np.int32(K), np.int32(tiles_m), np.int32(tiles_n), np.int32(whole))

    # the walk: the tiles of the full rounds on the resident clusters whole, then the sliced ones (tail_coords)
    tiles, size = tiles_m * tiles_n, cm * cn
    resident = resident_blocks(kernel, FK.THREADS, *arguments(tiles, *slice_workspace(0, block_n, 1, split_k)), **launch)
    whole = walked_whole(tiles, max(1, resident // size), k_slices, tail_slices)
    ws, counters = slice_workspace((tiles - whole) * size, block_n, slices, split_k)
    args = arguments(whole, ws, counters)
    grid = persistent_grid(kernel, whole + (tiles - whole) * slices, FK.THREADS, *args, **launch, resident=resident)
    return prepare_launch(kernel, grid, FK.THREADS, *args, **launch,
                          keep=(tma_a, tma_b, tma_sa, tma_sb, tma_d, ws, counters))


# ------------------------------------------------------------------------------------------------
# References (numpy, float64)
# ------------------------------------------------------------------------------------------------
def dequantize_b_reference(codes, sb) -> np.ndarray:
    """float64 values of B's e4m3 ``codes`` (N x K) times their 128 x 128 block scales ``sb``."""
    from ..formats.minifloat import E4M3, decode

    N, K = np.asarray(codes).shape
    full = np.repeat(np.repeat(np.asarray(sb, np.float64), FK.SCALE_BLOCK, axis=0), FK.SCALE_BLOCK, axis=1)
    return decode(np.asarray(codes), E4M3).astype(np.float64) * full[:N, :K]


def reference(a_codes, sa, b_codes, sb) -> np.ndarray:
    """float64 ``(A * sa) (B * sb)^T`` of host arrays: e4m3 codes (uint8) and fp32 scales (sa M x KB, sb
    N/128 x KB); what the tests compare ``fp8_gemm`` with."""
    return dequantize_reference(a_codes, sa) @ dequantize_b_reference(b_codes, sb).T


def quantize_b_reference(x) -> tuple[np.ndarray, np.ndarray]:
    """numpy ``(codes, sb)`` of an N x K float array per 128 x 128 block (the last ones partial where N or K is
    not a multiple of 128): scale = amax / 448 (amax floored as ``fp8_quant.AMAX_FLOOR``), codes =
    e4m3(x * (448 / amax)), as for A."""
    from ..formats.minifloat import E4M3, encode
    from .fp8_quant import AMAX_FLOOR, E4M3_MAX

    x = np.asarray(x, np.float32)
    N, K = x.shape
    nb, kb = k_blocks(N), k_blocks(K)
    padded = np.zeros((nb * FK.SCALE_BLOCK, kb * FK.SCALE_BLOCK), np.float32)   # zeros leave amax alone
    padded[:N, :K] = x
    blocks = padded.reshape(nb, FK.SCALE_BLOCK, kb, FK.SCALE_BLOCK)
    amax = np.maximum(np.abs(blocks).max(axis=(1, 3)), np.float32(AMAX_FLOOR)).astype(np.float32)
    inv = np.float32(E4M3_MAX) / amax
    q = (blocks * inv[:, None, :, None]).astype(np.float32).reshape(padded.shape)[:N, :K]
    return encode(q, E4M3), (amax / np.float32(E4M3_MAX)).astype(np.float32)


def error_bound(a_codes, sa, b_codes, sb, rows=None) -> np.ndarray:
    """The bound of |fp8_gemm - reference| for ``rows`` of D (default all; float64, len(rows) x N), from the FP8
    wgmma's measured arithmetic (``fp8_gemm_numerics``: every term of a k32 step truncated to 13 bits below
    the largest), the fp32 promotion and bf16's rounding."""
    from ..formats.minifloat import E4M3, decode
    from .fp8_gemm_numerics import error_bound as bound

    rows = np.arange(np.asarray(a_codes).shape[0]) if rows is None else np.asarray(rows)
    return bound(decode(np.asarray(a_codes), E4M3), sa, decode(np.asarray(b_codes), E4M3), sb, rows)


# ------------------------------------------------------------------------------------------------
# Benchmark: beside torch._scaled_mm (cuBLASLt) e4m3 -> bf16, tensorwise and rowwise, in the same run
# ------------------------------------------------------------------------------------------------
def random_operands(rng, m, n, k):
    """Random e4m3 codes (no NaN) and positive fp32 scales: A, sa (K-block-major, host M x KB), B, sb."""
    def codes(shape):
        c = rng.integers(0, 256, size=shape, dtype=np.uint8)
        return np.where((c & 0x7F) == 0x7F, np.uint8(0x3F), c)   # NaN codes -> 1.875

    kb = k_blocks(k)
    return (codes((m, k)), rng.uniform(0.5, 2.0, (m, kb)).astype(np.float32), codes((n, k)),
            rng.uniform(0.5, 2.0, (k_blocks(n), kb)).astype(np.float32))


def to_device_operands(a, sa, b, sb) -> tuple:
    """``random_operands``' host arrays as ``fp8_gemm`` takes them on the device: (A, sa K-block-major, B, sb)."""
    return cuda.to_device(a), to_device_scales(sa), cuda.to_device(b), cuda.to_device(sb)


def to_device_scales(sa_host):
    """A host M x KB sa as the K-block-major device layout ``fp8_gemm`` takes."""
    from .fp8_quant import scales_view

    M, kb = sa_host.shape
    blocks = np.zeros((kb, scale_ld(M)), np.float32)
    blocks[:, :M] = sa_host.T
    return scales_view(cuda.to_device(blocks), M)


# issue 20's shapes: square, and DeepSeek-V3's (N x K) at M from 64 (decoding) to 4096 (prefill)
BENCH_SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192),
                *((m, n, k) for n, k in ((7168, 2048), (2112, 7168), (24576, 1536)) for m in (64, 128, 512, 4096)))


H200_SMS, H200_SMEM_OPTIN = 132, 232448      # the H200's SMs and opt-in shared memory per block (bytes)


def default_epilogue(block_n, d_address: int) -> str:
    """"tma" where D is 16-byte aligned, else "direct". Measured on an H100 (2026-12-07, 17a303e,
    ``bench/h100_fp8_ab_epilogue_nsplit_17a303e.json``) at 192 wide: 1.11x the direct epilogue at 4096^3 and at 4096 x
    2112 x 7168, 1.02-1.09x at 8192^3, 1.00x at 4096 x 7168 x 2048 and 4096 x 24576 x 1536. Until ``pipeline.
    warp_index`` (2026-12-07) the epilogue's per-warp test made ptxas take the persistent loop as divergent (the
    k-loop's descriptors out of uniform registers, and a 40-byte spill at 192 wide), and it paid at 192 wide only
    where K <= 2048 (``bench/h100_fp8_epilogue_sweep_d4b83b8.json``)."""
    if d_address % TMA_ALIGN or block_n not in FK.BLOCK_NS:
        return "direct"
    return "tma"


def default_epilogue_buffers(block_n: int) -> int:
    """The TMA epilogue's staging buffers per consumer warpgroup by default: one (8 KB) at every width, which leaves
    the most stages (at 128 wide one and two ran within 2 %). At 192 wide a buffer per chunk (3) left 4 stages, one
    leaves 5: since a tile's D is stored under the next unit's first mmas (DEFER), one buffer ran 1.005-1.06x three
    in the same processes at every 192-wide shape timed (8192^3 1.011x, 1.047x and 1.012x in three processes;
    4096 x 24576 x 1536 1.008x, 4096 x 2112 x 7168 1.005x, 512 x 24576 x 1536 1.06x; an H100, 2026-12-07,
    ``bench/h100_fp8_s31_2026-12-07.json``). Before DEFER three buffers had been the faster (1.07-1.08x the direct
    epilogue against 1.05-1.07x)."""
    return 1


def fitting_epilogue(epilogue: str, bufs: int, block_n: int, stages: int, split_k: int, smem_limit: int,
                     explicit: bool = False) -> tuple:
    """The default epilogue's (epilogue, buffers) cut down until ``stages`` given by the caller fit: fewer staging
    buffers, then (unless the caller named the epilogue) the direct epilogue. Unchanged where they fit already or
    nothing fits (the check then names the rule)."""
    if epilogue != "tma":
        return epilogue, bufs
    for b in range(bufs, 0, -1):
        if FK.block_shared_bytes(block_n, stages, split_k, b) <= smem_limit:
            return epilogue, b
    if not explicit and FK.block_shared_bytes(block_n, stages, split_k, 0) <= smem_limit:
        return "direct", bufs
    return epilogue, bufs


def default_pingpong(split_k) -> bool:
    """Whether the consumer warpgroups take turns issuing their mmas by default: no. Measured on the H200
    (2026-12-06, 47fc7aa, ``bench/h200_fp8_pingpong_sweep_47fc7aa.json``, each shape's default configuration):
    0.96x at 4096^3, 0.93x at 8192^3, 1.02x at 4096 x 7168 x 2048 and 4096 x 24576 x 1536, 1.00x at 4096 x 2112 x
    7168, 0.97x at 512 x 7168 x 2048, 1.04x at 128 x 7168 x 2048: the warpgroups already fall out of step by
    themselves, and forcing the order costs more than it buys."""
    return False


def default_dacc(block_n, split_k, pingpong) -> bool:
    """Whether k-blocks go in pairs into two block sums by default: wherever they may (split_k 1, block_n <= 128, no
    pingpong), with either epilogue. Measured on an H100 (2026-12-07, ``bench/h100_fp8_ab_branches_17a303e.json``,
    against the kernel before it): 1.09x at 128 x 7168 x 2048 (64 wide), 1.02x at 4096^3 (128 wide, 2 x 1)."""
    return FK.dacc_fits(block_n, split_k, pingpong)


def default_split_k(m: int, block_n: int) -> int:
    """split_k 2 where it may be: M <= 64 and block_n <= 128."""
    return 2 if m <= FK.WGMMA_ROWS and block_n <= FK.KSPLIT_MAX_BLOCK_N else 1


def bench_configs(sm_count: int = H200_SMS, smem_optin: int = H200_SMEM_OPTIN) -> list[tuple]:
    """(block_n, stages, cluster, split_k, k_slices, epilogue_buffers) of every kernel the bench's shapes
    (``BENCH_SHAPES``) compile with the default choices on a GPU of ``sm_count`` SMs and ``smem_optin`` bytes of
    shared memory per block (an H200's unless given; D 16-byte aligned, as allocated): what ``python -m asyncpipe
    bench --compile`` and the first-call rows compile. epilogue_buffers 0: the direct epilogue."""
    out = set()
    for m, n, k in BENCH_SHAPES:
        bn = choose_block_n(m, n, sm_count)
        cluster = choose_cluster(m, n, bn, sm_count)
        split = default_split_k(m, bn)
        bufs = default_epilogue_buffers(bn) if default_epilogue(bn, 0) == "tma" else 0
        out.add((bn, FK.max_stages(bn, smem_optin, split, bufs), cluster, split,
                 choose_k_slices(m, n, k, bn, cluster, sm_count), bufs))
    return sorted(out)


def benchmark(m: int, n: int, k: int, *, stages=None, block_n=None, cluster=None, tail_slices=None, reps: int = 20,
              rounds: int = 5, yardsticks: bool = True, operands=None) -> dict:
    """TFLOPS (2 M N K) of ``fp8_gemm`` at m x n x k beside ``torch._scaled_mm`` e4m3 -> bf16 with tensorwise
    and rowwise scales (when torch is installed and ``yardsticks``), measured in the same call; ``kernel`` names
    fp8 and gemm, the tile width, the stages and the cluster (e.g. ``fp8_gemm_e4m3_blockscaled_bn128_sauto_c2x1``).
    ``operands``: ``random_operands``' four host arrays, to reuse them across configurations; ``tail_slices`` as
    ``fp8_gemm``'s (the name ends ``_k{S}`` with k_slices, ``_t{S}`` with tail slices). The kernel and torch's
    calls are timed in ``rounds`` round-robin rounds (``timing.time_rounds``) and each one's median round is kept:
    timed one after the other, the one timed first met cooler clocks (an H100 at 8192^3, 2026-12-07: torch
    1,351 TFLOPS timed after the kernel, 1,397-1,403 timed before it)."""
    from ..host import device_info
    from ..timing import time_rounds, tflops

    a, sa, b, sb = operands if operands is not None else random_operands(np.random.default_rng(0), m, n, k)
    args = to_device_operands(a, sa, b, sb)
    d = cuda.device_array((m, n), np.uint16)
    sms = device_info(API).sm_count
    bn = block_n if block_n is not None else choose_block_n(m, n, sms)
    cluster = cluster if cluster is not None else choose_cluster(m, n, bn, sms)
    slices = choose_k_slices(m, n, k, bn, cluster, sms)
    tail = tail_slices or 1
    run = functools.partial(fp8_gemm, *args, d, stages=stages, block_n=bn, cluster=cluster, tail_slices=tail)
    run()                                            # compile and check outside the timing
    theirs = working_scaled_mm_calls(a, b) if yardsticks else {}
    times = time_rounds({"fp8_gemm": run} | theirs, rounds=rounds, reps=reps)
    ms = statistics.median(times["fp8_gemm"])
    used = stages if stages is not None else "auto"
    cm, cn = cluster
    epi = default_epilogue(bn, _address(d))
    record = {"kernel": f"fp8_gemm_e4m3_blockscaled_bn{bn}_s{used}_c{cm}x{cn}" + (f"_k{slices}" if slices > 1 else "") +
              (f"_t{tail}" if tail > 1 else "") + ("_tma" if epi == "tma" else ""),
              "shape": [m, n, k], "ms": ms,
              "tflops": tflops(2.0 * m * n * k, ms), "rounds": rounds, "vs": {}}
    for mode in theirs:
        t = tflops(2.0 * m * n * k, statistics.median(times[mode]))
        record[f"scaled_mm_{mode}_tflops"] = t
        record["vs"][f"scaled_mm_{mode}"] = record["tflops"] / t
    return record


def scaled_mm_calls(a, b) -> dict:
    """``torch._scaled_mm`` e4m3 -> bf16 on the host codes ``a`` (M x K) and ``b`` (N x K), one callable a scaling
    mode: {"tensorwise": unit scalars, "rowwise": unit row and column vectors} (its cost does not depend on the
    scales' values); {} without torch. A mode this torch refuses raises when called."""
    try:
        import torch
    except ImportError:
        return {}
    m = a.shape[0]
    n = b.shape[0]
    x = torch.from_numpy(a).cuda().view(torch.float8_e4m3fn)
    y = torch.from_numpy(b).cuda().view(torch.float8_e4m3fn).t()      # K x N, column-major: what cuBLASLt takes
    one = torch.ones((), device="cuda", dtype=torch.float32)
    modes = {"tensorwise": (one, one),
             "rowwise": (torch.ones((m, 1), device="cuda", dtype=torch.float32),
                         torch.ones((1, n), device="cuda", dtype=torch.float32))}
    return {mode: functools.partial(torch._scaled_mm, x, y, scale_a=s_a, scale_b=s_b, out_dtype=torch.bfloat16)
            for mode, (s_a, s_b) in modes.items()}


def working_scaled_mm_calls(a, b) -> dict:
    """``scaled_mm_calls`` less the modes this torch refuses (each called once: compiled and checked outside any
    timing)."""
    out = {}
    for mode, fn in scaled_mm_calls(a, b).items():
        try:
            fn()
        except (RuntimeError, TypeError):
            continue
        out[mode] = fn
    return out


def _scaled_mm_tflops(a, b, reps) -> dict:
    """torch._scaled_mm's TFLOPS on the same codes (``working_scaled_mm_calls``), {"tensorwise": ..., "rowwise":
    ...}, each timed once (for scripts that time torch apart from the kernel; ``benchmark`` times them in rounds)."""
    from ..timing import time_ms, tflops

    m, k = a.shape
    n = b.shape[0]
    return {mode: tflops(2.0 * m * n * k, time_ms(fn, reps=reps)) for mode, fn in working_scaled_mm_calls(a, b).items()}


__all__ = ["API", "fp8_gemm", "choose_block_n", "choose_cluster", "choose_k_slices", "choose_tail_slices", "wave_efficiency", "TILE_SPEED", "check_fp8_gemm", "reference", "error_bound", "benchmark", "quantize_b_reference",
           "dequantize_b_reference", "random_operands", "to_device_operands", "to_device_scales", "scaled_mm_calls",
           "working_scaled_mm_calls"]
