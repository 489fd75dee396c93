"""The warp-specialized wgmma GEMM on the simulator, through its unchanged host function, at sizes a
CPU simulates in seconds: the TMA producer, the 128B-swizzled ring, setmaxnreg, both consumer
warpgroups' wgmma chains with one group in flight, the 2-CTA cluster's B multicast, persistent tiles
and clipped edges, checked against numpy in float64.

``wgmma_gemm`` asks ``asyncpipe.host.device_info`` for the GPU's SM count and shared memory, which
refuses under ``NUMBA_ENABLE_CUDASIM=1``; the tests answer with the simulated sm_90 device. C is fp32,
and bf16 in one case (the epilogue's rounding and bit packing, through ``asyncpipe.sim.bf16``)."""

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


def gemm(rng, m, n, k, stages, cluster, block_n, b_transposed, epilogue="direct"):
    a = G.bf16_bits(rng.standard_normal((m, k), dtype=np.float32))
    b = G.bf16_bits(rng.standard_normal((k, n), dtype=np.float32))
    c = cuda.to_device(np.full((m, n), np.nan, np.float32))
    G.wgmma_gemm(cuda.to_device(a), cuda.to_device(b.T.copy() if b_transposed else b), c, stages,
                 block_n=block_n, cluster=cluster, b_transposed=b_transposed, epilogue=epilogue)
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


@pytest.mark.parametrize("m, n, k, stages, cluster, block_n, b_transposed", [
    (128, 256, 64, 3, 2, 256, False),     # eight 32-column chunks through two staging buffers per warpgroup
    pytest.param(200, 136, 200, 3, 2, 128, False, marks=pytest.mark.slow),  # edges: stores clipped along M, N
    (300, 72, 136, 4, 1, 64, True),       # persistent: the staging buffers reused by each CTA's next tiles
])
def test_wgmma_gemm_tma_epilogue_matches_numpy(m, n, k, stages, cluster, block_n, b_transposed, rng):
    """The TMA epilogue: swizzled staging, fence, named barrier, TMA stores, wait_group.read before reuse."""
    got, want = gemm(rng, m, n, k, stages, cluster, block_n, b_transposed, "tma")
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(k))


@pytest.mark.parametrize("epilogue", G.EPILOGUES)
def test_wgmma_gemm_bf16_output(epilogue, rng):
    """The default C: bf16 rounded to nearest even, two per 32-bit store (to C, or to the staging
    buffer whose 64 x 64 bf16 boxes TMA stores)."""
    a = G.bf16_bits(rng.standard_normal((136, 64), dtype=np.float32))
    b = G.bf16_bits(rng.standard_normal((64, 72), dtype=np.float32))
    c = G.wgmma_gemm(cuda.to_device(a), cuda.to_device(b), None, 3, block_n=64, cluster=2, epilogue=epilogue)
    assert c.dtype == np.uint16 and c.shape == (136, 72)
    got = G.bf16_to_float32(c.copy_to_host()).astype(np.float64)
    want = G.bf16_to_float32(a).astype(np.float64) @ G.bf16_to_float32(b).astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=2.0**-8, atol=1e-3)


def test_simulated_bf16_rounding():
    from numba.cuda import bf16

    bits = [int(bf16.bfloat16_as_ushort(bf16.float32_to_bfloat16_rn(np.float32(x))))
            for x in (1.0, 1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, -2.5, np.inf, np.nan)]
    assert bits == [0x3F80, 0x3F80, 0x3F82, 0xC020, 0x7F80, 0x7FFF]   # ties to even; NaN as CUDA's 0x7FFF
    np.testing.assert_array_equal(bits[:5], G.bf16_bits(np.array([1.0, 1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, -2.5,
                                                                  np.inf], np.float32)))


def test_wgmma_gemm_under_another_interleaving(rng):
    """Right by construction, not by the default seed's schedule: more switches, another copy order."""
    with sim.settings(seed=7, switch=0.5):
        got, want = gemm(rng, 256, 128, 192, 3, 2, 128, False)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(192))


def broken_module(tmp_path, old, new):
    """A copy of ``asyncpipe.kernels.wgmma_gemm`` with one line of its kernel changed."""
    import importlib.util
    from pathlib import Path

    src = Path(G.__file__).read_text()
    assert old in src
    src = src.replace(old, new).replace("from .. import ptx", "from asyncpipe import ptx")
    src = src.replace("from ..", "from asyncpipe.").replace("from .", "from asyncpipe.kernels.")
    path = tmp_path / "broken_wgmma_gemm.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("broken_wgmma_gemm", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_slot_released_before_its_mmas_retire_is_caught(tmp_path, rng):
    """The consumer's wait_group(1) is what makes the previous k-block's slot free: with
    wait_group(2) its slot goes back to the producer while its mmas may still read it, and the next
    TMA load into that slot is caught (the correct kernel passes the same case above)."""
    wait = "ptx.wgmma_wait_group_sync_aligned(1)        # the previous k-block's mmas are done ..."
    mod = broken_module(tmp_path, wait, wait.replace("(1)", "(2)"))
    a = G.bf16_bits(rng.standard_normal((128, 256), dtype=np.float32))
    b = G.bf16_bits(rng.standard_normal((256, 64), dtype=np.float32))
    c = cuda.to_device(np.zeros((128, 64), np.float32))
    with pytest.raises(sim.WgmmaPendingError, match=r"(?s)shared memory a wgmma.mma_async reads must not be "
                       r"overwritten until a wgmma_wait_group retires the mma's group.*wgmma_wait_group\(2\).*"
                       r"leaving the newest 2 pending\n  at .*cp_async_bulk_tensor_2d_shared_global"):
        mod.wgmma_gemm(cuda.to_device(a), cuda.to_device(b), c, 3, block_n=64, cluster=1)


def test_mma_on_a_stage_not_yet_waited_for_is_caught(tmp_path, rng):
    """Without consumer_wait the consumers' first mma reads a stage the TMA has not filled, or whose
    mbarrier phase they have not acquired (the seed decides which): the operand read names the copy,
    its barrier and the mma's line."""
    wait = "                consumer_wait(full, st)\n"
    mod = broken_module(tmp_path, wait, "                pass\n")
    a = G.bf16_bits(rng.standard_normal((128, 64), dtype=np.float32))
    b = G.bf16_bits(rng.standard_normal((64, 64), dtype=np.float32))
    c = cuda.to_device(np.zeros((128, 64), np.float32))
    with pytest.raises(sim.UnwaitedAsyncReadError, match=r"(?s)a TMA copy (wrote must be acquired|is still writing).*"
                       r"\n  at .*MMA\(ptx.addr\(acc, 0\)"):
        mod.wgmma_gemm(cuda.to_device(a), cuda.to_device(b), c, 3, block_n=64, cluster=1)


def run_tma_epilogue(mod, rng, m=136, n=128, k=64):
    """``mod``'s GEMM with the TMA epilogue: two tiles per CTA (one CTA), four fp32 chunks per tile."""
    a = G.bf16_bits(rng.standard_normal((m, k), dtype=np.float32))
    b = G.bf16_bits(rng.standard_normal((k, n), dtype=np.float32))
    c = cuda.to_device(np.zeros((m, n), np.float32))
    with sim.settings(sms=1):
        mod.wgmma_gemm(cuda.to_device(a), cuda.to_device(b), c, 3, block_n=128, cluster=1, epilogue="tma")
    return c.copy_to_host(), G.bf16_to_float32(a).astype(np.float64) @ G.bf16_to_float32(b).astype(np.float64)


def test_tma_epilogue_reuse_on_one_sm(rng):
    """The correct twin of the broken epilogues below: one CTA walks both tiles."""
    got, want = run_tma_epilogue(G, rng)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(64))


def test_staging_written_without_proxy_fence_is_caught(tmp_path, rng):
    """Without fence.proxy.async the TMA store may read the staging words before the threads' writes."""
    fence = "                ptx.fence_proxy_async_shared_cta()\n"
    mod = broken_module(tmp_path, fence, "                pass\n")
    with pytest.raises(sim.ProxyFenceError,
                       match=r"(?s)fence_proxy_async_shared_cta.*cp_async_bulk_tensor_2d_global_shared"):
        run_tma_epilogue(mod, rng)


def test_staging_reused_before_the_store_read_it_is_caught(tmp_path, rng):
    """Waiting for all but 2 groups instead of 1 lets a thread overwrite a staging buffer that the
    TMA store issued two chunks ago may still be reading."""
    wait = "ptx.cp_async_bulk_wait_group_read(EPI_BUFS - 1 if ch > 0 else 0)"
    mod = broken_module(tmp_path, wait, "ptx.cp_async_bulk_wait_group_read(EPI_BUFS if ch > 0 else EPI_BUFS)")
    with pytest.raises(sim.UnwaitedAsyncReadError, match=r"(?s)a bulk store still reads must not be overwritten "
                       r"before cp_async_bulk_wait_group_read covers the store.*source of the TMA store.*\n  at "
                       r".*\(epilogue_tma\): staging\["):
        run_tma_epilogue(mod, rng)


def test_tma_epilogue_under_another_interleaving(rng):
    """The staging hand-over (wait_group.read, bar.sync, fence, store) right under another schedule too."""
    with sim.settings(seed=11, switch=0.5):
        got, want = run_tma_epilogue(G, rng)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(64))


def test_store_issued_before_the_warpgroup_wrote_is_caught(tmp_path, rng):
    """Without the bar.sync after the fence, thread 0 stores the box while the other 127 threads of its
    warpgroup may not have written (or fenced) their words yet."""
    sync = ("                ptx.fence_proxy_async_shared_cta()\n"
            "                ptx.bar_sync(wg, W.WARPGROUP_THREADS)\n")
    mod = broken_module(tmp_path, sync, "                ptx.fence_proxy_async_shared_cta()\n")
    with pytest.raises(sim.SharedMemoryRaceError, match=r"(?s)no barrier between them.*a cp_async_bulk_tensor_2d_"
                       r"global_shared of word .* by thread \(256, 0, 0\).*an earlier write by thread .*"
                       r"\(epilogue_tma\): staging\["):
        run_tma_epilogue(mod, rng)
