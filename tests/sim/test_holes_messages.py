"""Issue 18, section 2, messages that pointed at the symptom: a double buffer missing its trailing
__syncthreads is the race it is (not a WaitGroupError advising empty commit groups), and a wrong-parity
mbarrier wait names the wait, its parity and the barrier's phase. The error class does not depend on the
seed; each broken kernel has its corrected twin, which must give numpy's answer."""

import re

import numpy as np
import pytest
from numba import cuda

from asyncpipe import ptx, sim
from asyncpipe.host import TensorMap
from tests.sim.test_holes_bounds import init_tma_barrier

pytestmark = pytest.mark.sim

SEEDS = range(8)
T = 64                        # threads
TILE = 4 * T                  # floats per stage: one 16-byte cp.async per thread
TILES = 6
BOX = 32                      # TMA box, floats


# ---------------------------------------------------------------------------------------------
# (a) a cp.async double buffer whose loop lacks the trailing __syncthreads
# ---------------------------------------------------------------------------------------------
def make_double_buffer(trailing_sync):
    @cuda.jit
    def kernel(src, dst):
        buf = cuda.shared.array((2, TILE), np.float32)
        t = cuda.threadIdx.x
        ptx.cp_async_cg_shared_global_16(ptx.addr(buf, (0, 4 * t)), ptx.addr(src, 4 * t))
        ptx.cp_async_commit_group()
        acc = np.float32(0)
        for k in range(TILES):
            if k + 1 < TILES:                                   # refill the other stage
                ptx.cp_async_cg_shared_global_16(ptx.addr(buf, ((k + 1) % 2, 4 * t)),
                                                 ptx.addr(src, (k + 1) * TILE + 4 * t))
            ptx.cp_async_commit_group()
            ptx.cp_async_wait_group(1)
            cuda.syncthreads()
            acc += buf[k % 2, (4 * t + 4) % TILE]               # a neighbour's chunk
            if trailing_sync:
                cuda.syncthreads()                              # every read of the stage before its refill
        dst[t] = acc
    return kernel


@pytest.mark.parametrize("seed", SEEDS)
def test_double_buffer_without_trailing_sync_is_a_race(seed):
    src = np.arange(TILES * TILE, dtype=np.float32)
    with sim.settings(seed=seed), pytest.raises(sim.SharedMemoryRaceError) as err:
        make_double_buffer(False)[1, T](src, np.zeros(T, np.float32))
    msg = str(err.value)
    assert not isinstance(err.value, sim.UnwaitedAsyncReadError) and "empty one" not in msg, msg
    assert msg.startswith("shared memory: two threads access one word, one of them writing, with no barrier between "
                          "them [CUDA programming guide, memory consistency; compute-sanitizer racecheck], got a "), msg
    assert "ptx.cp_async_cg_shared_global_16(ptx.addr(buf, ((k + 1) % 2, 4 * t)), " in msg, msg      # the copy
    assert "(kernel): acc += buf[k % 2, (4 * t + 4) % TILE]" in msg, msg                             # the read
    assert re.search(r"got a (read|cp.async write) of word 0x[0-9a-f]+ of block \(0, 0, 0\)'s shared memory by "
                     r"thread \(\d+, 0, 0\)", msg), msg
    assert ("; nothing orders the read and the copy: every read of a buffer must come before a __syncthreads that "
            "precedes the copy refilling it (a double buffer's trailing barrier)\n") in msg, msg
    assert f"ASYNCPIPE_SIM_SEED={seed}" in msg and "(warp " in msg


@pytest.mark.parametrize("seed", SEEDS[:3])
def test_double_buffer_with_trailing_sync_passes(seed, rng):
    src = rng.integers(-1000, 1000, TILES * TILE).astype(np.float32)      # integers: float32 sums are exact
    dst = np.full(T, np.nan, np.float32)
    with sim.settings(seed=seed):
        make_double_buffer(True)[1, T](src, dst)
    expect = src.astype(np.float64).reshape(TILES, TILE)[:, (4 * np.arange(T) + 4) % TILE].sum(axis=0)
    np.testing.assert_array_equal(dst, expect)


# ---------------------------------------------------------------------------------------------
# (b) a wrong-parity mbarrier wait: named at the wait, whichever way the interleaving goes
# ---------------------------------------------------------------------------------------------
def make_tma_parity(parity, issue_first):
    """``issue_first``: thread 0 issues the load before the block barrier (it lands before the waits, and a
    wait on parity 1 would block for phase 1), or after it (the waits come first and return at once)."""
    @cuda.jit
    def kernel(tmap, out):
        tile = cuda.shared.array(BOX, np.float32, alignment=128)
        bars = cuda.shared.array(1, np.uint64)
        bar = ptx.addr(bars, 0)
        t = cuda.threadIdx.x
        if t == 0:
            init_tma_barrier(bar, tmap)
            if issue_first:
                ptx.mbarrier_arrive_expect_tx(bar, BOX * 4)
                ptx.cp_async_bulk_tensor_1d_shared_global(ptx.addr(tile, 0), ptx.addr(tmap, 0), 0, bar)
        cuda.syncthreads()
        if t == 0 and not issue_first:
            ptx.mbarrier_arrive_expect_tx(bar, BOX * 4)
            ptx.cp_async_bulk_tensor_1d_shared_global(ptx.addr(tile, 0), ptx.addr(tmap, 0), 0, bar)
        ptx.mbarrier_wait_parity(bar, parity)
        out[t] = tile[t] * 2
    return kernel


def _tmap(values):
    return TensorMap.tiled(cuda.to_device(values), (BOX,))


PARITY_RULE = ("mbarrier_wait_parity: a parity wait waits for the barrier's current phase when that phase has its "
               "parity, and returns at once otherwise (the phase before counts as complete): which of the two happens "
               "must not depend on timing (wrong parity?) [PTX ISA, mbarrier], got ")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("issue_first", [True, False])
def test_wrong_parity_wait_is_named_under_every_seed(seed, issue_first):
    a = np.arange(BOX, dtype=np.float32)
    with sim.settings(seed=seed), pytest.raises(sim.MbarrierParityError) as err:
        make_tma_parity(1, issue_first)[1, BOX](_tmap(a), np.zeros(BOX, np.float32))
    msg = str(err.value)
    assert msg.startswith(PARITY_RULE), msg
    at_wait = ("the wait asks for parity 1 while the mbarrier at shared 0x80 of block (0, 0, 0) is in phase 1 "
               "(parity 1), so it waits for phase 1; but phase 0 completed (the TMA load issued by thread (0, 0, 0) of "
               "block (0, 0, 0) (warp 0, lane 0) at test_holes_messages.py:")
    at_read = re.compile(r"the wait at test_holes_messages.py:\d+ \(kernel\): ptx.mbarrier_wait_parity\(bar, parity\) "
                         r"asked for parity 1 while the mbarrier at shared 0x80 of block \(0, 0, 0\) was in phase 0 "
                         r"\(parity 0\): it returned at once, taking phase -1 for the one it meant, and the thread then "
                         r"made (a read of word 0x[0-9a-f]+|an access to word 0x[0-9a-f]+), which a copy completing "
                         r"phase 0 writes\n  at test_holes_messages.py:\d+ \(kernel\): out\[t\] = tile\[t\] \* 2\n")
    if msg.startswith(PARITY_RULE + "the wait asks"):
        assert msg.startswith(PARITY_RULE + at_wait), msg
        assert "with nothing ordering that before this thread (no wait of its own on it, nor a barrier after one): " \
               "had the wait come earlier, in phase 0, it would have returned at once\n  at test_holes_messages.py:" \
               in msg and "(kernel): ptx.mbarrier_wait_parity(bar, parity)\n" in msg, msg
    else:
        assert at_read.search(msg), msg
    assert re.search(r"\n  thread \(\d+, 0, 0\) of block \(0, 0, 0\) \(warp \d, lane \d+\)\n", msg), msg
    assert f"ASYNCPIPE_SIM_SEED={seed}" in msg


@pytest.mark.parametrize("seed", SEEDS[:3])
@pytest.mark.parametrize("issue_first", [True, False])
def test_right_parity_wait_passes(seed, issue_first, rng):
    a = rng.standard_normal(BOX).astype(np.float32)
    out = np.full(BOX, np.nan, np.float32)
    with sim.settings(seed=seed):
        make_tma_parity(0, issue_first)[1, BOX](_tmap(a), out)
    np.testing.assert_array_equal(out, (a.astype(np.float64) * 2).astype(np.float32))
