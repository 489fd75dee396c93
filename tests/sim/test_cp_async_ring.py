"""cp_async_ring in the simulator (checks on): the row-sum of tests/pipeline/cp_async_ring_kernels.py against
float64 numpy for every stage count 2..6 and tile counts below, equal to and above it; a compute that reads
the slot still being filled is caught; a bad stage count is refused with its message."""

import numpy as np
import pytest
from numba import cuda

from asyncpipe import sim
from asyncpipe.errors import AsyncpipeError
from asyncpipe.pipeline import cp_async_ring, cp_async_ring_prologue
from tests.pipeline.cp_async_ring_kernels import check_rowsum, make_rowsum, run_rowsum

THREADS = 64            # two warps: two rows per CTA, each row copied by both warps
TILE_COLS = 128


def _rowsum(stages, style, **kw):
    return cuda.jit(make_rowsum(stages, style, threads=THREADS, tile_cols=TILE_COLS, **kw))


def _matrix(rng, tiles):
    rows = 2 * int(rng.integers(1, 3)) + 1                                  # a partial last CTA
    cols = (tiles - 1) * TILE_COLS + 4 * int(rng.integers(1, TILE_COLS // 4))  # a partial last tile
    return rng.standard_normal((rows, cols)).astype(np.float32)


@pytest.mark.parametrize("style", ("ring", "verbs"))
@pytest.mark.parametrize("stages", range(2, 7))
def test_ring_rowsum(stages, style, rng):
    kernel = _rowsum(stages, style)
    for tiles in sorted({1, stages - 1, stages, stages + 2} - {0}):   # fewer, as many as and more tiles than stages
        x = _matrix(rng, tiles)
        check_rowsum(run_rowsum(kernel, x, THREADS), x)


def test_reading_the_slot_being_filled_is_caught(rng):
    x = _matrix(rng, 5)
    with pytest.raises(sim.WaitGroupError, match="wait_group N must leave in flight only groups newer"):
        run_rowsum(_rowsum(3, "ring", read_ahead=True), x, THREADS)


@cuda.jit(device=True, inline="always")
def _no_copies(slot, tile, args):
    pass


@cuda.jit(device=True, inline="always")
def _no_compute(slot, tile, acc, args):
    return acc


def _zero_tiles_kernel(stages, verbs):
    def kernel(y):
        if verbs:
            cp_async_ring_prologue(0, stages, _no_copies, (y,))
        else:
            y[0] = cp_async_ring(0, stages, _no_copies, _no_compute, y[0], (y,))
    return cuda.jit(kernel)


RULE = "stages must be 2..9 (S-1 tiles ahead of the compute, wait_group(S-2) with N <= 7)"
SOURCE = "[the chapter's multi-stage cp.async loop; PTX ISA, cp.async.wait_group N]"


@pytest.mark.parametrize("verbs", (False, True))
@pytest.mark.parametrize("stages, message", [
    (1, f"cp_async_ring: {RULE} {SOURCE}, got 1"),
    (10, f"cp_async_ring: {RULE} {SOURCE}, got 10"),
    (3.0, f"cp_async_ring: stages must be an integer (a compile-time constant: wait_group takes an immediate) "
          f"{SOURCE}, got 3.0"),
])
def test_bad_stage_count_is_refused(stages, message, verbs):
    with pytest.raises(AsyncpipeError) as err:
        _zero_tiles_kernel(stages, verbs)[1, 1](np.zeros(1, np.float32))
    assert str(err.value) == message


@pytest.mark.parametrize("stages", (2, 9))
def test_zero_tiles_commit_the_prologue_groups(stages):
    y = np.full(1, 7, np.float32)
    _zero_tiles_kernel(stages, False)[1, 1](y)      # nothing issued, nothing computed: acc comes back
    assert y[0] == 7
