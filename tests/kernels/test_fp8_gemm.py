"""The block-scaled FP8 GEMM and its quantizer: host checks and references (no GPU), SASS offline, the GPU.

The GPU tolerance is ``fp8_gemm.error_bound``, derived from the FP8 wgmma's arithmetic as measured on the H200
(``fp8_gemm_numerics``: each k32 step truncates every term toward zero to 13 bits below its largest term):
the first bound assumed here (4 x 2^-13 of the block's absolute sum) was exceeded by up to 1.17x on the GPU
with outliers, and the model reproduces that excess offline. ``test_accumulator_model_gpu`` checks the model
itself against the hardware, bit for bit, on the probe's patterns. Without the promotion every 128 of K the
error would grow with K/128: the K = 7168 cases check it does not.
"""

import importlib.util
import re

import numpy as np
import pytest
from numba import cuda

from asyncpipe.bf16 import bf16_bits, bf16_to_float32
from asyncpipe.codegen import compile_kernel
from asyncpipe.errors import AsyncpipeError, UnsupportedDeviceError
from asyncpipe.formats.minifloat import E4M3, decode, encode
from asyncpipe.kernels import fp8_gemm as G
from asyncpipe.kernels import fp8_gemm_kernel as FK
from asyncpipe.kernels import fp8_quant as Q
from asyncpipe.kernels.fp8_gemm import check_fp8_gemm, fp8_gemm
from asyncpipe.kernels.fp8_quant import check_quantize, quantize_fp8_rowwise_blocks, quantize_reference

H200_SMEM = 227 * 1024          # shared memory per block after opt-in on the H200 (docs/FACTS.md)
_STRIDED = ("fp8_gemm: sa must be stored K-block-major: strides (1, ld) elements with ld >= M a multiple of 4 "
            "(DeepGEMM's TMA-aligned transposed layout, what quantize_fp8_rowwise_blocks returns) "
            "[cuTensorMapEncodeTiled], got ")
_CLUSTER_RULE = "cluster must be one of ((1, 1), (2, 1), (1, 2), (2, 2)) (CTAs along M sharing B, along N sharing A)"
_E4M3_RULE = "must hold float8 e4m3 (torch.float8_e4m3fn, or its codes in a uint8 array) [PTX ISA, wgmma.mma_async]"


# ---------------------------------------------------------------------------------------------
# Host: every rule, each message
# ---------------------------------------------------------------------------------------------
def check(a=(200, 512), ad="uint8", sa=(200, 4), sas=(1, 200), sad="float32", b=(384, 512), bd="uint8",
          sb=(3, 4), sbd="float32", d=(200, 384), dd="uint16", contiguous=None, addresses=None, stages=6,
          block_n=128, smem_limit=H200_SMEM, cluster=(1, 1), split_k=1, k_slices=1, tail_slices=1, **kw):
    c = {**dict(A=True, B=True, sb=True, D=True), **(contiguous or {})}
    at = {**dict(A=0x1000, B=0x2000, sa=0x3000, sb=0x4000, D=0x5000), **(addresses or {})}
    return check_fp8_gemm(a, ad, sa, sas, sad, b, bd, sb, sbd, d, dd, contiguous=c, addresses=at, stages=stages,
                          block_n=block_n, smem_limit=smem_limit, cluster=cluster, split_k=split_k, k_slices=k_slices,
                          tail_slices=tail_slices, **kw)


def test_check_accepts_and_reports():
    assert check() == (200, 384, 512, 200)
    assert check(ad="float8_e4m3fn", bd="float8_e4m3fn", dd="bfloat16") == (200, 384, 512, 200)
    assert check(sas=(1, 204)) == (200, 384, 512, 204)                  # a wider pitch is fine
    assert check(cluster=[2, 2]) == check(cluster=(1, 2)) == (200, 384, 512, 200)
    # M = 1 and one k-block: the strides of the size-1 dimensions do not matter; ld is then M rounded to 4
    assert check(a=(1, 128), sa=(1, 1), sas=(7, 9), b=(128, 128), sb=(1, 1), d=(1, 128), stages=2) == (1, 128, 128, 4)


_SPLIT_RULE = ("split_k must be one of (1, 2) (2: both consumer warpgroups on the same 64 rows, each with the "
               "k-blocks of its slots)")


@pytest.mark.parametrize("kwargs, message", [
    (dict(a=(4, 8, 8)), "fp8_gemm: A must be 2-D, got 3-D of shape (4, 8, 8)"),
    (dict(ad="float8_e5m2"), f"fp8_gemm: A {_E4M3_RULE}, got float8_e5m2"),
    (dict(bd="int8"), f"fp8_gemm: B {_E4M3_RULE}, got int8"),
    (dict(sad="float64"), "fp8_gemm: sa must be float32, got float64"),
    (dict(sbd="float16"), "fp8_gemm: sb must be float32, got float16"),
    (dict(dd="float32"), "fp8_gemm: D must hold bfloat16 (torch.bfloat16, or its bits in a uint16/int16 array), "
                         "got float32"),
    (dict(a=(0, 512), sa=(0, 4), d=(0, 384)), "fp8_gemm: M (A's rows) must be at least 1, got 0"),
    (dict(b=(384, 256)), "fp8_gemm: B (N x K, K-major) must have K = A.shape[1] columns, got A (200, 512), "
                         "B (384, 256)"),
    (dict(b=(300, 512), sb=(3, 4), d=(200, 300)), "fp8_gemm: N must be a positive multiple of 8 (D's rows are "
                                                  "stored as whole 16-byte lines), got N = 300"),
    (dict(a=(200, 500), sa=(200, 4), b=(384, 500)), "fp8_gemm: K must be a positive multiple of 16 (TMA: A's and "
                                                    "B's row pitch, K bytes, a multiple of 16) [cuTensorMapEncodeTiled],"
                                                    " got K = 500"),
    (dict(sa=(4, 200)), "fp8_gemm: sa must be M x ceil(K/128) (one scale per 1 x 128 block of A), got sa (4, 200) for "
                        "M = 200, K = 512"),
    (dict(sb=(4, 3)), "fp8_gemm: sb must be ceil(N/128) x ceil(K/128) (one scale per 128 x 128 block of B), got sb (4, 3) for "
                      "N = 384, K = 512"),
    (dict(d=(200, 385)), "fp8_gemm: D must be M x N, got D (200, 385) for M = 200, N = 384"),
    (dict(sas=(4, 1)), _STRIDED + "strides (4, 1) for shape (200, 4)"),         # row-major sa: refused
    (dict(sas=(1, 202)), _STRIDED + "strides (1, 202) for shape (200, 4)"),     # pitch not 16 bytes
    (dict(sas=(1, 100)), _STRIDED + "strides (1, 100) for shape (200, 4)"),     # overlapping k-blocks
    (dict(contiguous=dict(B=False)), "fp8_gemm: B must be C-contiguous (row-major, unit stride), got a strided B"),
    (dict(addresses=dict(A=0x1008)), "fp8_gemm: A must start on a 16-byte boundary (TMA's global address rule) "
                                     "[cuTensorMapEncodeTiled], got address 0x1008 (8 bytes past one)"),
    (dict(addresses=dict(sa=0x3004)), "fp8_gemm: sa must start on a 16-byte boundary (TMA's global address rule) "
                                      "[cuTensorMapEncodeTiled], got address 0x3004 (4 bytes past one)"),
    (dict(addresses=dict(sb=0x4004), block_n=192), "fp8_gemm: sb must start on a 16-byte boundary at block_n 192 "
                                                   "(TMA's global address rule) [cuTensorMapEncodeTiled], got address "
                                                   "0x4004 (4 bytes past one)"),
    (dict(addresses=dict(sb=0x4002)), "fp8_gemm: sb must start on a 4-byte boundary, got address 0x4002 (2 bytes past "
                                      "one)"),
    (dict(addresses=dict(D=0x5002)), "fp8_gemm: D must start on a 4-byte boundary, got address 0x5002 (2 bytes past "
                                     "one)"),
    (dict(block_n=256), "fp8_gemm: block_n must be one of (64, 128, 192) (tile widths whose B scales the promotion selects), got 256"),
    (dict(cluster=(4, 1)), f"fp8_gemm: {_CLUSTER_RULE}, got (4, 1)"),
    (dict(cluster=2), f"fp8_gemm: {_CLUSTER_RULE}, got 2"),
    (dict(cluster=(2.0, 1)), f"fp8_gemm: {_CLUSTER_RULE}, got (2.0, 1)"),
    (dict(stages=1), "fp8_gemm: stages must be an integer in 2..12, got 1"),
    (dict(stages=6.0), "fp8_gemm: stages must be an integer in 2..12, got 6.0"),
    (dict(stages=7), "fp8_gemm: stages x (stage bytes + 2 barriers) + 1024 alignment slack + 8 (k_slices' count) must "
                     "fit the 232448 bytes of shared memory per block [CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_"
                     "OPTIN], got 7 x (33792 + 16) + 1024 + 8 = 237688 bytes (at most 6 stages fit)"),
    (dict(split_k=3), f"fp8_gemm: {_SPLIT_RULE}, got 3"),
    (dict(split_k=True), f"fp8_gemm: {_SPLIT_RULE}, got True"),
    (dict(a=(64, 512), sa=(64, 4), sas=(1, 64), d=(64, 384), split_k=2, stages=3),
     "fp8_gemm: split_k 2 needs an even number of stages (each consumer warpgroup owns every other slot: a slot both "
     "used could pass one of them by two phases, which a parity wait cannot tell apart), got stages = 3"),
    (dict(split_k=2), "fp8_gemm: split_k 2 gives the tile's two consumer warpgroups the same 64 rows: M must be at "
                      "most 64, got M = 200"),
    (dict(a=(64, 512), sa=(64, 4), sas=(1, 64), d=(64, 384), split_k=2, stages=8),
     "fp8_gemm: stages x (stage bytes + 2 barriers) + 1024 alignment slack + 8 (k_slices' count) + split_k 2's 64 x "
     "block_n fp32 sums must fit the 232448 bytes of shared memory per block [CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_"
     "PER_BLOCK_OPTIN], got 8 x (25600 + 16) + 1024 + 8 + 32768 = 238728 bytes (at most 6 stages fit)"),
    (dict(k_slices=0), "fp8_gemm: k_slices must be an integer in 1..16 (the K slices of a tile, each a unit of the "
                       "persistent walk), got 0"),
    (dict(k_slices=2.0), "fp8_gemm: k_slices must be an integer in 1..16 (the K slices of a tile, each a unit of the "
                         "persistent walk), got 2.0"),
    (dict(k_slices=17), "fp8_gemm: k_slices must be an integer in 1..16 (the K slices of a tile, each a unit of the "
                        "persistent walk), got 17"),
    (dict(k_slices=5), "fp8_gemm: k_slices must be at most ceil(K/128), the k-blocks (every slice takes at least "
                       "one), got k_slices = 5 for K = 512 (4 k-blocks)"),
    (dict(epilogue="smem"), "fp8_gemm: epilogue must be one of ('tma', 'direct'), got 'smem'"),
    (dict(epilogue="tma", epilogue_buffers=3), "fp8_gemm: epilogue_buffers must be an integer in 1..2 (the TMA "
     "epilogue's 64-column staging buffers per consumer warpgroup, at most one per chunk of block_n = 128), got 3"),
    (dict(epilogue="tma", addresses=dict(D=0x5004)), "fp8_gemm: D must start on a 16-byte boundary (TMA's global "
     "address rule) [cuTensorMapEncodeTiled], got address 0x5004 (4 bytes past one)"),
    (dict(epilogue="tma", epilogue_buffers=2), "fp8_gemm: stages x (stage bytes + 2 barriers) + 1024 alignment "
     "slack + 8 (k_slices' count) + the TMA epilogue's staging (2 warpgroups x epilogue_buffers x 8192) must fit the "
     "232448 bytes of shared memory per block [CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN], got 6 x "
     "(33792 + 16) + 1024 + 8 + 32768 = 236648 bytes (at most 5 stages fit)"),
    (dict(tail_slices=0), "fp8_gemm: tail_slices must be an integer in 1..16 (the K slices of each tile of the "
                          "persistent walk's last, partial round), got 0"),
    (dict(tail_slices=True), "fp8_gemm: tail_slices must be an integer in 1..16 (the K slices of each tile of the "
                             "persistent walk's last, partial round), got True"),
    (dict(tail_slices=5), "fp8_gemm: tail_slices must be at most ceil(K/128), the k-blocks (every slice takes at "
                          "least one), got tail_slices = 5 for K = 512 (4 k-blocks)"),
    (dict(k_slices=2, tail_slices=3), "fp8_gemm: k_slices (every tile sliced) and tail_slices (the last round's "
                                      "tiles) exclude each other: one may be above 1, got k_slices = 2, tail_slices = 3"),
    (dict(pingpong=1), "fp8_gemm: pingpong must be True or False, got 1"),
    (dict(a=(64, 512), sa=(64, 4), sas=(1, 64), d=(64, 384), split_k=2, stages=4, pingpong=True),
     "fp8_gemm: pingpong (the consumer warpgroups take turns issuing their k-block's mmas) needs split_k 1: with "
     "split_k 2 they take alternate ring slots already, got split_k = 2"),
    (dict(a=(64, 512), sa=(64, 4), sas=(1, 64), d=(64, 384), split_k=2, block_n=192, stages=2),
     "fp8_gemm: split_k 2 needs block_n at most 128 (at 192 its reduction makes ptxas spill), got block_n = 192"),
    (dict(dacc=1), "fp8_gemm: dacc must be True or False, got 1"),
    (dict(dacc=True, block_n=192, stages=4),
     "fp8_gemm: dacc (two block sums, k-blocks in pairs) needs split_k 1, block_n at most 128 (three sets of fp32 "
     "sums in registers) and pingpong off, got split_k = 1, block_n = 192, pingpong = False"),
    (dict(a=(64, 512), sa=(64, 4), sas=(1, 64), d=(64, 384), split_k=2, stages=4, dacc=True),
     "fp8_gemm: dacc (two block sums, k-blocks in pairs) needs split_k 1, block_n at most 128 (three sets of fp32 "
     "sums in registers) and pingpong off, got split_k = 2, block_n = 128, pingpong = False"),
    (dict(dacc=True, pingpong=True),
     "fp8_gemm: dacc (two block sums, k-blocks in pairs) needs split_k 1, block_n at most 128 (three sets of fp32 "
     "sums in registers) and pingpong off, got split_k = 1, block_n = 128, pingpong = True"),
])
def test_check_messages(kwargs, message):
    with pytest.raises(AsyncpipeError) as e:
        check(**kwargs)
    assert str(e.value) == message


def test_dacc_default():
    """Two block sums by default wherever they may be, with either epilogue."""
    assert G.default_dacc(128, 1, False) and G.default_dacc(64, 1, False)
    assert not G.default_dacc(192, 1, False) and not G.default_dacc(64, 2, False)
    assert not G.default_dacc(128, 1, True)
    # the kernel's own default (compile_time's and the offline tests' configurations) agrees
    assert FK.kernel_constants(block_n=128)["DACC"] and FK.kernel_constants(block_n=128, epi_bufs=1)["DACC"]
    assert not FK.kernel_constants(block_n=192)["DACC"] and not FK.kernel_constants(block_n=64, ksplit=2)["DACC"]


def test_defer_where_it_may():
    """The deferred store (DEFER) wherever the first k-block can be peeled with its scales at hand: 192 wide (B's
    scales in the stage) and two block sums, KSPLIT 1 and no pingpong; not with one block sum and chunks, with
    KSPLIT 2 or pingpong (whose turns are taken per k-block), nor with one stage at 192 wide (no late release)."""
    on = [dict(block_n=192), dict(block_n=192, cluster=(2, 1), stages=2), dict(block_n=128), dict(block_n=64),
          dict(block_n=128, epi_bufs=1)]
    off = [dict(block_n=128, dacc=False), dict(block_n=64, ksplit=2), dict(block_n=192, pingpong=True),
           dict(block_n=128, pingpong=True), dict(block_n=192, stages=1)]
    assert all(FK.kernel_constants(**c)["DEFER"] for c in on)
    assert not any(FK.kernel_constants(**c)["DEFER"] for c in off)


def test_old_gpu_is_refused_by_name():
    from asyncpipe.spec.device import DeviceInfo, check_cc

    a100 = DeviceInfo("NVIDIA A100", (8, 0), 108, 1024, (1024, 1024, 64), (2**31 - 1, 65535, 65535), 49152,
                      166912, 167936, False)
    with pytest.raises(UnsupportedDeviceError, match=r"fp8_gemm: needs compute capability 9.0 \(FP8 wgmma, TMA: "
                       r"sm_90a\) \[.*\], got NVIDIA A100 \(compute capability 8.0\)"):
        check_cc(a100, G.API, (9, 0), "needs compute capability 9.0 (FP8 wgmma, TMA: sm_90a)")


def test_host_arrays_are_refused_before_the_gpu_is_asked():
    z8, z32 = np.zeros((128, 128), np.uint8), np.ones((1, 1), np.float32)
    with pytest.raises(AsyncpipeError) as e:
        fp8_gemm(z8, z32, z8, z32)
    assert str(e.value).startswith("fp8_gemm: A must be a CUDA device array (numba, CuPy, PyTorch), not host memory")
    with pytest.raises(AsyncpipeError) as e:
        quantize_fp8_rowwise_blocks(np.zeros((4, 32), np.uint16))
    assert str(e.value).startswith("quantize_fp8_rowwise_blocks: x must be a CUDA device array")


@pytest.mark.parametrize("args, message", [
    (((4, 4, 4), "uint16", True, 0), "x must be 2-D (M x K), got 3-D of shape (4, 4, 4)"),
    (((4, 32), "float32", True, 0), "x must hold bfloat16 (a torch bfloat16 tensor, or its bits in a uint16/int16 "
                                    "array), got float32"),
    (((0, 32), "uint16", True, 0), "M (x's rows) must be at least 1, got 0"),
    (((4, 24), "uint16", True, 0), "K (x's columns) must be a positive multiple of 16 (each lane writes 16 codes in "
                                   "one 16-byte store), got K = 24"),
    (((4, 32), "uint16", False, 0), "x must be C-contiguous (row-major, unit stride), got shape (4, 32)"),
    (((4, 32), "uint16", True, 8), "x must start on a 16-byte boundary (16-byte vector loads), got address 0x8 (8 "
                                   "bytes past one)"),
])
def test_quantize_check_messages(args, message):
    with pytest.raises(AsyncpipeError) as e:
        check_quantize(*args)
    assert str(e.value) == "quantize_fp8_rowwise_blocks: " + message
    assert check_quantize((3, 272), "bfloat16", True, 0x100) == (3, 272)


def test_block_n_follows_the_waves():
    """64 wide where M is one tile deep (the GEMM streams B); deeper, the width whose tiles fill the SMs' waves best,
    weighed by TILE_SPEED: 192 where its tiles fill whole waves, 128 where 192 would leave the last one part empty, 64
    where even 128-wide tiles are too few."""
    assert G.choose_block_n(8192, 8192, 132) == G.choose_block_n(4096, 2112, 132) == 192
    assert G.choose_block_n(4096, 24576, 132) == G.choose_block_n(512, 24576, 132) == 192
    assert G.choose_block_n(4096, 4096, 132) == 128        # 704 tiles of 192: 5.3 waves; 1024 of 128: 7.8
    assert G.choose_block_n(512, 7168, 132) == G.choose_block_n(4096, 7168, 132) == 128
    assert G.choose_block_n(512, 2112, 132) == 64           # 4 x 33 tiles: one whole wave
    assert G.choose_block_n(64, 24576, 132) == G.choose_block_n(128, 24576, 132) == G.choose_block_n(128, 7168, 132) == 64
    assert G.choose_block_n(1, 128, 132) == G.choose_block_n(128, 1 << 16, 132) == 64   # M one tile deep: always
    assert G.choose_block_n(129, 1 << 16, 132) != 64
    assert G.wave_efficiency(512, 2112, 64, 132) == 1.0    # 4 x 33 tiles: one whole wave
    assert abs(G.wave_efficiency(64, 24576, 192, 132) - 0.5 * 128 / 132) < 1e-12   # half of each tile past M


def test_cluster_is_none_by_default():
    """(1, 1) at every shape and width: multicast ran no faster on the H100 (2026-12-07)."""
    assert {G.choose_cluster(m, n, bn, 132) for m, n, k in G.BENCH_SHAPES for bn in (64, 128, 192)} == {(1, 1)}


def test_k_slices_fill_idle_sms():
    """K slices only where the tiles are fewer than half the SMs: as many as fill them, each of at least 4 k-blocks."""
    assert G.choose_k_slices(64, 2112, 7168, 64, (1, 1), 132) == 4          # 33 tiles x 4 = 132 units
    assert G.choose_k_slices(128, 2112, 7168, 128, (1, 2), 132) == 7        # 9 cluster tiles of 2 on 66 slots
    assert G.choose_k_slices(64, 7168, 2048, 64, (1, 1), 132) == 1          # 112 tiles: most SMs busy already
    assert G.choose_k_slices(1, 128, 768, 64, (1, 1), 132) == 1             # 6 k-blocks: slices would be too thin
    assert G.choose_k_slices(1, 128, 1024, 64, (1, 1), 132) == 2
    assert G.choose_k_slices(1, 64, 1 << 16, 64, (1, 1), 132) == 16         # at most MAX_KSLICES
    assert G.choose_k_slices(4096, 4096, 4096, 192, (1, 1), 132) == 1


def test_tail_slices_fill_the_last_round():
    """choose_tail_slices: the last round's tiles sliced where it is at most half full, as many slices as fill the
    slots, each of at least 4 k-blocks; none where the rounds are whole or there is only one round."""
    assert G.choose_tail_slices(4096, 4096, 4096, 192, (1, 1), 132) == 3    # 704 tiles: 5 rounds and 44 tiles
    assert G.choose_tail_slices(4096, 7168, 2048, 192, (1, 1), 132) == 4    # 1216 = 9 x 132 + 28
    assert G.choose_tail_slices(4096, 24576, 1536, 192, (1, 1), 132) == 3   # 4096 = 31 x 132 + 4; 12 k-blocks
    assert G.choose_tail_slices(512, 7168, 2048, 128, (2, 1), 132) == 1     # 112 cluster tiles on 66: 46 in the last
    assert G.choose_tail_slices(512, 7168, 2048, 192, (1, 1), 132) == 4     # 152 = 132 + 20
    assert G.choose_tail_slices(4224, 4096, 4096, 128, (1, 1), 132) == 1    # 33 x 32 = 8 x 132: whole rounds
    assert G.choose_tail_slices(64, 2112, 7168, 64, (1, 1), 132) == 1       # one round (k_slices' case)
    assert G.choose_tail_slices(4096, 4096, 384, 192, (1, 1), 132) == 1     # 3 k-blocks: too thin to slice
    assert [G.walked_whole(704, 132, 1, 3), G.walked_whole(704, 132, 3, 1), G.walked_whole(704, 132, 1, 1)] == \
        [660, 0, 704]


def test_default_epilogue_buffers():
    """One staging buffer a consumer warpgroup at every width by default: at 192 wide it leaves 5 stages on the H200
    (three buffers left 4)."""
    assert [G.default_epilogue_buffers(bn) for bn in FK.BLOCK_NS] == [1, 1, 1]
    assert FK.max_stages(192, H200_SMEM, 1, 1) == 5 and FK.max_stages(192, H200_SMEM, 1, 3) == 4
    assert (192, 5, (1, 1), 1, 1, 1) in G.bench_configs()


def test_default_epilogue_yields_to_given_stages():
    """stages given: the default TMA epilogue's buffers are cut to what leaves them room, then the direct epilogue
    taken, unless the caller named the epilogue (then the check says what does not fit)."""
    fit = G.fitting_epilogue
    assert fit("tma", 3, 192, 4, 1, H200_SMEM) == ("tma", 3)             # 4 stages beside 3 buffers
    assert fit("tma", 3, 192, 5, 1, H200_SMEM) == ("tma", 1)             # 5 x 41 KB: room for one
    assert fit("tma", 1, 64, 9, 1, H200_SMEM) == ("direct", 1)           # 9 x 25 KB: none
    assert fit("tma", 1, 64, 9, 1, H200_SMEM, explicit=True) == ("tma", 1)
    assert fit("direct", 3, 192, 5, 1, H200_SMEM) == ("direct", 3)
    assert fit("tma", 3, 192, 9, 1, H200_SMEM) == ("tma", 3)             # nothing fits: the check's to say
    for stages in range(2, 6):                                           # all that fit at 192 wide
        e, b = fit("tma", 3, 192, stages, 1, H200_SMEM)
        assert FK.block_shared_bytes(192, stages, 1, b if e == "tma" else 0) <= H200_SMEM


def test_stage_budget():
    """A stage is A (16 KB) + B (16 KB) + 128 scales of A, rounded to 33 KB; six fit in 227 KB. At 192 wide two 16-byte
    boxes of B's scales, 128 bytes apart, follow. With split_k 2 A is 8 KB."""
    assert FK.stage_tx(128) == 128 * 128 * 2 + 512 and FK.stage_bytes(128) == 33 * 1024
    assert FK.stage_tx(192) == 128 * 128 + 192 * 128 + 512 + 32 and FK.stage_bytes(192) == 41 * 1024
    assert FK.sb_offset(192) % 128 == 0 and FK.sb_offset(192) + FK.SB_PITCH + 16 <= FK.stage_bytes(192)
    assert FK.sb_boxes(128) == FK.sb_boxes(64) == 0 and FK.stage_tx(64) == 128 * 128 + 64 * 128 + 512
    assert FK.max_stages(128, H200_SMEM) == 6 and FK.block_shared_bytes(128, 6) <= H200_SMEM
    assert FK.stage_bytes(64) == 25 * 1024 and FK.max_stages(64, H200_SMEM) == 9
    assert FK.PRODUCER_REGS * 128 + FK.CONSUMER_REGS * 256 <= FK.REGISTER_FILE
    # split_k 2: A's 64 rows only (8 KB: 17 KB stages at 64 wide, 25 KB at 128), and warpgroup 2's 64 x block_n fp32
    # sums past the ring (16 KB at 64 wide, 32 KB at 128)
    assert FK.a_bytes(2) == 8 * 1024 and FK.stage_bytes(64, 2) == 17 * 1024 and FK.stage_bytes(128, 2) == 25 * 1024
    assert FK.reduce_bytes(64, 2) == 16 * 1024 and FK.max_stages(64, H200_SMEM, 2) == 12
    assert FK.max_stages(128, H200_SMEM, 2) == 6 and FK.reduce_bytes(128, 1) == 0   # 7 fit; even: 6
    assert FK.block_shared_bytes(64, 12, 2) <= H200_SMEM


# ---------------------------------------------------------------------------------------------
# The references, on hand-worked values
# ---------------------------------------------------------------------------------------------
def test_quantize_reference_by_hand():
    x = np.zeros((3, 144), np.float32)
    x[0, :4] = [896.0, 3.0, -1.0, 0.0078125]   # amax 896: scale 2, inv 0.5 -> 448, 1.5, -0.5, 2^-8
    x[0, 128:130] = [1.0, -0.25]               # a partial second block (16 columns): amax 1, scale 1/448
    x[2, 7] = np.nan                           # a NaN block: NaN scale, NaN codes
    codes, sa = quantize_reference(bf16_bits(x))
    assert sa.dtype == np.float32 and sa.shape == (3, 2)
    assert sa[0, 0] == 2.0 and sa[0, 1] == np.float32(1.0) / np.float32(448.0)
    # 448 = S.1111.110 (0x7E), 1.5 = 0.0111.100 (0x3C), -0.5 = 1.0110.000 (0xB0), 2^-8 = 2^-9 * 2: subnormal 0x02
    np.testing.assert_array_equal(codes[0, :4], [0x7E, 0x3C, 0xB0, 0x02])
    assert codes[0, 128] == 0x7E and decode(codes[0, 129:130], E4M3)[0] == np.float32(-0.25 * 448.0 / 1.0)  # -112
    # a zero block: the floor's scale, all codes 0 (+0)
    assert sa[1, 0] == np.float32(Q.AMAX_FLOOR) / np.float32(448.0) and not codes[1].any()
    assert np.isnan(sa[2, 0]) and np.all(codes[2, :128] == 0x7F) and sa[2, 1] == sa[1, 1]


def test_dequantized_reference_product():
    """reference = (decode(a) * sa) (decode(b) * sb)^T, the scales repeated over their blocks."""
    rng = np.random.default_rng(1)
    a, sa, b, sb = G.random_operands(rng, 3, 256, 256)
    da = decode(a, E4M3).astype(np.float64)
    db = decode(b, E4M3).astype(np.float64)
    want = np.zeros((3, 256))
    for i in range(3):
        for j in range(256):
            want[i, j] = sum(float(sa[i, kb]) * float(sb[j // 128, kb]) * (da[i, kb * 128:(kb + 1) * 128] @
                                                             db[j, kb * 128:(kb + 1) * 128]) for kb in range(2))
    np.testing.assert_allclose(G.reference(a, sa, b, sb), want, rtol=1e-12)
    codes, sbq = G.quantize_b_reference(np.full((128, 128), 3.0, np.float32))
    assert sbq[0, 0] == np.float32(3.0) / np.float32(448.0) and np.all(codes == 0x7E)


def test_step_model_by_hand():
    """The measured k32 step: terms truncated toward zero to 13 bits below the largest (448: unit 2^-5)."""
    from asyncpipe.kernels.fp8_gemm_numerics import step_model

    p = np.zeros(32)
    p[:4] = [448.0, -448.0, 3 * 2.0 ** -6, -3 * 2.0 ** -6]   # 1.5 units each: both keep one unit, toward zero
    assert step_model(0.0, p) == 0.0
    p[2:4] = [3 * 2.0 ** -6, 2.0 ** -6]                       # 1.5 units keeps 1, half a unit is lost
    assert step_model(0.0, p) == 2.0 ** -5
    assert step_model(448.0, np.full(32, 2.0 ** -6)) == 448.0  # the accumulator is a term: it cuts them all
    assert step_model(0.0, np.full(32, 2.0 ** -6)) == 0.5      # alone, they are exact
    assert step_model(1.0, np.r_[-1.0, np.zeros(31)]) == 0.0 and step_model(0.0, np.zeros(32)) == 0.0


@pytest.mark.parametrize("outliers", [False, True])
def test_bound_holds_for_the_model(outliers, rng):
    """The derived bound covers the model's own error (the GPU test checks the model against the hardware), on
    random codes and on quantized data with outliers, whose errors exceeded the first, assumed bound."""
    from asyncpipe.kernels import fp8_gemm_numerics as NM

    m, n, k = 40, 200, 400
    if outliers:
        x, y = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((n, k)).astype(np.float32)
        x[np.arange(m), rng.integers(0, k, m)] *= 1000.0
        y[:, rng.integers(0, k, 3)] *= 100.0
        a, sa = quantize_reference(bf16_bits(x))
        b, sb = G.quantize_b_reference(y)
    else:
        a, sa, b, sb = G.random_operands(rng, m, n, k)
    model = NM.gemm_model(decode(a, E4M3), sa, decode(b, E4M3), sb).astype(np.float64)
    ratio = np.abs(model - G.reference(a, sa, b, sb)) / G.error_bound(a, sa, b, sb)
    print("model error / bound:", ratio.max())
    assert ratio.max() <= 1.0


# ---------------------------------------------------------------------------------------------
# Offline SASS
# ---------------------------------------------------------------------------------------------
@pytest.mark.sass
@pytest.mark.parametrize("block_n, bufs, ksplit", [(128, 1, 1), pytest.param(128, 2, 1, marks=pytest.mark.slow),
                                                  (64, 1, 2), (192, 1, 1),    # the defaults (192: 5 stages)
                                                  pytest.param(192, 3, 1, marks=pytest.mark.slow)])
def test_fp8_gemm_sass_tma_epilogue(block_n, bufs, ksplit):
    """The TMA epilogue: D's bf16 pairs into the staging buffers (one STS each; split_k 2 adds warpgroup 2's sums),
    TMA stores (UTMASTG) of each warp's 16 x 64 boxes, no STG of D. No local memory, 192 wide included (it spilled
    40 bytes there while the epilogue's warp test was on threadIdx.x // 32, not warp_index())."""
    from tests.sass import assert_sass

    kernel = FK.make_kernel(block_n=block_n, stages=FK.max_stages(block_n, H200_SMEM, ksplit, bufs), ksplit=ksplit,
                            epi_bufs=bufs)
    cubin = assert_sass(kernel, FK.kernel_argtypes(), has=("UTMALDG.2D", "UTMASTG.2D", "QGMMA"),
                        lacks=("CALL", "STG.E", "LDL", "STL"), launch_bounds=FK.LAUNCH_BOUNDS)
    ops = cubin.opcodes
    n2 = FK.W.accumulators(block_n)
    print(cubin.resources, "STS:", ops.count("STS"))
    # (LLVM may duplicate the epilogue per path of the tile's edge tests: at least one copy of every conversion)
    assert ops.count("F2FP.BF16.F32.PACK_AB") >= n2 // 2 and ops.count("STS") >= n2 // 2 + n2 * (ksplit == 2)
    stores = 1 + FK.kernel_constants(block_n=block_n, ksplit=ksplit, epi_bufs=bufs)["DEFER"]   # DEFER: two sites
    assert ops.count("UTMASTG.2D") == FK.epilogue_chunks(block_n) * stores and ops.count("FENCE.VIEW.ASYNC.S") >= 1
    assert cubin.resources.stack == 0 and cubin.resources.local == 0
    k_loop = [i.opcode for i in cubin.innermost_loop("QGMMA")]
    pairs = FK.kernel_constants(block_n=block_n, ksplit=ksplit, epi_bufs=bufs)["DACC"]   # DACC: the loop is a pair
    assert sum(op.startswith("QGMMA") for op in k_loop) == 4 * (1 + pairs)   # a k-block: 128 of K in k32 steps
    # the epilogue's branch on the warp's rows is warp-uniform to ptxas (warp_index): the k-loop keeps its
    # descriptors in uniform registers (it took 16 R2UR a k-block and a WARPSYNC per syncwarp otherwise) and, with
    # KSPLIT 1, polls the next slot
    print("k-loop:", len(k_loop), "instructions")
    assert k_loop.count("R2UR") <= (0 if ksplit == 1 else 2) and "WARPSYNC" not in k_loop, k_loop
    assert k_loop.count("SYNCS.PHASECHK.TRANS64") == (ksplit == 1) * (1 + pairs), k_loop


@pytest.mark.sass
def test_fp8_gemm_sass_pingpong():
    """pingpong: in the k-loop, one named-barrier wait before the four QGMMAs (the warpgroup's turn) and one arrival
    after them (the other's), at the 192-wide default with no local memory; without it, neither."""
    from tests.sass import assert_sass

    def k_loop(pingpong):
        kernel = FK.make_kernel(block_n=192, stages=FK.max_stages(192, H200_SMEM), pingpong=pingpong)
        cubin = assert_sass(kernel, FK.kernel_argtypes(), has=("QGMMA",), lacks=("CALL", "LDL", "STL"),
                            launch_bounds=FK.LAUNCH_BOUNDS)
        return [i.opcode for i in cubin.innermost_loop("QGMMA")]

    ops = k_loop(True)
    bars = [op for op in ops if op.startswith(("BAR.SYNC", "BAR.ARV", "QGMMA"))]
    assert [b.split(".")[0] + "." + b.split(".")[1] if b.startswith("BAR") else "QGMMA" for b in bars] == \
        ["BAR.SYNC"] + ["QGMMA"] * FK.K_STEPS + ["BAR.ARV"], bars
    assert not [op for op in k_loop(False) if op.startswith("BAR")]


@pytest.mark.sass
def test_fp8_gemm_sass_trace():
    """The diagnostic build (TRACE, scripts/fp8_trace.py) at the 192-wide default: three clock readings in the
    k-loop (a k-block's data wanted, its issue, the end of its wait), no local memory; the shipped build has none."""
    from tests.sass import assert_sass

    def loop(trace):
        kernel = FK.make_kernel(block_n=192, stages=5, epi_bufs=1, trace=trace)
        cubin = assert_sass(kernel, FK.kernel_argtypes(), has=("QGMMA",), lacks=("CALL", "LDL", "STL"),
                            launch_bounds=FK.LAUNCH_BOUNDS)
        return [i for i in cubin.innermost_loop("QGMMA") if i.opcode.startswith("CS2R") and "SR_CLOCKLO" in i.operands]

    assert len(loop(64)) == FK.TRACE_WORDS == 3
    assert loop(0) == []


@pytest.mark.sass
def test_fp8_gemm_sass_map_fences():
    """The tensor maps' acquire fences: one descriptor-cache invalidation (UTMACCTL.IV) per map the kernel reads
    (A, B, sa; D's in the TMA epilogue) in the shipped build; none in the diagnostic build without them
    (map_fences=False, scripts/fp8_small_m_floor.py)."""
    from tests.sass import assert_sass

    def invalidations(fences):
        kernel = FK.make_kernel(block_n=64, stages=8, epi_bufs=1, map_fences=fences)
        cubin = assert_sass(kernel, FK.kernel_argtypes(), has=("QGMMA",), lacks=("CALL", "LDL", "STL"),
                            launch_bounds=FK.LAUNCH_BOUNDS)
        return [i for i in cubin.instructions if i.opcode.startswith("UTMACCTL")]

    assert len(invalidations(True)) == 4
    assert invalidations(False) == []


@pytest.mark.sass
@pytest.mark.parametrize("block_n, cluster, ksplit, k_slices", [
    (128, (1, 1), 1, 1), (64, (1, 1), 1, 1), (192, (1, 1), 1, 1), (128, (2, 2), 1, 1), (64, (1, 1), 2, 1),
    (128, (1, 2), 2, 1), (64, (1, 1), 2, 4), (192, (1, 1), 1, 2), (128, (1, 2), 1, 8)])
def test_fp8_gemm_sass(block_n, cluster, ksplit, k_slices):
    from tests.sass import assert_sass

    kernel = FK.make_kernel(block_n=block_n, stages=FK.max_stages(block_n, H200_SMEM, ksplit), cluster=cluster,
                            ksplit=ksplit, k_slices=k_slices)
    cubin = assert_sass(kernel, FK.kernel_argtypes(), has=("UTMALDG.2D", "USETMAXREG", "QGMMA"),
                        lacks=("CALL", "LDL", "STL"), launch_bounds=FK.LAUNCH_BOUNDS)
    sass, ops = cubin.sass, cubin.opcodes
    print(cubin.resources, "QGMMA:", sum(o.startswith("QGMMA") for o in ops), "FFMA:", ops.count("FFMA"))
    # DACC (on by default at <= 128 wide with KSPLIT 1 and this direct epilogue): the k-loop issues a pair of k-blocks
    # into two block sums, and an odd unit's last k-block follows it: three copies of a k-block's mmas and promotion
    # DEFER (192 wide, and DACC): the unit's first k-block is peeled (one copy more), and a tile's store comes twice:
    # after the next unit's first mmas, and after the walk for its last tile
    constants = FK.kernel_constants(block_n=block_n, cluster=cluster, ksplit=ksplit, k_slices=k_slices)
    copies = (3 if constants["DACC"] else 1) + constants["DEFER"]
    stores = 2 if constants["DEFER"] else 1
    # four k32 e4m3 wgmma per k-block, the first with scale-d 0 (no C input: "RZ, !UPT"), the last committed
    q = [line for line in sass.splitlines() if re.search(rf"\bQGMMA\.64x{block_n}x32\.F32\.E4M3\.E4M3\s", line)]
    assert len(q) == FK.K_STEPS * copies, "\n".join(q) or sass
    for c in range(copies):
        block = q[c * FK.K_STEPS:(c + 1) * FK.K_STEPS]
        assert "RZ, !UPT" in block[0] and not any("RZ, !UPT" in line for line in block[1:])
        assert "gsb0" in block[-1] and not any("gsb0" in line for line in block[:-1])   # not serialised (C7514)
    assert re.search(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x0", sass)
    # A, B and A's scales: three 2-D TMA loads per k-block, and B's scale box(es), 1-D (two at 192 wide); in a 2 x 2
    # cluster A and B are multicast shares, and a slot goes back with bare remote arrivals (one per CTA of the row
    # and column, by as many lanes), GPU fences only at the cluster barriers
    loads = sorted(o for o in ops if o.startswith("UTMALDG"))
    boxes = ["UTMALDG.1D"] * FK.sb_boxes(block_n)
    if cluster == (1, 1):
        assert loads == boxes + ["UTMALDG.2D"] * 3
    else:
        shared = (cluster[0] > 1) + (cluster[1] > 1)           # B along M, A along N
        assert loads == boxes + ["UTMALDG.2D"] * (3 - shared) + ["UTMALDG.2D.MULTICAST"] * shared
        # (the k-loop's release: one arrival instruction, lane i < CM + CN - 1 arriving in peer i)
        k_loop = [i for i in cubin.innermost_loop("QGMMA") if i.opcode == "SYNCS.ARRIVE.TRANS64.RED.A1T0"]
        assert len(k_loop) == 1 + constants["DACC"] and all(i.predicate for i in k_loop), k_loop
        assert "UCGABAR_ARV" in ops and "UCGABAR_WAIT" in ops
        assert ops.count("MEMBAR.ALL.GPU") == ops.count("UCGABAR_ARV") + 2 * (k_slices > 1)
    # the promotion: one FFMA per accumulator (64), the scales' product (2 FMUL), bf16 pairs out; split_k 2 adds
    # warpgroup 2's sums (an FADD each) after named barriers (bar.sync / bar.arrive 1 and 2)
    assert ops.count("FFMA") == FK.W.accumulators(block_n) * copies
    if ksplit == 2:
        assert ops.count("FADD") >= FK.W.accumulators(block_n) and sum(o.startswith("BAR.ARV") for o in ops) == 2
    # k_slices: the sums out to the workspace (an STG each beside D's bf16 pairs, and the counter's reset), one
    # counting atomic, the last slice's adds (an FADD per accumulator at least); none of it without
    n2 = FK.W.accumulators(block_n)
    atomics = [o for o in ops if o.startswith(("ATOM", "RED"))]
    if k_slices > 1:
        assert len(atomics) == 1 and atomics[0].startswith("ATOMG.E.ADD"), atomics
        # the count, between two acquire-release fences of its one thread (each a MEMBAR.ALL.GPU and an L1
        # invalidation); no sequentially consistent fence (cuda.threadfence: MEMBAR.SC.GPU) by every holder
        assert "MEMBAR.SC.GPU" not in ops and ops.count("CCTL.IVALL") >= 2
        a = ops.index(atomics[0])
        syncs = [i for i, o in enumerate(ops) if o.startswith("BAR.SYNC")]
        before = ops[max(i for i in syncs if i < a):a]             # from the holders' barrier to the count ...
        after = ops[a:min(i for i in syncs if i > a)]              # ... and on to the barrier that hands it out
        assert "MEMBAR.ALL.GPU" in before and "MEMBAR.ALL.GPU" in after, sass
        assert ops.count("STG.E") == n2 // 2 * stores + n2 + 1 and ops.count("FADD") >= n2 * (ksplit == 2) + n2
    else:
        assert atomics == [] and ops.count("STG.E") == n2 // 2 * stores      # D's bf16 pairs only
    assert ops.count("F2FP.BF16.F32.PACK_AB") == FK.W.accumulators(block_n) // 2 * stores
    assert re.findall(r"USETMAXREG\.DEALLOC\.CTAPOOL (0x[0-9a-f]+)", sass) == [hex(FK.PRODUCER_REGS)]
    assert re.findall(r"USETMAXREG\.TRY_ALLOC\.CTAPOOL UP\d, (0x[0-9a-f]+)", sass) == [hex(FK.CONSUMER_REGS)]
    assert cubin.resources.registers == FK.REGISTER_FILE // FK.THREADS // 8 * 8 and cubin.resources.local == 0
    # the k-loop builds each k-step's descriptors in uniform registers (the warpgroup from warpgroup_index(): with
    # threadIdx.x // 128 every step's A descriptor took two R2UR), and polls the next slot before the promotion
    k_loop = [i.opcode for i in cubin.innermost_loop("QGMMA")]
    r2ur = k_loop.count("R2UR")
    print("k-loop:", len(k_loop), "instructions,", r2ur, "R2UR")
    assert ksplit == 2 or r2ur <= (2 if block_n > 128 else 0), k_loop   # (KSPLIT 2's loop: 1 to 3, not looked into)
    polls = [o for o in k_loop if o == "SYNCS.PHASECHK.TRANS64"]          # test_wait: no TRYWAIT suffix
    assert len(polls) == (ksplit == 1) * (1 + constants["DACC"]), k_loop   # DACC's loop: a pair of k-blocks


@pytest.mark.sass
def test_quantizer_sass():
    """Two 16-byte loads and one 16-byte store per lane, 8 conversions of two values, a 3-step shuffle reduction,
    nothing in local memory. (The two fp32 divisions per block keep their FCHK slow path, a CALL.REL.)"""
    from tests.sass import assert_sass

    cubin = assert_sass(Q.quantize_kernel, Q.kernel_argtypes(), has=("SHFL.BFLY",), lacks=("LDL", "STL"))
    ops = cubin.opcodes
    print(cubin.resources)
    assert ops.count("LDG.E.128") == 2 and ops.count("STG.E.128") == 1
    assert sum(o.startswith("F2FP.SATFINITE.E4M3.F32") for o in ops) == 8
    assert ops.count("SHFL.BFLY") in (3, 6)           # ptxas may duplicate them on the convergent and divergent paths


# ---------------------------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------------------------
def _ids(v):
    return "c" + "x".join(map(str, v)) if isinstance(v, tuple) else str(v)


BOUND_PRODUCTS = 1 << 26        # the bound costs rows x N x K products in numpy: large problems check sampled rows


def within_bound(got, a, sa, b, sb, seed=0):
    """Every row of a small problem, or the first, last and sampled rows of a large one, within the bound."""
    m, (n, k) = a.shape[0], b.shape
    rows = np.arange(m)
    if m * n * k > BOUND_PRODUCTS:
        sample = np.random.default_rng(seed).choice(m, max(2, BOUND_PRODUCTS // (n * k)), replace=False)
        rows = np.unique(np.concatenate([[0, m - 1], sample]))
    want = G.reference(a[rows], sa[rows], b, sb)
    err = np.abs(got[rows] - want)
    worst = (err / G.error_bound(a, sa, b, sb, rows)).max()
    print(f"rows {len(rows)}/{m}: max |err| {err.max():.4g}, max |err| / bound {worst:.3g}, max |err| / max |ref| "
          f"{err.max() / np.abs(want).max():.3g}")
    return worst <= 1.0


def run_gpu(a, sa, b, sb, stages=None, block_n=None, cluster=None, **options):
    m, n = a.shape[0], b.shape[0]
    d = cuda.to_device(np.full((m, n), 0x7FC0, np.uint16))          # NaN: every element must be written
    fp8_gemm(cuda.to_device(a), G.to_device_scales(sa), cuda.to_device(b), cuda.to_device(sb), d, stages=stages,
             block_n=block_n, cluster=cluster, **options)
    got = bf16_to_float32(d.copy_to_host()).astype(np.float64)
    assert not np.isnan(got).any()
    return got


SHAPES = [(1, 256, 512), (64, 384, 1024), (128, 128, 7168), (200, 640, 384), (1000, 2048, 1024), (4096, 1024, 2048),
          (3, 200, 400), (130, 2112, 1040), (64, 2112, 7168),          # N and K edges: partial n-tiles, k-blocks
          (72, 320, 8336), (2048, 2304, 4224)]      # B's scales in three chunks of 32 k-blocks; two across tiles


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_fp8_gemm_random_codes_gpu(shape, rng):
    """Every e4m3 code but NaN, scales in [0.5, 2)."""
    a, sa, b, sb = G.random_operands(rng, *shape)
    assert within_bound(run_gpu(a, sa, b, sb), a, sa, b, sb)


@pytest.mark.gpu
@pytest.mark.hopper
def test_accumulator_model_gpu():
    """The measured model of the FP8 wgmma's sum, bit for bit on the probe's patterns (X = 448 cancelled by -X
    at every position among small values, which survive or not by where they sit), and on random codes the
    share of outputs it gets exactly (printed: a fused multiply-add emulated in float64 may round twice)."""
    import importlib.util
    from pathlib import Path

    from asyncpipe.kernels import fp8_gemm_numerics as NM

    path = Path(__file__).parents[2] / "scripts" / "fp8_accumulator_probe.py"
    spec = importlib.util.spec_from_file_location("probe", path)
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    ones = np.ones((1, probe.K))
    for name, a in probe.EXPERIMENTS.items():
        codes = encode(a, E4M3)
        got = run_gpu(codes, np.ones((probe.M, 1), np.float32), np.full((probe.N, probe.K), 0x38, np.uint8),
                      np.ones((1, 1), np.float32))
        want = bf16_to_float32(bf16_bits(NM.block_model(decode(codes, E4M3), ones).astype(np.float32)))[:, 0]
        np.testing.assert_array_equal(got[:, 0], want, err_msg=name)
    rng = np.random.default_rng(7)
    a, sa, b, sb = G.random_operands(rng, 64, 256, 512)
    got = run_gpu(a, sa, b, sb)
    model = NM.gemm_model(decode(a, E4M3), sa, decode(b, E4M3), sb)
    print(f"random codes: {np.mean(got == model):.4f} of the outputs as the model says, bit for bit")


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("outliers", [False, True])
@pytest.mark.parametrize("shape", [(1, 128, 1024), (64, 256, 2048), (128, 512, 4096), (200, 256, 384)],
                         ids=lambda s: "x".join(map(str, s)))
def test_fp8_gemm_quantized_gpu(shape, outliers, rng):
    """bf16 activations through quantize_fp8_rowwise_blocks (checked bit-exact), B block-quantized on the host;
    with outliers: one entry per row of A 1000x larger and a few columns of B 100x (their blocks' scales absorb
    them)."""
    m, n, k = shape
    x = rng.standard_normal((m, k)).astype(np.float32)
    y = rng.standard_normal((n, k)).astype(np.float32)
    if outliers:
        x[np.arange(m), rng.integers(0, k, m)] *= 1000.0
        y[:, rng.integers(0, k, 3)] *= 100.0
    bits = bf16_bits(x)
    q, sa = quantize_fp8_rowwise_blocks(cuda.to_device(bits))
    codes, scales = quantize_reference(bits)
    np.testing.assert_array_equal(q.copy_to_host(), codes)
    np.testing.assert_array_equal(sa.copy_to_host(), scales)
    b, sb = G.quantize_b_reference(y)
    d = fp8_gemm(q, sa, cuda.to_device(b), cuda.to_device(sb))
    assert within_bound(bf16_to_float32(d.copy_to_host()).astype(np.float64), codes, scales, b, sb)


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("block_n, stages, cluster", [(64, 12, (1, 1)), (64, 2, (1, 1)), (64, 12, (1, 2)),
                                                     (128, 6, (1, 2)), (64, 10, (2, 1)), (128, 4, (2, 2))], ids=_ids)
def test_fp8_gemm_split_k_stages_gpu(block_n, stages, cluster, rng):
    """split_k 2 at 40 x 520 x 2320 (M <= 64): the stages hold A's 64 rows, so 12 fit at 64 wide; in clusters along
    N each CTA loads 64 / CN of them and multicasts its share; partial tiles along N and K."""
    a, sa, b, sb = G.random_operands(rng, 40, 520, 2320)
    assert within_bound(run_gpu(a, sa, b, sb, stages, block_n, cluster, split_k=2, k_slices=1, epilogue="direct"),
                        a, sa, b, sb)


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("block_n, stages, cluster", [(128, 2, (1, 1)), (128, 4, (1, 1)), (64, 3, (1, 1)),
                                                     (64, 8, (1, 1)), (128, 2, (2, 1)), (64, 8, (1, 2)),
                                                     (128, 6, (2, 2)), (64, 4, (2, 2)), (192, 5, (1, 1)),
                                                     (192, 2, (2, 1)), (192, 4, (1, 2))], ids=_ids)
def test_fp8_gemm_configurations_gpu(block_n, stages, cluster, rng):
    """300 x 520 x 1552: partial tiles along M, N and K; in clusters the cluster tiles overhang M and N (their
    CTAs past the edge load and share zeros and store nothing)."""
    a, sa, b, sb = G.random_operands(rng, 300, 520, 1552)
    assert within_bound(run_gpu(a, sa, b, sb, stages, block_n, cluster), a, sa, b, sb)


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("m, n, k, options", [
    (300, 520, 1552, dict(block_n=128, epilogue="direct")),     # partial tiles along M, N and K
    (300, 520, 1552, dict(block_n=192, epilogue="tma")),        # the turns around the TMA epilogue's stores
    (2048, 2304, 1024, dict(block_n=128, cluster=(2, 1))),      # persistent: the turns carry across tiles
    (1100, 1000, 1552, dict(block_n=64, tail_slices=3)),        # the last round's tiles in K slices
    (100, 520, 1552, dict(block_n=64, k_slices=13, split_k=1)), # one k-block a slice
], ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else None)
def test_fp8_gemm_pingpong_gpu(m, n, k, options, rng):
    """pingpong: the consumer warpgroups take turns issuing each k-block's mmas (named barriers 4 and 5); three
    launches of one plan on a poisoned D, the same bits each time, within the bound."""
    three_launches_agree(m, n, k, dict(options, pingpong=True), rng)


def three_launches_agree(m, n, k, options, rng):
    """Three launches of one plan (the sliced walks' workspace and counters reused) on a D poisoned before each: the
    same bits each time, no element unwritten, within the bound."""
    a, sa, b, sb = G.random_operands(rng, m, n, k)
    args = (cuda.to_device(a), G.to_device_scales(sa), cuda.to_device(b), cuda.to_device(sb))
    poison = np.full((m, n), 0x7FC0, np.uint16)
    d = cuda.to_device(poison)
    outs = []
    for _ in range(3):
        d.copy_to_device(poison)
        fp8_gemm(*args, d, **options)
        outs.append(d.copy_to_host())
    np.testing.assert_array_equal(outs[0], outs[2])
    np.testing.assert_array_equal(outs[0], outs[1])
    got = bf16_to_float32(outs[0]).astype(np.float64)
    assert not np.isnan(got).any() and within_bound(got, a, sa, b, sb)


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("m, n, k, options", [
    (64, 2112, 7168, {}),                                   # the default: 33 tiles x 4 slices, split_k 2
    (128, 2112, 7168, dict(block_n=128, cluster=(1, 2))),   # 7 slices a cluster tile of two
    (100, 520, 1552, dict(block_n=64, k_slices=13)),        # split_k 1, one k-block a slice, N and K edges
    (3, 328, 4224, dict(block_n=192, k_slices=3)),          # 192 wide: 11 k-blocks a slice, two blocks of B's scales
    (300, 1040, 8336, dict(block_n=128, cluster=(2, 1), k_slices=16)),   # 66 k-blocks: chunks of B's scales
], ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else None)
def test_fp8_gemm_k_slices_gpu(m, n, k, options, rng):
    """k_slices: a tile's slices on different SMs at once, the last to count adding the others' sums (fenced writes,
    an atomic count); run three times on the same plan, D poisoned before each (a counter the launch before left
    set would leave tiles unwritten), with the same bits each time (the slices always added in one order)."""
    three_launches_agree(m, n, k, options, rng)


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("m, n, k, options", [
    (1100, 1000, 1552, dict(block_n=64, tail_slices=3)),    # 9 x 16 = 144 tiles: 132 whole, 12 in 3 slices
    (1300, 2304, 2048, dict(block_n=192, tail_slices=4)),   # 11 x 12 = 132 + 1; 192 wide: two blocks of B's scales
    (2200, 2000, 2560, dict(block_n=128, cluster=(2, 1), tail_slices=5)),   # 9 x 16 cluster tiles of two
    (40, 8520, 1040, dict(block_n=64, tail_slices=2)),      # split_k 2: 134 tiles of one warpgroup's rows
], ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else None)
def test_fp8_gemm_tail_slices_gpu(m, n, k, options, rng):
    """tail_slices: the tiles of the full rounds walked whole, the last round's in K slices that the last to count
    adds; three launches of one plan on a poisoned D, the same bits each time."""
    three_launches_agree(m, n, k, options, rng)


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("m, n, k, options", [
    (300, 520, 1552, dict(block_n=128, epilogue="direct")),                 # 13 k-blocks: 6 pairs and the odd one
    (300, 520, 1552, dict(block_n=64, epilogue="tma", stages=2)),           # the TMA epilogue; two stages
    (2048, 2304, 1024, dict(block_n=128, cluster=(2, 1), epilogue="tma")),  # persistent, in clusters
    (2048, 2304, 1024, dict(block_n=128, cluster=(2, 2), epilogue="direct")),
    (300, 1040, 8336, dict(block_n=128, cluster=(2, 1), k_slices=5, epilogue="direct")),   # slices of 13 and 14
], ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else None)
def test_fp8_gemm_dacc_gpu(m, n, k, options, rng):
    """dacc=True (two block sums, k-blocks in pairs): three launches of one plan on a poisoned D, the same bits each
    time, within the bound; with either epilogue."""
    three_launches_agree(m, n, k, dict(options, dacc=True), rng)


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("m, n, k, options", [
    (4000, 4000, 384, dict(block_n=192)),                     # 32 x 21 tiles, about 5 a CTA; M and N edges
    (2000, 3000, 128, dict(block_n=192, epilogue="direct")),  # one k-block a tile: only the peeled one
    (1000, 4000, 1152, dict(block_n=192, cluster=(2, 1), stages=3)),   # in clusters, B multicast
    (2000, 3000, 128, dict(block_n=128)),                     # DACC: the peeled k-block only
    (1000, 2000, 256, dict(block_n=64, epilogue="direct")),   # DACC: the peeled k-block and an odd last one
], ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else None)
def test_fp8_gemm_deferred_store_gpu(m, n, k, options, rng):
    """At 192 wide and with two block sums (DEFER) a tile's D is stored while the next unit's first mmas run: CTAs
    walking several tiles, three launches of one plan on a poisoned D, the same bits each time, within the bound."""
    assert FK.kernel_constants(block_n=options["block_n"], stages=options.get("stages", 4))["DEFER"]
    three_launches_agree(m, n, k, options, rng)


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("block_n, cluster", [(128, (2, 1)), (128, (1, 2)), (128, (2, 2)), (192, (2, 1))], ids=_ids)
def test_fp8_gemm_clusters_persistent_gpu(block_n, cluster, rng):
    """More cluster tiles than clusters fit (2048 x 2304 x 1024): every cluster walks several tiles, its ring's
    phases carried across them and across its CTAs."""
    a, sa, b, sb = G.random_operands(rng, 2048, 2304, 1024)
    assert within_bound(run_gpu(a, sa, b, sb, None, block_n, cluster), a, sa, b, sb)


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("shape", [(1, 16), (9, 272), (64, 7168), (200, 512), (4096, 2048), (513, 1040)],
                         ids=lambda s: "x".join(map(str, s)))
def test_quantizer_bit_exact_gpu(shape, rng):
    """Codes and scales bit for bit against quantize_reference: wide magnitudes per row, zero blocks, outliers."""
    m, k = shape
    x = (rng.standard_normal((m, k)) * np.exp2(rng.integers(-40, 40, (m, 1)))).astype(np.float32)
    x[rng.random((m, k)) < 0.01] *= 1e4
    x[::3, :min(k, 128)] = 0.0
    bits = bf16_bits(x)
    q, sa = quantize_fp8_rowwise_blocks(cuda.to_device(bits))
    codes, scales = quantize_reference(bits)
    np.testing.assert_array_equal(q.copy_to_host(), codes)
    np.testing.assert_array_equal(sa.copy_to_host(), scales)


@pytest.mark.gpu
@pytest.mark.hopper
def test_quantizer_nan_and_inf_gpu():
    """A NaN makes its block's scale NaN and its codes NaN (0x7F, or 0xFF should the GPU keep a sign); an
    infinity makes the scale infinite and the other codes zero."""
    x = np.ones((2, 256), np.float32)
    x[0, 3] = np.nan
    x[1, 200] = np.inf
    q, sa = quantize_fp8_rowwise_blocks(cuda.to_device(bf16_bits(x)))
    q, sa = q.copy_to_host(), sa.copy_to_host()
    assert np.isnan(sa[0, 0]) and np.all((q[0, :128] & 0x7F) == 0x7F)
    assert np.isinf(sa[1, 1]) and (q[1, 200] & 0x7F) == 0x7F and not q[1, 128:200].any()
    codes, scales = quantize_reference(bf16_bits(x))            # the finite blocks: as ever
    np.testing.assert_array_equal([q[0, 128:], q[1, :128]], [codes[0, 128:], codes[1, :128]])
    assert sa[0, 1] == scales[0, 1] and sa[1, 0] == scales[1, 0]


@pytest.mark.gpu
@pytest.mark.hopper
def test_fp8_gemm_from_torch_gpu(rng):
    """torch in, torch out: a bf16 tensor quantized (float8_e4m3fn codes, K-block-major scales), B as float8_e4m3fn,
    D a new bf16 tensor."""
    torch = pytest.importorskip("torch")
    m, n, k = 72, 256, 512
    x = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
    q, sa = quantize_fp8_rowwise_blocks(x)
    assert q.dtype == torch.float8_e4m3fn and sa.shape == (m, k // 128) and sa.stride() == (1, Q.scale_ld(m))
    b, sb = G.quantize_b_reference(rng.standard_normal((n, k)).astype(np.float32))
    d = fp8_gemm(q, sa, torch.from_numpy(b).cuda().view(torch.float8_e4m3fn), torch.from_numpy(sb).cuda())
    assert d.dtype == torch.bfloat16 and tuple(d.shape) == (m, n)
    codes, scales = q.view(torch.uint8).cpu().numpy(), sa.cpu().numpy()
    want_codes, want_scales = quantize_reference(x.view(torch.int16).cpu().numpy())
    np.testing.assert_array_equal(codes, want_codes)
    np.testing.assert_array_equal(scales, want_scales)
    assert within_bound(d.float().cpu().numpy().astype(np.float64), codes, scales, b, sb)


@pytest.mark.gpu
@pytest.mark.hopper
def test_benchmark_record_gpu():
    record = G.benchmark(256, 512, 1024, reps=3, rounds=2)
    assert "fp8" in record["kernel"] and "gemm" in record["kernel"] and record["tflops"] > 0 and record["rounds"] == 2
    if importlib.util.find_spec("torch") is not None:   # torch beside it, timed in the same rounds
        t = record["scaled_mm_tensorwise_tflops"]
        assert t > 0 and record["vs"]["scaled_mm_tensorwise"] == pytest.approx(record["tflops"] / t)
    print(record)
