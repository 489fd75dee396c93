"""The engine itself: clusters run together, warps, DSMEM, multicast, determinism from the seed,
deadlock reports, and the host side (launch checks, tensor maps) under the simulator."""

import numpy as np
import pytest
from numba import cuda

from asyncpipe import ptx, sim
from asyncpipe.errors import AsyncpipeError
from asyncpipe.host import TensorMap, launch

pytestmark = pytest.mark.sim


# ---------------------------------------------------------------------------------------------
# Clusters: every CTA of a cluster runs at once (a cluster barrier needs them all)
# ---------------------------------------------------------------------------------------------
@cuda.jit
def ring(out):
    """Each CTA writes its rank into shared memory; after a cluster barrier every CTA reads its
    neighbour's through DSMEM (possible only if all CTAs of the cluster are alive together)."""
    mine = cuda.shared.array(1, np.uint32)
    t = cuda.threadIdx.x
    rank = ptx.cluster_ctarank()
    n = ptx.cluster_nctarank()
    if t == 0:
        mine[0] = rank * 10
    ptx.barrier_cluster_arrive()
    ptx.barrier_cluster_wait()
    peer = rank + 1
    if peer == n:
        peer = 0
    if t == 0:
        out[cuda.blockIdx.x] = ptx.ld_shared_cluster_u32(ptx.mapa_shared_cluster(ptx.addr(mine, 0), peer))
    ptx.barrier_cluster_arrive()
    ptx.barrier_cluster_wait()


@pytest.mark.parametrize("cluster", [2, 4, 8])
def test_cluster_ctas_run_together(cluster):
    blocks = 2 * cluster
    out = np.zeros(blocks, np.uint32)
    launch(ring, blocks, 64, out, cluster=cluster)
    rank = np.arange(blocks) % cluster
    np.testing.assert_array_equal(out, ((rank + 1) % cluster) * 10)


@cuda.jit
def sregs(out):
    if cuda.threadIdx.x == 0:
        b = cuda.blockIdx.x + cuda.gridDim.x * cuda.blockIdx.y
        out[b, 0] = ptx.cluster_ctarank()
        out[b, 1] = ptx.cluster_nctarank()
        out[b, 2] = ptx.clusterid_x()
        out[b, 3] = ptx.clusterid_y()
        out[b, 4] = ptx.cluster_ctaid_x()
        out[b, 5] = ptx.cluster_ctaid_y()
        out[b, 6] = ptx.nclusterid_x()
        out[b, 7] = ptx.cluster_nctaid_y()


def test_special_registers_2d_clusters():
    out = np.zeros((8, 8), np.uint32)
    launch(sregs, (4, 2), 32, out, cluster=(2, 2))
    for by in range(2):
        for bx in range(4):
            row = out[bx + 4 * by]
            lx, ly = bx % 2, by % 2
            assert list(row) == [lx + 2 * ly, 4, bx // 2, by // 2, lx, ly, 2, 2]


def test_launch_checks_hold_in_the_simulator():
    with pytest.raises(AsyncpipeError, match="multiple of cluster"):
        launch(ring, 3, 32, np.zeros(3, np.uint32), cluster=2)
    with pytest.raises(AsyncpipeError, match="at most 8 CTAs"):
        launch(ring, 16, 32, np.zeros(16, np.uint32), cluster=16)


# ---------------------------------------------------------------------------------------------
# Warps
# ---------------------------------------------------------------------------------------------
@cuda.jit
def warp_ops(out):
    t = cuda.threadIdx.x
    lane = t % 32
    out[t, 0] = ptx.elect_sync(0xFFFFFFFF)
    v = np.float32(t)
    for k in range(5):
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, 16 >> k)
    out[t, 1] = v
    out[t, 2] = cuda.shfl_sync(0xFFFFFFFF, t, 3)
    out[t, 3] = cuda.ballot_sync(0xFFFFFFFF, lane % 2 == 0)
    out[t, 4] = cuda.shfl_xor_sync(0xFFFFFFFF, t, 1)


def test_warp_collectives():
    out = np.zeros((64, 5), np.float64)
    warp_ops[1, 64](out)
    lanes = np.arange(64) % 32
    np.testing.assert_array_equal(out[:, 0], lanes == 0)
    np.testing.assert_array_equal(out[[0, 32], 1], [sum(range(32)), sum(range(32, 64))])
    np.testing.assert_array_equal(out[:, 2], np.arange(64) // 32 * 32 + 3)
    np.testing.assert_array_equal(out[:, 3], 0x55555555)
    np.testing.assert_array_equal(out[:, 4], np.arange(64) ^ 1)


@cuda.jit
def elect_in_branch(out):
    if cuda.threadIdx.x % 2 == 0:
        out[cuda.threadIdx.x] = ptx.elect_sync(0xFFFFFFFF)


def test_warp_collective_in_divergent_branch_is_caught():
    """Half the lanes skip the elect: they exit (reported at once) or the others wait forever."""
    with pytest.raises((sim.DeadlockError, sim.SimUsageError), match=r"elect.sync|elect_sync") as err:
        elect_in_branch[1, 32](np.zeros(32, np.uint32))
    assert "lane" in str(err.value)


# ---------------------------------------------------------------------------------------------
# TMA multicast: one copy delivered to every CTA of the cluster
# ---------------------------------------------------------------------------------------------
W = 32


@cuda.jit
def multicast(tmap, out):
    tile = cuda.shared.array(W, np.float32, alignment=128)
    bars = cuda.shared.array(1, np.uint64)
    bar = ptx.addr(bars, 0)
    t = cuda.threadIdx.x
    if t == 0:
        ptx.mbarrier_init(bar, 1)
        ptx.fence_mbarrier_init_release_cluster()
    ptx.barrier_cluster_arrive_relaxed()             # every CTA's barrier is initialised ...
    ptx.barrier_cluster_wait()                       # ... before rank 0 multicasts into it
    if t == 0:
        ptx.mbarrier_arrive_expect_tx(bar, W * 4)
        if ptx.cluster_ctarank() == 0:
            ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tmap, 0))
            ptx.cp_async_bulk_tensor_1d_shared_global_multicast(ptx.addr(tile, 0), ptx.addr(tmap, 0), 0, bar,
                                                                 np.uint16((1 << ptx.cluster_nctarank()) - 1))
    ptx.mbarrier_wait_parity(bar, 0)
    out[cuda.blockIdx.x, t] = tile[t]
    ptx.barrier_cluster_arrive()
    ptx.barrier_cluster_wait()


def test_multicast_reaches_every_cta():
    a = np.arange(W, dtype=np.float32) * 3
    d = cuda.to_device(a)
    out = np.zeros((4, W), np.float32)
    launch(multicast, 4, W, TensorMap.tiled(d, (W,)), out, cluster=4)
    np.testing.assert_array_equal(out, np.tile(a, (4, 1)))


# ---------------------------------------------------------------------------------------------
# Determinism: the seed fixes the interleaving
# ---------------------------------------------------------------------------------------------
@cuda.jit
def arrival_order(order, counter):
    t = cuda.threadIdx.x
    cuda.syncthreads()
    order[t] = cuda.atomic.add(counter, 0, 1)


def run_order(seed):
    order = np.zeros(64, np.int32)
    with sim.settings(seed=seed, switch=0.9):
        arrival_order[1, 64](order, np.zeros(1, np.int32))
    return order


def test_same_seed_same_interleaving():
    assert (run_order(7) == run_order(7)).all()
    assert any((run_order(7) != run_order(s)).any() for s in (8, 9, 10))


# ---------------------------------------------------------------------------------------------
# Polling waits: try_wait on a phase that is not coming returns 0 instead of hanging
# ---------------------------------------------------------------------------------------------
@cuda.jit
def try_wait_then_arrive(out):
    bars = cuda.shared.array(1, np.uint64)
    bar = ptx.addr(bars, 0)
    t = cuda.threadIdx.x
    if t == 0:
        ptx.mbarrier_init(bar, 1)
    cuda.syncthreads()
    out[t, 0] = ptx.mbarrier_try_wait_parity(bar, 0)     # nobody has arrived: 0 (a timed-out try)
    cuda.syncthreads()
    if t == 0:
        ptx.mbarrier_arrive(bar)
    ptx.mbarrier_wait_parity(bar, 0)
    out[t, 1] = ptx.mbarrier_test_wait_parity(bar, 0)


def test_try_wait_on_an_open_phase_returns_zero():
    out = np.full((32, 2), 7, np.int32)
    try_wait_then_arrive[1, 32](out)
    assert (out[:, 0] == 0).all() and (out[:, 1] == 1).all()


@cuda.jit
def spin_forever(out):
    bars = cuda.shared.array(1, np.uint64)
    bar = ptx.addr(bars, 0)
    if cuda.threadIdx.x == 0:
        ptx.mbarrier_init(bar, 1)
    cuda.syncthreads()
    while ptx.mbarrier_try_wait_parity(bar, 0) == 0:
        pass
    out[0] = 1


def test_spinning_on_a_phase_that_never_completes_is_a_deadlock():
    with pytest.raises(sim.DeadlockError, match="phase 0 \\(parity 0\\)"):
        spin_forever[1, 32](np.zeros(1, np.int32))


@cuda.jit
def divergent_syncthreads(out):
    if cuda.threadIdx.x < 16:
        cuda.syncthreads()
        cuda.syncthreads()
    out[cuda.threadIdx.x] = 1


def test_exited_threads_do_not_release_a_block_barrier():
    out = np.zeros(32, np.int32)               # a __syncthreads not every thread reaches: undefined (issue 18)
    with pytest.raises(sim.DivergentBarrierError, match="threads 16..31 exited without reaching it"):
        divergent_syncthreads[1, 32](out)


# ---------------------------------------------------------------------------------------------
# Host side under the simulator
# ---------------------------------------------------------------------------------------------
def test_tensor_map_keeps_its_checks():
    d = cuda.to_device(np.zeros((8, 8), np.int32))
    with pytest.raises(AsyncpipeError, match="multiple of 16 bytes"):
        TensorMap.tiled(d, (2, 3))
    tmap = TensorMap.tiled(d, (4, 4))
    assert tmap.box_bytes == 64 and tmap.words().shape == (16,)


def test_simulated_device_reports_sm90():
    dev = cuda.get_current_device()
    assert dev.compute_capability == (9, 0) and dev.MULTIPROCESSOR_COUNT >= 1
    with sim.settings(sms=3):
        assert cuda.get_current_device().MULTIPROCESSOR_COUNT == 3


def test_errors_name_seed_and_thread():
    with sim.settings(seed=123), pytest.raises(sim.DeadlockError) as err:
        spin_forever[1, 32](np.zeros(1, np.int32))
    assert "ASYNCPIPE_SIM_SEED=123" in str(err.value)
