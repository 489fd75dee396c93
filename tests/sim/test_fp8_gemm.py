"""The block-scaled FP8 GEMM and its quantizer on the simulator, through their unchanged host functions, at
sizes a CPU simulates in seconds: the TMA producer (A, B and A's scales into each stage), the 128B-swizzled
ring, setmaxnreg, both consumer warpgroups' k32 e4m3 wgmma chains with a fresh block accumulator per k-block,
the promotion with sa * sb, persistent tiles and M's edge (TMA zero fill, predicated stores), checked against
the float64 reference of the dequantized operands. Every protocol check is on (the default, ``all``).

The simulator's FP8 wgmma sums each k32 step exactly and rounds to fp32 once, so it does not model the
tensor core's narrower accumulator (``fp8_gemm_numerics`` does, as measured): the bound asserted is the GPU
tests' (``fp8_gemm.error_bound``)."""

import numpy as np
import pytest
from numba import cuda

import asyncpipe.host
from asyncpipe import sim
from asyncpipe.bf16 import bf16_bits, bf16_to_float32
from asyncpipe.kernels import fp8_gemm as G
from asyncpipe.kernels import fp8_gemm_kernel as FK
from asyncpipe.kernels import fp8_quant as Q
from asyncpipe.sim.device import sim_device_info

pytestmark = pytest.mark.sim


@pytest.fixture(autouse=True)
def simulated_device(monkeypatch):
    monkeypatch.setattr(asyncpipe.host, "device_info", lambda api="device_info": sim_device_info())


def run(rng, m, n, k, stages, gemm=None, **options):
    a, sa, b, sb = G.random_operands(rng, m, n, k)
    d = cuda.to_device(np.full((m, n), 0x7FC0, np.uint16))          # NaN: every element must be written
    (gemm or G.fp8_gemm)(*G.to_device_operands(a, sa, b, sb), d, stages=stages, **options)
    return bf16_to_float32(d.copy_to_host()).astype(np.float64), a, sa, b, sb


@pytest.mark.parametrize("m, n, k, stages", [
    (1, 128, 256, 2),       # inference's M: one row, 127 zero-filled; two k-blocks through two stages
    pytest.param(130, 256, 256, 2, marks=pytest.mark.slow),  # two M tiles (the second 2 rows deep), two N tiles
    (5, 200, 176, 2),       # N and K edges: a 72-column n-tile, a 48-deep k-block (TMA zero-fills both)
])
def test_fp8_gemm_matches_float64(m, n, k, stages, rng):
    got, a, sa, b, sb = run(rng, m, n, k, stages)
    err = np.abs(got - G.reference(a, sa, b, sb))
    assert np.all(err <= G.error_bound(a, sa, b, sb)), err.max()


def test_fp8_gemm_persistent_on_one_sm(rng):
    """One CTA walks both tiles: the ring's phases carry over from the first tile to the second, and the
    accumulators restart from zero."""
    with sim.settings(sms=1, seed=3, switch=0.3):
        got, a, sa, b, sb = run(rng, 130, 128, 384, 2)
    assert np.all(np.abs(got - G.reference(a, sa, b, sb)) <= G.error_bound(a, sa, b, sb))


@pytest.mark.parametrize("m, n, k, sms, options", [
    (130, 328, 128, 1, dict(block_n=192)),                   # 4 tiles of one k-block on one SM (no k-loop past
                                                             # the first); the last tiles 2 rows deep, 136 wide
    (70, 328, 384, 1, dict(block_n=192, epilogue="direct")),   # each thread's pairs straight to D
    (3, 520, 512, 2, dict(block_n=192, k_slices=2)),         # sliced units: only the last slice stores
    (130, 200, 384, 1, dict(block_n=128)),                   # DACC: the peeled k-block, then a pair
    (70, 136, 256, 1, dict(block_n=64)),                     # DACC: the peeled k-block, then an odd last one
    (130, 200, 128, 1, dict(block_n=128, epilogue="direct")),   # DACC: the peeled k-block only
])
def test_deferred_store_across_tiles(m, n, k, sms, options, rng):
    """At 192 wide and with two block sums (DEFER) a tile's D is stored after the next unit's first mmas are issued,
    and the walk's last tile after the walk: one SM (two with slices) walks every tile, each stored once, from its
    own sums."""
    assert FK.kernel_constants(block_n=options["block_n"], stages=2)["DEFER"]
    with sim.settings(sms=sms, seed=7, switch=0.3):
        got, a, sa, b, sb = run(rng, m, n, k, 2, **options)
    assert np.all(np.abs(got - G.reference(a, sa, b, sb)) <= G.error_bound(a, sa, b, sb))


@pytest.mark.parametrize("cluster, m, n, block_n, k", [
    ((2, 1), 130, 128, 128, 384),   # two CTAs along M share B: the second's tile is 2 rows deep
    ((1, 2), 5, 200, 64, 384),      # two along N share A: 200 = 64 + 64 + 64 + 8, the second cluster's right CTA
                               # has a 8-wide tile and the cluster tile overhangs N
    ((2, 2), 100, 72, 64, 384),     # four: the bottom CTAs' tiles lie wholly past M (they load, share and store
                               # nothing), the right ones' 8 columns deep
    ((1, 1), 3, 328, 192, 256),     # 192-wide tiles meet two 128-blocks of B's scales: the first at column 128, the
                               # second (n0 = 192) at 256, its last 56 columns past N = 328 (3 blocks)
    pytest.param((2, 1), 130, 136, 192, 384, marks=pytest.mark.slow),   # ... with B multicast in 96-row shares
])
def test_fp8_gemm_clusters(cluster, m, n, block_n, k, rng):
    """Clusters of CM x CN CTAs: each loads its share of A and B and multicasts it; every CTA's empty barriers
    count the consumers of its row and column; and the 192-wide tiles. In clusters the ring runs three k-blocks through
    two stages, so every slot is released across the cluster and refilled."""
    got, a, sa, b, sb = run(rng, m, n, k, 2, cluster=cluster, block_n=block_n)
    assert np.all(np.abs(got - G.reference(a, sa, b, sb)) <= G.error_bound(a, sa, b, sb))


def test_quantized_bf16_through_the_gemm(rng):
    """bf16 activations with an outlier per row -> quantize_fp8_rowwise_blocks (bit-exact against its
    reference) -> fp8_gemm with a block-quantized B: within the bound of the dequantized product."""
    m, n, k = 3, 128, 256
    x = rng.standard_normal((m, k)).astype(np.float32)
    x[np.arange(m), rng.integers(0, k, m)] *= 300.0
    x[0, :128] = 0.0                                                  # a zero block: its scale is the floor's
    bits = bf16_bits(x)
    q, sa = Q.quantize_fp8_rowwise_blocks(cuda.to_device(bits))
    codes, scales = Q.quantize_reference(bits)
    np.testing.assert_array_equal(q.copy_to_host(), codes)
    np.testing.assert_array_equal(sa.copy_to_host(), scales)
    b, sb = G.quantize_b_reference(rng.standard_normal((n, k)).astype(np.float32))
    d = G.fp8_gemm(q, sa, cuda.to_device(b), cuda.to_device(sb), stages=2)
    got = bf16_to_float32(d.copy_to_host()).astype(np.float64)
    assert np.all(np.abs(got - G.reference(codes, scales, b, sb)) <= G.error_bound(codes, scales, b, sb))


@pytest.mark.parametrize("m, k", [(9, 272), (1, 16), (4, 640)])
def test_quantizer_bit_exact(m, k, rng):
    """ld = M rounded up to 4 (9 -> 12), a partial last block (272 = 2 x 128 + 16), a row shorter than a block,
    a warp's full 512 columns and one more group; large and tiny magnitudes."""
    x = (rng.standard_normal((m, k)) * np.exp2(rng.integers(-60, 60, (m, 1)))).astype(np.float32)
    bits = bf16_bits(x)
    q, sa = Q.quantize_fp8_rowwise_blocks(cuda.to_device(bits))
    codes, scales = Q.quantize_reference(bits)
    assert sa.shape == (m, Q.k_blocks(k)) and sa.strides[0] == 4 and (Q.k_blocks(k) == 1 or
                                                                       sa.strides[1] == 4 * Q.scale_ld(m))
    np.testing.assert_array_equal(q.copy_to_host(), codes)
    np.testing.assert_array_equal(sa.copy_to_host(), scales)


def broken_kernel(tmp_path, old, new, *more):
    """``asyncpipe.kernels.fp8_gemm_kernel`` with ``old`` replaced by ``new`` in its source (and each further
    (old, new) pair of ``more``), run as a module of the package (its relative imports resolve) from a file
    (``unrolled`` reads the kernel's source)."""
    import types
    from pathlib import Path

    from asyncpipe.kernels import fp8_gemm_kernel as FK

    src = Path(FK.__file__).read_text()
    for before, after in ((old, new), *more):
        assert before in src, before
        src = src.replace(before, after)
    path = tmp_path / "broken_fp8_gemm_kernel.py"
    path.write_text(src)
    mod = types.ModuleType("asyncpipe.kernels.broken_fp8_gemm_kernel")
    mod.__package__, mod.__file__ = "asyncpipe.kernels", str(path)
    exec(compile(path.read_text(), str(path), "exec"), mod.__dict__)
    return mod


@pytest.fixture
def broken(monkeypatch, tmp_path):
    """``fp8_gemm`` compiling a broken copy of the kernel (its jit cache emptied before and after)."""
    def make(old, new, *more):
        monkeypatch.setattr(G, "FK", broken_kernel(tmp_path, old, new, *more))
        G._jit.cache_clear()
    yield make
    G._jit.cache_clear()


@pytest.mark.parametrize("m, n, k, options", [
    (130, 128, 384, {}),                            # 3 k-blocks: a pair, then the odd one out
    (70, 136, 512, dict(block_n=64)),               # 4: two pairs; both warpgroups hold rows
    (130, 128, 640, dict(cluster=(2, 1))),          # 5 in 2 x 1 clusters: every slot released across the cluster
    (70, 136, 896, dict(block_n=64, k_slices=3)),   # slices of 2, 2 and 3 k-blocks (odd and even units)
    (130, 128, 640, dict(epilogue="tma", dacc=True)),   # with the TMA epilogue
])
def test_dacc_pairs_of_k_blocks(m, n, k, options, rng):
    """DACC (two block sums, k-blocks in pairs; by default at <= 128 wide with split_k 1): the pairs and an
    odd unit's last k-block, through two stages, one SM walking every tile (the pairs' phases carried from tile to
    tile)."""
    with sim.settings(sms=1, seed=7, switch=0.3):
        got, a, sa, b, sb = run(rng, m, n, k, 2, **{"block_n": 128, "epilogue": "direct", **options})
    assert np.all(np.abs(got - G.reference(a, sa, b, sb)) <= G.error_bound(a, sa, b, sb))


def test_dacc_promotion_before_its_mmas_retire_is_caught(broken, rng):
    """DACC: the pair's second block sum promoted after wait_group(1) only (which retires the first's group): the
    simulator names the read of a pending wgmma's accumulators."""
    broken("                    ptx.wgmma_wait_group_sync_aligned(0)   # and the second's", "                    pass")
    with pytest.raises(sim.WgmmaPendingError, match=r"accumulator read.*wgmma_wait_group\(1\)"):
        run(rng, 130, 128, 384, 2, epilogue="direct")


def test_release_before_every_lane_read_its_scales_is_caught(broken, rng):
    """Lane 0's arrival on the empty barrier releases only what lane 0 did: without the syncwarp the
    producer's next TMA into the stage races with the other lanes' reads of the scales."""
    broken("            cuda.syncwarp()\n            if lane0 if CLUSTER == 1 else releaser:",
           "            if lane0 if CLUSTER == 1 else releaser:")
    # seen as the copy landing on a word another lane read, or (when that lane lags a whole phase behind) as its
    # wait returning for the phase before: both a race on the scales
    with pytest.raises(sim.SharedMemoryRaceError, match=r"(?s)(cp_async_bulk_tensor_2d_shared_global.*an earlier "
                       r"read by thread|made a read of word 0x[0-9a-f]+, which a copy completing phase \d+ writes)"
                       r".*(smem_f32\[|ld_shared_f32)"):
        run(rng, 1, 128, 512, 2)


def test_late_release_before_every_lane_read_its_scales_is_caught(broken, rng):
    """The late release (two stages, KSPLIT 1; the test above takes the immediate one, KSPLIT 2 with two stages) too:
    lane 0 hands the last k-block's slot back after this one's mmas, and without the syncwarp before it other lanes
    may not have read that slot's scales yet."""
    broken("            cuda.syncwarp()\n            if lane0 if CLUSTER == 1 else releaser:",
           "            if lane0 if CLUSTER == 1 else releaser:")
    with pytest.raises(sim.SharedMemoryRaceError, match=r"(?s)(cp_async_bulk_tensor_2d_shared_global.*an earlier "
                       r"read by thread|made a read of word 0x[0-9a-f]+, which a copy completing phase \d+ writes)"):
        run(rng, 130, 128, 512, 2)


@pytest.mark.parametrize("m, block_n", [(3, 64), (130, 128)])      # split_k 2; pairs of k-blocks (DACC)
def test_b_scales_in_chunks(broken, rng, m, block_n):
    """At most 128 wide B's scales reach the consumers in chunks of SB_CHUNK k-blocks (one per lane, read with shfl),
    each loaded a chunk ahead and a tile's first during the tile before. With 2-wide chunks instead of 32, five
    k-blocks cross two chunk boundaries and one CTA walks several tiles, some in other 128-blocks of B's rows: a
    scale taken from the wrong k-block, block or tile is off by up to 4x, far outside the bound."""
    broken("SB_CHUNK = 32 ", "SB_CHUNK = 2 ")
    with sim.settings(sms=1, seed=5):
        got, a, sa, b, sb = run(rng, m, 328, 640, 2, block_n=block_n)
    assert np.all(np.abs(got - G.reference(a, sa, b, sb)) <= G.error_bound(a, sa, b, sb))


def test_b_scales_from_their_boxes(rng):
    """At 192 wide B's scales come by TMA in 16-byte boxes that start on 16-byte boundaries of flat sb; the k-block's scale is
    word (row + kb) % 4 of its box. With five k-blocks a row (rows 5 words apart), 192-wide tiles (two rows of
    scales each) and one SM walking two tiles, the words taken are every one of the four."""
    with sim.settings(sms=1, seed=5):
        got, a, sa, b, sb = run(rng, 3, 328, 640, 2, block_n=192)
    assert np.all(np.abs(got - G.reference(a, sa, b, sb)) <= G.error_bound(a, sa, b, sb))


def test_b_scale_read_from_the_box_start_is_caught(broken, rng):
    """Reading a box's first word instead of the k-block's takes a neighbouring k-block's (or row's) scale: off by
    up to 4x, far outside the bound."""
    broken("sb_k = ptx.ld_shared_f32(sb_addr + ((sb_row + kb) & (SB_BOX - 1)) * SCALE_BYTES)",
           "sb_k = ptx.ld_shared_f32(sb_addr)")
    with sim.settings(sms=1, seed=5):
        got, a, sa, b, sb = run(rng, 3, 328, 640, 2, block_n=192)
    assert not np.all(np.abs(got - G.reference(a, sa, b, sb)) <= G.error_bound(a, sa, b, sb))


@pytest.mark.parametrize("m, k, options", [
    (1, 256, {}),                                   # the k-loop of one block sum (split_k 2 at M = 1)
    (130, 512, dict(epilogue="direct")),            # DACC: four k-blocks, each of the two block sums used twice
], ids=["k-loop", "dacc"])
def test_fresh_block_accumulator_is_what_promotion_needs(broken, rng, m, k, options):
    """scale-d 1 on every step (in issue_mmas, which both k-loops splice) keeps the previous k-block's sum in the
    block sum: promoted again, it is counted twice (the simulator computes the wrong answer the GPU would)."""
    broken("W.advance_descriptor(b_desc, step), 0 if s == 0 else 1)", "W.advance_descriptor(b_desc, step), 1)")
    got, a, sa, b, sb = run(rng, m, 128, k, 2, **options)
    assert not np.all(np.abs(got - G.reference(a, sa, b, sb)) <= G.error_bound(a, sa, b, sb))


def test_empty_barrier_counting_only_its_own_consumers_is_caught(broken, rng):
    """An empty barrier that counts only this CTA's consumer warps, while its cluster peer's warps arrive on it
    too, completes a phase early: the producer refills a stage whose scales the consumers still read (seen as the
    copy landing on a word a consumer read, on an operand of a wgmma not yet retired, or as a consumer's wait
    returning for the phase before)."""
    broken("pipeline_init(full, empty, STAGES, 1, CONSUMER_WARPS // KSPLIT * (CM + CN - 1))",
           "pipeline_init(full, empty, STAGES, 1, CONSUMER_WARPS // KSPLIT)")
    with pytest.raises((sim.SharedMemoryRaceError, sim.WgmmaPendingError, sim.MbarrierPhaseError),
                       match=r"(?s)(cp_async_bulk_tensor_2d_shared_global.*an earlier read by thread|made a read of word "
                       r"0x[0-9a-f]+, which a copy completing phase \d+ writes|must not be overwritten until a "
                       r"wgmma_wait_group retires|a waiting thread must see its phase complete before the barrier "
                       r"completes the next one)"):
        run(rng, 130, 128, 640, 2, cluster=(2, 1), block_n=128)


@pytest.mark.parametrize("m, n, k, block_n", [(5, 200, 640, 64), (64, 256, 384, 128)])
def test_split_k_halves_of_k_meet(m, n, k, block_n, rng):
    """split_k 2 (the default at M <= 64): the tile's two consumer warpgroups take the same 64 rows, each the k-blocks
    of every other slot, and add through shared memory. 5 and 3 k-blocks a tile through 2 slots: the warpgroups'
    shares alternate from tile to tile. One SM walks every tile (4 and 2), so warpgroup 2 writes its sums again only
    after warpgroup 1 has read the last ones."""
    with sim.settings(sms=1, seed=7):
        got, a, sa, b, sb = run(rng, m, n, k, 2, block_n=block_n, split_k=2)
    assert np.all(np.abs(got - G.reference(a, sa, b, sb)) <= G.error_bound(a, sa, b, sb))


def test_split_k_sums_rewritten_before_they_are_read_is_caught(broken, rng):
    """Without the named barrier that hands the buffer back, warpgroup 2 writes the next tile's sums over words
    warpgroup 1 may still be reading: a race on shared memory."""
    broken("""                    if tiles_done > 1:               # warpgroup 1 has added the last tile's sums
                        ptx.bar_sync(REDUCE_FREE, 2 * W.WARPGROUP_THREADS)""", "                    pass",
           ("""                if unit < units:                     # warpgroup 2 writes again after the next tile
                    ptx.bar_arrive(REDUCE_FREE, 2 * W.WARPGROUP_THREADS)""", "                pass"))
    with sim.settings(sms=1, seed=7), pytest.raises(sim.SharedMemoryRaceError, match=r"smem_f32\["):
        run(rng, 5, 200, 256, 2, block_n=64, split_k=2)


def test_split_k_by_k_block_parity_is_caught(broken, rng):
    """Split by the k-block's parity instead of the slot's: with 5 k-blocks a tile the second tile's even k-blocks
    sit in odd slots, so a slot serves both warpgroups and its barrier can pass one of them by two phases, where a
    parity wait returns for the wrong phase (the simulator's parity check sees the timing dependence)."""
    broken("if KSPLIT == 2 and (st.stage & uint32(1)) != parity:", "if KSPLIT == 2 and uint32(kb & 1) != parity:")
    with sim.settings(sms=1, seed=7), pytest.raises(sim.MbarrierParityError):
        run(rng, 5, 200, 640, 2, block_n=64, split_k=2)


@pytest.fixture
def workspaces(monkeypatch):
    """Every sliced (ws, counters) ``fp8_gemm``'s plans allocate, to look at after the launch (not the one-word
    pair of the occupancy query)."""
    made = []
    original = G.slice_workspace

    def record(*args):
        pair = original(*args)
        if args[2] > 1:
            made.append(pair)
        return pair

    monkeypatch.setattr(G, "slice_workspace", record)
    return made


@pytest.mark.parametrize("m, n, k, block_n, k_slices, options", [
    (5, 200, 640, 64, 3, {}),                   # split_k 2: 5 k-blocks as 1 + 2 + 2, each split between the warpgroups
    (70, 136, 512, 64, 4, {}),                  # split_k 1, a k-block per slice; 70 rows: both warpgroups hold sums
    (5, 200, 1040, 64, 5, dict(cluster=(1, 2))),  # 9 k-blocks in 5 slices; a cluster tile overhanging N
    pytest.param(3, 328, 512, 192, 2, {}, marks=pytest.mark.slow),   # 192 wide: two blocks of B's scales
])
def test_k_slices_meet(m, n, k, block_n, k_slices, options, workspaces, rng):
    """k_slices: each tile's k-blocks in slices that different CTAs run (4 SMs walk 9 to 12 units), the last to count
    adding every slice's sums from the workspace; every counter is back at 0 after the launch."""
    got, a, sa, b, sb = run(rng, m, n, k, 2, block_n=block_n, k_slices=k_slices, **options)
    assert np.all(np.abs(got - G.reference(a, sa, b, sb)) <= G.error_bound(a, sa, b, sb))
    (ws, counters), = workspaces
    assert ws.size > 1 and not counters.copy_to_host().any()


def test_k_slices_sum_in_one_order(rng):
    """Whichever slice of a tile counts last, the slices are added in the order 0, 1, 2: two schedules (one SM
    walking the units in order, four interleaved by another seed) give the same bits."""
    a, sa, b, sb = G.random_operands(rng, 5, 136, 768)
    out = []
    for sms, seed in ((1, 1), (4, 9)):
        d = cuda.to_device(np.full((5, 136), 0x7FC0, np.uint16))
        with sim.settings(sms=sms, seed=seed, switch=0.3):
            G.fp8_gemm(cuda.to_device(a), G.to_device_scales(sa), cuda.to_device(b), cuda.to_device(sb), d,
                       stages=2, block_n=64, k_slices=3)
        out.append(d.copy_to_host())
    np.testing.assert_array_equal(out[0], out[1])
    assert np.all(np.abs(bf16_to_float32(out[0]).astype(np.float64) - G.reference(a, sa, b, sb))
                  <= G.error_bound(a, sa, b, sb))


def test_k_slices_counter_left_set_is_caught(broken, workspaces, rng):
    """Without the reset the tile's counter stays at KSLICES after the launch, and the next launch of the plan would
    find no last slice (D never written)."""
    broken("""                if h == 0:
                    counters[cta_slot] = 0""", "                pass")
    run(rng, 5, 200, 640, 2, block_n=64, k_slices=3)
    (ws, counters), = workspaces
    assert counters.copy_to_host().tolist() == [3] * 4


def test_k_slices_last_one_adding_too_few_is_caught(broken, rng):
    """The last slice adding one slot too few (slice 2's sums): D is far outside the bound."""
    broken("for s in range(1, KSLICES):", "for s in range(1, KSLICES - 1):")
    got, a, sa, b, sb = run(rng, 5, 200, 640, 2, block_n=64, k_slices=3)
    assert not np.all(np.abs(got - G.reference(a, sa, b, sb)) <= G.error_bound(a, sa, b, sb))


@pytest.mark.parametrize("m, n, k, options, sliced", [
    (5, 360, 1024, dict(block_n=64, tail_slices=2), 2),     # 6 tiles on 4 SMs, the last 2 in 2 slices; split_k 2
    pytest.param(70, 520, 640, dict(block_n=64, cluster=(1, 2), tail_slices=2), 2,   # 5 cluster tiles on 2: 1 sliced
                 marks=pytest.mark.slow),                   # (26 s; the GPU test runs tail slices in clusters)
    (130, 136, 512, dict(block_n=64, tail_slices=4), 2),    # split_k 1 over 2 M tiles: 6 tiles, 4 whole, 2 sliced
])
def test_tail_slices_meet(m, n, k, options, sliced, workspaces, rng):
    """tail_slices: the tiles of the full rounds whole, the last round's tiles in K slices (a counter per sliced CTA
    tile, each back at 0 after the launch), D within the bound everywhere."""
    got, a, sa, b, sb = run(rng, m, n, k, 2, **options)
    assert np.all(np.abs(got - G.reference(a, sa, b, sb)) <= G.error_bound(a, sa, b, sb))
    (ws, counters), = workspaces
    assert counters.size == sliced and not counters.copy_to_host().any()


@pytest.mark.parametrize("m, n, k, options", [
    (130, 200, 256, dict(block_n=64, epilogue="direct")),           # each thread's bf16 pairs straight to D
    (70, 328, 256, dict(block_n=192, epilogue_buffers=3)),          # a buffer per chunk; the second tile's third
                                                                    # chunk 8 columns deep (TMA clips at N)
    (40, 200, 384, dict(block_n=128, epilogue_buffers=2, split_k=2)),   # warpgroup 1 stores the 64 rows
])
def test_epilogues(m, n, k, options, rng):
    """Both epilogues and the TMA one's buffer counts (the default, tested everywhere else, is "tma" with one)."""
    got, a, sa, b, sb = run(rng, m, n, k, 2, **options)
    assert np.all(np.abs(got - G.reference(a, sa, b, sb)) <= G.error_bound(a, sa, b, sb))


@pytest.mark.slow    # (11 s; test_fp8_gemm_persistent_on_one_sm reuses the default's one buffer across two tiles)
def test_tma_epilogue_reuses_its_buffer_across_tiles(rng):
    """One SM walks 8 tiles with one staging buffer per warpgroup: each chunk waits until the store of the one
    before has read the buffer."""
    with sim.settings(sms=1, seed=5, switch=0.3):
        got, a, sa, b, sb = run(rng, 130, 256, 256, 2, block_n=64, epilogue_buffers=1)
    assert np.all(np.abs(got - G.reference(a, sa, b, sb)) <= G.error_bound(a, sa, b, sb))


@pytest.mark.parametrize("m, n, k, options", [
    (130, 128, 384, dict(block_n=64)),                          # one SM, 4 tiles: the turns carry across tiles
    (70, 136, 512, dict(block_n=64, tail_slices=2, epilogue="direct")),   # 4 tiles whole, the rest in K slices
])
def test_pingpong_turns(m, n, k, options, rng):
    """pingpong: each consumer warpgroup waits for its turn (named barrier 4 or 5) before its k-block's mmas and
    hands the turn over once they are issued; warpgroup 1's last wait takes warpgroup 2's last hand-over."""
    with sim.settings(sms=1, seed=7, switch=0.3):
        got, a, sa, b, sb = run(rng, m, n, k, 2, pingpong=True, split_k=1, **options)
    assert np.all(np.abs(got - G.reference(a, sa, b, sb)) <= G.error_bound(a, sa, b, sb))
