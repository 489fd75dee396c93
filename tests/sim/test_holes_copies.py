"""Issue 18, section 2, group A: the simulator's holes around copies, mbarriers and exit. Each mistake
is a broken kernel that must raise under every seed tried, with its corrected twin that must give
numpy's answer; each message is checked for the rule, the statement, the thread, the kernel line and
the seed."""

import re

import numpy as np
import pytest
from numba import cuda

from asyncpipe import ptx, sim

pytestmark = pytest.mark.sim

SEEDS = range(8)
W = 32                        # a warp


# ---------------------------------------------------------------------------------------------
# 2. An mbarrier in an array of 4-byte elements, or misaligned: refused at mbarrier_init
# ---------------------------------------------------------------------------------------------
def make_mbarrier_counter(dtype, index):
    @cuda.jit
    def kernel(src, out):
        bars = cuda.shared.array(4, dtype)
        t = cuda.threadIdx.x
        bar = ptx.addr(bars, index)
        if t == 0:
            ptx.mbarrier_init(bar, W)
        cuda.syncthreads()
        ptx.mbarrier_arrive(bar)
        ptx.mbarrier_wait_parity(bar, 0)
        out[t] = src[t] + 1
    return kernel


@pytest.mark.parametrize("seed", SEEDS)
def test_mbarrier_in_int32_array_is_refused_at_init(seed):
    src = np.arange(W, dtype=np.float32)
    with sim.settings(seed=seed), pytest.raises(sim.MbarrierInitError) as err:
        make_mbarrier_counter(np.int32, 0)[1, W](src, np.zeros(W, np.float32))
    msg = str(err.value)
    assert msg.startswith("mbarrier_init: an mbarrier object is 8 bytes and 8-byte aligned: keep it in an "
                          "array of 8-byte elements (np.uint64) [PTX ISA, mbarrier object], got an element "
                          "of a int32 shared array (4 bytes) at shared offset 0x"), msg
    assert "ptx.mbarrier_init(bar, W)" in msg and "test_holes_copies.py:" in msg, msg
    assert "thread (0, 0, 0) of block (0, 0, 0) (warp 0, lane 0)" in msg, msg
    assert f"ASYNCPIPE_SIM_SEED={seed}" in msg


@pytest.mark.parametrize("seed", SEEDS)
def test_misaligned_mbarrier_is_refused_at_init_not_at_its_wait(seed):
    src = np.arange(W, dtype=np.float32)                 # element 1 of a uint32 array: shared offset 4
    with sim.settings(seed=seed), pytest.raises(sim.MbarrierInitError) as err:
        make_mbarrier_counter(np.uint32, 1)[1, W](src, np.zeros(W, np.float32))
    msg = str(err.value)
    assert "mbarrier_init: an mbarrier object is 8 bytes and 8-byte aligned" in msg, msg
    assert msg.split("\n")[0].endswith("(4 bytes) at shared offset 0x4"), msg
    assert "ptx.mbarrier_init(bar, W)" in msg and f"ASYNCPIPE_SIM_SEED={seed}" in msg, msg


@pytest.mark.parametrize("seed", SEEDS[:3])
def test_mbarrier_in_uint64_array_passes(seed, rng):
    src = rng.standard_normal(W).astype(np.float32)
    out = np.full(W, np.nan, np.float32)
    with sim.settings(seed=seed):
        make_mbarrier_counter(np.uint64, 1)[1, W](src, out)
    np.testing.assert_allclose(out, src.astype(np.float64) + 1, rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# The WaitGroupError's range of groups waited for ("groups 0..-1" when it waited for none)
# ---------------------------------------------------------------------------------------------
def make_wait_one(n):
    @cuda.jit
    def kernel(src, dst):
        tile = cuda.shared.array(4 * W, np.float32)
        t = cuda.threadIdx.x
        ptx.cp_async_cg_shared_global_16(ptx.addr(tile, 4 * t), ptx.addr(src, 4 * t))
        ptx.cp_async_commit_group()
        ptx.cp_async_wait_group(n)
        cuda.syncthreads()
        dst[t] = tile[(4 * t + 4) % (4 * W)]
    return kernel


@pytest.mark.parametrize("seed", SEEDS)
def test_wait_group_that_covered_no_group_says_so(seed):
    src = np.arange(4 * W, dtype=np.float32)
    with sim.settings(seed=seed), pytest.raises(sim.WaitGroupError) as err:
        make_wait_one(1)[1, W](src, np.zeros(W, np.float32))
    msg = str(err.value)
    assert "in cp.async group 0; the last cp_async_wait_group(1) at test_holes_copies.py:" in msg, msg
    assert "waited for no group of the 1 committed then, leaving the newest 1 in flight" in msg, msg
    assert "0..-1" not in msg and "dst[t] = tile[(4 * t + 4) % (4 * W)]" in msg, msg
    assert f"ASYNCPIPE_SIM_SEED={seed}" in msg


def test_wait_group_zero_twin_passes(rng):
    src = rng.standard_normal(4 * W).astype(np.float32)
    dst = np.full(W, np.nan, np.float32)
    make_wait_one(0)[1, W](src, dst)
    np.testing.assert_array_equal(dst, src[(4 * np.arange(W) + 4) % (4 * W)])


def make_two_groups():
    @cuda.jit
    def kernel(src, dst):
        tile = cuda.shared.array((2, 4 * W), np.float32)
        t = cuda.threadIdx.x
        for g in range(2):
            ptx.cp_async_cg_shared_global_16(ptx.addr(tile, (g, 4 * t)), ptx.addr(src, g * 4 * W + 4 * t))
            ptx.cp_async_commit_group()
        ptx.cp_async_wait_group(1)
        cuda.syncthreads()
        dst[t] = tile[1, (4 * t + 4) % (4 * W)]                 # group 1: still in flight
    return kernel


@pytest.mark.parametrize("seed", SEEDS)
def test_wait_group_that_covered_one_group_names_it(seed):
    src = np.arange(8 * W, dtype=np.float32)
    with sim.settings(seed=seed), pytest.raises(sim.WaitGroupError) as err:
        make_two_groups()[1, W](src, np.zeros(W, np.float32))
    msg = str(err.value)
    assert "in cp.async group 1; the last cp_async_wait_group(1)" in msg, msg
    assert "waited for group 0 of the 2 committed then, leaving the newest 1 in flight" in msg, msg


# ---------------------------------------------------------------------------------------------
# An expect_tx mismatch names the expect_tx statement and the bytes it announced
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("expect_bytes,copies,rule", [
    (256, 2, "waits for bytes that no copy will bring"),
    (64, 2, "announced fewer bytes than the copies deliver"),
])
def test_tx_count_mismatch_names_the_expect_tx(seed, expect_bytes, copies, rule):
    from tests.sim.test_mistakes import make_bulk
    src = np.arange(64, dtype=np.int32)
    with sim.settings(seed=seed), pytest.raises(sim.TxCountError) as err:
        make_bulk(expect_bytes, copies)[1, 32](src, np.zeros(32, np.int32))
    msg = str(err.value)
    assert rule in msg, msg
    assert re.search(rf"announced( \(in phase 0, the one before\))? by mbarrier_arrive_expect_tx\({expect_bytes} bytes\) by thread \(0, 0, 0\) of "
                     r"block \(0, 0, 0\) \(warp 0, lane 0\) at test_mistakes.py:\d+ \(kernel\): "
                     r"ptx.mbarrier_arrive_expect_tx\(bar, expect_bytes\)", msg), msg
    assert f"ASYNCPIPE_SIM_SEED={seed}" in msg
