"""The chapter's TMA program: add one to every element of a 2-D array, box by box, through TMA.

``add_one_tma`` is the chapter's kernel: one CTA per 16 x 32 box; one thread issues the load, the
mbarrier counts its bytes, every thread adds one in shared memory, both proxy fences, one thread
issues the store and waits until TMA has read shared memory before the CTA exits.

``add_one_pipelined`` goes past it: a persistent grid (a few CTAs per SM) walks the boxes with
``STAGES`` shared-memory buffers and one ``full`` mbarrier each, so that several loads are in flight
while the threads work on the current box and the stores drain behind them::

    prologue:  thread 0 issues boxes 0 .. STAGES-1 of this CTA, one per stage
    for box j: wait full[s] (phase j // STAGES); add one; fence.proxy.async; syncthreads;
               thread 0: store box j from stage s, commit; wait until at most one store is still
               reading shared memory (so stage s' of box j-1 is free); load box j-1+STAGES into s'

Edges: boxes over the edge load zeros (TMA's out-of-bounds fill) and their stores are clipped by
TMA to the map, which covers each row's whole 16-byte granules (a TMA store writes whole granules:
``asyncpipe.ptx.bulk_tensor``); the last ``cols % 4`` elements of a row, if any, go through a plain kernel. The tensor map lives in device memory, so each issuing thread acquires it once
(``fence.proxy.tensormap::generic.acquire.sys``, as the CUDA guide asks for a map the host wrote).
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda, float32, int32, uint64

from .. import ptx
from ..constants import BULK_SMEM_ALIGN_TENSOR, TMA_STORE_GRANULE
from ..host.plans import cached_tensor_map
from ..jit_cache import jit
from ..pipeline import unit_coords
from .unroll import unrolled

BOX_H, BOX_W = 16, 32              # the chapter's box: 16 rows x 32 int32 = 128-byte rows
# The pipelined kernel's defaults: 8 KiB boxes, 4 stages in 32 KiB of (static) shared memory.
# DTYPE, PIPE_STAGES and the box are compile-time constants (see _jit).
PIPE_BOX_H, PIPE_BOX_W = 32, 64
PIPE_STAGES = 4
PIPE_THREADS = 256
DTYPE = int32


def add_one_tma(tmap):
    tile = cuda.shared.array((BOX_H, BOX_W), DTYPE, alignment=BULK_SMEM_ALIGN_TENSOR)
    bars = cuda.shared.array(1, uint64)
    bar = ptx.addr(bars, 0)
    tid = cuda.threadIdx.x
    x = cuda.blockIdx.x * BOX_W                      # innermost coordinate (columns) first
    y = cuda.blockIdx.y * BOX_H

    if tid == 0:
        ptx.mbarrier_init(bar, cuda.blockDim.x)
        ptx.fence_proxy_async_shared_cta()           # the barrier's init, visible to TMA
    cuda.syncthreads()

    if tid == 0:
        ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tmap, 0))
        ptx.cp_async_bulk_tensor_2d_shared_global(ptx.addr(tile, (0, 0)), ptx.addr(tmap, 0), x, y, bar)
        ptx.mbarrier_arrive_expect_tx(bar, BOX_H * BOX_W * 4)   # one arrival, and the bytes to wait for
    else:
        ptx.mbarrier_arrive(bar)
    ptx.mbarrier_wait_parity(bar, 0)

    i = tid
    while i < BOX_H * BOX_W:
        tile[i // BOX_W, i % BOX_W] += DTYPE(1)
        i += cuda.blockDim.x

    ptx.fence_proxy_async_shared_cta()               # our writes, visible to the TMA store
    cuda.syncthreads()
    if tid == 0:
        ptx.cp_async_bulk_tensor_2d_global_shared(ptx.addr(tmap, 0), x, y, ptx.addr(tile, (0, 0)))
        ptx.cp_async_bulk_commit_group()
        ptx.cp_async_bulk_wait_group_read(0)         # TMA has read the tile: the CTA may exit


def add_one_pipelined(tmap, boxes_x, boxes_total):
    tiles = cuda.shared.array((PIPE_STAGES, PIPE_BOX_H, PIPE_BOX_W), DTYPE, alignment=BULK_SMEM_ALIGN_TENSOR)
    full = cuda.shared.array(PIPE_STAGES, uint64)
    tid = cuda.threadIdx.x
    step = cuda.gridDim.x
    box_bytes = PIPE_BOX_H * PIPE_BOX_W * 4

    # Box b sits at column-box b % boxes_x, row-box b // boxes_x (unit_coords: one 32-bit division, where stepping
    # by subtraction would loop step / boxes_x times a box: 528 times for a one-box-wide tensor on 132 SMs x 4).
    # The CTA walks b = blockIdx.x + j * step.
    def load(stage, b):                              # one thread: announce the bytes, issue the copy of box b
        bx, _, by = unit_coords(b, boxes_x, 1)
        ptx.mbarrier_arrive_expect_tx(ptx.addr(full, stage), box_bytes)
        ptx.cp_async_bulk_tensor_2d_shared_global(ptx.addr(tiles, (stage, 0, 0)), ptx.addr(tmap, 0),
                                                  bx * PIPE_BOX_W, by * PIPE_BOX_H, ptx.addr(full, stage))

    if tid == 0:
        for s in range(PIPE_STAGES):
            ptx.mbarrier_init(ptx.addr(full, s), 1)
        ptx.fence_proxy_async_shared_cta()           # the inits, visible to TMA
        ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tmap, 0))
    cuda.syncthreads()

    # ---- prologue: the first STAGES boxes of this CTA in flight ----------------------------------
    b_next = cuda.blockIdx.x                         # the next box to load
    if tid == 0:
        for s in range(PIPE_STAGES):
            if b_next < boxes_total:
                load(s, b_next)
            b_next += step

    # ---- main loop: box j of this CTA sits in stage j % STAGES -----------------------------------
    j = 0
    b = cuda.blockIdx.x
    while b < boxes_total:
        s = j % PIPE_STAGES
        ptx.mbarrier_wait_parity(ptx.addr(full, s), (j // PIPE_STAGES) & 1)
        e = tid
        while e < PIPE_BOX_H * PIPE_BOX_W:
            tiles[s, e // PIPE_BOX_W, e % PIPE_BOX_W] += DTYPE(1)
            e += PIPE_THREADS
        ptx.fence_proxy_async_shared_cta()           # our writes, visible to the TMA store
        cuda.syncthreads()
        if tid == 0:
            bx, _, by = unit_coords(b, boxes_x, 1)
            ptx.cp_async_bulk_tensor_2d_global_shared(ptx.addr(tmap, 0), bx * PIPE_BOX_W, by * PIPE_BOX_H,
                                                      ptx.addr(tiles, (s, 0, 0)))
            ptx.cp_async_bulk_commit_group()
            if j > 0:                                # refill the stage of box j-1 ...
                ptx.cp_async_bulk_wait_group_read(1)  # ... once its store has read it
                if b_next < boxes_total:
                    load((j - 1) % PIPE_STAGES, b_next)
                b_next += step
        j += 1
        b += step
    if tid == 0:
        ptx.cp_async_bulk_wait_group_read(0)         # every store has read shared memory: exit is safe


# ------------------------------------------------------------------------------------------------
# Host side
# ------------------------------------------------------------------------------------------------
class _Rows:
    """A contiguous buffer seen as ``rows`` x ``cols`` with a chosen row pitch (CUDA array interface)."""

    def __init__(self, base, rows, cols, pitch):
        cai = base.__cuda_array_interface__
        self.__cuda_array_interface__ = dict(shape=(rows, cols), strides=(pitch, cai_itemsize(cai)),
                                             typestr=cai["typestr"], data=cai["data"], version=3)
        self.base = base


def cai_itemsize(cai) -> int:
    return np.dtype(cai["typestr"]).itemsize


def as_tma_rows(api: str, a):
    """A 2-D view of ``a`` whose row pitch TMA accepts (a multiple of 16 bytes).

    A 2-D array with such a pitch is used as it is. A contiguous array whose rows are not 16-byte
    multiples (a 1 x 4097 array, say) is elementwise the same as one long row, whose pitch TMA never
    uses: it is seen as 1 x size with the pitch rounded up.
    """
    from ..errors import AsyncpipeError
    from .checks import as_device_array

    d = as_device_array(api, "a", a)
    if d.dtype not in (np.int32, np.float32):
        raise AsyncpipeError(api, "a must be int32 or float32", d.dtype)
    if d.ndim != 2:
        raise AsyncpipeError(api, "a must be 2-D", f"{d.ndim}-D of shape {d.shape}")
    rows, cols = d.shape
    if d.strides[1] == 4 and (d.strides[0] % 16 == 0 or rows == 1):
        pitch = d.strides[0] if rows > 1 else -(-cols * 4 // 16) * 16
        return _Rows(d, rows, cols, pitch), d
    if d.is_c_contiguous():
        n = rows * cols
        return _Rows(d, 1, n, -(-n * 4 // 16) * 16), d
    raise AsyncpipeError(api, "rows must be 16-byte aligned (TMA's global stride rule) or the array contiguous",
                         f"strides {d.strides}", "cuTensorMapEncodeTiled")


GRANULE_ELEMENTS = TMA_STORE_GRANULE // 4   # int32 / float32 elements of one 16-byte granule of a row


def add_one(a, pipelined: bool = True, ctas_per_sm: int = 2, stages: int = PIPE_STAGES, stream=0):
    """Adds one to every element of the 2-D int32 or float32 device array ``a`` in place, through TMA.

    The TMA store writes whole 16-byte granules of a row (``asyncpipe.ptx.bulk_tensor``, measured on the
    H200): a map over rows that end inside a granule would write past them. So the tensor map covers the
    whole granules of each row and the last ``cols % 4`` elements of a row, if any, are added by a plain
    kernel (``add_one_tail``) on the same stream."""
    view, d = as_tma_rows("add_one", a)
    rows, cols = view.__cuda_array_interface__["shape"]
    dtype = "int32" if d.dtype == np.int32 else "float32"
    main = cols - cols % GRANULE_ELEMENTS
    if main < cols:
        tail = _Rows(d, rows, cols, view.__cuda_array_interface__["strides"][0])
        _tail_kernel()[max(1, -(-rows * (cols - main) // 128)), 128, stream](tail, np.int32(main))
    if main == 0:
        return d
    view = _Rows(d, rows, main, view.__cuda_array_interface__["strides"][0])
    cols = main
    if not pipelined:
        tmap = cached_tensor_map(view, (BOX_H, BOX_W), dtype=dtype)
        grid = (-(-cols // BOX_W), -(-rows // BOX_H))
        _jit("chapter", dtype)[grid, 128, stream](tmap)
        return d
    tmap = cached_tensor_map(view, (PIPE_BOX_H, PIPE_BOX_W), dtype=dtype)
    boxes_x = -(-cols // PIPE_BOX_W)
    total = boxes_x * -(-rows // PIPE_BOX_H)
    grid = max(1, min(total, _sm_count() * ctas_per_sm))
    _jit("pipelined", dtype, stages)[grid, PIPE_THREADS, stream](tmap, np.int32(boxes_x), np.int32(total))
    return d


_kernels: dict = {}


@functools.lru_cache(maxsize=None)
def _sms(device_id: int) -> int:
    return cuda.get_current_device().MULTIPROCESSOR_COUNT


def _sm_count() -> int:
    return _sms(cuda.get_current_device().id)


def add_one_tail(a, c0):
    """a[r, c] += 1 for the columns c0.. of every row, one element a thread: the last elements of rows that end
    inside a 16-byte granule, which add_one's TMA store must not reach."""
    width = a.shape[1] - c0
    i = cuda.grid(1)
    if i < a.shape[0] * width:
        a[i // width, c0 + i % width] += 1


def _tail_kernel():
    key = ("tail",)
    if key not in _kernels:
        _kernels[key] = jit(add_one_tail)
    return _kernels[key]


def _jit(which: str, dtype: str, stages: int = PIPE_STAGES):
    key = (which, dtype, stages)
    if key not in _kernels:
        ty = {"int32": int32, "float32": float32}[dtype]
        fn = add_one_tma if which == "chapter" else add_one_pipelined
        _kernels[key] = jit(unrolled(fn, DTYPE=ty, PIPE_STAGES=stages))
    return _kernels[key]
