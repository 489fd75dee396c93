"""Experiment (H200): at the innermost edge of a tensor whose rows end mid-16-byte granule, what does a TMA store
write and what does a TMA load return?

For each element size (1, 2, 4, 8 bytes) and each innermost extent W over a granule (48 bytes + 0..15 bytes of
elements), a 40 x W window of a 60-row buffer with a 256-byte pitch, every byte outside the window a known
pattern. One CTA stores a 16 x 64-byte box at the last 64-byte-aligned column origin before W (the box hangs over
the edge), another loads the same box. Prints, per case, the elements past W the store wrote and, for the load,
whether the elements past W came back as the fill (zero) or as what lies in memory there.

``--rank1 W``: a rank-1 int32 tensor of exactly W elements (its own allocation), a 32-element box stored at
origin 32: run under compute-sanitizer memcheck to see whether a write past the allocation is reported."""
import sys

import numpy as np
from numba import cuda, uint8, uint64

sys.path.insert(0, ".")
from asyncpipe import ptx  # noqa: E402
from asyncpipe.host.tensor_map import TensorMap  # noqa: E402

BOXH, BOXB = 16, 64          # box: 16 rows x 64 bytes
PITCH = 256


@cuda.jit
def store_kernel(tmap, c0):
    tile = cuda.shared.array((BOXH, BOXB), uint8, alignment=128)
    t = cuda.threadIdx.x
    i = t
    while i < BOXH * BOXB:
        tile[i // BOXB, i % BOXB] = 0xA0 + i % 16 + 1
        i += cuda.blockDim.x
    ptx.fence_proxy_async_shared_cta()
    cuda.syncthreads()
    if t == 0:
        ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tmap, 0))
        ptx.cp_async_bulk_tensor_2d_global_shared(ptx.addr(tmap, 0), c0, 0, ptx.addr(tile, (0, 0)))
        ptx.cp_async_bulk_commit_group()
        ptx.cp_async_bulk_wait_group_read(0)


@cuda.jit
def load_kernel(tmap, c0, out):
    tile = cuda.shared.array((BOXH, BOXB), uint8, alignment=128)
    bar = cuda.shared.array(1, uint64)
    t = cuda.threadIdx.x
    if t == 0:
        ptx.mbarrier_init(ptx.addr(bar, 0), 1)
        ptx.fence_mbarrier_init_release_cluster()
    cuda.syncthreads()
    if t == 0:
        ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tmap, 0))
        ptx.mbarrier_arrive_expect_tx(ptx.addr(bar, 0), BOXH * BOXB)
        ptx.cp_async_bulk_tensor_2d_shared_global(ptx.addr(tile, (0, 0)), ptx.addr(tmap, 0), c0, 0, ptx.addr(bar, 0))
    ptx.mbarrier_wait_parity(ptx.addr(bar, 0), 0)
    i = t
    while i < BOXH * BOXB:
        out[i] = tile[i // BOXB, i % BOXB]
        i += cuda.blockDim.x


@cuda.jit
def store1_kernel(tmap):
    tile = cuda.shared.array(32, np.int32, alignment=128)
    t = cuda.threadIdx.x
    tile[t] = 1000 + t
    ptx.fence_proxy_async_shared_cta()
    cuda.syncthreads()
    if t == 0:
        ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tmap, 0))
        ptx.cp_async_bulk_tensor_1d_global_shared(ptx.addr(tmap, 0), 32, ptx.addr(tile, 0))
        ptx.cp_async_bulk_commit_group()
        ptx.cp_async_bulk_wait_group_read(0)


def case(dtype, w):
    item = np.dtype(dtype).itemsize
    host = np.full((60, PITCH), 0x5C, np.uint8)            # the bytes outside the window: 0x5C
    win = np.arange(40 * w * item, dtype=np.int64).reshape(40, w * item) % 7 + 1
    host[:40, :w * item] = win                             # inside: 1..7
    cols = BOXB // item
    c0 = (w // cols) * cols if w % cols else w - cols      # the box hangs over the edge (or ends at it)
    buf = cuda.to_device(host.view(dtype))                 # 60 x (256 / item) elements, pitch 256 bytes
    window = buf[:40, :w]
    tmap = TensorMap.tiled(window, (BOXH, cols))
    out = cuda.to_device(np.full(BOXH * BOXB, 0xEE, np.uint8))
    load_kernel[1, 128](tmap, np.int32(c0), out)
    got_load = out.copy_to_host().reshape(BOXH, BOXB)
    store_kernel[1, 128](tmap, np.int32(c0))
    got = buf.copy_to_host().view(np.uint8)
    edge = w * item                                        # byte column of the edge
    wrote = np.nonzero((got[:BOXH, edge:] != 0x5C).any(axis=0))[0]
    past_load = got_load[:, edge - c0 * item:]
    load_past = ("zero" if not past_load.any() else "memory" if (past_load == 0x5C).all() else "mixed")
    inside_ok = bool((got_load[:, :edge - c0 * item] == host[:BOXH, c0 * item:edge]).all())
    print(f"{np.dtype(dtype).name:>7} W={w:3d} ({edge:3d} B) c0={c0:3d}: store wrote {len(wrote):2d} bytes past the "
          f"edge; load past the edge: {load_past}; load inside correct: {inside_ok}", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--rank1"]:
        w = int(sys.argv[2])
        a = cuda.to_device(np.zeros(w, np.int32))
        store1_kernel[1, 32](TensorMap.tiled(a, (32,)))
        cuda.synchronize()
        print(f"rank-1 store of a 32-element box at 32 into a {w}-element allocation: done", a.copy_to_host()[-3:])
    else:
        for dtype in (np.uint8, np.uint16, np.int32, np.int64):
            item = np.dtype(dtype).itemsize
            for extra in range(0, 16, item):
                case(dtype, (48 + extra) // item)
