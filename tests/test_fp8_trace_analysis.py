"""scripts/fp8_trace.py's reading of a trace, on made-up traces whose answer is known: two warpgroups in step leave
the tensor core a promotion's gap each period; half a period apart they leave none."""

import importlib.util
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "fp8_trace.py"
spec = importlib.util.spec_from_file_location("fp8_trace", SCRIPT)
fp8_trace = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fp8_trace)

PERIOD, MMA, DATA = 918, 768, 40   # cycles: a k-block's issue to issue, its group's run, the wait for its data


def trace(offset, blocks=20):
    ev = np.zeros((2, blocks, 3), np.int64)
    for j in range(blocks):
        ev[0, j] = (j * PERIOD - DATA, j * PERIOD, j * PERIOD + MMA)
        ev[1, j] = (j * PERIOD + offset - DATA, j * PERIOD + offset, j * PERIOD + offset + MMA)
    return ev


def test_in_step_leaves_the_gap_idle():
    r = fp8_trace.analyse(trace(0), 192)
    assert (r["mma"], r["gap"], r["period"], r["phase"]) == (MMA, PERIOD - MMA, PERIOD, 0.0)
    assert (r["promote"], r["data"]) == (PERIOD - MMA - DATA, DATA)
    assert abs(r["idle"] - (PERIOD - MMA) / PERIOD) < 0.01
    assert abs(r["ideal"] - 768 / PERIOD) < 0.01      # 128 x 192 x 128 MACs a k-block at 4096 a cycle


def test_half_a_period_apart_leaves_none():
    r = fp8_trace.analyse(trace(PERIOD // 2), 192)
    assert r["idle"] == 0.0 and abs(abs(r["phase"]) - 0.5) < 0.01


def test_wrapped_readings_and_unwritten_entries():
    ev = (trace(100) + (1 << 32) - 5000) % (1 << 32)  # the 32-bit counter wraps inside the trace
    ev[:, 15:, :] = -1                                # the warpgroups walked 15 k-blocks only
    r = fp8_trace.analyse(ev, 192)
    assert r["k_blocks"] == 15 and (r["mma"], r["period"]) == (MMA, PERIOD)
    assert fp8_trace.analyse(np.full((2, 8, 3), -1, np.int64), 192) is None
