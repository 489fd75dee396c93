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


def test_rounds_go_round_robin_and_each_round_starts_one_further(monkeypatch):
    """The order of the timed calls (the timing itself is the GPU test below): in round r the call r % n goes first,
    so no call always meets the GPU first or last."""
    import asyncpipe.timing as T

    order = []
    monkeypatch.setattr(T, "time_ms", lambda fn, **kw: (order.append(fn()), 1.0)[1])
    got = T.time_rounds({"a": lambda: "a", "b": lambda: "b", "c": lambda: "c"}, rounds=4, reps=2)
    assert order == list("abc" "bca" "cab" "abc")
    assert got == {"a": [1.0] * 4, "b": [1.0] * 4, "c": [1.0] * 4}


@pytest.mark.parametrize("calls, rounds", [({}, 3), ({"a": print}, 0)])
def test_rounds_need_a_call_and_a_round(calls, rounds):
    from asyncpipe.timing import time_rounds

    with pytest.raises(ValueError, match=rf"at least one call and one round, got {len(calls)} call\(s\), "
                                         rf"rounds={rounds}"):
        time_rounds(calls, rounds=rounds)


@pytest.mark.gpu
def test_rounds_time_each_call_on_the_gpu():
    from asyncpipe.timing import time_rounds

    call, x = _bumping(0.0)
    other, y = _bumping(0.0)
    with warnings.catch_warnings(record=True) as retries:     # (a busy host may miss a hold: that pass runs again)
        warnings.simplefilter("always")
        got = time_rounds({"one": call, "other": other}, rounds=3, reps=5)
    assert set(got) == {"one", "other"} and all(len(v) == 3 and all(0 < t < 0.05 for t in v) for v in got.values())
    again = sum("slower than the hold" in str(w.message) for w in retries)
    # each round: each call's warm-up (3) and timed calls (5), once per pass
    assert x.copy_to_host()[0] + y.copy_to_host()[0] == 2 * 3 * (3 + 5) + 5 * again
