"""Issue 18, section 2, hole 3: a CTA that exits while a TMA or bulk load into its shared memory is not
waited for, or a thread that exits with cp.async copies in flight, is refused at the exit, whether or
not the copy happened to land first. Each broken kernel must raise under every seed tried, with its
corrected twin that must give numpy's answer; each message is checked for the rule, the copy statement,
the thread and the seed."""

import re

import numpy as np
import pytest
from numba import cuda

from asyncpipe import ptx, sim
from asyncpipe.host import TensorMap
from tests.sim.test_holes_bounds import init_tma_barrier

pytestmark = pytest.mark.sim

SEEDS = range(8)
W = 32                        # a warp
BOX = 32                      # TMA box, floats
ROUNDS = 4                    # shared-memory work after the copy's issue: time for it to land


def _exit_error(run, seed):
    with sim.settings(seed=seed), pytest.raises(sim.UnwaitedAsyncReadError) as err:
        run()
    msg = str(err.value)
    assert f"ASYNCPIPE_SIM_SEED={seed}" in msg, msg
    return msg


# ---------------------------------------------------------------------------------------------
# TMA and bulk loads that no thread waits for
# ---------------------------------------------------------------------------------------------
def make_unwaited_load(kind, waiters, rounds=ROUNDS):
    """Thread 0 issues a load into ``tile``; then every thread works on another array (``rounds`` times: with
    none the load is still in flight at the exit, with 4 it has landed) and exits. ``waiters``: how many
    threads wait on the load's phase (0: none, the mistake; 1: thread 0 only, enough)."""
    @cuda.jit
    def kernel(tmap, src, out):
        tile = cuda.shared.array(BOX, np.float32, alignment=128)
        work = cuda.shared.array(W, np.float32)
        bars = cuda.shared.array(1, np.uint64)
        bar = ptx.addr(bars, 0)
        t = cuda.threadIdx.x
        if t == 0:
            init_tma_barrier(bar, tmap)
        cuda.syncthreads()
        if t == 0:
            ptx.mbarrier_arrive_expect_tx(bar, BOX * 4)
            if kind == "tma":
                ptx.cp_async_bulk_tensor_1d_shared_global(ptx.addr(tile, 0), ptx.addr(tmap, 0), 0, bar)
            else:
                ptx.cp_async_bulk_shared_global(ptx.addr(tile, 0), ptx.addr(src, 0), BOX * 4, bar)
        acc = np.float32(0)
        for k in range(rounds):
            work[t] = src[t] * k
            cuda.syncthreads()
            acc += work[(t + 1) % W]
            cuda.syncthreads()
        if t < waiters:
            ptx.mbarrier_wait_parity(bar, 0)
        out[t] = acc
    return kernel


def _load_run(kind, waiters, src, out, rounds=ROUNDS):
    tmap = TensorMap.tiled(cuda.to_device(src), (BOX,))
    make_unwaited_load(kind, waiters, rounds)[1, W](tmap, src, out)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("rounds,state", [(0, "is still in flight"),
                                          (ROUNDS, "landed, but under another interleaving it would still be in flight")])
@pytest.mark.parametrize("kind,what,call", [
    ("tma", "TMA load", "ptx.cp_async_bulk_tensor_1d_shared_global(ptx.addr(tile, 0), ptx.addr(tmap, 0), 0, bar)"),
    ("bulk", "bulk load", "ptx.cp_async_bulk_shared_global(ptx.addr(tile, 0), ptx.addr(src, 0), BOX * 4, bar)"),
])
def test_cta_exit_with_an_unwaited_load_is_refused(seed, rounds, state, kind, what, call):
    """Landed or not when the CTA exits (which depends on the interleaving), the load is refused."""
    src = np.arange(W, dtype=np.float32)
    msg = _exit_error(lambda: _load_run(kind, 0, src, np.zeros(W, np.float32), rounds), seed)
    assert msg.startswith("CTA exit: a CTA must not exit before one of its threads has waited for the mbarrier phase "
                          "that each TMA or bulk load into its shared memory completes in (until then the copy may "
                          "still write it) [PTX ISA, cp.async.bulk; mbarrier], got block (0, 0, 0) exits and no "
                          "thread of it waited for phase 0 (parity 0) of the mbarrier at shared 0x"), msg
    assert (f"which the {what} issued by thread (0, 0, 0) of block (0, 0, 0) (warp 0, lane 0) at "
            f"test_holes_exit.py:") in msg and f"(kernel): {call} completes in; it " in msg, msg
    assert f"completes in; it {state}\n" in msg, msg
    assert "when the last thread of block (0, 0, 0) exits" in msg, msg


@pytest.mark.parametrize("seed", SEEDS[:3])
@pytest.mark.parametrize("kind", ["tma", "bulk"])
@pytest.mark.parametrize("waiters", [1, W])
def test_cta_exit_after_a_wait_on_the_load_passes(seed, kind, waiters, rng):
    """One thread's wait is enough: the load's phase is then ordered before that thread's exit."""
    src = rng.standard_normal(W).astype(np.float32)
    out = np.full(W, np.nan, np.float32)
    with sim.settings(seed=seed):
        _load_run(kind, waiters, src, out)
    t = np.arange(W)
    expect = sum(src.astype(np.float64)[(t + 1) % W] * k for k in range(ROUNDS))
    np.testing.assert_allclose(out, expect, rtol=1e-5)


def test_unwaited_load_is_not_an_error_with_the_async_check_off():
    src = np.arange(W, dtype=np.float32)
    out = np.zeros(W, np.float32)
    with sim.settings(checks="all,-async"):
        _load_run("tma", 0, src, out)
    t = np.arange(W)
    np.testing.assert_array_equal(out, sum(src[(t + 1) % W] * k for k in range(ROUNDS)))


# ---------------------------------------------------------------------------------------------
# cp.async copies still in flight when their thread exits
# ---------------------------------------------------------------------------------------------
def make_cp_async_exit(how):
    @cuda.jit
    def kernel(src, out):
        tile = cuda.shared.array((2, 4 * W), np.float32)
        t = cuda.threadIdx.x
        ptx.cp_async_cg_shared_global_16(ptx.addr(tile, (0, 4 * t)), ptx.addr(src, 4 * t))
        ptx.cp_async_commit_group()
        ptx.cp_async_wait_group(0)
        cuda.syncthreads()
        out[t] = tile[0, (4 * t + 4) % (4 * W)]
        ptx.cp_async_cg_shared_global_16(ptx.addr(tile, (1, 4 * t)), ptx.addr(src, 4 * W + 4 * t))  # a prefetch
        if how != "uncommitted":
            ptx.cp_async_commit_group()
        if how == "wait_one":
            ptx.cp_async_wait_group(1)
        elif how == "wait_all":
            ptx.cp_async_wait_all()
    return kernel


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("how,state", [
    ("uncommitted", r"never committed \(cp_async_commit_group\) and so never waited for"),
    ("committed", r"in cp.async group 1; the last cp_async_wait_group\(0\) at test_holes_exit.py:\d+ \(kernel\): "
                  r"ptx.cp_async_wait_group\(0\) waited for group 0 of the 1 committed then, leaving the newest 0 "
                  r"in flight"),
    ("wait_one", r"in cp.async group 1; the last cp_async_wait_group\(1\) at test_holes_exit.py:\d+ \(kernel\): "
                 r"ptx.cp_async_wait_group\(1\) waited for group 0 of the 2 committed then, leaving the newest 1 "
                 r"in flight"),
])
def test_thread_exit_with_cp_async_in_flight_is_refused(seed, how, state):
    src = np.arange(8 * W, dtype=np.float32)
    msg = _exit_error(lambda: make_cp_async_exit(how)[1, W](src, np.zeros(W, np.float32)), seed)
    assert msg.startswith("thread exit: a thread must wait for its cp.async copies (cp_async_wait_all, or "
                          "cp_async_wait_group(0) after its last commit) before it exits: no other thread can wait "
                          "for them, and they still write shared memory [PTX ISA, cp.async; the chapter's multi-stage "
                          "pipeline], got 1 copy in flight, the first (cp_async_cg_shared_global_16) issued at "
                          "test_holes_exit.py:"), msg
    assert "(kernel): ptx.cp_async_cg_shared_global_16(ptx.addr(tile, (1, 4 * t)), ptx.addr(src, 4 * W + 4 * t)), " \
        in msg, msg
    assert re.search(state + r"\n", msg), msg
    assert re.search(r"\n  thread \(\d+, 0, 0\) of block \(0, 0, 0\) \(warp 0, lane \d+\) exits\n", msg), msg


@pytest.mark.parametrize("seed", SEEDS[:3])
def test_thread_exit_after_wait_all_passes(seed, rng):
    src = rng.standard_normal(8 * W).astype(np.float32)
    out = np.full(W, np.nan, np.float32)
    with sim.settings(seed=seed):
        make_cp_async_exit("wait_all")[1, W](src, out)
    np.testing.assert_array_equal(out, src[(4 * np.arange(W) + 4) % (4 * W)])
