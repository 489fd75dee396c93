"""clock64: SASS offline (each reading one CS2R of SR_CLOCKLO, inlined, in program order around a store), then on
the GPU (and, in the simulator run, on the simulator): every thread's readings never go backwards, and a chain of
dependent arithmetic between two readings shows in their difference."""

import numpy as np
import pytest
from numba import cuda, float64
from numba.cuda import types

from asyncpipe import ptx
from tests.sass import assert_sass

u64 = types.uint64[::1]
f64 = types.float64[::1]
SPIN = 500                     # dependent FP64 multiply-adds between the first two readings: thousands of cycles


def clock_kernel(out, spin):
    """Each thread: a reading, SPIN dependent steps stored to ``spin`` (the store sits before the second reading:
    the shim's memory clobber), a second reading, a third right after it."""
    i = cuda.grid(1)
    if i < spin.size:
        t0 = ptx.clock64()
        x = float64(t0 & 1)
        for _ in range(SPIN):
            x = x * 0.5 + 1.0
        spin[i] = x
        t1 = ptx.clock64()
        t2 = ptx.clock64()
        out[3 * i] = t0
        out[3 * i + 1] = t1
        out[3 * i + 2] = t2


@pytest.mark.sass
def test_clock64_sass():
    cubin = assert_sass(clock_kernel, (u64, f64), has=ptx.REGISTRY["clock64"].sass, lacks=("CALL",))
    ops = [(i.opcode, i.operands) for i in cubin.instructions]
    reads = [k for k, (op, args) in enumerate(ops) if op.startswith("CS2R") and "SR_CLOCKLO" in args]
    assert len(reads) == 3, cubin.sass               # none merged, none dropped
    stores = [k for k, (op, _) in enumerate(ops) if op.startswith("STG")]
    assert reads[0] < stores[0] < reads[1] < reads[2], cubin.sass   # the spin's store between the first two


@pytest.mark.gpu
def test_clock64_counts_forward_gpu():
    threads = 256
    out = cuda.to_device(np.zeros(3 * threads, np.uint64))
    spin = cuda.to_device(np.zeros(threads, np.float64))
    cuda.jit(clock_kernel)[2, threads // 2](out, spin)
    t = out.copy_to_host().reshape(threads, 3).astype(np.int64)
    assert (spin.copy_to_host() == 2.0).all()       # the chain ran (it converges to 2)
    assert (t[:, 0] > 0).all()                       # every reading written (the arrays start at 0)
    assert (t[:, 1] >= t[:, 0]).all() and (t[:, 2] >= t[:, 1]).all()
    # the chain shows: at least SPIN cycles (ns in the simulator) between the first two readings, more than
    # between the last two
    assert (t[:, 1] - t[:, 0] >= SPIN).all() and np.median(t[:, 1] - t[:, 0]) > np.median(t[:, 2] - t[:, 1])
