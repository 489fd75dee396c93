"""Issue 18, section 2, group B: the simulator's holes around barriers, launches and messages. Each
mistake is a broken kernel that must raise under every seed tried, with its corrected twin that must
give numpy's answer; each message is checked for the rule, the statement, the thread, the kernel line
and the seed."""

import numpy as np
import pytest
from numba import cuda

from asyncpipe import pipeline, ptx, sim
from asyncpipe.errors import AsyncpipeError
from asyncpipe.host import TensorMap, launch
from tests.sim.test_mistakes import BOX, make_tma_sum

pytestmark = pytest.mark.sim

SEEDS = range(10)
W = 32                        # a warp


# ---------------------------------------------------------------------------------------------
# 4. A write after bar.arrive on a named barrier, before the consumer's bar.sync
# ---------------------------------------------------------------------------------------------
def make_producer_consumer(write_after_arrive):
    @cuda.jit
    def kernel(src, out):
        buf = cuda.shared.array(W, np.float32)
        t = cuda.threadIdx.x
        if t < W:                                           # producer warp
            buf[t] = src[t] * 2
            ptx.bar_arrive(1, 2 * W)
            if write_after_arrive:
                buf[t] = src[t] * 3                         # after the release: the consumer may see either
        else:                                               # consumer warp
            ptx.bar_sync(1, 2 * W)
            out[t - W] = buf[(t - W + 1) % W]
    return kernel


@pytest.mark.parametrize("seed", SEEDS)
def test_write_after_bar_arrive_is_a_race_under_every_seed(seed):
    src = np.arange(W, dtype=np.float32)
    with sim.settings(seed=seed), pytest.raises(sim.SharedMemoryRaceError) as err:
        make_producer_consumer(True)[1, 2 * W](src, np.zeros(W, np.float32))
    msg = str(err.value)
    assert "no barrier between them" in msg
    assert "buf[t] = src[t] * 3" in msg and "out[t - W] = buf[(t - W + 1) % W]" in msg, msg
    assert "test_holes_barriers.py:" in msg and "(warp " in msg and f"ASYNCPIPE_SIM_SEED={seed}" in msg


@pytest.mark.parametrize("seed", SEEDS)
def test_bar_arrive_releasing_only_earlier_writes_passes(seed, rng):
    src = rng.standard_normal(W).astype(np.float32)
    out = np.full(W, np.nan, np.float32)
    with sim.settings(seed=seed):
        make_producer_consumer(False)[1, 2 * W](src, out)
    np.testing.assert_array_equal(out, (src.astype(np.float64) * 2)[(np.arange(W) + 1) % W].astype(np.float32))


# ---------------------------------------------------------------------------------------------
# 5. __syncthreads in a branch that not every thread takes
# ---------------------------------------------------------------------------------------------
def make_branch_sync(kind):
    @cuda.jit
    def kernel(src, out):
        tile = cuda.shared.array(2 * W, np.float32)
        t = cuda.threadIdx.x
        if kind == "early_exit" and t >= W:
            return
        tile[t] = src[t]
        if kind == "exit":
            if t < W:
                cuda.syncthreads()                          # the other warp exits instead
        elif kind == "different":
            if t < W:
                cuda.syncthreads()                          # the first warp's barrier
            else:
                cuda.syncthreads()                          # another barrier
        else:
            cuda.syncthreads()                              # every (live) thread
        if t < W:
            out[t] = tile[t + W] if kind != "early_exit" else tile[t]
    return kernel


def _branch_sync_error(kind, seed):
    src = np.arange(2 * W, dtype=np.float32)
    with sim.settings(seed=seed), pytest.raises(sim.DivergentBarrierError) as err:
        make_branch_sync(kind)[1, 2 * W](src, np.zeros(W, np.float32))
    msg = str(err.value)
    assert "every thread of the block must reach the same __syncthreads" in msg and "[CUDA programming guide" in msg
    assert f"ASYNCPIPE_SIM_SEED={seed}" in msg and "test_holes_barriers.py:" in msg
    return msg


@pytest.mark.parametrize("seed", SEEDS)
def test_syncthreads_some_threads_skip_and_exit_is_caught(seed):
    msg = _branch_sync_error("exit", seed)
    assert "# the other warp" not in msg                      # the statement, not its comment
    assert "(kernel): cuda.syncthreads() reached by block (0, 0, 0) threads 0..31" in msg, msg
    assert "exited without reaching it" in msg and ("threads 32..63 exited" in msg or "thread (" in msg), msg


@pytest.mark.parametrize("seed", SEEDS)
def test_syncthreads_in_both_branches_is_caught(seed):
    msg = _branch_sync_error("different", seed)
    assert "at a different __syncthreads" in msg and "threads 0..31" in msg and "threads 32..63" in msg, msg
    lines = {int(x) for x in __import__("re").findall(r"test_holes_barriers.py:(\d+) \(kernel\): cuda.syncthreads",
                                                      msg)}
    assert len(lines) == 2, msg                                # both barriers' lines are named


@pytest.mark.parametrize("seed", SEEDS)
def test_early_exit_before_syncthreads_is_caught(seed):
    msg = _branch_sync_error("early_exit", seed)
    assert "block (0, 0, 0) threads 32..63 exited without reaching it" in msg, msg


@pytest.mark.parametrize("seed", SEEDS[:3])
def test_syncthreads_every_thread_reaches_passes(seed, rng):
    src = rng.standard_normal(2 * W).astype(np.float32)
    out = np.full(W, np.nan, np.float32)
    with sim.settings(seed=seed):
        make_branch_sync("all")[1, 2 * W](src, out)
    np.testing.assert_array_equal(out, src[W:])


# ---------------------------------------------------------------------------------------------
# 6. Shared memory limits at launch: numba's own launch has no opt-in above 48 KB
# ---------------------------------------------------------------------------------------------
def make_smem_kernel(static_floats):
    @cuda.jit
    def kernel(out):
        out[0] = 1.0                                       # a kernel that ran leaves a mark
        dyn = cuda.shared.array(0, np.float32)
        t = cuda.threadIdx.x
        if static_floats:
            st = cuda.shared.array(static_floats, np.float32)
            st[t] = t
            cuda.syncthreads()
            out[t] = st[(t + 1) % W]
        dyn[t] = t * 2
        cuda.syncthreads()
        out[W + t] = dyn[(t + 3) % W]
    return kernel


def _smem_expect():
    t = np.arange(W)
    return np.concatenate([(t + 1) % W, 2 * ((t + 3) % W)]).astype(np.float32)


PLAIN_48KB = (r"kernel\[grid, block, stream, shared\]: without the CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES "
              r"opt-in .* at most 49152 bytes .*asyncpipe.host.launch.*\[cuLaunchKernel, CUDA_ERROR_INVALID_VALUE\], ")


@pytest.mark.parametrize("static_floats,dynamic,opt_in,match", [
    (0, 65536, False, PLAIN_48KB + r"got 0 static \+ 65536 dynamic = 65536 bytes"),
    (10240, 12288, False, PLAIN_48KB + r"got 40960 static \+ 12288 dynamic = 53248 bytes"),
    (10240, 200000, True, r"launch: static \+ dynamic shared memory per block must be at most 232448 bytes .* "
                          r"got 40960 static \+ 200000 dynamic = 240960 bytes"),
    (13312, 0, True, r"launch: static shared memory .* at most 49152 bytes .*\[ptxas, 'uses too much shared data'\], "
                     r"got 53248 bytes of static shared arrays"),
])
def test_shared_memory_over_the_launch_limit_is_refused_before_the_launch(static_floats, dynamic, opt_in, match):
    """numba's kernel[1, 32, 0, shared] has no opt-in (48 KB in all); asyncpipe.host.launch opts in (227 KB);
    static arrays alone stop at 48 KB. The static arrays are counted before any thread runs."""
    out = np.full(2 * W, -5, np.float32)
    kernel = make_smem_kernel(static_floats)
    with pytest.raises(AsyncpipeError, match=match):
        if opt_in:
            launch(kernel, 1, W, out, shared_mem=dynamic)
        else:
            kernel[1, W, 0, dynamic](out)
    assert (out == -5).all()                               # no thread ran


def test_host_launch_opts_in_to_64kb_dynamic():
    out = np.full(2 * W, np.nan, np.float32)
    launch(make_smem_kernel(0), 1, W, out, shared_mem=65536)
    np.testing.assert_array_equal(out[W:], _smem_expect()[W:])


def test_plain_launch_static_plus_dynamic_of_48kb_passes():
    out = np.full(2 * W, np.nan, np.float32)
    make_smem_kernel(8192)[1, W, 0, 16384](out)            # 32 KB + 16 KB
    np.testing.assert_array_equal(out, _smem_expect())


def test_static_shared_counts_device_functions_and_closures():
    from asyncpipe.sim.static_shared import static_shared_bytes

    n = 3

    @cuda.jit(device=True)
    def helper(i):
        scratch = cuda.shared.array((n, W * 2), np.float64)
        scratch[0, i] = i
        return scratch[0, i]

    @cuda.jit
    def kernel(out):
        a = cuda.shared.array((2, W + 1), np.int16)
        for _ in range(3):                                  # one allocation per call site
            b = cuda.shared.array(W, dtype=np.uint64, alignment=128)
            b[0] = 1
        a[0, 0] = 1
        out[0] = helper(0) + helper(1)

    assert static_shared_bytes(kernel) == 2 * (W + 1) * 2 + W * 8 + n * W * 2 * 8


# ---------------------------------------------------------------------------------------------
# 7. A data array where a tensor map belongs
# ---------------------------------------------------------------------------------------------
def test_data_array_for_a_tensor_map_is_named():
    a = np.arange(BOX, dtype=np.float32)
    with pytest.raises(sim.SimUsageError) as err:
        make_tma_sum(0, 1)[1, BOX](cuda.to_device(a), np.zeros(BOX, np.float32))
    msg = str(err.value)
    assert "cp_async_bulk_tensor_1d_shared_global: tmap must be addr(tmap, 0) of an asyncpipe TensorMap" in msg
    assert "got addr() of a float32 array of shape (32,) in global memory: a data array, not a TensorMap" in msg
    assert "asyncpipe.host.TensorMap.tiled" in msg and "thread (0, 0, 0) of block (0, 0, 0)" in msg, msg


def test_tensor_map_for_a_tensor_map_passes(rng):
    a = rng.standard_normal(BOX).astype(np.float32)
    out = np.full(BOX, np.nan, np.float32)
    d = cuda.to_device(a)
    make_tma_sum(0, 1)[1, BOX](TensorMap.tiled(d, (BOX,)), out)
    np.testing.assert_array_equal(out, a)


# ---------------------------------------------------------------------------------------------
# Messages: the user's kernel line first (then the helper's), Python errors located, whole statements
# ---------------------------------------------------------------------------------------------
STAGES = 2


def make_ring_consumer(init):
    @cuda.jit
    def kernel(out):
        full = cuda.shared.array(STAGES, np.uint64)
        empty = cuda.shared.array(STAGES, np.uint64)
        t = cuda.threadIdx.x
        if init and t == 0:
            pipeline.pipeline_init(full, empty, STAGES, 1, 1)
        cuda.syncthreads()
        st = pipeline.pipeline_state(0, 0)
        if t == 0:
            pipeline.producer_commit(full, st, 0)
        pipeline.consumer_wait(full, st)
        out[t] = 1
    return kernel


def test_error_inside_a_pipeline_helper_names_the_kernel_line_first():
    with pytest.raises(sim.MbarrierInitError) as err:
        make_ring_consumer(False)[1, W](np.zeros(W, np.float32))
    msg = str(err.value)
    kernel_at = msg.find("test_holes_barriers.py:")
    helper_at = msg.find("[in ring.py:")
    assert 0 <= kernel_at < helper_at, msg
    assert "(kernel): pipeline." in msg and "ring.py:" in msg and "ptx.mbarrier" in msg, msg


def test_pipeline_helpers_used_right_pass():
    out = np.zeros(W, np.float32)
    make_ring_consumer(True)[1, W](out)
    np.testing.assert_array_equal(out, np.ones(W, np.float32))


@cuda.jit(device=True)
def wait_stage(bars, i):
    ptx.mbarrier_wait_parity(ptx.addr(bars, i), 0)


@cuda.jit
def device_function_wait(out):
    bars = cuda.shared.array(1, np.uint64)
    wait_stage(bars, 0)
    out[cuda.threadIdx.x] = 1


def test_error_inside_a_device_function_names_the_kernel_line_then_the_function():
    with pytest.raises(sim.MbarrierInitError) as err:
        device_function_wait[1, W](np.zeros(W, np.float32))
    msg = str(err.value)
    assert ("test_holes_barriers.py:" in msg and "(device_function_wait): wait_stage(bars, 0) [in "
            "test_holes_barriers.py:") in msg and "(wait_stage): ptx.mbarrier_wait_parity(ptx.addr(bars, i), 0)]" in msg


def make_python_error(kind):
    @cuda.jit
    def kernel(src, out):
        tile = cuda.shared.array(W, np.float32)
        t = cuda.threadIdx.x
        if kind == "float":
            ptx.cp_async_ca_shared_global_4(ptx.addr(tile, t * 1.0), ptx.addr(src, t))
            ptx.cp_async_wait_all()
        elif kind == "range":
            tile[t + 1] = src[t]
        else:
            tile[t] = src[t]
        cuda.syncthreads()
        out[t] = tile[t]
    return kernel


@pytest.mark.parametrize("kind,cls,line", [
    ("float", TypeError, "(kernel): ptx.cp_async_ca_shared_global_4(ptx.addr(tile, t * 1.0), ptx.addr(src, t))"),
    ("range", IndexError, "(kernel): tile[t + 1] = src[t]"),
])
def test_python_errors_in_a_kernel_carry_the_line_and_the_thread(kind, cls, line):
    with pytest.raises(cls) as err:
        make_python_error(kind)[1, W](np.arange(W, dtype=np.float32), np.zeros(W, np.float32))
    msg = str(err.value)
    assert "test_holes_barriers.py:" in msg and line in msg, msg
    assert "of block (0, 0, 0) (warp 0, lane" in msg and "ASYNCPIPE_SIM_SEED=0" in msg, msg
    if kind == "range":
        assert "index 32 is out of bounds for axis 0 with size 32" in msg and "thread (31, 0, 0)" in msg, msg


def test_python_error_twin_passes(rng):
    src = rng.standard_normal(W).astype(np.float32)
    out = np.full(W, np.nan, np.float32)
    make_python_error("none")[1, W](src, out)
    np.testing.assert_array_equal(out, src)


@cuda.jit
def multi_line_misaligned(src, out):
    tile = cuda.shared.array(2 * W, np.float32)
    t = cuda.threadIdx.x
    ptx.cp_async_cg_shared_global_16(ptx.addr(tile, 1),
                                     ptx.addr(src, 4 * t))
    ptx.cp_async_wait_all()
    out[t] = tile[t]


def test_multi_line_statement_is_printed_whole():
    with pytest.raises(sim.SimUsageError) as err:
        multi_line_misaligned[1, 1](np.arange(2 * W, dtype=np.float32), np.zeros(1, np.float32))
    msg = str(err.value)
    assert ",," not in msg, msg
    assert "(multi_line_misaligned): ptx.cp_async_cg_shared_global_16(ptx.addr(tile, 1), ptx.addr(src, 4 * t))" \
        in msg, msg


@cuda.jit
def never_arrives(out):
    bars = cuda.shared.array(1, np.uint64)
    t = cuda.threadIdx.x
    if t == 0:
        ptx.mbarrier_init(ptx.addr(bars, 0), 2 * W)      # twice the threads that arrive
    cuda.syncthreads()
    ptx.mbarrier_arrive(ptx.addr(bars, 0))
    ptx.mbarrier_wait_parity(ptx.addr(bars, 0), 0)
    out[t] = 1


def test_deadlock_message_says_what_it_got():
    with pytest.raises(sim.DeadlockError) as err:
        never_arrives[1, W](np.zeros(W, np.float32))
    msg = str(err.value)
    assert "[deadlock detection], got 32 threads waiting at 1 place, none of which can ever proceed:\n" \
           "  block (0, 0, 0) threads 0..31 wait at test_holes_barriers.py:" in msg, msg
    assert "(never_arrives): ptx.mbarrier_wait_parity(ptx.addr(bars, 0), 0)" in msg, msg
