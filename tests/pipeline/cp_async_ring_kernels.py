"""A pipelined row-sum written three ways, for the cp.async ring's tests (SASS, simulator, GPU).

``y[r] = sum(x[r, :])`` for a row-major ``rows x cols`` float32 matrix (``cols`` a multiple of 4, so that
every row starts 16-byte aligned). A CTA of ``threads`` threads owns ``threads // 32`` rows and streams
them through ``stages`` shared-memory slots in tiles of ``tile_cols`` columns. The copies are 16-byte
chunks of the flat tile, consecutive threads on consecutive chunks (coalesced); the compute is one warp
per row, lane l reading columns l, l + 32, ...: a warp reads what other warps copied, so the block
barrier is needed. Outside the matrix a copy reads nothing and writes zeros (``src_size`` 0).

``style``: ``"ring"`` (``cp_async_ring``), ``"verbs"`` (its verbs, in the chapter's order) or ``"hand"``
(the chapter's loop written out, as ``asyncpipe/kernels/sgemm.py`` writes it). All three must compile to
the same SASS.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32, types

from asyncpipe import ptx
from asyncpipe.pipeline import (cp_async_ring, cp_async_ring_advance, cp_async_ring_issue, cp_async_ring_prologue,
                                cp_async_ring_wait)

STYLES = ("ring", "verbs", "hand")
ARGS = (types.float32[:, ::1], types.float32[::1])
FULL_MASK = 0xFFFFFFFF


def make_rowsum(stages: int, style: str, threads: int = 256, tile_cols: int = 256, read_ahead: bool = False):
    """The row-sum kernel (a plain function: ``cuda.jit`` it, or compile it offline) for ``stages`` slots.
    ``read_ahead``: a broken compute that reads the slot after its own (the next tile's, still in flight)."""
    rows_per_cta = threads // 32
    tile_floats = rows_per_cta * tile_cols
    chunks = tile_floats // 4 // threads                  # 16-byte copies per thread per tile
    assert chunks * 4 * threads == tile_floats and tile_cols % 32 == 0

    @cuda.jit(device=True, inline="always")
    def load_tile(slot, tile, args):
        tiles, x, row0 = args
        rows, cols = x.shape
        for c in range(chunks):
            e = (c * threads + cuda.threadIdx.x) * 4      # element of the flat tile
            r = row0 + e // tile_cols
            col = tile * tile_cols + e % tile_cols
            inside = r < rows and col < cols
            ptx.cp_async_cg_shared_global_16_src_size(ptx.addr(tiles, (slot, e)), ptx.addr(x, (r, col) if inside
                                                      else (0, 0)), 16 if inside else 0)

    @cuda.jit(device=True, inline="always")
    def sum_tile(slot, tile, acc, args):
        tiles, x, row0 = args
        if read_ahead:
            slot = slot + 1 if slot < stages - 1 else 0
        base = (cuda.threadIdx.x // 32) * tile_cols + cuda.threadIdx.x % 32
        for j in range(tile_cols // 32):
            acc += tiles[slot, base + 32 * j]
        return acc

    def rowsum(x, y):
        tiles = cuda.shared.array((stages, tile_floats), float32, alignment=16)
        row0 = cuda.blockIdx.x * rows_per_cta
        num_tiles = (x.shape[1] + tile_cols - 1) // tile_cols
        args = (tiles, x, row0)
        acc = float32(0)
        if style == "ring":
            acc = cp_async_ring(num_tiles, stages, load_tile, sum_tile, acc, args)
        elif style == "verbs":
            ring = cp_async_ring_prologue(num_tiles, stages, load_tile, args)
            for kt in range(num_tiles):
                cp_async_ring_wait(stages)
                cp_async_ring_issue(ring, kt, num_tiles, stages, load_tile, args)
                acc = sum_tile(ring.read, kt, acc, args)
                ring = cp_async_ring_advance(ring, stages)
        else:
            # ---- prologue: tiles 0 .. S-2 in flight, one group each -------------------------------
            for s in range(stages - 1):
                if s < num_tiles:
                    load_tile(s, s, args)
                ptx.cp_async_commit_group()
            # ---- main loop ------------------------------------------------------------------------
            read = 0
            write = stages - 1
            for kt in range(num_tiles):
                ptx.cp_async_wait_group(stages - 2)
                cuda.syncthreads()
                nxt = kt + stages - 1
                if nxt < num_tiles:
                    load_tile(write, nxt, args)
                ptx.cp_async_commit_group()
                acc = sum_tile(read, kt, acc, args)
                write = read
                read = read + 1 if read < stages - 1 else 0
        # ---- epilogue: the warp's 32 partial sums, lane 0 stores the row ---------------------------
        for offset in (16, 8, 4, 2, 1):
            acc += cuda.shfl_down_sync(FULL_MASK, acc, offset)
        r = row0 + cuda.threadIdx.x // 32
        if cuda.threadIdx.x % 32 == 0 and r < x.shape[0]:
            y[r] = acc

    rowsum.__name__ = f"rowsum_{style}_{stages}"
    return rowsum


def run_rowsum(kernel, x: np.ndarray, threads: int = 256) -> np.ndarray:
    """Launch ``kernel`` (jitted) on ``x`` and return y, poisoned with NaN before the launch."""
    rows_per_cta = threads // 32
    y = cuda.to_device(np.full(x.shape[0], np.nan, np.float32))
    kernel[(x.shape[0] + rows_per_cta - 1) // rows_per_cta, threads](cuda.to_device(x), y)
    return y.copy_to_host()


def check_rowsum(y: np.ndarray, x: np.ndarray) -> None:
    """``y`` against float64 numpy, within the rounding bound of this summation order: each element goes
    through at most ceil(cols / 32) float32 additions in its lane, 5 in the warp's shuffle tree and one
    final rounding, so ``|y - ref| <= gamma_k * sum(|x|)`` with ``k = ceil(cols / 32) + 6`` and
    ``gamma_k = k u / (1 - k u)``, ``u = 2**-24`` (Higham, Accuracy and Stability, 4.2)."""
    ref = x.astype(np.float64).sum(axis=1)
    k = -(-x.shape[1] // 32) + 6
    u = np.finfo(np.float32).eps / 2
    bound = k * u / (1 - k * u) * np.abs(x).astype(np.float64).sum(axis=1)
    assert np.all(np.isfinite(y)), f"rows not written (still NaN): {np.flatnonzero(~np.isfinite(y))}"
    err = np.abs(y - ref)
    assert np.all(err <= bound), f"rows {np.flatnonzero(err > bound)}: error {err.max():.3g} above the bound"
