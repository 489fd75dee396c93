"""The demo's CPU path: the chapter's three programs on asyncpipe's simulator, at sizes a CPU runs in
seconds, checked against numpy like the GPU demo (``python -m asyncpipe demo`` with no GPU).

The simulator must be chosen before numba is imported; a demo process that has already imported
numba for the GPU check runs this module in a fresh interpreter (``python -m asyncpipe.demo_sim``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np

from . import backend


def _sgemm():
    from numba import cuda

    from .kernels.sgemm import sgemm

    rng = np.random.default_rng(0)
    m, n, k = 128, 128, 32                  # the chapter's 128 x 128 tile, 4 k-tiles through 3 stages
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    c = cuda.to_device(np.full((m, n), np.nan, np.float32))
    sgemm(cuda.to_device(a), cuda.to_device(b), c, stages=3, tile="8x8", bk=8)
    ref = a.astype(np.float64) @ b
    err = np.linalg.norm(c.copy_to_host() - ref) / np.linalg.norm(ref)
    return err < 1e-5, f"rel. error {err:.1e} at {m}x{n}x{k}, 3 stages"


def _tma():
    from numba import cuda

    from .kernels.tma_add_one import add_one

    rng = np.random.default_rng(1)
    a = rng.integers(0, 1000, (32, 64), dtype=np.int32)
    bad = 0
    for pipelined in (False, True):
        d = cuda.to_device(a)
        add_one(d, pipelined=pipelined)
        bad += int(np.count_nonzero(d.copy_to_host() != a + 1))
    return bad == 0, f"{bad} mismatches at 32x64, chapter kernel (16x32 boxes) and pipelined kernel"


def _cluster():
    from numba import cuda

    from .kernels.cluster_sum import cluster_sum, pair_sums

    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, 2 * 2 * 1000).astype(np.float32)
    got = pair_sums(cuda.to_device(x), 1000, 2).copy_to_host()
    ok = np.allclose(got, x.astype(np.float64).reshape(2, -1).sum(axis=1), rtol=1e-4, atol=1e-3)
    y = rng.uniform(-1, 1, 4096).astype(np.float32)
    total = cluster_sum(cuda.to_device(y), cluster_size=2).copy_to_host()[0]
    ok = ok and abs(total - y.astype(np.float64).sum()) <= 1e-6 * np.abs(y).sum() + 1e-6
    return ok, "2 pair sums of 2x1000 floats over DSMEM; cluster sum of 4096 floats"


PROGRAMS = [
    ("gemm_cp_async (3-stage cp.async SGEMM)", _sgemm),
    ("tma_copy (TMA add-one)", _tma),
    ("cluster_sum (2-CTA cluster over DSMEM)", _cluster),
]


def run_in_process() -> int:
    """Run the programs here (the simulator must already be selected)."""
    failed = 0
    for name, fn in PROGRAMS:
        t0 = time.perf_counter()
        try:
            ok, detail = fn()
        except Exception as exc:  # noqa: BLE001 - report and carry on with the other programs
            ok, detail = False, f"{type(exc).__name__}: {exc}"
        failed += not ok
        print(f"  {'PASS' if ok else 'FAIL'}  {name}: {detail} ({time.perf_counter() - t0:.1f} s on the CPU simulator)",
              flush=True)
    return 1 if failed else 0


def run_on_simulator() -> int:
    """The demo's CPU path: in this process if the simulator is selected, else in a fresh one."""
    if backend.simulating():
        return run_in_process()
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    return subprocess.run([sys.executable, "-m", "asyncpipe.demo_sim"], env=env).returncode


if __name__ == "__main__":
    sys.exit(run_in_process())
