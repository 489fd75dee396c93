"""asyncpipe.timing on the GPU: the event pairs time the GPU's work, not the host's time to enqueue it."""

import time
import warnings

import numpy as np
import pytest
from numba import cuda

from asyncpipe.timing import HOLD_NS_PER_CALL, time_ms


def _bumping(host_seconds):
    @cuda.jit
    def bump(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] += 1.0

    x = cuda.to_device(np.zeros(1024, np.float32))

    def call():
        time.sleep(host_seconds)
        bump[4, 256](x)

    return call, x


@pytest.mark.gpu
def test_host_time_between_launches_is_not_timed():
    """Each call spends 0.1 ms in Python before a kernel of microseconds: held behind the sleeping kernel, the
    calls run back to back on the GPU, so the median is the kernel's time, well below the 0.1 ms."""
    call, x = _bumping(0.5 * HOLD_NS_PER_CALL * 1e-9)
    with warnings.catch_warnings(record=True) as retries:     # a busy host (other tests beside it) may miss the
        warnings.simplefilter("always")                        # hold: then the hold doubles and the calls run again
        ms = time_ms(call, reps=10)
    assert ms < 0.05, ms
    passes = 1 + sum("slower than the hold" in str(w.message) for w in retries)
    assert x.copy_to_host()[0] == 3 + 10 * passes  # warm-up and each pass's timed calls all ran, once each


@pytest.mark.gpu
def test_a_slower_host_doubles_the_hold():
    """Calls slower to enqueue than the hold allows: a warning, a longer hold, and still the GPU's time."""
    call, _ = _bumping(3 * HOLD_NS_PER_CALL * 1e-9)
    with pytest.warns(RuntimeWarning, match="slower than the hold"):
        ms = time_ms(call, reps=10)
    assert ms < 0.05, ms
