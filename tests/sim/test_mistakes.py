"""Every pipeline mistake the simulator catches: a deliberately broken kernel that must raise its
error, and its corrected twin that must run and give numpy's answer. Each error must name the
kernel line (and, where there is one, the barrier, group or thread)."""

import numpy as np
import pytest
from numba import cuda

from asyncpipe import ptx, sim
from asyncpipe.host import TensorMap, launch

pytestmark = pytest.mark.sim

T = 64                  # threads per block in most kernels here
STAGES = 3
TILE = T * 4            # floats per stage: one 16-byte cp.async per thread


# ---------------------------------------------------------------------------------------------
# 1. cp.async: reading a copy that was never waited for
# ---------------------------------------------------------------------------------------------
def make_stage_in(wait):
    @cuda.jit
    def kernel(src, dst):
        tile = cuda.shared.array(TILE, np.float32)
        t = cuda.threadIdx.x
        ptx.cp_async_cg_shared_global_16(ptx.addr(tile, 4 * t), ptx.addr(src, 4 * t))
        ptx.cp_async_commit_group()
        if wait:
            ptx.cp_async_wait_group(0)
        cuda.syncthreads()
        dst[t] = tile[(4 * t + 4) % TILE]          # a neighbour's chunk
    return kernel


def test_unwaited_cp_async_read_is_caught():
    src = np.arange(TILE, dtype=np.float32)
    with pytest.raises(sim.UnwaitedAsyncReadError, match=r"test_mistakes.py:\d+ \(kernel\): dst\[t\] = tile"):
        make_stage_in(False)[1, T](src, np.zeros(T, np.float32))


def test_waited_cp_async_read_passes():
    src = np.arange(TILE, dtype=np.float32)
    dst = np.zeros(T, np.float32)
    make_stage_in(True)[1, T](src, dst)
    np.testing.assert_array_equal(dst, src[(4 * np.arange(T) + 4) % TILE])


# ---------------------------------------------------------------------------------------------
# 2. The chapter's pipeline: wait_group(STAGES - 2) and the empty commit_group
# ---------------------------------------------------------------------------------------------
def make_pipeline(wait_n, commit_always):
    @cuda.jit
    def kernel(src, dst, num_tiles):
        buf = cuda.shared.array((STAGES, TILE), np.float32)
        t = cuda.threadIdx.x
        for s in range(STAGES - 1):                               # prologue
            if s < num_tiles:
                ptx.cp_async_cg_shared_global_16(ptx.addr(buf, (s, 4 * t)), ptx.addr(src, s * TILE + 4 * t))
            ptx.cp_async_commit_group()
        acc = np.float32(0)
        for kt in range(num_tiles):
            ptx.cp_async_wait_group(wait_n)
            cuda.syncthreads()
            nxt = kt + STAGES - 1
            if nxt < num_tiles:
                ptx.cp_async_cg_shared_global_16(ptx.addr(buf, (nxt % STAGES, 4 * t)),
                                                 ptx.addr(src, nxt * TILE + 4 * t))
                ptx.cp_async_commit_group()
            elif commit_always:
                ptx.cp_async_commit_group()                       # the chapter's empty group
            acc += buf[kt % STAGES, (4 * t + 4) % TILE]
        dst[t] = acc
        ptx.cp_async_wait_all()
    return kernel


def pipeline_expect(src, tiles):
    idx = (4 * np.arange(T) + 4) % TILE
    return src.reshape(tiles, TILE)[:, idx].sum(axis=0)


@pytest.mark.parametrize("wait_n,commit_always", [(STAGES - 2, False), (STAGES - 1, True)])
def test_wait_group_not_covering_the_tile_is_caught(wait_n, commit_always):
    tiles = 5
    src = np.arange(tiles * TILE, dtype=np.float32)
    with pytest.raises(sim.WaitGroupError, match=rf"cp_async_wait_group\({wait_n}\)") as err:
        make_pipeline(wait_n, commit_always)[1, T](src, np.zeros(T, np.float32), np.int32(tiles))
    assert "acc += buf" in str(err.value) and "cp.async group" in str(err.value)


def test_chapter_pipeline_passes():
    tiles = 5
    src = np.random.default_rng(1).standard_normal(tiles * TILE).astype(np.float32)
    dst = np.zeros(T, np.float32)
    make_pipeline(STAGES - 2, True)[1, T](src, dst, np.int32(tiles))
    np.testing.assert_allclose(dst, pipeline_expect(src, tiles), rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# 3. mbarrier parity: a wait on the wrong parity returns at once, or waits for a phase that never comes
# ---------------------------------------------------------------------------------------------
BOX = 32


def make_tma_sum(parity, arrivals):
    @cuda.jit
    def kernel(tmap, out):
        tile = cuda.shared.array(BOX, np.float32, alignment=128)
        bars = cuda.shared.array(1, np.uint64)
        bar = ptx.addr(bars, 0)
        t = cuda.threadIdx.x
        if t == 0:
            ptx.mbarrier_init(bar, arrivals)
            ptx.fence_proxy_async_shared_cta()
            ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tmap, 0))
            ptx.cp_async_bulk_tensor_1d_shared_global(ptx.addr(tile, 0), ptx.addr(tmap, 0), 0, bar)
            ptx.mbarrier_arrive_expect_tx(bar, BOX * 4)
        cuda.syncthreads()
        ptx.mbarrier_wait_parity(bar, parity)
        out[t] = tile[t]
    return kernel


def tma_input():
    a = np.arange(BOX, dtype=np.float32) + 1
    d = cuda.to_device(a)
    return a, d, TensorMap.tiled(d, (BOX,))


@pytest.mark.parametrize("seed", range(4))
def test_wrong_parity_is_caught(seed):
    """Waiting on parity 1 of a fresh barrier returns at once: the threads read the tile before the
    copy lands (or without acquiring it); if the copy lands first, phase 0 completes and the wait is for
    phase 1, which never comes. Which one happens depends on the interleaving; each is reported."""
    a, d, tmap = tma_input()
    with sim.settings(seed=seed), pytest.raises((sim.UnwaitedAsyncReadError, sim.DeadlockError)) as err:
        make_tma_sum(1, 1)[1, BOX](tmap, np.zeros(BOX, np.float32))
    msg = str(err.value)
    assert "wrong parity" in msg or "phase 1 (parity 1)" in msg, msg


def test_phase_that_never_completes_is_a_deadlock():
    a, d, tmap = tma_input()
    with pytest.raises(sim.DeadlockError) as err:
        make_tma_sum(0, 2)[1, BOX](tmap, np.zeros(BOX, np.float32))
    msg = str(err.value)
    assert "phase 0 (parity 0)" in msg and "1 of 2 arrivals pending" in msg
    assert "mbarrier_wait_parity(bar, parity)" in msg and "threads 0..31" in msg


def test_right_parity_passes():
    a, d, tmap = tma_input()
    out = np.zeros(BOX, np.float32)
    make_tma_sum(0, 1)[1, BOX](tmap, out)
    np.testing.assert_array_equal(out, a)


# ---------------------------------------------------------------------------------------------
# 4. tx-count: expect_tx more, or fewer, bytes than the copies deliver
# ---------------------------------------------------------------------------------------------
def make_bulk(expect_bytes, copies):
    @cuda.jit
    def kernel(src, out):
        tile = cuda.shared.array(64, np.int32, alignment=128)
        bars = cuda.shared.array(1, np.uint64)
        bar = ptx.addr(bars, 0)
        t = cuda.threadIdx.x
        if t == 0:
            ptx.mbarrier_init(bar, 1)
            ptx.fence_mbarrier_init_release_cluster()
        cuda.syncthreads()
        if t == 0:
            ptx.mbarrier_arrive_expect_tx(bar, expect_bytes)
            for c in range(copies):
                ptx.cp_async_bulk_shared_global(ptx.addr(tile, 16 * c), ptx.addr(src, 16 * c), 64, bar)
        ptx.mbarrier_wait_parity(bar, 0)
        out[t] = tile[t % 16]                   # the first copy's words
    return kernel


@pytest.mark.parametrize("expect_bytes,copies,rule", [
    (256, 2, "waits for bytes that no copy will bring"),
    (64, 2, "announced fewer bytes than the copies deliver"),
])
def test_tx_count_mismatch_is_caught(expect_bytes, copies, rule):
    src = np.arange(64, dtype=np.int32)
    with pytest.raises(sim.TxCountError, match=rule):
        make_bulk(expect_bytes, copies)[1, 32](src, np.zeros(32, np.int32))


def test_tx_count_that_matches_passes():
    src = np.arange(64, dtype=np.int32)
    out = np.zeros(32, np.int32)
    make_bulk(128, 2)[1, 32](src, out)
    np.testing.assert_array_equal(out, src[np.arange(32) % 16])


# ---------------------------------------------------------------------------------------------
# 5. Proxy fences: threads' writes read by a TMA store, and overwritten by a TMA load
# ---------------------------------------------------------------------------------------------
def make_store(fence):
    @cuda.jit
    def kernel(tmap):
        tile = cuda.shared.array(BOX, np.float32, alignment=128)
        t = cuda.threadIdx.x
        tile[t] = np.float32(t) * 2
        if fence:
            ptx.fence_proxy_async_shared_cta()
        cuda.syncthreads()
        if t == 0:
            ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tmap, 0))
            ptx.cp_async_bulk_tensor_1d_global_shared(ptx.addr(tmap, 0), 0, ptx.addr(tile, 0))
            ptx.cp_async_bulk_commit_group()
            ptx.cp_async_bulk_wait_group_read(0)
    return kernel


def test_tma_store_without_proxy_fence_is_caught():
    a, d, tmap = tma_input()
    with pytest.raises(sim.ProxyFenceError, match=r"fence_proxy_async_shared_cta[\s\S]*tile\[t\] = np.float32"):
        make_store(False)[1, BOX](tmap)


def test_tma_store_with_proxy_fence_passes():
    a, d, tmap = tma_input()
    make_store(True)[1, BOX](tmap)
    np.testing.assert_array_equal(d.copy_to_host(), np.arange(BOX, dtype=np.float32) * 2)


def make_reload(fence):
    """Threads poison the tile, then TMA loads over it: a write-after-write across proxies."""
    @cuda.jit
    def kernel(tmap, out):
        tile = cuda.shared.array(BOX, np.float32, alignment=128)
        bars = cuda.shared.array(1, np.uint64)
        bar = ptx.addr(bars, 0)
        t = cuda.threadIdx.x
        tile[t] = np.float32(-1)
        if fence:
            ptx.fence_proxy_async_shared_cta()
        if t == 0:
            ptx.mbarrier_init(bar, 1)
            ptx.fence_mbarrier_init_release_cluster()
        cuda.syncthreads()
        if t == 0:
            ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tmap, 0))
            ptx.mbarrier_arrive_expect_tx(bar, BOX * 4)
            ptx.cp_async_bulk_tensor_1d_shared_global(ptx.addr(tile, 0), ptx.addr(tmap, 0), 0, bar)
        ptx.mbarrier_wait_parity(bar, 0)
        out[t] = tile[t]
    return kernel


def test_tma_load_over_unfenced_writes_is_caught():
    a, d, tmap = tma_input()
    with pytest.raises(sim.ProxyFenceError, match="write into"):
        make_reload(False)[1, BOX](tmap, np.zeros(BOX, np.float32))


def test_tma_load_over_fenced_writes_passes():
    a, d, tmap = tma_input()
    out = np.zeros(BOX, np.float32)
    make_reload(True)[1, BOX](tmap, out)
    np.testing.assert_array_equal(out, a)


# ---------------------------------------------------------------------------------------------
# 6. mbarrier init: use before init, init not visible, init not fenced for TMA, re-init in use
# ---------------------------------------------------------------------------------------------
def make_init(mistake):
    @cuda.jit
    def kernel(src, out):
        tile = cuda.shared.array(16, np.int32, alignment=128)
        bars = cuda.shared.array(1, np.uint64)
        bar = ptx.addr(bars, 0)
        t = cuda.threadIdx.x
        if t == 0 and mistake != "no init":
            ptx.mbarrier_init(bar, cuda.blockDim.x)
            if mistake != "no fence":
                ptx.fence_mbarrier_init_release_cluster()
        if mistake != "no syncthreads":
            cuda.syncthreads()
        if t == 0:
            ptx.mbarrier_expect_tx(bar, 64)
            ptx.cp_async_bulk_shared_global(ptx.addr(tile, 0), ptx.addr(src, 0), 64, bar)
        ptx.mbarrier_arrive(bar)
        ptx.mbarrier_wait_parity(bar, 0)
        out[t] = tile[t]
        if mistake == "reinit" and t == 0:
            ptx.mbarrier_init(bar, 1)
        cuda.syncthreads()
        if t == 0 and mistake == "ok":
            ptx.mbarrier_inval(bar)
            ptx.mbarrier_init(bar, 1)                # reuse after inval is fine
            ptx.mbarrier_inval(bar)
    return kernel


@pytest.mark.parametrize("mistake,rule", [
    ("no init", "must be initialised"),
    ("no syncthreads", "init must be visible before another thread uses it|must be initialised"),
    ("no fence", "made visible to the async proxy"),
    ("reinit", "must not be initialised again"),
])
def test_mbarrier_init_mistakes_are_caught(mistake, rule):
    src = np.arange(16, dtype=np.int32)
    with pytest.raises(sim.MbarrierInitError, match=rule):
        make_init(mistake)[1, 16](src, np.zeros(16, np.int32))


def test_mbarrier_init_done_right_passes():
    src = np.arange(16, dtype=np.int32)
    out = np.zeros(16, np.int32)
    make_init("ok")[1, 16](src, out)
    np.testing.assert_array_equal(out, src)


# ---------------------------------------------------------------------------------------------
# 7. DSMEM: a CTA exits while its peer still reads its shared memory (the chapter's pair sum)
# ---------------------------------------------------------------------------------------------
def make_pair(second_barrier):
    @cuda.jit
    def kernel(inp, out):
        partial = cuda.shared.array(1, np.float32)
        t = cuda.threadIdx.x
        if t == 0:
            partial[0] = inp[cuda.blockIdx.x]
        ptx.barrier_cluster_arrive()
        ptx.barrier_cluster_wait()
        if ptx.cluster_ctarank() == 0 and t == 0:
            out[cuda.blockIdx.x // 2] = partial[0] + ptx.ld_shared_cluster_f32(
                ptx.mapa_shared_cluster(ptx.addr(partial, 0), 1))
        if second_barrier:
            ptx.barrier_cluster_arrive()
            ptx.barrier_cluster_wait()
    return kernel


def test_cta_exit_before_peer_read_is_caught():
    inp = np.arange(4, dtype=np.float32)
    with pytest.raises(sim.DsmemLifetimeError, match=r"ld_shared_cluster_f32"):
        launch(make_pair(False), 4, 32, inp, np.zeros(2, np.float32), cluster=2)


def test_pair_sum_with_second_cluster_barrier_passes():
    inp = np.arange(4, dtype=np.float32)
    out = np.zeros(2, np.float32)
    launch(make_pair(True), 4, 32, inp, out, cluster=2)
    np.testing.assert_array_equal(out, [1, 5])


# ---------------------------------------------------------------------------------------------
# 8. Shared-memory data race: a tree reduction that skips its __syncthreads
# ---------------------------------------------------------------------------------------------
def make_reduce(sync):
    @cuda.jit
    def kernel(inp, out):
        s_data = cuda.shared.array(T, np.float32)
        t = cuda.threadIdx.x
        s_data[t] = inp[t]
        cuda.syncthreads()
        s = T // 2
        while s > 0:
            if t < s:
                s_data[t] += s_data[t + s]
            if sync:
                cuda.syncthreads()
            s //= 2
        if t == 0:
            out[0] = s_data[0]
    return kernel


def test_data_race_is_caught():
    inp = np.arange(T, dtype=np.float32)
    with pytest.raises(sim.SharedMemoryRaceError, match=r"s_data\[t\] \+= s_data\[t \+ s\]"):
        make_reduce(False)[1, T](inp, np.zeros(1, np.float32))


def test_reduction_with_barriers_passes():
    inp = np.arange(T, dtype=np.float32)
    out = np.zeros(1, np.float32)
    make_reduce(True)[1, T](inp, out)
    assert out[0] == inp.sum()


# ---------------------------------------------------------------------------------------------
# Checks can be switched off (the broken kernel then runs, as on a GPU, with poisoned data)
# ---------------------------------------------------------------------------------------------
def test_checks_off_lets_the_race_run():
    inp = np.arange(T, dtype=np.float32)
    out = np.zeros(1, np.float32)
    with sim.settings(checks="none"):
        make_reduce(False)[1, T](inp, out)


def test_unwaited_read_sees_poison_with_checks_off():
    src = np.arange(TILE, dtype=np.float32)
    dst = np.zeros(T, np.float32)
    with sim.settings(checks="none"):
        make_stage_in(False)[1, T](src, dst)
    assert np.isnan(dst).all()
