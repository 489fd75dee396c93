"""A kernel that is not in asyncpipe, tuned through its public API: a pipelined row sum.

``out[i] = sum_j x[i, j]`` for a float32 matrix ``x`` (rows x cols, cols a multiple of 4). Each CTA owns
``ROWS`` rows and walks along them in tiles of ``ROWS x TC`` floats (each thread copies ``chunks`` 16-byte
chunks of a tile), brought into shared memory with the chapter's multi-stage cp.async loop, written with
``asyncpipe.pipeline.cp_async_ring`` (the kernel gives the issue and the compute of one tile)::

    prologue:  issue tiles 0 .. S-2, one commit_group each (an empty one where there is no tile)
    main loop: wait_group(S-2); syncthreads; issue tile k+S-1 into the slot tile k-1 used; commit (always);
               add tile k
    epilogue:  each row's partial sums meet in shared memory

Each thread adds up floats of its tile row that other threads copied (a column stride of ``CPR``, the
threads of a row), so the barrier is what makes the tile safe to read, as in the chapter's SGEMM.
The tail chunks past ``cols`` (and the rows past ``rows``) are zero-filled by cp.async's ``src_size`` form.

Tune it (compile-time constants: the stage count, the CTA's threads and the chunks a thread copies per tile)::

    python -m asyncpipe tune examples/rowsum_tune.py:row_sum --problem rows=8192,cols=8192

or from Python / Jupyter: ``row_sum.tune({"rows": 8192, "cols": 8192})``; then ``row_sum(x, out)`` launches
with the pick cached for that problem on this GPU (the default below before tuning).
"""

import math

import numpy as np
from numba import cuda, float32

from asyncpipe import ptx
from asyncpipe.errors import check
from asyncpipe.pipeline.cp_async_ring import cp_async_ring
from asyncpipe.tune import CpAsyncPipeline, Launch, autotune

ROWS = 8                                   # rows of x per CTA (and per tile)


def tile_cols(threads: int, chunks: int) -> int:
    """Floats of a tile row: ``chunks`` 16-byte chunks (4 floats each) per thread, ``threads / ROWS`` threads a row."""
    return 4 * chunks * (threads // ROWS)


def launch(config, x, out):
    rows, cols = x.shape
    check(cols % 4 == 0, "row_sum", "cols must be a multiple of 4 (each row is copied in 16-byte cp.async chunks)",
          cols, "cp.async.cg.shared.global 16 bytes")
    check(out.shape == (rows,), "row_sum", "out must have one element per row of x", out.shape)
    return Launch(grid=math.ceil(rows / ROWS), block=config["threads"], args=(x, out, np.int32(rows), np.int32(cols)))


@autotune(
    space={"stages": (2, 3, 4, 6, 8), "threads": (128, 256), "chunks": (1, 4)},
    default={"stages": 3, "threads": 128, "chunks": 1},
    problem=("rows", "cols"),
    key=lambda x, out: {"rows": x.shape[0], "cols": x.shape[1]},
    inputs=lambda p, rng: (rng.standard_normal((p["rows"], p["cols"])).astype(np.float32),
                           np.zeros(p["rows"], np.float32)),
    reference=lambda x, out: x.astype(np.float64).sum(axis=1),
    output=1,
    tolerance=1e-4,                        # float32 sums of thousands of terms, against float64
    launch=launch,
    pipeline=CpAsyncPipeline(tiles=lambda p, c: math.ceil(p["cols"] / tile_cols(c["threads"], c["chunks"])),
                             stage_bytes=lambda p, c: ROWS * tile_cols(c["threads"], c["chunks"]) * 4),
    nbytes=lambda p: 4 * p["rows"] * (p["cols"] + 1),
)
def row_sum(config):
    STAGES, THREADS, CHUNKS = config["stages"], config["threads"], config["chunks"]
    CPR = THREADS // ROWS                  # threads per tile row
    TC = tile_cols(THREADS, CHUNKS)        # floats per tile row

    @cuda.jit(device=True, inline="always")
    def load_tile(slot, tile, args):       # this thread's CHUNKS copies of `tile` into `slot` (the ring commits)
        buf, x, rows, cols, r, chunk, row, src_row = args
        for c in range(CHUNKS):
            j = 4 * (chunk + CPR * c)                        # the copy's first float in the tile row
            col = tile * TC + j
            n = 16 if row < rows and col < cols else 0       # zero-fill past the edge
            ptx.cp_async_cg_shared_global_16_src_size(ptx.addr(buf, (slot, r, j)),
                                                      ptx.addr(x, (src_row, col if n else 0)), n)

    @cuda.jit(device=True, inline="always")
    def add_tile(slot, tile, acc, args):   # floats of row r that other threads copied: stride CPR
        buf, r, chunk = args[0], args[4], args[5]
        for i in range(4 * CHUNKS):
            acc += buf[slot, r, chunk + CPR * i]
        return acc

    @cuda.jit
    def kernel(x, out, rows, cols):
        buf = cuda.shared.array((STAGES, ROWS, TC), np.float32)
        part = cuda.shared.array(THREADS, np.float32)
        t = cuda.threadIdx.x
        r = t // CPR                       # the tile row this thread copies into and adds up
        chunk = t % CPR
        row = cuda.blockIdx.x * ROWS + r
        src_row = row if row < rows else 0
        tiles = (cols + TC - 1) // TC

        # ---- the chapter's loop: prologue of S-1 groups; per tile wait(S-2), barrier, issue, commit, add ----
        acc = cp_async_ring(tiles, STAGES, load_tile, add_tile, float32(0),
                            (buf, x, rows, cols, r, chunk, row, src_row))

        # ---- epilogue: a row's CPR partial sums (nothing is in flight: the tail's groups are empty) --------
        part[t] = acc
        cuda.syncthreads()
        if t < ROWS and cuda.blockIdx.x * ROWS + t < rows:
            s = float32(0)
            for i in range(CPR):
                s += part[t * CPR + i]
            out[cuda.blockIdx.x * ROWS + t] = s

    return kernel
