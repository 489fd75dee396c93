"""ASYNCPIPE_DEBUG=1: the bounded forms of the blocking waits (ptx_shims/debug.cu) and the host that turns
a wait that gave up into HangError (asyncpipe/backend/hang.py).

Offline: the forms compile without local memory and read %globaltimer, while the same kernel built
without them has none of it (no cost when off); the host's record layout is the shim's struct; each
message names the barrier, phase, block and thread. On the GPU: tests/ptx/hang_cases.py in a process
started with ASYNCPIPE_DEBUG=1, every hang reported, every correct twin right, the GPU fine after.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda, types, uint64

from asyncpipe import ptx
from asyncpipe.errors import AsyncpipeError
from asyncpipe.ptx import debug
from tests.sass import assert_sass

ROOT = Path(__file__).resolve().parents[2]
DEBUG_CU = ROOT / "ptx_shims" / "debug.cu"


def _every_wait(mod):
    def kernel(out):
        bars = cuda.shared.array(1, uint64)
        t = cuda.threadIdx.x
        if t == 0:
            ptx.mbarrier_init(ptx.addr(bars, 0), 1)
        cuda.syncthreads()
        if t == 0:
            ptx.mbarrier_arrive(ptx.addr(bars, 0))
        mod.mbarrier_wait_parity(ptx.addr(bars, 0), 0)
        done = mod.mbarrier_try_wait_parity(ptx.addr(bars, 0), 0) + mod.mbarrier_test_wait_parity(ptx.addr(bars, 0), 0)
        mod.bar_arrive(1, 64)
        mod.bar_sync(1, 64)
        mod.barrier_cluster_arrive_relaxed()
        mod.barrier_cluster_wait()
        mod.barrier_cluster_arrive()
        mod.barrier_cluster_wait()
        out[t] = done

    return kernel


@pytest.mark.sass
def test_no_cost_when_off():
    """The kernel that calls every blocking wait through asyncpipe.ptx, built as CI builds it (debug
    off): the hardware instructions, no timer, no record, no software barrier."""
    cubin = assert_sass(_every_wait(ptx), (types.uint32[::1],),
                        has=("SYNCS.PHASECHK.TRANS64.TRYWAIT", "BAR.SYNC", "BAR.ARV", "UCGABAR_WAIT"),
                        lacks=("CALL", "NANOSLEEP", "ATOMS.CAS", "ATOMG"))
    assert "SR_GLOBALTIMER" not in cubin.sass


@pytest.mark.sass
def test_debug_forms_are_bounded():
    """The same kernel through asyncpipe.ptx.debug: every wait reads %globaltimer and sleeps between
    polls; the named barriers are shared-memory CASes, not BAR; nothing spills."""
    cubin = assert_sass(_every_wait(debug), (types.uint32[::1],),
                        has=("NANOSLEEP", "ATOMS.CAS", "SYNCS.PHASECHK.TRANS64.TRYWAIT"),
                        lacks=("BAR.ARV",))
    assert "SR_GLOBALTIMER" in cubin.sass


def test_every_debug_form_is_a_blocking_primitive_and_back():
    forms = set(re.findall(r'extern "C" __device__ [\w\s\*]+?\bap_debug_(\w+)\s*\(', DEBUG_CU.read_text()))
    assert forms == {name for name, p in ptx.REGISTRY.items() if p.debug}
    assert set(debug.NAMES) == forms
    with pytest.raises(AttributeError, match="the blocking waits it bounds: mbarrier_try_wait_parity"):
        debug.mbarrier_arrive  # noqa: B018


def test_the_record_is_the_shims_struct():
    """hang.RECORD has ap_debug_record's fields, in order, with its sizes (the host reads it raw)."""
    from asyncpipe.backend import hang

    body = re.search(r"struct ap_debug_record \{(.*?)\n\};", DEBUG_CU.read_text(), re.S).group(1)
    fields = re.findall(r"^\s*unsigned( long long)? (\w+)(\[3\])?;", body, re.M)
    assert [name for _, name, _ in fields] == list(hang.RECORD.names)
    for wide, name, array in fields:
        dtype, shape = hang.RECORD.fields[name][0].base, hang.RECORD.fields[name][0].shape
        assert dtype == (np.uint64 if wide else np.uint32) and shape == ((3,) if array else ()), name


def _record(**values):
    from asyncpipe.backend import hang

    r = np.zeros(1, hang.RECORD)[0]
    r["recorded"], r["given_up"], r["released"], r["elapsed_ns"], r["smid"] = 1, 3, 61, 1_020_000_000, 17
    r["block"], r["thread"] = (2, 0, 0), (33, 0, 0)
    for k, v in values.items():
        r[k] = v
    return r


@pytest.mark.parametrize("values, says", [
    (dict(kind=1, barrier=0x408, phase=1),
     [r"mbarrier_wait_parity gave up after 0\.5 s", "arrivals mbarrier_init asked for", "expect_tx",
      r"block \(2, 0, 0\) thread \(33, 0, 0\) waited for parity 1 of the mbarrier at shared offset 0x408",
      "1.02 s on SM 17", "2 other wait", "61 were released"]),
    (dict(kind=2, barrier=0x10, phase=0),
     [r"mbarrier_try_wait_parity kept answering 0 to this thread's polls after 0\.5 s",
      "parity 0 of the mbarrier at shared offset 0x10"]),
    (dict(kind=5, barrier=0x10, phase=1), [r"mbarrier_test_wait_parity kept answering 0", "parity 1 of the mbarrier"]),
    (dict(kind=3, barrier=1, phase=4, arrived=64, expected=128),
     ["a named barrier gave up", r"bar_sync\(a, b\)", "waited at named barrier 1 for 128 threads, 64 arrived",
      "use 4 of it in that block"]),
    (dict(kind=4, barrier=3, phase=0, arrived=96, expected=128),
     ["the cluster barrier gave up", "barrier_cluster_arrive and then barrier_cluster_wait",
      "cluster barrier of cluster 3 for 128 threads, 96 arrived"]),
])
def test_messages_name_the_barrier_phase_block_and_thread(values, says):
    from asyncpipe.backend import hang

    r = _record(**values)
    err = hang.HangError("kernel ring", hang._rule(r, 0.5), hang._got(r), r)
    assert isinstance(err, AsyncpipeError) and str(err).startswith("kernel ring: ")
    assert "[ASYNCPIPE_DEBUG]" in str(err)
    for s in says:
        assert re.search(s, str(err)), (s, str(err))


@pytest.mark.parametrize("raw", ["0", "-1", "soon"])
def test_a_bad_timeout_is_named(raw, monkeypatch):
    from asyncpipe.backend import hang

    monkeypatch.setenv(hang.ENV_TIMEOUT, raw)
    with pytest.raises(AsyncpipeError, match=rf"ASYNCPIPE_DEBUG_TIMEOUT: the debug wait timeout is a number of "
                                             rf"seconds above 0, got '{raw}'"):
        hang.timeout_s()


def test_debug_turns_the_disk_cache_off(monkeypatch):
    import asyncpipe.backend as backend
    from asyncpipe import jit_cache

    monkeypatch.setattr(backend, "_DEBUGGING", True)
    assert not jit_cache.enabled()
    monkeypatch.setattr(backend, "_DEBUGGING", False)
    monkeypatch.delenv(jit_cache.ENV, raising=False)
    assert jit_cache.enabled() or ptx.simulating()


# ---------------------------------------------------------------------------------------------
# On the GPU
# ---------------------------------------------------------------------------------------------
TIMEOUT = 0.2


@pytest.fixture(scope="module")
def hang_rows():
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])   # the GPU machine's .site too
    env = dict(os.environ, ASYNCPIPE_DEBUG="1", ASYNCPIPE_DEBUG_TIMEOUT=str(TIMEOUT), PYTHONPATH=path)
    done = subprocess.run([sys.executable, "-m", "tests.ptx.hang_cases"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def _by_case(rows, case):
    found = [r for r in rows if r["case"] == case]
    assert found, f"{case} did not run: {rows}"
    return found


@pytest.mark.gpu
@pytest.mark.hopper
def test_every_case_ran(hang_rows):
    from tests.ptx.hang_cases import CASES

    assert [r["case"] for r in hang_rows] == list(CASES)


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("case, kind, fields, says", [
    ("arrivals_short", 1, dict(phase=0, block=[0, 0, 0]), ["mbarrier_wait_parity gave up", "parity 0 of the mbarrier"]),
    ("arrivals_short_try_wait", 2, dict(phase=0), ["mbarrier_try_wait_parity kept answering 0"]),
    ("arrivals_short_test_wait", 5, dict(phase=0), ["mbarrier_test_wait_parity kept answering 0"]),
    ("expect_tx_over", 1, dict(phase=0), ["expect_tx above the bytes copied"]),
    ("ring_never_released", 1, dict(), ["mbarrier_wait_parity gave up"]),
    # warp 0's idle threads wait at the closing cluster barrier from the start, the producer and consumers at
    # mbarriers: whichever wait began first gives up first (both seen on the H200)
    ("ring_never_released_cluster", (1, 4), dict(), ["gave up"]),
    ("ring_bytes_owed", 1, dict(phase=0), ["mbarrier_wait_parity gave up"]),
    ("named_short", 3, dict(barrier=1, arrived=64, expected=128, phase=0),
     ["waited at named barrier 1 for 128 threads, 64 arrived"]),
    ("cluster_short", 4, dict(arrived=96, expected=128, phase=0), ["for 128 threads, 96 arrived"]),
])
def test_a_hang_is_a_hang_error(hang_rows, case, kind, fields, says):
    """On the GPU, ASYNCPIPE_DEBUG's HangError; in the simulator run the same kernels meet the simulator's
    own checks (a deadlock, or bytes no copy will bring), which need no debug mode."""
    (row,) = _by_case(hang_rows, case)
    if ptx.simulating():
        assert row.get("error") == ("TxCountError" if case in ("expect_tx_over", "ring_bytes_owed") else
                                    "DeadlockError"), row
        return
    assert row.get("error") == "HangError", row
    record = row["record"]
    assert record["kind"] in (kind if isinstance(kind, tuple) else (kind,)) and record["given_up"] >= 1, row
    for k, v in fields.items():
        assert record[k] == v, (k, row)
    assert record["elapsed_ns"] >= TIMEOUT * 1e9, row
    for s in says:
        assert s in row["message"], (s, row["message"])
    assert f"after {TIMEOUT:g} s" in row["message"]


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("case", ["ring", "ring_cluster", "named_handover", "cluster_exchange", "polls_that_succeed"])
def test_correct_kernels_are_right_in_debug_mode_also_after_a_hang(hang_rows, case):
    for row in _by_case(hang_rows, case):
        assert row.get("ok") is True, row
