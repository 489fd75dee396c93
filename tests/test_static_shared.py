"""The simulator's count of a kernel's static shared memory (``asyncpipe.sim.static_shared``, which the
simulated launch checks against the 48 KB and 227 KB limits before any thread runs) equals what ptxas
allocates for the same kernel compiled offline for sm_90a (no GPU needed)."""

import numpy as np
from numba import cuda, float32

from asyncpipe.codegen import compile_kernel
from asyncpipe.sim.static_shared import static_shared_bytes

ROWS, COLS = 3, 100


@cuda.jit(device=True, inline="always")
def scratch_sum(i):
    s = cuda.shared.array((3, 8), np.float64)
    s[i % 3, i % 8] = i
    cuda.syncthreads()
    return s[(i + 1) % 3, (i + 2) % 8]


def kernel(out):
    t = cuda.threadIdx.x
    a = cuda.shared.array((ROWS, COLS), float32)
    b = cuda.shared.array((2, 40), np.int16)
    c = cuda.shared.array(32, dtype=np.uint64)
    a[t % ROWS, t % COLS] = t
    b[t % 2, t % 40] = t
    c[t % 32] = t
    cuda.syncthreads()
    out[t] = a[(t + 1) % ROWS, (t + 7) % COLS] + b[(t + 1) % 2, (t + 3) % 40] + c[(t + 5) % 32] + scratch_sum(t)


def no_shared(out):
    out[cuda.threadIdx.x] = 1


RESERVED = 1024     # ptxas's SHARED adds the 1 KB sm_8x/sm_9x reserve per block once a kernel uses shared memory


def test_static_shared_matches_ptxas():
    expected = ROWS * COLS * 4 + 2 * 40 * 2 + 32 * 8 + 3 * 8 * 8
    assert static_shared_bytes(kernel) == expected
    assert compile_kernel(kernel, (float32[:],)).resources.shared == expected + RESERVED
    assert static_shared_bytes(no_shared) == 0
    assert compile_kernel(no_shared, (float32[:],)).resources.shared == 0
