"""The simulator chosen whatever the import order (asyncpipe.backend.choose), or a message at once that
says what to do. Each order runs in a fresh interpreter: numba reads its switch when numba.cuda is first
imported, so one process can test one order only."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Run after the order under test: asyncpipe, then numba.cuda, then a kernel that only the simulator runs
# here (no GPU): a cp.async group committed and waited for, then a plain update, checked against numpy.
KERNEL = """
import numpy as np
from asyncpipe import backend, ptx
from numba import cuda

@cuda.jit
def kernel(a):
    t = cuda.threadIdx.x
    ptx.cp_async_commit_group()
    ptx.cp_async_wait_all()
    a[t] += t

x = np.arange(4, dtype=np.float32)
kernel[1, 4](x)
assert np.array_equal(x, 2 * np.arange(4)), x
assert backend.simulating() and backend.current().name == "simulator"
print("RAN ON THE SIMULATOR")
"""


def run(code: str, **env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("ASYNCPIPE_SIM", "NUMBA_ENABLE_CUDASIM")}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env={**clean, **env},
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("first,env", [
    ("import asyncpipe", {"ASYNCPIPE_SIM": "1"}),                       # asyncpipe first: it sets numba's switch
    ("import numba", {"ASYNCPIPE_SIM": "1"}),                           # numba alone first: numba re-reads it
    ("import numba\nfrom numba import cuda", {"NUMBA_ENABLE_CUDASIM": "1"}),   # numba's own switch: any order
], ids=["asyncpipe-first", "numba-first", "numba-cuda-first-numba-switch"])
def test_the_simulator_runs_whatever_the_order(first, env):
    out = run(first + "\n" + KERNEL, **env)
    assert out.returncode == 0 and "RAN ON THE SIMULATOR" in out.stdout, out.stderr[-3000:]


def test_numba_cuda_imported_for_the_gpu_first_fails_at_import_asyncpipe():
    out = run("""
        import numba
        from numba import cuda
        try:
            import asyncpipe
        except Exception as exc:
            print(type(exc).__name__, exc)
    """, ASYNCPIPE_SIM="1")
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == (
        "AsyncpipeError import asyncpipe: the simulator must be chosen before numba.cuda is imported: import "
        "asyncpipe before numba.cuda (importing numba alone first is fine), or start Python with "
        "NUMBA_ENABLE_CUDASIM=1 in the environment [numba reads NUMBA_ENABLE_CUDASIM when numba.cuda is first "
        "imported], got ASYNCPIPE_SIM=1 set, but numba.cuda was already imported for the GPU")


def test_asyncpipe_sim_with_numba_switched_off_is_refused():
    out = run("""
        try:
            import asyncpipe
        except Exception as exc:
            print(type(exc).__name__, exc)
    """, ASYNCPIPE_SIM="1", NUMBA_ENABLE_CUDASIM="0")
    assert out.stdout.strip() == (
        "AsyncpipeError import asyncpipe: ASYNCPIPE_SIM=1 asks for the simulator and NUMBA_ENABLE_CUDASIM must then "
        "be unset or 1 [asyncpipe.backend], got NUMBA_ENABLE_CUDASIM='0'"), out.stderr[-3000:]


def test_switching_after_import_asyncpipe_is_refused():
    out = run("""
        import os
        import asyncpipe
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"     # too late for asyncpipe, in time for numba.cuda
        try:
            from asyncpipe import ptx
        except Exception as exc:
            print(type(exc).__name__, exc)
    """)
    assert out.stdout.strip() == (
        "AsyncpipeError asyncpipe.backend: ASYNCPIPE_SIM or NUMBA_ENABLE_CUDASIM must be set before asyncpipe is "
        "imported and not changed after (asyncpipe and numba.cuda must run on the same backend) [numba reads "
        "NUMBA_ENABLE_CUDASIM when numba.cuda is first imported], got asyncpipe chose the GPU at import, numba.cuda "
        "was then imported for the simulator"), out.stderr[-3000:]


def test_the_gpu_is_chosen_without_the_switch_and_import_asyncpipe_stays_light():
    out = run("""
        import sys
        import asyncpipe
        from asyncpipe import backend
        print(backend.simulating(), "numba.cuda" in sys.modules)
        from asyncpipe import ptx
        print(backend.current().name, "numba.cuda.device_init" in sys.modules)
    """)
    assert out.stdout.split() == ["False", "False", "gpu", "True"], out.stderr[-3000:]


def test_numba_switched_to_its_simulator_in_code_is_followed():
    out = run("""
        import numba
        numba.config.ENABLE_CUDASIM = 1
        from numba import cuda
        from asyncpipe import backend
        print(backend.simulating())
    """)
    assert out.stdout.split() == ["True"], out.stderr[-3000:]
