"""Out-of-place transpose of a float32 row-major matrix into a zero-padded buffer.

``prepare(src, dst, rows, cols, rows_out, cols_out)``: the prepared launch that makes ``dst`` (``cols_out x
rows_out``, row-major, flat) ``dst[c, r] = src[r, c]`` inside ``src`` and 0 in the padding (``r >= rows`` or
``c >= cols``). The SGEMM's ``schedule="kmajor"`` reads A through it: A's tiles then lie k-major in memory as B's
do.

A CTA of 32 x 8 threads moves a 32 x 32 tile through shared memory, each thread four elements: a warp reads one
128-byte row of the tile and writes one 128-byte row of the result. The tile's rows are padded by one float, so
that the column reads of the second half fall in 32 different banks.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32

from ..jit_cache import jit

TILE, ROWS = 32, 8                     # a CTA: TILE x ROWS threads, each moving TILE // ROWS elements
PITCH = TILE + 1                       # floats from one row of the shared tile to the next


def _transpose(src, dst, rows, cols, rows_out, cols_out):
    tile = cuda.shared.array((TILE, PITCH), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    c = cuda.blockIdx.x * TILE + tx                   # read: src row r, column c
    for k in range(0, TILE, ROWS):
        r = cuda.blockIdx.y * TILE + ty + k
        tile[ty + k, tx] = src[r * cols + c] if r < rows and c < cols else float32(0)
    cuda.syncthreads()
    r = cuda.blockIdx.y * TILE + tx                   # write: dst row c, column r
    for k in range(0, TILE, ROWS):
        c = cuda.blockIdx.x * TILE + ty + k
        if c < cols_out and r < rows_out:
            dst[c * rows_out + r] = tile[tx, ty + k]


_kernel = None


def prepare(src, dst, rows: int, cols: int, rows_out: int, cols_out: int, stream=0):
    """The ``PreparedLaunch`` of the transpose of flat float32 device arrays ``src`` (``rows x cols``) into ``dst``
    (``cols_out x rows_out``): one CTA per 32 x 32 tile of ``dst``."""
    from ..host.launch import prepare_launch

    global _kernel
    if _kernel is None:                               # compiled on first use; numba's disk cache keeps it
        _kernel = jit(_transpose)
    grid = (cols_out + TILE - 1) // TILE, (rows_out + TILE - 1) // TILE
    return prepare_launch(_kernel, grid, (TILE, ROWS), src, dst, np.int32(rows), np.int32(cols), np.int32(rows_out),
                          np.int32(cols_out), stream=stream)
