"""Issue 18, section 2, hole 1: a copy (cp.async, cp.async.bulk, TMA) that starts inside a shared array
and runs past its end, into the next one, is refused at the copy. Each broken kernel must raise under
every seed tried, with its corrected twin that must give numpy's answer; each message is checked for
the rule, the copy statement, the array (its size, the offset, the bytes), the thread and the seed."""

import re

import numpy as np
import pytest
from numba import cuda

from asyncpipe import ptx, sim
from asyncpipe.host import TensorMap, launch

pytestmark = pytest.mark.sim

SEEDS = range(8)
W = 32                        # a warp
ROW = 4 * W - 2               # floats: 504 bytes, so the last thread's 16-byte chunk hangs 8 bytes over
BOX = 32                      # TMA box, floats


@cuda.jit(device=True)
def init_tma_barrier(bar, tmap):
    """One thread's set-up for TMA loads completing on ``bar``: its init (one arrival) published to the async
    proxy, and the tensor map acquired."""
    ptx.mbarrier_init(bar, 1)
    ptx.fence_proxy_async_shared_cta()
    ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tmap, 0))


def _message(run, seed):
    with sim.settings(seed=seed), pytest.raises(sim.SharedBoundsError) as err:
        run()
    msg = str(err.value)
    assert f"ASYNCPIPE_SIM_SEED={seed}" in msg and "test_holes_bounds.py:" in msg, msg
    return msg


# ---------------------------------------------------------------------------------------------
# cp.async: a 16-byte chunk at the end of a row whose size is not a multiple of 16 bytes
# ---------------------------------------------------------------------------------------------
def make_cp_async_row(last_chunk_8):
    @cuda.jit
    def kernel(src, out):
        row = cuda.shared.array(ROW, np.float32)
        edge = cuda.shared.array(2, np.float32)             # 8 bytes, 4-byte aligned: right after row
        t = cuda.threadIdx.x
        if t == 0:
            edge[0] = 1.5
            edge[1] = 2.5
        if t == W - 1 and last_chunk_8:
            ptx.cp_async_ca_shared_global_8(ptx.addr(row, 4 * t), ptx.addr(src, 4 * t))
        else:
            ptx.cp_async_ca_shared_global_16(ptx.addr(row, 4 * t), ptx.addr(src, 4 * t))
        ptx.cp_async_wait_all()
        cuda.syncthreads()
        out[t] = row[(4 * t + 5) % ROW] + edge[t % 2]
    return kernel


@pytest.mark.parametrize("seed", SEEDS)
def test_cp_async_past_the_end_of_its_array_is_refused(seed):
    src = np.arange(4 * W, dtype=np.float32)
    msg = _message(lambda: make_cp_async_row(False)[1, W](src, np.zeros(W, np.float32)), seed)
    assert msg.startswith("cp_async_ca_shared_global_16: a copy must stay inside the shared array its dst points "
                          "into (past its end lie the next arrays, which the GPU overwrites or reads in silence) "
                          "[PTX ISA, cp.async], got 16 bytes at byte 496 of the 504-byte float32 shared array of "
                          "shape (126,) (shared 0x0..0x1f8) declared at test_holes_bounds.py:"), msg
    assert "(kernel): row = cuda.shared.array(ROW, np.float32): bytes 496..512 run 8 bytes past its end" in msg, msg
    assert "(kernel): ptx.cp_async_ca_shared_global_16(ptx.addr(row, 4 * t), ptx.addr(src, 4 * t))" in msg, msg
    assert "thread (31, 0, 0) of block (0, 0, 0) (warp 0, lane 31)" in msg, msg


@pytest.mark.parametrize("seed", SEEDS[:3])
def test_cp_async_of_8_bytes_at_the_end_passes(seed, rng):
    src = rng.standard_normal(4 * W).astype(np.float32)
    out = np.full(W, np.nan, np.float32)
    with sim.settings(seed=seed):
        make_cp_async_row(True)[1, W](src, out)
    t = np.arange(W)
    expect = src.astype(np.float64)[(4 * t + 5) % ROW] + np.where(t % 2, 2.5, 1.5)
    np.testing.assert_allclose(out, expect, rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# cp.async.bulk: a load or a store of more bytes than the array holds (static or dynamic)
# ---------------------------------------------------------------------------------------------
def make_bulk_load(nbytes, dynamic):
    @cuda.jit
    def kernel(src, out):
        if dynamic:
            tile = cuda.shared.array(0, np.int32)            # the launch's shared_mem: 128 bytes
        else:
            tile = cuda.shared.array((2, 16), np.int32, alignment=128)
        after = cuda.shared.array(W, np.int32)
        bars = cuda.shared.array(1, np.uint64)
        bar = ptx.addr(bars, 0)
        t = cuda.threadIdx.x
        if t == 0:
            ptx.mbarrier_init(bar, 1)
            ptx.fence_mbarrier_init_release_cluster()
        after[t] = -t
        cuda.syncthreads()
        if t == 0:
            ptx.mbarrier_arrive_expect_tx(bar, nbytes)
            if dynamic:
                ptx.cp_async_bulk_shared_global(ptx.addr(tile, 0), ptx.addr(src, 0), nbytes, bar)
            else:
                ptx.cp_async_bulk_shared_global(ptx.addr(tile, (0, 0)), ptx.addr(src, 0), nbytes, bar)
        ptx.mbarrier_wait_parity(bar, 0)
        if dynamic:
            out[t] = tile[t] + after[(t + 1) % W]
        else:
            out[t] = tile[t // 16, t % 16] + after[(t + 1) % W]
    return kernel


def _run_bulk_load(nbytes, dynamic, src, out):
    if dynamic:
        launch(make_bulk_load(nbytes, True), 1, W, src, out, shared_mem=4 * W)
    else:
        make_bulk_load(nbytes, False)[1, W](src, out)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dynamic,declared", [
    (False, "the 128-byte int32 shared array of shape (2, 16) (shared 0x0..0x80) declared at test_holes_bounds.py:"),
    (True, "the 128-byte int32 dynamic shared memory (shared 0x0..0x80) declared at test_holes_bounds.py:"),
])
def test_bulk_load_past_the_end_of_its_array_is_refused(seed, dynamic, declared):
    src = np.arange(2 * W, dtype=np.int32)
    msg = _message(lambda: _run_bulk_load(8 * W, dynamic, src, np.zeros(W, np.int32)), seed)
    assert msg.startswith("cp_async_bulk_shared_global: a copy must stay inside the shared array its dst points "
                          "into"), msg
    assert "[PTX ISA, cp.async.bulk], got 256 bytes at byte 0 of " + declared in msg, msg
    assert re.search(r"\(kernel\): tile = cuda.shared.array\((0|\(2, 16\)), np.int32(, alignment=128)?\): "
                     r"bytes 0..256 run 128 bytes past its end", msg), msg
    assert "ptx.cp_async_bulk_shared_global(ptx.addr(tile, " in msg and "thread (0, 0, 0) of block (0, 0, 0)" in msg


@pytest.mark.parametrize("seed", SEEDS[:3])
@pytest.mark.parametrize("dynamic", [False, True])
def test_bulk_load_of_the_whole_array_passes(seed, dynamic, rng):
    """Both rows of the 2-D tile from the pointer to its first element: inside the declaration."""
    src = rng.integers(-1000, 1000, 2 * W).astype(np.int32)
    out = np.zeros(W, np.int32)
    with sim.settings(seed=seed):
        _run_bulk_load(4 * W, dynamic, src, out)
    t = np.arange(W)
    np.testing.assert_array_equal(out, src[:W].astype(np.int64) - (t + 1) % W)


def make_bulk_store(nbytes):
    @cuda.jit
    def kernel(dst):
        tile = cuda.shared.array(W, np.int32, alignment=128)
        after = cuda.shared.array(W, np.int32)
        t = cuda.threadIdx.x
        tile[t] = 3 * t
        after[t] = -1
        ptx.fence_proxy_async_shared_cta()
        cuda.syncthreads()
        if t == 0:
            ptx.cp_async_bulk_global_shared(ptx.addr(dst, 0), ptx.addr(tile, 0), nbytes)
            ptx.cp_async_bulk_commit_group()
            ptx.cp_async_bulk_wait_group_read(0)
    return kernel


@pytest.mark.parametrize("seed", SEEDS)
def test_bulk_store_past_the_end_of_its_array_is_refused(seed):
    msg = _message(lambda: make_bulk_store(8 * W)[1, W](np.zeros(2 * W, np.int32)), seed)
    assert msg.startswith("cp_async_bulk_global_shared: a copy must stay inside the shared array its src points "
                          "into"), msg
    assert ("got 256 bytes at byte 0 of the 128-byte int32 shared array of shape (32,) (shared 0x0..0x80) "
            "declared at test_holes_bounds.py:") in msg, msg
    assert "bytes 0..256 run 128 bytes past its end" in msg and "thread (0, 0, 0) of block (0, 0, 0)" in msg, msg
    assert "(kernel): ptx.cp_async_bulk_global_shared(ptx.addr(dst, 0), ptx.addr(tile, 0), nbytes)" in msg, msg


def test_bulk_store_of_the_array_passes():
    dst = np.full(2 * W, 7, np.int32)
    make_bulk_store(4 * W)[1, W](dst)
    np.testing.assert_array_equal(dst, np.concatenate([3 * np.arange(W), np.full(W, 7)]))


# ---------------------------------------------------------------------------------------------
# TMA: a box larger than the tile it lands in (or is stored from)
# ---------------------------------------------------------------------------------------------
def make_tma_load(tile_floats):
    @cuda.jit
    def kernel(tmap, out):
        tile = cuda.shared.array(tile_floats, np.float32, alignment=128)
        after = cuda.shared.array(BOX, np.float32)
        bars = cuda.shared.array(1, np.uint64)
        bar = ptx.addr(bars, 0)
        t = cuda.threadIdx.x
        after[t] = 0.5
        if t == 0:
            init_tma_barrier(bar, tmap)
        cuda.syncthreads()
        if t == 0:
            ptx.mbarrier_arrive_expect_tx(bar, BOX * 4)
            ptx.cp_async_bulk_tensor_1d_shared_global(ptx.addr(tile, 0), ptx.addr(tmap, 0), 0, bar)
        ptx.mbarrier_wait_parity(bar, 0)
        out[t] = tile[t % tile_floats] + after[t]
    return kernel


def _tmap(values):
    return TensorMap.tiled(cuda.to_device(values), (BOX,))


@pytest.mark.parametrize("seed", SEEDS)
def test_tma_load_past_the_end_of_its_tile_is_refused(seed):
    tmap = _tmap(np.arange(BOX, dtype=np.float32))
    msg = _message(lambda: make_tma_load(BOX // 2)[1, BOX](tmap, np.zeros(BOX, np.float32)), seed)
    assert msg.startswith("cp_async_bulk_tensor_1d_shared_global: a copy must stay inside the shared array its dst "
                          "points into"), msg
    assert ("[PTX ISA, cp.async.bulk.tensor], got 128 bytes at byte 0 of the 64-byte float32 shared array of "
            "shape (16,) (shared 0x0..0x40) declared at test_holes_bounds.py:") in msg, msg
    assert "bytes 0..128 run 64 bytes past its end" in msg and "thread (0, 0, 0) of block (0, 0, 0)" in msg, msg
    assert "ptx.cp_async_bulk_tensor_1d_shared_global(ptx.addr(tile, 0), ptx.addr(tmap, 0), 0, bar)" in msg, msg


@pytest.mark.parametrize("seed", SEEDS[:3])
def test_tma_load_into_a_tile_of_the_box_passes(seed, rng):
    a = rng.standard_normal(BOX).astype(np.float32)
    out = np.full(BOX, np.nan, np.float32)
    with sim.settings(seed=seed):
        make_tma_load(BOX)[1, BOX](_tmap(a), out)
    np.testing.assert_allclose(out, a.astype(np.float64) + 0.5, rtol=1e-6)


def make_tma_store(tile_floats):
    @cuda.jit
    def kernel(tmap):
        tile = cuda.shared.array(tile_floats, np.float32, alignment=128)
        after = cuda.shared.array(BOX, np.float32)
        t = cuda.threadIdx.x
        tile[t % tile_floats] = t + 0.25
        after[t] = -1.0
        ptx.fence_proxy_async_shared_cta()
        cuda.syncthreads()
        if t == 0:
            ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tmap, 0))
            ptx.cp_async_bulk_tensor_1d_global_shared(ptx.addr(tmap, 0), 0, ptx.addr(tile, 0))
            ptx.cp_async_bulk_commit_group()
            ptx.cp_async_bulk_wait_group_read(0)
    return kernel


@pytest.mark.parametrize("seed", SEEDS)
def test_tma_store_past_the_end_of_its_tile_is_refused(seed):
    tmap = _tmap(np.zeros(BOX, np.float32))
    msg = _message(lambda: make_tma_store(BOX // 2)[1, BOX // 2](tmap), seed)
    assert msg.startswith("cp_async_bulk_tensor_1d_global_shared: a copy must stay inside the shared array its src "
                          "points into"), msg
    assert "got 128 bytes at byte 0 of the 64-byte float32 shared array of shape (16,)" in msg, msg
    assert "bytes 0..128 run 64 bytes past its end" in msg and "thread (0, 0, 0) of block (0, 0, 0)" in msg, msg
    assert "ptx.cp_async_bulk_tensor_1d_global_shared(ptx.addr(tmap, 0), 0, ptx.addr(tile, 0))" in msg, msg


def test_tma_store_of_a_tile_of_the_box_passes():
    d = cuda.to_device(np.zeros(BOX, np.float32))
    make_tma_store(BOX)[1, BOX](TensorMap.tiled(d, (BOX,)))
    np.testing.assert_array_equal(d.copy_to_host(), np.arange(BOX, dtype=np.float32) + 0.25)
