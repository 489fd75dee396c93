"""How long a new process waits for each kernel's first call: compile (cold) or disk cache (warm).

``python -m asyncpipe.first_call`` times, in this process, the first call of every chapter kernel at
a small size (the call compiles the kernel, or loads it from numba's disk cache, then runs it) and
prints one JSON object ``{kernel: seconds}``. ``measure()`` runs it twice in fresh processes sharing
a fresh cache folder: the first run is cold, the second warm. Needs a GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time


def _calls():
    import numpy as np
    from numba import cuda

    from .kernels import cluster_sum as CS
    from .kernels import sgemm as S
    from .kernels.tma_add_one import add_one

    a = cuda.to_device(np.ones((256, 256), np.float32))
    x = cuda.to_device(np.ones(1 << 16, np.float32))
    t = cuda.to_device(np.zeros((256, 256), np.int32))
    return {
        "sgemm_cp_async_s3": lambda: S.sgemm(a, a, stages=3, tile="8x8", bk=8),
        "sgemm_v4": lambda: S.sgemm(a, a, variant="v4"),
        "tma_add_one_chapter": lambda: add_one(t, pipelined=False),
        "tma_add_one_pipelined": lambda: add_one(t, pipelined=True),
        "cluster_pair_sum_chapter": lambda: CS.pair_sums(x, 1024, 2),
        "cluster_sum": lambda: CS.cluster_sum(x, cluster_size=2),
    }


def main() -> int:
    from numba import cuda

    cuda.synchronize()                       # context creation is not the kernel's cost
    times = {}
    for name, call in _calls().items():
        t0 = time.perf_counter()
        call()
        cuda.synchronize()
        times[name] = time.perf_counter() - t0
    print(json.dumps(times))
    return 0


def measure() -> dict[str, dict[str, float]]:
    """{kernel: {"cold_s": ..., "warm_s": ...}} from two fresh processes and one fresh cache."""
    with tempfile.TemporaryDirectory(prefix="asyncpipe-first-call-") as d:
        env = dict(os.environ, ASYNCPIPE_CACHE_DIR=d, NUMBA_CACHE_DIR=os.path.join(d, "numba"))
        runs = []
        for _ in range(2):
            out = subprocess.run([sys.executable, "-m", "asyncpipe.first_call"], env=env, capture_output=True,
                                 text=True, check=True)
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {k: {"cold_s": runs[0][k], "warm_s": runs[1][k]} for k in runs[0]}


if __name__ == "__main__":
    sys.exit(main())
