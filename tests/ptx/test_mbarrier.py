"""mbarrier: SASS offline, then phases, parity, tx-count and re-initialisation on the GPU."""

import re

import numpy as np
import pytest
from numba import cuda
from numba.cuda import types

from asyncpipe import ptx
from tests.sass import assert_sass

u32 = types.uint32[::1]
u64 = types.uint64[::1]
f32 = types.float32[::1]
i32_2d = types.int32[:, ::1]
i32_3d = types.int32[:, :, ::1]

THREADS = 128        # one block of four warps in every GPU kernel
PHASES = 5           # phases 0..4: parities 0, 1, 0, 1, 0
TX_PHASES = 3
TX_BYTES = 16        # each thread's cp.async copies 16 bytes (4 float32) per phase
TX_WORDS = THREADS * 4
POISON = -1
# Where completion rests on more than plain arrivals (tx-count, cluster addresses), the kernels wait with
# at most TRIES try_waits and record whether the phase completed: a wrong guess fails, never hangs.
TRIES = 1 << 14


# ---------------------------------------------------------------------------------------------
# SASS kernels: one primitive each. ``args[0]`` supplies run-time operands so nothing folds away.
# ---------------------------------------------------------------------------------------------
def sass_init(args, states):
    bars = cuda.shared.array(1, np.uint64)
    if cuda.threadIdx.x == 0:
        ptx.mbarrier_init(ptx.addr(bars, 0), args[0])
    cuda.syncthreads()


def sass_arrive(args, states):
    bars = cuda.shared.array(1, np.uint64)
    states[cuda.threadIdx.x] = ptx.mbarrier_arrive(ptx.addr(bars, 0))


def sass_arrive_expect_tx(args, states):
    bars = cuda.shared.array(1, np.uint64)
    states[cuda.threadIdx.x] = ptx.mbarrier_arrive_expect_tx(ptx.addr(bars, 0), args[0])


def sass_expect_tx(args, states):
    bars = cuda.shared.array(1, np.uint64)
    ptx.mbarrier_expect_tx(ptx.addr(bars, 0), args[0])


def sass_complete_tx(args, states):
    bars = cuda.shared.array(1, np.uint64)
    ptx.mbarrier_complete_tx(ptx.addr(bars, 0), args[0])


def sass_try_wait_parity(args, states):
    bars = cuda.shared.array(1, np.uint64)
    args[cuda.threadIdx.x] = ptx.mbarrier_try_wait_parity(ptx.addr(bars, 0), args[0])


def sass_test_wait_parity(args, states):
    bars = cuda.shared.array(1, np.uint64)
    args[cuda.threadIdx.x] = ptx.mbarrier_test_wait_parity(ptx.addr(bars, 0), args[0])


def sass_wait_parity(args, states):
    bars = cuda.shared.array(1, np.uint64)
    ptx.mbarrier_wait_parity(ptx.addr(bars, 0), args[0])
    args[cuda.threadIdx.x] = 1


def sass_inval(args, states):
    bars = cuda.shared.array(1, np.uint64)
    if cuda.threadIdx.x == 0:
        ptx.mbarrier_inval(ptx.addr(bars, 0))


def sass_arrive_shared_cluster(args, states):
    ptx.mbarrier_arrive_shared_cluster(args[cuda.threadIdx.x])


def sass_arrive_release_cluster_shared_cluster(args, states):
    ptx.mbarrier_arrive_release_cluster_shared_cluster(args[cuda.threadIdx.x])


SASS = {
    "mbarrier_init": sass_init,
    "mbarrier_arrive": sass_arrive,
    "mbarrier_arrive_expect_tx": sass_arrive_expect_tx,
    "mbarrier_expect_tx": sass_expect_tx,
    "mbarrier_complete_tx": sass_complete_tx,
    "mbarrier_try_wait_parity": sass_try_wait_parity,
    "mbarrier_test_wait_parity": sass_test_wait_parity,
    "mbarrier_wait_parity": sass_wait_parity,
    "mbarrier_inval": sass_inval,
    "mbarrier_arrive_shared_cluster": sass_arrive_shared_cluster,
    "mbarrier_arrive_release_cluster_shared_cluster": sass_arrive_release_cluster_shared_cluster,
}


@pytest.mark.sass
@pytest.mark.parametrize("name", sorted(SASS))
def test_sass(name):
    ops = ptx.REGISTRY[name].sass
    cubin = assert_sass(SASS[name], (u32, u64), has=ops)
    # Prefixes overlap (SYNCS.ARRIVE.TRANS64 opens every arrive): each kernel must hold its own
    # primitive's opcode exactly, not only a longer one that starts with it.
    assert ops[0] in cubin.opcodes, f"{ops[0]} missing (exact) from SASS:\n{cubin.sass}"


@pytest.mark.sass
def test_remote_arrive_without_release_has_no_fence():
    """The default (.release.cta) remote arrive is a bare SYNCS.ARRIVE; .release.cluster costs a
    MEMBAR.ALL.GPU, which in a GEMM's consumer loop waits for every outstanding store of C."""
    plain = assert_sass(sass_arrive_shared_cluster, (u32, u64), has=("SYNCS.ARRIVE.TRANS64.RED.A1T0",))
    assert not any(op.startswith("MEMBAR") for op in plain.opcodes), plain.sass
    fenced = assert_sass(sass_arrive_release_cluster_shared_cluster, (u32, u64), has=("MEMBAR.ALL.GPU",))
    assert fenced.opcodes.index("MEMBAR.ALL.GPU") < fenced.opcodes.index("SYNCS.ARRIVE.TRANS64.RED.A1T0")


@pytest.mark.sass
def test_test_wait_never_suspends():
    """test_wait is the non-suspending form: it must not become a TRYWAIT."""
    assert_sass(sass_test_wait_parity, (u32, u64), has=("SYNCS.PHASECHK.TRANS64",),
                lacks=("CALL", "SYNCS.PHASECHK.TRANS64.TRYWAIT"))


@pytest.mark.sass
def test_wait_parity_loops_on_try_wait():
    """The blocking wait is a TRYWAIT with a branch back to it while its predicate is false."""
    cubin = assert_sass(sass_wait_parity, (u32, u64), has=("SYNCS.PHASECHK.TRANS64.TRYWAIT",))
    assert re.search(r"@!P\d+\s+BRA", cubin.sass), f"no retry branch:\n{cubin.sass}"


# ---------------------------------------------------------------------------------------------
# GPU kernels
# ---------------------------------------------------------------------------------------------
def phases_kernel(obs):
    """THREADS threads arrive on a barrier of count THREADS for PHASES phases; each records what
    test_wait/try_wait say about the current and the preceding phase around its arrival."""
    bars = cuda.shared.array(1, np.uint64)
    bar = ptx.addr(bars, 0)
    t = cuda.threadIdx.x
    if t == 0:
        ptx.mbarrier_init(bar, THREADS)          # a phase completes when all THREADS threads arrived
    cuda.syncthreads()                           # the init is seen before anyone arrives
    for k in range(PHASES):
        parity = np.uint32(k & 1)
        # Phase k cannot complete before this thread arrives: it is the current, open phase (0);
        # phase k - 1 (for k = 0: the one before the first) counts as completed (1).
        obs[k, t, 0] = ptx.mbarrier_test_wait_parity(bar, parity)
        obs[k, t, 1] = ptx.mbarrier_test_wait_parity(bar, parity ^ 1)
        ptx.mbarrier_arrive(bar)
        ptx.mbarrier_wait_parity(bar, parity)    # all THREADS arrived: phase k completed
        # Phase k + 1 cannot complete before this thread arrives again: k is now the preceding one.
        obs[k, t, 2] = ptx.mbarrier_try_wait_parity(bar, parity)
        obs[k, t, 3] = ptx.mbarrier_test_wait_parity(bar, parity ^ 1)


def tx_kernel(src, dst, held):
    """Each phase: thread 0 announces THREADS * TX_BYTES bytes (half with expect_tx, half with
    arrive_expect_tx); every thread copies TX_BYTES with cp.async and arrives through
    cp.async.mbarrier.arrive.noinc when they land; complete_tx accounts for the bytes."""
    smem = cuda.shared.array(TX_WORDS, np.float32)
    bars = cuda.shared.array(1, np.uint64)
    bar = ptx.addr(bars, 0)
    t = cuda.threadIdx.x
    if t == 0:
        # THREADS cp.async arrivals (noinc: each counts against this count) + thread 0's arrive_expect_tx
        ptx.mbarrier_init(bar, THREADS + 1)
    cuda.syncthreads()
    for k in range(TX_PHASES):
        parity = np.uint32(k & 1)
        if t == 0:
            ptx.mbarrier_expect_tx(bar, THREADS * TX_BYTES // 2)
        # (The block barrier keeps ptxas from fusing the two announcements into one arrive.)
        cuda.syncthreads()
        if t == 0:
            # The phase cannot complete before this arrival, and the arrival comes after both
            # announcements, so the tx-count it waits for is the whole THREADS * TX_BYTES.
            ptx.mbarrier_arrive_expect_tx(bar, THREADS * TX_BYTES // 2)
        ptx.cp_async_cg_shared_global_16(ptx.addr(smem, t * 4), ptx.addr(src, (k * THREADS + t) * 4))
        ptx.cp_async_mbarrier_arrive_noinc(bar)  # arrives once this thread's copies have landed
        if t != 0:
            ptx.mbarrier_complete_tx(bar, TX_BYTES)   # stands in for a TMA copy's complete_tx
        cuda.syncthreads()
        # Every arrival may have landed, but thread 0's TX_BYTES are still owed: the phase is open.
        held[k, t, 0] = ptx.mbarrier_test_wait_parity(bar, parity)
        cuda.syncthreads()                       # everyone has looked before the phase may complete
        if t == 0:
            ptx.mbarrier_complete_tx(bar, TX_BYTES)   # tx-count reaches 0: the phase can complete
        done = 0
        for _ in range(TRIES):                   # a bounded mbarrier_wait_parity
            if ptx.mbarrier_try_wait_parity(bar, parity) != 0:
                done = 1
                break
        held[k, t, 1] = done
        # The wait acquires every thread's copies (cp.async before its cp.async.mbarrier.arrive):
        # read a neighbour's chunk, not only this thread's own.
        n = (t + 1) % THREADS
        for w in range(4):
            dst[(k * THREADS + t) * 4 + w] = smem[n * 4 + w]
        cuda.syncthreads()                       # all reads are done before the next copies overwrite


def fresh_kernel(obs):
    """try_wait on a fresh barrier of count 1, then after its one arrival. Never blocks for good:
    a try_wait on an open phase gives up after a time limit and returns 0."""
    bars = cuda.shared.array(1, np.uint64)
    bar = ptx.addr(bars, 0)
    t = cuda.threadIdx.x
    if t == 0:
        ptx.mbarrier_init(bar, 1)
    cuda.syncthreads()
    obs[t, 0] = ptx.mbarrier_try_wait_parity(bar, 1)   # the phase "before" phase 0 is complete: 1 at once
    obs[t, 1] = ptx.mbarrier_try_wait_parity(bar, 0)   # phase 0 is open: 0 (after the time limit)
    cuda.syncthreads()                                 # every thread looked before phase 0 completes
    if t == 0:
        ptx.mbarrier_arrive(bar)                       # count 1: this arrival completes phase 0
    ptx.mbarrier_wait_parity(bar, 0)
    obs[t, 2] = ptx.mbarrier_try_wait_parity(bar, 0)   # phase 0, now the preceding one: 1
    obs[t, 3] = ptx.mbarrier_try_wait_parity(bar, 1)   # phase 1 is open (nobody arrives): 0


REINIT_COUNT = 64    # the re-initialised barrier counts only warps 0 and 1


def reinit_kernel(obs):
    """Two phases with every thread, then inval and init again with another count in the same 8
    bytes: the new barrier starts over at phase 0."""
    bars = cuda.shared.array(1, np.uint64)
    bar = ptx.addr(bars, 0)
    t = cuda.threadIdx.x
    if t == 0:
        ptx.mbarrier_init(bar, THREADS)
    cuda.syncthreads()
    for k in range(2):
        ptx.mbarrier_arrive(bar)
        ptx.mbarrier_wait_parity(bar, np.uint32(k & 1))
    obs[t, 0] = ptx.mbarrier_test_wait_parity(bar, 1)  # phase 1 completed: 1 (phase 2 is open)
    cuda.syncthreads()                                 # nobody touches the old barrier any more
    if t == 0:
        ptx.mbarrier_inval(bar)                        # a valid barrier must be invalidated before init
        ptx.mbarrier_init(bar, REINIT_COUNT)
    cuda.syncthreads()
    obs[t, 1] = ptx.mbarrier_test_wait_parity(bar, 0)  # phase 0 again, and open: 0
    obs[t, 2] = ptx.mbarrier_test_wait_parity(bar, 1)  # the one "before" it: 1
    cuda.syncthreads()                                 # every thread looked before anyone arrives
    if t < REINIT_COUNT:
        ptx.mbarrier_arrive(bar)
        ptx.mbarrier_wait_parity(bar, 0)
    cuda.syncthreads()                                 # the REINIT_COUNT arrivals completed phase 0
    obs[t, 3] = ptx.mbarrier_test_wait_parity(bar, 0)  # 1
    obs[t, 4] = ptx.mbarrier_test_wait_parity(bar, 1)  # phase 1 is open: 0
    cuda.syncthreads()
    if t == 0:
        ptx.mbarrier_inval(bar)                        # leave the shared memory as it was found


def remote_arrive_kernel(src, dst, done):
    """Every thread arrives on its CTA's barrier through the barrier's .shared::cluster address. A
    launch without clusters runs each CTA as a cluster of one, of rank 0, whose own shared memory
    lies in the .shared::cluster window too."""
    smem = cuda.shared.array(THREADS, np.float32)
    bars = cuda.shared.array(1, np.uint64)
    bar = ptx.addr(bars, 0)
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * THREADS
    if t == 0:
        ptx.mbarrier_init(bar, THREADS)
        ptx.fence_mbarrier_init_release_cluster()      # the init is released to the whole cluster
    cuda.syncthreads()
    remote = ptx.mapa_shared_cluster(bar, ptx.cluster_ctarank())
    smem[t] = src[base + t] * np.float32(2)
    ptx.mbarrier_arrive_release_cluster_shared_cluster(remote)   # cluster-scope release: the store goes first
    ok = 0
    for _ in range(TRIES):                             # a bounded wait; acquire: every store is visible
        if ptx.mbarrier_try_wait_parity(bar, 0) != 0:
            ok = 1
            break
    done[base + t] = ok
    dst[base + t] = smem[(t + 1) % THREADS]


GPU_KERNELS = {
    "phases": (phases_kernel, (i32_3d,)),
    "tx": (tx_kernel, (f32, f32, i32_3d)),
    "fresh": (fresh_kernel, (i32_2d,)),
    "reinit": (reinit_kernel, (i32_2d,)),
    "remote_arrive": (remote_arrive_kernel, (f32, f32, types.int32[::1])),
}


@pytest.mark.sass
@pytest.mark.parametrize("name", sorted(GPU_KERNELS))
def test_gpu_kernels_compile(name):
    """The GPU tests' kernels compile offline, shims inlined, nothing in local memory."""
    kernel, argtypes = GPU_KERNELS[name]
    cubin = assert_sass(kernel, argtypes, has=("SYNCS.EXCH.64", "SYNCS.PHASECHK.TRANS64"))
    if name == "tx":   # the GPU test exercises both announcements, not one fused arrive
        for op in ("SYNCS.ARRIVE.TRANS64.RED.A0TR", "SYNCS.ARRIVE.TRANS64", "SYNCS.ARRIVE.TRANS64.RED.A0TX"):
            assert op in cubin.opcodes, f"{op} missing from the tx kernel:\n{cubin.sass}"


# ---------------------------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.hopper
def test_phases_gpu():
    obs = cuda.to_device(np.full((PHASES, THREADS, 4), POISON, np.int32))
    cuda.jit(phases_kernel)[1, THREADS](obs)
    # before the arrival: current phase open (0), preceding complete (1);
    # after the wait: that phase complete (1), the next one open (0) -- with the parity alternating
    expect = np.broadcast_to(np.array([0, 1, 1, 0], np.int32), (PHASES, THREADS, 4))
    np.testing.assert_array_equal(obs.copy_to_host(), expect)


@pytest.mark.gpu
@pytest.mark.hopper
def test_tx_count_gpu(rng):
    src = rng.standard_normal(TX_PHASES * THREADS * 4).astype(np.float32)
    dst = cuda.to_device(np.full(src.size, np.nan, np.float32))
    held = cuda.to_device(np.full((TX_PHASES, THREADS, 2), POISON, np.int32))
    cuda.jit(tx_kernel)[1, THREADS](cuda.to_device(src), dst, held)
    held = held.copy_to_host()
    # the phase stayed open while bytes were owed, even with every arrival in; then it completed
    np.testing.assert_array_equal(held[:, :, 1], 1, err_msg="a phase never completed")
    np.testing.assert_array_equal(held[:, :, 0], 0, err_msg="a phase completed with bytes owed")
    # thread t read thread t + 1's chunk of each phase
    expect = np.roll(src.reshape(TX_PHASES, THREADS, 4), -1, axis=1).ravel()
    np.testing.assert_array_equal(dst.copy_to_host(), expect)


@pytest.mark.gpu
@pytest.mark.hopper
def test_try_wait_fresh_and_wrong_parity_gpu():
    obs = cuda.to_device(np.full((THREADS, 4), POISON, np.int32))
    cuda.jit(fresh_kernel)[1, THREADS](obs)
    expect = np.broadcast_to(np.array([1, 0, 1, 0], np.int32), (THREADS, 4))
    np.testing.assert_array_equal(obs.copy_to_host(), expect)


@pytest.mark.gpu
@pytest.mark.hopper
def test_inval_then_init_gpu():
    obs = cuda.to_device(np.full((THREADS, 5), POISON, np.int32))
    cuda.jit(reinit_kernel)[1, THREADS](obs)
    expect = np.broadcast_to(np.array([1, 0, 1, 1, 0], np.int32), (THREADS, 5))
    np.testing.assert_array_equal(obs.copy_to_host(), expect)


@pytest.mark.gpu
@pytest.mark.hopper
def test_arrive_shared_cluster_gpu(rng):
    blocks = 4
    src = rng.standard_normal(blocks * THREADS).astype(np.float32)
    dst = cuda.to_device(np.full(src.size, np.nan, np.float32))
    done = cuda.to_device(np.full(src.size, POISON, np.int32))
    cuda.jit(remote_arrive_kernel)[blocks, THREADS](cuda.to_device(src), dst, done)
    np.testing.assert_array_equal(done.copy_to_host(), 1, err_msg="the phase never completed")
    expect = np.roll((src * np.float32(2)).reshape(blocks, THREADS), -1, axis=1).ravel()
    np.testing.assert_array_equal(dst.copy_to_host(), expect)
