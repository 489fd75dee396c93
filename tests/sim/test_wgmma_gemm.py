"""The warp-specialized wgmma GEMM on the simulator, through its unchanged host function, at sizes a
CPU simulates in seconds: the TMA producer, the 128B-swizzled ring, setmaxnreg, both consumer
warpgroups' wgmma chains with one group in flight, the 2-CTA cluster's B multicast, persistent tiles
and clipped edges, checked against numpy in float64.

``wgmma_gemm`` asks ``asyncpipe.host.device_info`` for the GPU's SM count and shared memory, which
refuses under ``NUMBA_ENABLE_CUDASIM=1``; the tests answer with the simulated sm_90 device. C is fp32:
numba's simulator has no ``numba.cuda.bf16`` conversions for the bf16 epilogue."""

import numpy as np
import pytest
from numba import cuda

import asyncpipe.host
from asyncpipe import sim
from asyncpipe.kernels import wgmma_gemm as G
from asyncpipe.sim.device import sim_device_info

pytestmark = pytest.mark.sim


@pytest.fixture(autouse=True)
def simulated_device(monkeypatch):
    monkeypatch.setattr(asyncpipe.host, "device_info", lambda api="device_info": sim_device_info())


def gemm(rng, m, n, k, stages, cluster, block_n, b_transposed):
    a = G.bf16_bits(rng.standard_normal((m, k), dtype=np.float32))
    b = G.bf16_bits(rng.standard_normal((k, n), dtype=np.float32))
    c = cuda.to_device(np.full((m, n), np.nan, np.float32))
    G.wgmma_gemm(cuda.to_device(a), cuda.to_device(b.T.copy() if b_transposed else b), c, stages,
                 block_n=block_n, cluster=cluster, b_transposed=b_transposed)
    want = G.bf16_to_float32(a).astype(np.float64) @ G.bf16_to_float32(b).astype(np.float64)
    return c.copy_to_host(), want


@pytest.mark.parametrize("m, n, k, stages, cluster, block_n, b_transposed", [
    (128, 256, 64, 3, 2, 256, False),     # one cluster tile, one k-block, B multicast in 32-row halves
    (128, 256, 256, 3, 2, 256, True),     # B^T K-major, four k-blocks through three stages (the ring wraps)
    (200, 136, 200, 3, 2, 128, False),    # edges: OOB-filled boxes along M, N and K, clipped stores
    (300, 72, 136, 4, 1, 64, True),       # no cluster, persistent: 6 tiles on 4 simulated SMs
])
def test_wgmma_gemm_matches_numpy(m, n, k, stages, cluster, block_n, b_transposed, rng):
    got, want = gemm(rng, m, n, k, stages, cluster, block_n, b_transposed)
    # products of bf16 values are exact in fp32; only the fp32 sums round
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(k))


def test_wgmma_gemm_under_another_interleaving(rng):
    """Right by construction, not by the default seed's schedule: more switches, another copy order."""
    with sim.settings(seed=7, switch=0.5):
        got, want = gemm(rng, 256, 128, 192, 3, 2, 128, False)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(192))
