"""A kernel that is not in asyncpipe, tuned through its public API: a pipelined row sum.

``out[i] = sum_j x[i, j]`` for a float32 matrix ``x`` (rows x cols, cols a multiple of 4). Each CTA owns
``ROWS`` rows and walks along them in tiles of ``ROWS x TC`` floats (each thread copies ``chunks`` 16-byte
chunks of a tile), brought into shared memory with the chapter's multi-stage cp.async loop::

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

    @cuda.jit
    def kernel(x, out, rows, cols):
        buf = cuda.shared.array((STAGES, ROWS, TC), np.float32)
        part = cuda.shared.array(THREADS, np.float32)
        t = cuda.threadIdx.x
        r = t // CPR                       # the tile row this thread copies and adds
        chunk = t % CPR
        row = cuda.blockIdx.x * ROWS + r
        src_row = row if row < rows else 0
        tiles = (cols + TC - 1) // TC

        # ---- prologue: tiles 0 .. S-2 in flight, one group each ---------------------------------
        for s in range(STAGES - 1):
            if s < tiles:
                for c in range(CHUNKS):
                    j = 4 * (chunk + CPR * c)                        # this copy's first float in the tile row
                    col = s * TC + j
                    n = 16 if row < rows and col < cols else 0       # zero-fill past the edge
                    ptx.cp_async_cg_shared_global_16_src_size(ptx.addr(buf, (s, r, j)),
                                                              ptx.addr(x, (src_row, col if n else 0)), n)
            ptx.cp_async_commit_group()

        # ---- main loop ---------------------------------------------------------------------------
        acc = float32(0)
        for k in range(tiles):
            ptx.cp_async_wait_group(STAGES - 2)        # tile k's group has landed (this thread's copies)
            cuda.syncthreads()                         # ... and every thread's; tile k-1's slot is free
            nxt = k + STAGES - 1
            if nxt < tiles:
                for c in range(CHUNKS):
                    j = 4 * (chunk + CPR * c)
                    col = nxt * TC + j
                    n = 16 if row < rows and col < cols else 0
                    ptx.cp_async_cg_shared_global_16_src_size(ptx.addr(buf, (nxt % STAGES, r, j)),
                                                              ptx.addr(x, (src_row, col if n else 0)), n)
            ptx.cp_async_commit_group()                # always: the tail's empty groups keep wait_group(S-2) right
            st = k % STAGES
            for i in range(4 * CHUNKS):                # floats other threads copied: stride CPR
                acc += buf[st, r, chunk + CPR * i]

        # ---- epilogue: a row's CPR partial sums ----------------------------------------------------
        ptx.cp_async_wait_all()
        part[t] = acc
        cuda.syncthreads()
        if t < ROWS and cuda.blockIdx.x * ROWS + t < rows:
            s = float32(0)
            for i in range(CPR):
                s += part[t * CPR + i]
            out[cuda.blockIdx.x * ROWS + t] = s

    return kernel
