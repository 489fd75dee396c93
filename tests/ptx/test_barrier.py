"""Named barriers: SASS offline, then two warpgroups that sync at their own ids and a producer/consumer
hand-over through bar.arrive on the GPU (and on the simulator, which also refuses bad ids and counts)."""

import numpy as np
import pytest
from numba import cuda
from numba.cuda import types

from asyncpipe import ptx
from tests.conftest import SIMULATING
from tests.sass import assert_sass

u32 = types.uint32[::1]
i32 = types.int32[::1]

WARPGROUP = 128
THREADS = 2 * WARPGROUP
BLOCKS = 2
ROUNDS = 3


def sass_bar_sync(ids, out):
    out[cuda.threadIdx.x] = 1
    ptx.bar_sync(ids[0], WARPGROUP)
    out[cuda.threadIdx.x + 1] = 2


def sass_bar_arrive(ids, out):
    out[cuda.threadIdx.x] = 1
    ptx.bar_arrive(ids[0], WARPGROUP)


@pytest.mark.sass
@pytest.mark.parametrize("name, kernel", [("bar_sync", sass_bar_sync), ("bar_arrive", sass_bar_arrive)])
def test_barrier_sass(name, kernel):
    assert_sass(kernel, (u32, u32), has=ptx.REGISTRY[name].sass)


def warpgroups_kernel(out):
    """Each warpgroup passes values around its own 128 threads, ROUNDS times, synchronised only by its
    own barrier (id 1 + warpgroup): thread t reads what thread t + 1 of its warpgroup wrote."""
    buf = cuda.shared.array(THREADS, np.int32)
    t = cuda.threadIdx.x
    wg = t // WARPGROUP
    base = wg * WARPGROUP
    v = t + 1000 * cuda.blockIdx.x
    for r in range(ROUNDS):
        buf[t] = v
        ptx.bar_sync(1 + wg, WARPGROUP)          # every write of this round is visible ...
        v = buf[base + (t - base + 1) % WARPGROUP]
        ptx.bar_sync(1 + wg, WARPGROUP)          # ... and every read is done before the next write
    out[cuda.blockIdx.x * THREADS + t] = v


def handover_kernel(out):
    """Warpgroup 0 writes and bar.arrive-s (it does not wait); warpgroup 1 bar.sync-s and reads."""
    buf = cuda.shared.array(WARPGROUP, np.int32)
    t = cuda.threadIdx.x
    if t < WARPGROUP:
        buf[t] = 7 * t + cuda.blockIdx.x
        ptx.bar_arrive(3, THREADS)
    else:
        ptx.bar_sync(3, THREADS)
        out[cuda.blockIdx.x * WARPGROUP + t - WARPGROUP] = buf[WARPGROUP - 1 - (t - WARPGROUP)]


@pytest.mark.sass
def test_gpu_kernels_compile():
    assert_sass(warpgroups_kernel, (i32,), has=("BAR.SYNC",))
    assert_sass(handover_kernel, (i32,), has=("BAR.SYNC", "BAR.ARV"))


@pytest.mark.gpu
@pytest.mark.hopper
def test_warpgroups_sync_at_their_own_ids_gpu():
    out = cuda.to_device(np.full(BLOCKS * THREADS, -1, np.int32))
    cuda.jit(warpgroups_kernel)[BLOCKS, THREADS](out)
    t = np.arange(THREADS)
    base = t // WARPGROUP * WARPGROUP
    want = np.concatenate([base + (t - base + ROUNDS) % WARPGROUP + 1000 * b for b in range(BLOCKS)])
    np.testing.assert_array_equal(out.copy_to_host(), want)


@pytest.mark.gpu
@pytest.mark.hopper
def test_arrive_hands_over_to_sync_gpu():
    out = cuda.to_device(np.full(BLOCKS * WARPGROUP, -1, np.int32))
    cuda.jit(handover_kernel)[BLOCKS, THREADS](out)
    t = np.arange(WARPGROUP)
    want = np.concatenate([7 * (WARPGROUP - 1 - t) + b for b in range(BLOCKS)])
    np.testing.assert_array_equal(out.copy_to_host(), want)


# ---------------------------------------------------------------------------------------------
# The simulator's checks (marked gpu so that the simulator run keeps them; they need its errors)
# ---------------------------------------------------------------------------------------------
def bad_barrier_kernel(out, a, b):
    ptx.bar_sync(a, b)
    out[cuda.threadIdx.x] = 1


def half_arrives_kernel(out):
    """Only warpgroup 0 arrives at a barrier that counts both warpgroups: it never completes."""
    if cuda.threadIdx.x < WARPGROUP:
        ptx.bar_sync(1, THREADS)
    out[cuda.threadIdx.x] = 1


def unsynced_kernel(out):
    """bar.arrive does not acquire: warpgroup 0 reads what warpgroup 1 wrote without waiting."""
    buf = cuda.shared.array(THREADS, np.int32)
    t = cuda.threadIdx.x
    buf[t] = t
    if t < WARPGROUP:
        ptx.bar_arrive(2, THREADS)
        out[t] = buf[t + WARPGROUP]
    else:
        ptx.bar_sync(2, THREADS)


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.skipif(not SIMULATING, reason="the simulator's checks (a GPU would hang or misbehave)")
@pytest.mark.parametrize("a, b, message", [
    (0, 128, r"bar_sync: the barrier id must be in 1\.\.15 \(id 0 is cuda\.syncthreads'\) "
             r"\[PTX ISA, bar\.sync / bar\.arrive\], got 0"),
    (16, 128, r"the barrier id must be in 1\.\.15.*got 16"),
    (1, 96 + 1, r"the thread count must be a positive multiple of 32, at most the block's 256 threads.*got 97"),
    (1, 512, r"the thread count must be a positive multiple of 32.*got 512"),
])
def test_simulator_refuses_bad_operands_gpu(a, b, message):
    from asyncpipe import sim

    with pytest.raises(sim.SimUsageError, match=message):
        cuda.jit(bad_barrier_kernel)[1, THREADS](cuda.to_device(np.zeros(THREADS, np.int32)), a, b)


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.skipif(not SIMULATING, reason="the simulator's checks (a GPU would hang or misbehave)")
def test_simulator_catches_too_few_arrivals_and_arrive_without_acquire_gpu():
    from asyncpipe import sim

    with pytest.raises(sim.DeadlockError, match=r"bar\.sync 1, 256: 128 of 256 threads have arrived"):
        cuda.jit(half_arrives_kernel)[1, THREADS](cuda.to_device(np.zeros(THREADS, np.int32)))
    with pytest.raises(sim.SharedMemoryRaceError):
        cuda.jit(unsynced_kernel)[1, THREADS](cuda.to_device(np.zeros(THREADS, np.int32)))
