"""The chapter's three programs on the simulator, through their unchanged host functions, at sizes a
CPU simulates in seconds (the GPU tests in tests/kernels use the chapter's sizes)."""

import numpy as np
import pytest
from numba import cuda

from asyncpipe import sim
from asyncpipe.sim import errors as sim_errors
from asyncpipe.kernels import cluster_sum as C
from asyncpipe.kernels import sgemm as S
from asyncpipe.kernels import tma_add_one as T

pytestmark = pytest.mark.sim


def rel_err(got, ref):
    return np.linalg.norm(got.astype(np.float64) - ref) / max(np.linalg.norm(ref), 1e-30)


@pytest.mark.parametrize("variant,stages,m,n,k,bk,tile", [
    ("cp_async", 3, 128, 128, 32, 8, "8x8"),     # the chapter's tile, four k-tiles through three stages
    ("cp_async", 2, 70, 33, 20, 8, "8x8"),       # edges: zero-filled copies, predicated stores
    pytest.param("cp_async", 3, 128, 128, 48, 16, "8x8", marks=pytest.mark.slow),  # 16-deep stages: the ring wraps
    pytest.param("cp_async", 2, 70, 33, 20, 16, "8x8", marks=pytest.mark.slow),    # 16-deep stages at the edges
    pytest.param("cp_async", 3, 128, 128, 32, 8, "8x16", marks=pytest.mark.slow),  # 8 x 16 interior, ring wraps
    pytest.param("cp_async", 2, 70, 33, 20, 8, "8x16", marks=pytest.mark.slow),    # ... at the edges
    ("cp_async", 2, 33, 72, 21, 16, "8x16"),     # ... 16-deep, at the edges: 4-byte copies of A, 16-byte of B
    ("v4", 2, 64, 40, 16, 8, "8x8"),             # edges: element by element
    ("v4", 2, 128, 128, 16, 8, "8x8"),           # interior: 16-byte vector loads and stores
])
def test_sgemm(variant, stages, m, n, k, bk, tile, rng):
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    c = cuda.to_device(c0)
    S.sgemm(cuda.to_device(a), cuda.to_device(b), c, alpha=1.5, beta=-0.5, stages=stages, variant=variant, bk=bk,
            tile=tile)
    ref = 1.5 * (a.astype(np.float64) @ b) - 0.5 * c0
    assert rel_err(c.copy_to_host(), ref) < 1e-5


def _launch_cp_async(a, b, c, stages, bk, tile, fn, alpha=1.5, beta=-0.5, schedule="plain"):
    """Launches ``fn`` (an unrolled cp.async kernel source, any options) as ``sgemm`` would."""
    from asyncpipe.host.launch import prepare_launch
    from asyncpipe.jit_cache import jit

    (m, k), n = a.shape, b.shape[1]
    vec_a, vec_b = (4 if k % 4 == 0 else 1), (4 if n % 4 == 0 else 1)
    edges = not (m % S.BM == 0 and n % S.BN == 0 and k % bk == 0 and vec_a == vec_b == 4)
    kern = jit(fn(vec_a, vec_b, edges), launch_bounds=S.launch_bounds(edges, bk, tile))
    da, db = cuda.to_device(a.reshape(-1)), cuda.to_device(b.reshape(-1))
    dc = cuda.to_device(c.reshape(-1))
    grid = ((n + S.BN - 1) // S.BN, (m + S.BM - 1) // S.BM)
    prepare_launch(kern, grid, S.threads(tile), np.int32(m), np.int32(n), np.int32(k), np.float32(alpha), da, db,
                   np.float32(beta), dc, shared_mem=S.shared_bytes(stages, bk, schedule))()
    return dc.copy_to_host().reshape(m, n)


# schedule="dbuf": fragments double-buffered, the barrier before each tile's last FFMAs. issue_after is the
# k-step slot of the copies: bk-1 (the default: after the barrier that ends the tile's reads, into the tile's
# own stage, STAGES tiles in the prologue) or a slot before it (into the previous tile's stage, as the plain
# loop). k-tiles > STAGES: the ring wraps; ragged sizes: zero-filled copies and predicated stores.
@pytest.mark.parametrize("stages,m,n,k,bk,tile,issue_after", [
    pytest.param(3, 128, 128, 64, 8, "8x16", None, marks=pytest.mark.slow),  # interior, eight k-tiles, three stages
    pytest.param(2, 128, 128, 48, 16, "8x16", None, marks=pytest.mark.slow),  # interior, 16-deep, two stages
    pytest.param(4, 128, 128, 80, 16, "8x16", None, marks=pytest.mark.slow),  # interior, five k-tiles through four stages
    (3, 128, 128, 64, 8, "8x8", None),            # the chapter's tile
    pytest.param(2, 128, 128, 48, 16, "8x8", None, marks=pytest.mark.slow),
    pytest.param(3, 70, 33, 45, 8, "8x16", None, marks=pytest.mark.slow),  # edges: 4-byte copies of A and B
    pytest.param(2, 33, 72, 21, 16, "8x16", None, marks=pytest.mark.slow),  # edges: 4-byte A, 16-byte B copies
    pytest.param(3, 130, 70, 33, 16, "8x8", None, marks=pytest.mark.slow),  # edges, two row blocks
    (3, 128, 128, 64, 8, "8x16", 2),              # copies before the barrier: STAGES-1 tiles ahead
    pytest.param(2, 128, 128, 48, 16, "8x16", 3, marks=pytest.mark.slow),
    (4, 70, 33, 45, 8, "8x8", 0),
    (2, 33, 72, 21, 16, "8x16", 14),
])
def test_sgemm_dbuf(stages, m, n, k, bk, tile, issue_after, rng):
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    ref = 1.5 * (a.astype(np.float64) @ b) - 0.5 * c0
    if issue_after is None:                       # through sgemm()
        c = cuda.to_device(c0)
        S.sgemm(cuda.to_device(a), cuda.to_device(b), c, alpha=1.5, beta=-0.5, stages=stages, bk=bk, tile=tile,
                schedule="dbuf")
        got = c.copy_to_host()
    else:
        got = _launch_cp_async(a, b, c0, stages, bk, tile, lambda va, vb, e: S.kernel_source(
            "cp_async", stages, va, vb, e, bk, tile, issue_after, "dbuf"), schedule="dbuf")
    assert rel_err(got, ref) < 1e-5


# schedule="kmajor": A transposed first into a zero-padded buffer (a second kernel), then the dbuf loop on k-major
# tiles of both operands. Ragged sizes: the padding's zeros (k past K, rows past M) and predicated stores.
# The 3-stage 8 x 16 bk 16 interior kernel (an LLVM-loop kernel) runs in test_sgemm.py's
# test_llvm_loop_kernels_against_numpy_one_beta_each, four k-tiles through three stages (here it took 3 of the
# simulator run's 9 minutes at 128 x 256 x 112); its GPU tests run it at many shapes.
@pytest.mark.parametrize("stages,m,n,k,bk,tile", [
    pytest.param(2, 128, 128, 48, 8, "8x8", marks=pytest.mark.slow),  # the chapter's tile
    (3, 70, 33, 45, 8, "8x16"),                   # edges: At padded to 128 x 48, 4-byte copies of B
    pytest.param(2, 130, 70, 33, 16, "8x8", marks=pytest.mark.slow),  # edges, two row blocks
    (2, 1, 1, 1, 16, "8x16"),
])
def test_sgemm_kmajor(stages, m, n, k, bk, tile, rng):
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    c = cuda.to_device(c0)
    S.sgemm(cuda.to_device(a), cuda.to_device(b), c, alpha=1.5, beta=-0.5, stages=stages, bk=bk, tile=tile,
            schedule="kmajor")
    assert rel_err(c.copy_to_host(), 1.5 * (a.astype(np.float64) @ b) - 0.5 * c0) < 1e-5


@pytest.mark.parametrize("slot,ahead,error", [(3, 3, "SharedMemoryRaceError"), (15, 2, "WaitGroupError")])
def test_sgemm_dbuf_wrong_stage_reuse_is_caught(slot, ahead, error, rng):
    """The stage rule matters, and the simulator sees it. Copies before the barrier (slot 3) one tile further
    ahead (STAGES) overwrite the stage being read; copies after it (slot bk-1) with the plain ring's STAGES-1
    tiles ahead leave wait_group(STAGES-2) one group short of the tile the barrier is for."""
    from asyncpipe.kernels.unroll import unrolled

    stages, bk, tile = 3, 16, "8x16"
    t = S.TILES[tile]

    def fn(va, vb, e):
        return unrolled(S.sgemm_cp_async_dbuf, STAGES=stages, VEC_A=va, VEC_B=vb, EDGES=e, copy_a=S._COPY[va],
                        copy_b=S._COPY[vb], BK=bk, LDA=S.a_pitch(bk, "dbuf"), TILE_FLOATS=S.tile_floats(bk, "dbuf"),
                        RI=t.ri, COL_STEP=S.BN // (t.tn // 4),
                        DB_SLOT=slot, AHEAD=ahead, static_ifs=True, TM=t.tm, TN=t.tn, THREADS=t.threads)

    a = rng.standard_normal((128, 96)).astype(np.float32)
    b = rng.standard_normal((96, 128)).astype(np.float32)
    with pytest.raises(getattr(sim_errors, error)):
        _launch_cp_async(a, b, np.zeros((128, 128), np.float32), stages, bk, tile, fn, beta=0.0, schedule="dbuf")


@pytest.mark.parametrize("bk,tile", [(8, "8x8"), pytest.param(16, "8x16", marks=pytest.mark.slow)])
def test_sgemm_edges_beta_zero_never_reads_c(bk, tile, rng):
    """At the edges with beta == 0, C is written, never read: NaN poison does not leak through."""
    m, n, k = 5, 130, 11
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = cuda.to_device(np.full((m, n), np.nan, np.float32))
    S.sgemm(cuda.to_device(a), cuda.to_device(b), c, alpha=2.0, beta=0.0, stages=2, bk=bk, tile=tile)
    assert rel_err(c.copy_to_host(), 2.0 * (a.astype(np.float64) @ b)) < 1e-5


@pytest.mark.parametrize("pipelined", [False, True])
@pytest.mark.parametrize("dtype,shape", [(np.int32, (32, 64)), (np.float32, (33, 100)), (np.int32, (1, 5))])
def test_tma_add_one(pipelined, dtype, shape, rng):
    a = (rng.integers(-1000, 1000, shape) if dtype == np.int32 else rng.standard_normal(shape)).astype(dtype)
    d = cuda.to_device(a)
    T.add_one(d, pipelined=pipelined)
    np.testing.assert_array_equal(d.copy_to_host(), a + dtype(1))


def test_pair_sums(rng):
    clusters, per_block = 2, 600
    x = rng.uniform(-1, 1, clusters * 2 * per_block).astype(np.float32)
    got = C.pair_sums(cuda.to_device(x), per_block, clusters).copy_to_host()
    np.testing.assert_allclose(got, x.astype(np.float64).reshape(clusters, -1).sum(axis=1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("cluster_size,n", [(2, 5000), (4, 3000), (1, 255)])
def test_cluster_sum(cluster_size, n, rng):
    x = rng.uniform(-1, 1, n).astype(np.float32)
    got = C.cluster_sum(cuda.to_device(x), cluster_size=cluster_size).copy_to_host()[0]
    assert abs(got - x.astype(np.float64).sum()) <= 1e-6 * np.abs(x).sum() + 1e-6


def test_programs_pass_under_other_seeds(rng):
    """The programs are right by construction, not by the default interleaving."""
    a = rng.integers(0, 100, (16, 64)).astype(np.int32)
    for seed in (1, 2):
        d = cuda.to_device(a)
        with sim.settings(seed=seed, switch=0.5):
            T.add_one(d, pipelined=True)
        np.testing.assert_array_equal(d.copy_to_host(), a + 1)


def test_demo_runs_the_programs_on_the_cpu(capsys):
    from asyncpipe.demo import run_demo

    assert run_demo(quick=True) == 0
    out = capsys.readouterr().out
    assert out.count("PASS") == 3 and "FAIL" not in out
