"""ptx.ld_shared_f32 on the simulator: a misaligned or out-of-range .shared::cta address is refused, naming the rule
and the offset, before anything is read."""

import numpy as np
import pytest
from numba import cuda

from asyncpipe import ptx, sim

pytestmark = pytest.mark.sim


def make_reader(delta):
    @cuda.jit
    def kernel(out):
        s = cuda.shared.array(32, np.float32)
        t = cuda.threadIdx.x
        s[t] = np.float32(t)
        cuda.syncthreads()
        base = ptx.cvta_to_shared_u32(ptx.addr(s, 0))
        out[t] = ptx.ld_shared_f32(base + np.uint32(4 * t + delta))

    return kernel


def test_aligned_reads_its_own_word():
    out = np.zeros(32, np.float32)
    make_reader(0)[1, 32](out)
    np.testing.assert_array_equal(out, np.arange(32, dtype=np.float32))


def test_misaligned_address_is_refused():
    with pytest.raises(sim.SimUsageError, match=r"ld_shared_f32: the address must be 4-byte aligned \[PTX ISA, ld: the "
                       r"address aligned to the access size\], got offset 0x[0-9a-f]*[26ae]\n"):
        make_reader(2)[1, 32](np.zeros(32, np.float32))


def test_address_past_the_shared_memory_is_refused():
    with pytest.raises(sim.SimUsageError, match=r"ld_shared_f32: the address must lie inside the CTA's shared memory "
                       r"\(\d+ bytes\) \[PTX ISA\], got bytes 0x1000[0-9a-f]+\.\.0x1000[0-9a-f]+\n"):
        make_reader(1 << 20)[1, 32](np.zeros(32, np.float32))
