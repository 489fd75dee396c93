"""cp.async.bulk.tensor (TMA): SASS offline, then exact copies on the GPU.

Conventions of every kernel here:

- Shared-memory boxes are declared with ``cuda.shared.array(..., alignment=128)`` (TMA needs 128-byte
  aligned boxes, ``constants.BULK_SMEM_ALIGN_TENSOR``; numba would otherwise align to the element
  size). The 128B-swizzle test asks for 1024, the span after which that swizzle pattern repeats.
- One thread (``threadIdx.x == 0``) initialises the mbarrier, acquires the tensor map with
  ``fence_proxy_tensormap_generic_acquire_gpu`` (it was written from the host), issues the copy and
  announces ``box_bytes`` with ``mbarrier_arrive_expect_tx``; every thread waits on parity 0.
- Waits are bounded (``WAIT_TRIES`` naps) and report a timeout in an output flag: a test may fail,
  never hang. Loops over a box use ``while`` (``range`` with a run-time step calls a 64-bit division).
"""

from pathlib import Path

import numpy as np
import pytest
from numba import cuda
from numba.cuda import types
from numba.cuda.np import numpy_support

from asyncpipe import ptx
from asyncpipe.constants import BULK_SMEM_ALIGN_TENSOR, TMA_COORD_ALIGN
from asyncpipe.ptx.tensor_map_type import tensormap
from tests.ptx.test_bulk import WAIT_NAP_NS, WAIT_TRIES
from tests.sass import assert_sass

TMAP = tensormap                          # how a TensorMap arrives in a kernel (ptx.tensor_map_type)
FLAGS = types.int32[::1]
SWIZZLE_128B_ALIGN = 1024                 # 8 rows x 128 bytes: the 128B swizzle pattern's period

LOADS = {1: ptx.cp_async_bulk_tensor_1d_shared_global, 2: ptx.cp_async_bulk_tensor_2d_shared_global,
         3: ptx.cp_async_bulk_tensor_3d_shared_global, 4: ptx.cp_async_bulk_tensor_4d_shared_global,
         5: ptx.cp_async_bulk_tensor_5d_shared_global}
MULTICASTS = {1: ptx.cp_async_bulk_tensor_1d_shared_global_multicast,
              2: ptx.cp_async_bulk_tensor_2d_shared_global_multicast,
              3: ptx.cp_async_bulk_tensor_3d_shared_global_multicast,
              4: ptx.cp_async_bulk_tensor_4d_shared_global_multicast,
              5: ptx.cp_async_bulk_tensor_5d_shared_global_multicast}
STORES = {1: ptx.cp_async_bulk_tensor_1d_global_shared, 2: ptx.cp_async_bulk_tensor_2d_global_shared,
          3: ptx.cp_async_bulk_tensor_3d_global_shared, 4: ptx.cp_async_bulk_tensor_4d_global_shared,
          5: ptx.cp_async_bulk_tensor_5d_global_shared}


def expected_box(a, origin, box, fill):
    """The box of ``a`` at ``origin`` (numpy order), elements outside ``a`` replaced by ``fill``."""
    out = np.full(box, fill, a.dtype)
    src, dst = [], []
    for o, b, n in zip(origin, box, a.shape):
        lo, hi = max(o, 0), min(o + b, n)
        if hi <= lo:
            return out
        src.append(slice(lo, hi))
        dst.append(slice(lo - o, hi - o))
    out[tuple(dst)] = a[tuple(src)]
    return out


def device_array_and_map(a, box, **options):
    from asyncpipe.host.tensor_map import TensorMap

    d = cuda.to_device(a)
    return d, TensorMap.tiled(d, box, **options)


# ---------------------------------------------------------------------------------------------
# The chapter's add-one: 16 x 32 int32 boxes, one thread issues, TMA load, +1, TMA store
# ---------------------------------------------------------------------------------------------
BOX_H, BOX_W = 16, 32
BOX_BYTES = BOX_H * BOX_W * 4


def add_one_kernel(tmap, timeouts):
    tile = cuda.shared.array((BOX_H, BOX_W), np.int32, alignment=BULK_SMEM_ALIGN_TENSOR)
    bar = cuda.shared.array(1, np.uint64)
    t = cuda.threadIdx.x
    x = np.int32(cuda.blockIdx.x * BOX_W)      # innermost coordinate (the column) first
    y = np.int32(cuda.blockIdx.y * BOX_H)
    if t == 0:
        ptx.mbarrier_init(ptx.addr(bar, 0), 1)
        ptx.fence_mbarrier_init_release_cluster()      # TMA (the async proxy) will complete_tx on it
    cuda.syncthreads()

    # --- load: one thread issues the copy and announces its bytes -------------------------------
    if t == 0:
        ptx.fence_proxy_tensormap_generic_acquire_gpu(ptx.addr(tmap, 0))
        ptx.cp_async_bulk_tensor_2d_shared_global(ptx.addr(tile, (0, 0)), ptx.addr(tmap, 0), x, y,
                                                  ptx.addr(bar, 0))
        ptx.mbarrier_arrive_expect_tx(ptx.addr(bar, 0), BOX_BYTES)
    landed = False
    for _ in range(WAIT_TRIES):                        # wait for phase 0 (parity 0) to complete
        if ptx.mbarrier_test_wait_parity(ptx.addr(bar, 0), 0) != 0:
            landed = True
            break
        cuda.nanosleep(WAIT_NAP_NS)
    if not landed:
        timeouts[cuda.blockIdx.y * cuda.gridDim.x + cuda.blockIdx.x] = 1
        return

    # --- every thread adds one -----------------------------------------------------------------
    i = t
    while i < BOX_H * BOX_W:
        tile[i // BOX_W, i % BOX_W] += 1
        i += cuda.blockDim.x
    ptx.fence_proxy_async_shared_cta()                 # the TMA store must see the threads' writes
    cuda.syncthreads()

    # --- store: one thread; shared memory must outlive the TMA's reads of it ---------------------
    if t == 0:
        ptx.cp_async_bulk_tensor_2d_global_shared(ptx.addr(tmap, 0), x, y, ptx.addr(tile, (0, 0)))
        ptx.cp_async_bulk_commit_group()
        ptx.cp_async_bulk_wait_group_read(0)


# ---------------------------------------------------------------------------------------------
# Rank 1..5 loads: block b loads the box at coords[b] (innermost first) and writes it out flat
# ---------------------------------------------------------------------------------------------
def make_load(rank, dtype, elems, box_bytes, poison, align=BULK_SMEM_ALIGN_TENSOR):
    def kernel(tmap, coords, out, timeouts):
        tile = cuda.shared.array(elems, dtype, alignment=align)
        bar = cuda.shared.array(1, np.uint64)
        t = cuda.threadIdx.x
        b = cuda.blockIdx.x
        i = t
        while i < elems:                               # poison: the box (and its fill) must overwrite it
            tile[i] = poison
            i += cuda.blockDim.x
        ptx.fence_proxy_async_shared_cta()             # the poison lands before TMA's writes
        if t == 0:
            ptx.mbarrier_init(ptx.addr(bar, 0), 1)
            ptx.fence_mbarrier_init_release_cluster()
        cuda.syncthreads()

        if t == 0:
            ptx.fence_proxy_tensormap_generic_acquire_gpu(ptx.addr(tmap, 0))
            ptx.prefetch_tensormap(ptx.addr(tmap, 0))  # a hint, after the acquire: harmless, exercised
            dst, m, w = ptx.addr(tile, 0), ptx.addr(tmap, 0), ptx.addr(bar, 0)
            if rank == 1:
                ptx.cp_async_bulk_tensor_1d_shared_global(dst, m, coords[b, 0], w)
            elif rank == 2:
                ptx.cp_async_bulk_tensor_2d_shared_global(dst, m, coords[b, 0], coords[b, 1], w)
            elif rank == 3:
                ptx.cp_async_bulk_tensor_3d_shared_global(dst, m, coords[b, 0], coords[b, 1], coords[b, 2], w)
            elif rank == 4:
                ptx.cp_async_bulk_tensor_4d_shared_global(dst, m, coords[b, 0], coords[b, 1], coords[b, 2],
                                                          coords[b, 3], w)
            else:
                ptx.cp_async_bulk_tensor_5d_shared_global(dst, m, coords[b, 0], coords[b, 1], coords[b, 2],
                                                          coords[b, 3], coords[b, 4], w)
            ptx.mbarrier_arrive_expect_tx(w, box_bytes)
        landed = False
        for _ in range(WAIT_TRIES):
            if ptx.mbarrier_test_wait_parity(ptx.addr(bar, 0), 0) != 0:
                landed = True
                break
            cuda.nanosleep(WAIT_NAP_NS)
        if not landed:
            timeouts[b] = 1
            return
        i = t
        while i < elems:
            out[b, i] = tile[i]
            i += cuda.blockDim.x

    return kernel


# shape, box (numpy order), dtype; every inner extent is a multiple of 16 bytes
RANKS = {
    1: ((1000,), (64,), np.float32),
    2: ((37, 100), (8, 16), np.int32),
    3: ((5, 12, 40), (2, 4, 8), np.float32),
    4: ((3, 4, 6, 24), (2, 2, 3, 8), np.uint16),
    5: ((2, 3, 4, 5, 16), (1, 2, 2, 3, 2), np.float64),
}


def random_array(rng, shape, dtype):
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


# ---------------------------------------------------------------------------------------------
# Clipped store: block b fills its box with b * 100000 + i and stores it at coords[b]
# ---------------------------------------------------------------------------------------------
def clipped_store_kernel(tmap, coords):
    tile = cuda.shared.array((BOX_H, BOX_W), np.int32, alignment=BULK_SMEM_ALIGN_TENSOR)
    t = cuda.threadIdx.x
    b = cuda.blockIdx.x
    i = t
    while i < BOX_H * BOX_W:
        tile[i // BOX_W, i % BOX_W] = b * 100000 + i
        i += cuda.blockDim.x
    ptx.fence_proxy_async_shared_cta()
    cuda.syncthreads()
    if t == 0:
        ptx.fence_proxy_tensormap_generic_acquire_gpu(ptx.addr(tmap, 0))
        ptx.cp_async_bulk_tensor_2d_global_shared(ptx.addr(tmap, 0), coords[b, 0], coords[b, 1],
                                                  ptx.addr(tile, (0, 0)))
        ptx.cp_async_bulk_commit_group()
        ptx.cp_async_bulk_wait_group_read(0)


# ---------------------------------------------------------------------------------------------
# 128B swizzle: load box rows 0..15 swizzled, copy shared memory out as it lies, store it back
# with the same map at rows 16..31 (the store un-swizzles)
# ---------------------------------------------------------------------------------------------
def swizzle_kernel(tmap, raw, timeouts):
    tile = cuda.shared.array((BOX_H, BOX_W), np.float32, alignment=SWIZZLE_128B_ALIGN)
    bar = cuda.shared.array(1, np.uint64)
    t = cuda.threadIdx.x
    if t == 0:
        ptx.mbarrier_init(ptx.addr(bar, 0), 1)
        ptx.fence_mbarrier_init_release_cluster()
    cuda.syncthreads()
    if t == 0:
        ptx.fence_proxy_tensormap_generic_acquire_gpu(ptx.addr(tmap, 0))
        ptx.cp_async_bulk_tensor_2d_shared_global(ptx.addr(tile, (0, 0)), ptx.addr(tmap, 0), 0, 0,
                                                  ptx.addr(bar, 0))
        ptx.mbarrier_arrive_expect_tx(ptx.addr(bar, 0), BOX_BYTES)
    landed = False
    for _ in range(WAIT_TRIES):
        if ptx.mbarrier_test_wait_parity(ptx.addr(bar, 0), 0) != 0:
            landed = True
            break
        cuda.nanosleep(WAIT_NAP_NS)
    if not landed:
        timeouts[0] = 1
        return
    i = t
    while i < BOX_H * BOX_W:
        raw[i] = tile[i // BOX_W, i % BOX_W]
        i += cuda.blockDim.x
    cuda.syncthreads()                                 # only reads of the tile since TMA wrote it
    if t == 0:
        ptx.cp_async_bulk_tensor_2d_global_shared(ptx.addr(tmap, 0), 0, BOX_H, ptx.addr(tile, (0, 0)))
        ptx.cp_async_bulk_commit_group()
        ptx.cp_async_bulk_wait_group_read(0)


def swizzle_128b(rows):
    """Where TMA's 128B swizzle puts each 16-byte chunk: chunk j of row r lands at chunk j ^ (r % 8)."""
    chunks = rows.reshape(rows.shape[0], 8, -1)
    out = np.empty_like(chunks)
    for r in range(rows.shape[0]):
        for j in range(8):
            out[r, j ^ (r % 8)] = chunks[r, j]
    return out.reshape(rows.shape)


# ---------------------------------------------------------------------------------------------
# Multicast: a cluster of n CTAs; slot s of every CTA receives box s of the cluster's rows
# ---------------------------------------------------------------------------------------------
def make_multicast(n, every):
    """``every``: CTA r issues box r to all; otherwise CTA 0 issues all n boxes."""
    mask = np.uint16((1 << n) - 1)
    expect = n * BOX_BYTES

    def kernel(tmap, out, timeouts):
        tiles = cuda.shared.array((n, BOX_H, BOX_W), np.int32, alignment=BULK_SMEM_ALIGN_TENSOR)
        bar = cuda.shared.array(1, np.uint64)
        t = cuda.threadIdx.x
        b = cuda.blockIdx.x
        rank = ptx.cluster_ctarank()
        cluster = b // n                               # 1-D grid: a cluster is n consecutive blocks
        if t == 0:
            ptx.mbarrier_init(ptx.addr(bar, 0), 1)
            ptx.fence_mbarrier_init_release_cluster()  # visible to peer CTAs' TMA multicasts
            ptx.mbarrier_arrive_expect_tx(ptx.addr(bar, 0), expect)
        # every CTA's barrier exists and expects its bytes before any CTA multicasts into it
        ptx.barrier_cluster_arrive()
        ptx.barrier_cluster_wait()

        if t == 0:
            ptx.fence_proxy_tensormap_generic_acquire_gpu(ptx.addr(tmap, 0))
            for s in range(n):
                if (every and s == rank) or (not every and rank == 0):
                    ptx.cp_async_bulk_tensor_2d_shared_global_multicast(
                        ptx.addr(tiles, (s, 0, 0)), ptx.addr(tmap, 0), np.int32(0),
                        np.int32((cluster * n + s) * BOX_H), ptx.addr(bar, 0), mask)
        landed = False
        for _ in range(WAIT_TRIES):
            if ptx.mbarrier_test_wait_parity(ptx.addr(bar, 0), 0) != 0:
                landed = True
                break
            cuda.nanosleep(WAIT_NAP_NS)
        if landed:
            i = t
            while i < n * BOX_H * BOX_W:
                s = i // (BOX_H * BOX_W)
                r = (i // BOX_W) % BOX_H
                c = i % BOX_W
                out[b, s, r, c] = tiles[s, r, c]
                i += cuda.blockDim.x
        else:
            timeouts[b] = 1
        # no CTA exits while a peer may still multicast into it (its shared memory must exist)
        ptx.barrier_cluster_arrive()
        ptx.barrier_cluster_wait()

    return kernel


# ---------------------------------------------------------------------------------------------
# SASS probe: every form of one rank, and the prefetch
# ---------------------------------------------------------------------------------------------
def make_probe(rank):
    def kernel(tmap, coords, out):
        tile = cuda.shared.array(1024, np.int32, alignment=BULK_SMEM_ALIGN_TENSOR)
        bar = cuda.shared.array(1, np.uint64)
        dst, m, w = ptx.addr(tile, 0), ptx.addr(tmap, 0), ptx.addr(bar, 0)
        c = coords
        mask = np.uint16(3)
        ptx.prefetch_tensormap(m)
        if rank == 1:
            ptx.cp_async_bulk_tensor_1d_shared_global(dst, m, c[0], w)
            ptx.cp_async_bulk_tensor_1d_shared_global_multicast(dst, m, c[0], w, mask)
            ptx.cp_async_bulk_tensor_1d_global_shared(m, c[0], dst)
        elif rank == 2:
            ptx.cp_async_bulk_tensor_2d_shared_global(dst, m, c[0], c[1], w)
            ptx.cp_async_bulk_tensor_2d_shared_global_multicast(dst, m, c[0], c[1], w, mask)
            ptx.cp_async_bulk_tensor_2d_global_shared(m, c[0], c[1], dst)
        elif rank == 3:
            ptx.cp_async_bulk_tensor_3d_shared_global(dst, m, c[0], c[1], c[2], w)
            ptx.cp_async_bulk_tensor_3d_shared_global_multicast(dst, m, c[0], c[1], c[2], w, mask)
            ptx.cp_async_bulk_tensor_3d_global_shared(m, c[0], c[1], c[2], dst)
        elif rank == 4:
            ptx.cp_async_bulk_tensor_4d_shared_global(dst, m, c[0], c[1], c[2], c[3], w)
            ptx.cp_async_bulk_tensor_4d_shared_global_multicast(dst, m, c[0], c[1], c[2], c[3], w, mask)
            ptx.cp_async_bulk_tensor_4d_global_shared(m, c[0], c[1], c[2], c[3], dst)
        else:
            ptx.cp_async_bulk_tensor_5d_shared_global(dst, m, c[0], c[1], c[2], c[3], c[4], w)
            ptx.cp_async_bulk_tensor_5d_shared_global_multicast(dst, m, c[0], c[1], c[2], c[3], c[4], w, mask)
            ptx.cp_async_bulk_tensor_5d_global_shared(m, c[0], c[1], c[2], c[3], c[4], dst)
        ptx.cp_async_bulk_commit_group()
        ptx.cp_async_bulk_wait_group_read(0)
        out[0] = tile[cuda.threadIdx.x]

    return kernel


# ---------------------------------------------------------------------------------------------
# Registry and shim agree
# ---------------------------------------------------------------------------------------------
def test_registry_matches_shim():
    names = {n for n, p in ptx.REGISTRY.items() if p.stem == "bulk_tensor"}
    assert len(names) == 3 * 5 + 1
    text = Path(ptx.REGISTRY["prefetch_tensormap"].shim_path).read_text()
    shims = {line.split("void ap_", 1)[1].split("(", 1)[0] for line in text.splitlines() if 'extern "C"' in line}
    assert shims == names
    flat = " ".join(line.lstrip("/ ").strip() for line in text.splitlines() if line.startswith("//"))
    for name in names:
        p = ptx.REGISTRY[name]
        assert " ".join(p.ptx.split()) in flat, f"{name}: its PTX line is not a comment of the shim"
        assert p.arch_specific == name.endswith("_multicast")


# ---------------------------------------------------------------------------------------------
# Offline SASS
# ---------------------------------------------------------------------------------------------
@pytest.mark.sass
@pytest.mark.parametrize("rank", range(1, 6))
def test_forms_sass(rank):
    has = [*LOADS[rank].primitive.sass, *MULTICASTS[rank].primitive.sass, *STORES[rank].primitive.sass,
           *ptx.prefetch_tensormap.primitive.sass]
    assert_sass(make_probe(rank), (TMAP, types.int32[::1], types.int32[::1]), has=has)


@pytest.mark.sass
def test_add_one_sass():
    cubin = assert_sass(add_one_kernel, (TMAP, FLAGS), has=("UTMALDG.2D", "UTMASTG.2D", "UTMACMDFLUSH", "SYNCS"))
    assert cubin.count("UTMALDG") == 1 and cubin.count("UTMASTG") == 1


@pytest.mark.sass
@pytest.mark.parametrize("rank", range(1, 6))
def test_load_kernel_sass(rank):
    shape, box, dtype = RANKS[rank]
    elems = int(np.prod(box))
    kernel = make_load(rank, dtype, elems, elems * np.dtype(dtype).itemsize, dtype(7))
    out = types.Array(numpy_support.from_dtype(np.dtype(dtype)), 2, "C")
    assert_sass(kernel, (TMAP, types.int32[:, ::1], out, FLAGS),
                has=(*LOADS[rank].primitive.sass, *ptx.prefetch_tensormap.primitive.sass))


@pytest.mark.sass
def test_store_and_swizzle_kernels_sass():
    assert_sass(clipped_store_kernel, (TMAP, types.int32[:, ::1]), has=("UTMASTG.2D", "UTMACMDFLUSH"))
    assert_sass(swizzle_kernel, (TMAP, types.float32[::1], FLAGS), has=("UTMALDG.2D", "UTMASTG.2D"))


@pytest.mark.sass
@pytest.mark.parametrize("every", [False, True])
def test_multicast_kernel_sass(every):
    assert_sass(make_multicast(4, every), (TMAP, types.int32[:, :, :, ::1], FLAGS),
                has=("UTMALDG.2D.MULTICAST", "UCGABAR_ARV", "UCGABAR_WAIT"))


@pytest.mark.sass
def test_box_alignment_reaches_ptx():
    """numba honours ``alignment=``: the tile is declared ``.align 128`` (1024 for the swizzle test)."""
    text, _ = cuda.compile_ptx(add_one_kernel, (TMAP, FLAGS), cc=(9, 0))
    assert any(".shared .align 128 .b8" in line and f"[{BOX_BYTES}]" in line for line in text.splitlines()), text
    text, _ = cuda.compile_ptx(swizzle_kernel, (TMAP, types.float32[::1], FLAGS), cc=(9, 0))
    assert any(f".shared .align {SWIZZLE_128B_ALIGN} .b8" in line for line in text.splitlines()), text


# ---------------------------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.hopper
def test_add_one_gpu(rng):
    rows, cols = 256, 512
    a = rng.integers(-(2**30), 2**30, (rows, cols), dtype=np.int32)
    d, tmap = device_array_and_map(a, (BOX_H, BOX_W))
    assert tmap.box_bytes == BOX_BYTES
    timeouts = cuda.to_device(np.zeros((rows // BOX_H) * (cols // BOX_W), np.int32))
    cuda.jit(add_one_kernel)[(cols // BOX_W, rows // BOX_H), 128](tmap, timeouts)
    assert not timeouts.copy_to_host().any(), "a TMA load never completed its mbarrier phase"
    np.testing.assert_array_equal(d.copy_to_host(), a + 1)


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("rank", range(1, 6))
def test_load_ranks_gpu(rank, rng):
    shape, box, dtype = RANKS[rank]
    a = random_array(rng, shape, dtype)
    d, tmap = device_array_and_map(a, box)
    blocks = 16
    # the innermost coordinate times the itemsize must be a multiple of 16 bytes (TMA_COORD_ALIGN)
    step = TMA_COORD_ALIGN // np.dtype(dtype).itemsize
    origins = [tuple(int(rng.integers(0, n - b + 1)) for n, b in zip(shape, box)) for _ in range(blocks)]
    origins = [(*o[:-1], o[-1] // step * step) for o in origins]
    origins[0] = (0,) * rank
    origins[1] = tuple(n - b for n, b in zip(shape, box))           # the far corner (aligned in RANKS)
    assert origins[1][-1] % step == 0
    coords = np.array([o[::-1] for o in origins], np.int32)         # PTX order: innermost first
    elems = int(np.prod(box))
    poison = dtype(7)
    out = cuda.to_device(np.full((blocks, elems), poison, dtype))
    timeouts = cuda.to_device(np.zeros(blocks, np.int32))
    kernel = cuda.jit(make_load(rank, dtype, elems, tmap.box_bytes, poison))
    kernel[blocks, 128](tmap, cuda.to_device(coords), out, timeouts)
    assert not timeouts.copy_to_host().any(), "a TMA load never completed its mbarrier phase"
    got = out.copy_to_host()
    for k, o in enumerate(origins):
        np.testing.assert_array_equal(got[k].reshape(box), expected_box(a, o, box, 0), err_msg=f"box at {o}")


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("fill", ["zero", "nan"])
def test_out_of_bounds_fill_gpu(fill, rng):
    a = rng.standard_normal((40, 52)).astype(np.float32)
    d, tmap = device_array_and_map(a, (BOX_H, BOX_W), oob_fill=fill)
    # numpy order: (row, column); columns are multiples of 4 float32 (TMA_COORD_ALIGN)
    origins = [(30, 40), (-4, -8), (38, -28), (-15, 48), (0, 0)]
    coords = np.array([o[::-1] for o in origins], np.int32)
    poison = np.float32(-12345.5)
    out = cuda.to_device(np.full((len(origins), BOX_H * BOX_W), poison, np.float32))
    timeouts = cuda.to_device(np.zeros(len(origins), np.int32))
    kernel = cuda.jit(make_load(2, np.float32, BOX_H * BOX_W, tmap.box_bytes, poison))
    kernel[len(origins), 128](tmap, cuda.to_device(coords), out, timeouts)
    assert not timeouts.copy_to_host().any(), "a TMA load never completed its mbarrier phase"
    got = out.copy_to_host()
    value = 0.0 if fill == "zero" else np.nan
    for k, o in enumerate(origins):
        want = expected_box(a, o, (BOX_H, BOX_W), value)
        np.testing.assert_array_equal(got[k].reshape(BOX_H, BOX_W), want, err_msg=f"box at {o}")


@pytest.mark.gpu
@pytest.mark.hopper
def test_one_row_view_of_a_pitched_array_gpu(rng):
    """Row 2 of a 5 x 8 float32 array, its first 6 columns: a view that counts as contiguous, whose interface says
    24 bytes from row to row (not a multiple of 16; TMA never steps along its one row). It is described and loaded:
    its columns 4 and 5, then TMA's zeros past column 6."""
    from asyncpipe.host.tensor_map import TensorMap

    a = rng.standard_normal((5, 8)).astype(np.float32)
    d = cuda.to_device(a)
    tmap = TensorMap.tiled(d[2:3, :6], (1, 4))
    origins = [(0, 0), (0, 4)]
    coords = np.array([o[::-1] for o in origins], np.int32)
    poison = np.float32(-12345.5)
    out = cuda.to_device(np.full((len(origins), 4), poison, np.float32))
    timeouts = cuda.to_device(np.zeros(len(origins), np.int32))
    kernel = cuda.jit(make_load(2, np.float32, 4, tmap.box_bytes, poison))
    kernel[len(origins), 32](tmap, cuda.to_device(coords), out, timeouts)
    assert not timeouts.copy_to_host().any(), "a TMA load never completed its mbarrier phase"
    got = out.copy_to_host()
    np.testing.assert_array_equal(got[0], a[2, :4])
    np.testing.assert_array_equal(got[1], [a[2, 4], a[2, 5], 0, 0])


@pytest.mark.gpu
@pytest.mark.hopper
def test_clipped_store_gpu():
    # The map covers a 40 x 52 window of a 60 x 80 buffer; everything outside the window is poison
    # that the boxes hanging over the window's far edges must not touch.
    poison = np.int32(-1)
    parent = cuda.to_device(np.full((60, 80), poison, np.int32))
    window = parent[8:48, 16:68]
    from asyncpipe.host.tensor_map import TensorMap

    tmap = TensorMap.tiled(window, (BOX_H, BOX_W))
    # numpy order, non-overlapping, overhanging the far edges; columns are multiples of 4 int32
    # (TMA_COORD_ALIGN) and none is negative (a TMA store at a negative coordinate stops the kernel)
    origins = [(30, 40), (14, 8), (30, 0), (0, 44)]
    coords = np.array([o[::-1] for o in origins], np.int32)
    cuda.jit(clipped_store_kernel)[len(origins), 128](tmap, cuda.to_device(coords))
    got = parent.copy_to_host()

    want = np.full((60, 80), poison, np.int32)
    view = want[8:48, 16:68]
    for b, (r0, c0) in enumerate(origins):
        box = (b * 100000 + np.arange(BOX_H * BOX_W, dtype=np.int32)).reshape(BOX_H, BOX_W)
        for r in range(BOX_H):
            for c in range(BOX_W):
                if 0 <= r0 + r < 40 and 0 <= c0 + c < 52:
                    view[r0 + r, c0 + c] = box[r, c]
    np.testing.assert_array_equal(got, want)


@pytest.mark.gpu
@pytest.mark.hopper
def test_swizzle_128b_gpu(rng):
    a = rng.standard_normal((2 * BOX_H, BOX_W)).astype(np.float32)  # rows of 32 float32 = 128 bytes
    d, tmap = device_array_and_map(a, (BOX_H, BOX_W), swizzle="128B")
    raw = cuda.to_device(np.full(BOX_H * BOX_W, np.nan, np.float32))
    timeouts = cuda.to_device(np.zeros(1, np.int32))
    cuda.jit(swizzle_kernel)[1, 128](tmap, raw, timeouts)
    assert not timeouts.copy_to_host().any(), "the TMA load never completed its mbarrier phase"
    got = d.copy_to_host()
    # round trip: the store with the same map un-swizzles what the load swizzled
    np.testing.assert_array_equal(got[BOX_H:], a[:BOX_H])
    np.testing.assert_array_equal(got[:BOX_H], a[:BOX_H])
    # the documented pattern: 16-byte chunk j of row r sits at chunk j ^ (r % 8)
    np.testing.assert_array_equal(raw.copy_to_host().reshape(BOX_H, BOX_W), swizzle_128b(a[:BOX_H]))


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("every", [False, True], ids=["rank0_issues", "every_cta_issues"])
def test_multicast_gpu(n, every, rng):
    from asyncpipe.host.launch import launch

    clusters = 2
    a = rng.integers(-(2**30), 2**30, (clusters * n * BOX_H, 2 * BOX_W), dtype=np.int32)
    _, tmap = device_array_and_map(a, (BOX_H, BOX_W))
    blocks = clusters * n
    out = cuda.to_device(np.full((blocks, n, BOX_H, BOX_W), -1, np.int32))
    timeouts = cuda.to_device(np.zeros(blocks, np.int32))
    launch(cuda.jit(make_multicast(n, every)), blocks, 128, tmap, out, timeouts, cluster=n)
    cuda.synchronize()
    assert not timeouts.copy_to_host().any(), "a CTA never received all its multicast bytes"
    got = out.copy_to_host()
    for b in range(blocks):
        cluster = b // n
        for s in range(n):
            row = (cluster * n + s) * BOX_H
            np.testing.assert_array_equal(got[b, s], a[row:row + BOX_H, :BOX_W], err_msg=f"CTA {b}, slot {s}")
