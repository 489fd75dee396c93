"""Experiment (H200): does a TMA store clip at the tensor's last element, or at a 16-byte granule?
And does a TMA load fill zeros from the last element on, or read the row pitch's padding?

A 40 x W int32 window of a 60 x 80 buffer poisoned with -1, W = 49..56; one 16 x 32 box per CTA at
column origin 32 (hanging over the window's right edge). Prints, per W, which columns past the window
the store wrote and what the load returned for the columns past W (poison = read the padding)."""
import sys

import numpy as np
from numba import cuda

sys.path.insert(0, ".")
from tests.ptx.test_bulk_tensor import BOX_H, BOX_W, add_one_kernel, clipped_store_kernel  # noqa: E402
from asyncpipe.host.tensor_map import TensorMap  # noqa: E402

store = cuda.jit(clipped_store_kernel)
add1 = cuda.jit(add_one_kernel)
for w in range(49, 57):
    parent = cuda.to_device(np.full((60, 80), -1, np.int32))
    window = parent[8:48, 16:16 + w]
    tmap = TensorMap.tiled(window, (BOX_H, BOX_W))
    store[1, 128](tmap, cuda.to_device(np.array([[32, 0]], np.int32)))
    got = parent.copy_to_host()
    past = got[8:8 + BOX_H, 16 + w:16 + 64]
    wrote = sorted({int(c) + w for c in np.argwhere(past != -1)[:, 1]})
    # load side: values 7 inside, -1 in the padding columns; add_one loads, adds one, stores back
    host = np.full((60, 80), -1, np.int32)
    host[8:48, 16:16 + w] = 7
    parent2 = cuda.to_device(host)
    tmap2 = TensorMap.tiled(parent2[8:48, 16:16 + w], (BOX_H, BOX_W))
    timeouts = cuda.to_device(np.zeros(64, np.int32))
    add1[(2, 3), 128](tmap2, timeouts)
    g2 = parent2.copy_to_host()
    inside_ok = bool(np.all(g2[8:48, 16:16 + w] == 8))
    pad_changed = sorted({int(c) + w for c in np.argwhere(g2[8:48, 16 + w:] != -1)[:, 1]})
    print(f"W={w}: store wrote past the window at columns {wrote or 'none'}; "
          f"add-one inside correct: {inside_ok}; padding changed at columns {pad_changed or 'none'}", flush=True)
