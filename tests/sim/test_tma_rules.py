"""The TMA rules measured on the H200 (asyncpipe.ptx.bulk_tensor): the two coordinate rules (on the GPU a broken one
stops the kernel with CUDA_ERROR_ILLEGAL_INSTRUCTION) and the store's 16-byte granule (on the GPU a store hanging
over the innermost edge of rows that end inside a granule writes the rest of the granule, unseen by memcheck;
scripts/experiments/tma_edge_granularity.py, 2026-12-02: 1..15 bytes past the edge for 1-, 2-, 4- and 8-byte
elements, loads exact). The simulator names each."""

import numpy as np
import pytest
from numba import cuda

from asyncpipe import ptx, sim
from asyncpipe.host import TensorMap

pytestmark = pytest.mark.sim

H, W = 4, 8                  # an 8-float row: 32 bytes


def make_load(x):
    @cuda.jit
    def kernel(tmap, out):
        tile = cuda.shared.array((H, W), np.float32, alignment=128)
        bar = cuda.shared.array(1, np.uint64)
        t = cuda.threadIdx.x
        if t == 0:
            ptx.mbarrier_init(ptx.addr(bar, 0), 1)
            ptx.fence_mbarrier_init_release_cluster()
        cuda.syncthreads()
        if t == 0:
            ptx.fence_proxy_tensormap_generic_acquire_gpu(ptx.addr(tmap, 0))
            ptx.cp_async_bulk_tensor_2d_shared_global(ptx.addr(tile, (0, 0)), ptx.addr(tmap, 0), x, 0,
                                                      ptx.addr(bar, 0))
            ptx.mbarrier_arrive_expect_tx(ptx.addr(bar, 0), H * W * 4)
        ptx.mbarrier_wait_parity(ptx.addr(bar, 0), 0)
        out[t // W, t % W] = tile[t // W, t % W]
    return kernel


def make_store(x, y):
    @cuda.jit
    def kernel(tmap):
        tile = cuda.shared.array((H, W), np.float32, alignment=128)
        t = cuda.threadIdx.x
        tile[t // W, t % W] = np.float32(t)
        ptx.fence_proxy_async_shared_cta()
        cuda.syncthreads()
        if t == 0:
            ptx.fence_proxy_tensormap_generic_acquire_gpu(ptx.addr(tmap, 0))
            ptx.cp_async_bulk_tensor_2d_global_shared(ptx.addr(tmap, 0), x, y, ptx.addr(tile, (0, 0)))
            ptx.cp_async_bulk_commit_group()
            ptx.cp_async_bulk_wait_group_read(0)
    return kernel


def array_and_map():
    a = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    d = cuda.to_device(a)
    return a, d, TensorMap.tiled(d, (H, W))


def test_misaligned_inner_coordinate_is_named():
    a, d, tmap = array_and_map()
    out = np.full((H, W), np.nan, np.float32)
    with pytest.raises(sim.SimUsageError, match=r"innermost coordinate times the element size must be a multiple "
                                                r"of 16 bytes.*c0 = 2 x 4 bytes"):
        make_load(2)[1, H * W](tmap, out)


def test_aligned_inner_coordinate_loads_its_box():
    a, d, tmap = array_and_map()
    out = np.full((H, W), np.nan, np.float32)
    make_load(4)[1, H * W](tmap, out)            # 4 floats: 16 bytes
    np.testing.assert_array_equal(out, a[:H, 4:4 + W])


def test_negative_store_coordinate_is_named():
    a, d, tmap = array_and_map()
    with pytest.raises(sim.SimUsageError, match=r"a TMA store's coordinates must not be negative.*\(0, -1\)"):
        make_store(0, -1)[1, H * W](tmap)


def test_store_over_the_far_edge_is_clipped():
    a, d, tmap = array_and_map()
    make_store(12, 6)[1, H * W](tmap)            # columns 12..19 of 16, rows 6..9 of 8
    got = d.copy_to_host()
    want = a.copy()
    want[6:8, 12:16] = np.arange(H * W, dtype=np.float32).reshape(H, W)[:2, :4]
    np.testing.assert_array_equal(got, want)


def pitched(rows, cols, width):
    """A rows x width float32 buffer of fresh random values and the map of its first ``cols`` columns (the row
    pitch, width x 4 bytes, a multiple of 16)."""
    buf = np.random.default_rng().standard_normal((rows, width)).astype(np.float32)
    d = cuda.to_device(buf)
    return buf, d, TensorMap.tiled(d[:, :cols], (H, W))


@pytest.mark.parametrize("cols", [13, 14, 15])
def test_store_over_a_row_ending_inside_a_granule_is_named(cols):
    """Rows of 13..15 floats (52..60 bytes): the box at column 8 hangs over the edge; on the H200 it would also
    write columns cols..15 of the padding."""
    _, d, tmap = pitched(8, cols, 16)
    with pytest.raises(sim.SimUsageError, match=rf"hanging over the innermost edge needs rows of a multiple of 16 "
                                                rf"bytes.*elements {cols}\.\.15 past the edge.*multiple of 4 elements"
                                                rf".*got innermost extent {cols} x 4 bytes = {cols * 4} bytes, box "
                                                rf"at c0 = 8 of 8 elements"):
        make_store(8, 0)[1, H * W](tmap)


def test_store_inside_a_row_ending_inside_a_granule_runs():
    """The same map, the box inside the rows (columns 0..7 of 13): nothing past the edge, no error."""
    buf, d, tmap = pitched(8, 13, 16)
    make_store(0, 2)[1, H * W](tmap)
    want = buf.copy()
    want[2:2 + H, :W] = np.arange(H * W, dtype=np.float32).reshape(H, W)
    np.testing.assert_array_equal(d.copy_to_host(), want)


def test_store_below_the_outer_edge_writes_nothing_and_runs():
    """A box whose rows all lie past the tensor's last row writes nothing, granule or not: no error."""
    buf, d, tmap = pitched(8, 13, 16)
    make_store(8, 8)[1, H * W](tmap)
    np.testing.assert_array_equal(d.copy_to_host(), buf)


def test_store_over_the_edge_of_granule_rows_is_clipped():
    """The twin: the map covers 16 floats (64 bytes, whole granules), the box hangs over at column 12, the
    elements past the edge are clipped exactly."""
    buf, d, tmap = pitched(8, 16, 20)
    make_store(12, 1)[1, H * W](tmap)
    want = buf.copy()
    want[1:1 + H, 12:16] = np.arange(H * W, dtype=np.float32).reshape(H, W)[:, :4]
    np.testing.assert_array_equal(d.copy_to_host(), want)
