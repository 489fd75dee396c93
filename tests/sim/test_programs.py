"""The chapter's three programs on the simulator, through their unchanged host functions, at sizes a
CPU simulates in seconds (the GPU tests in tests/kernels use the chapter's sizes)."""

import numpy as np
import pytest
from numba import cuda

from asyncpipe import sim
from asyncpipe.kernels import cluster_sum as C
from asyncpipe.kernels import sgemm as S
from asyncpipe.kernels import tma_add_one as T

pytestmark = pytest.mark.sim


def rel_err(got, ref):
    return np.linalg.norm(got.astype(np.float64) - ref) / max(np.linalg.norm(ref), 1e-30)


@pytest.mark.parametrize("variant,stages,m,n,k,bk,tile", [
    ("cp_async", 3, 128, 128, 32, 8, "8x8"),     # the chapter's tile, four k-tiles through three stages
    ("cp_async", 2, 70, 33, 20, 8, "8x8"),       # edges: zero-filled copies, predicated stores
    ("cp_async", 3, 128, 128, 48, 16, "8x8"),    # 16-deep stages: three k-tiles, the ring wraps
    ("cp_async", 2, 70, 33, 20, 16, "8x8"),      # 16-deep stages at the edges
    ("cp_async", 3, 128, 128, 32, 8, "8x16"),    # 128 threads of 8 x 16: interior, the ring wraps
    ("cp_async", 2, 70, 33, 20, 8, "8x16"),      # ... at the edges
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


@pytest.mark.parametrize("bk,tile", [(8, "8x8"), (16, "8x16")])
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
