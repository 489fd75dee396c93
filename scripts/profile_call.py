"""Where a Python call of a kernel function spends its host time: cProfile over many calls of
``wgmma_gemm`` (and ``sgemm``) on the GPU, per-call wall time, and the top functions by own time.
``python3 scripts/profile_call.py [n]``"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time

import numpy as np
from numba import cuda

CALLS = 200


def profile(name, run):
    run()
    cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(CALLS):
        run()
    host = (time.perf_counter() - t0) / CALLS
    cuda.synchronize()
    wall = (time.perf_counter() - t0) / CALLS
    print(f"{name}: {host * 1e6:.0f} us of host time per call (queued), {wall * 1e6:.0f} us per call with the GPU")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(CALLS):
        run()
    prof.disable()
    cuda.synchronize()
    pstats.Stats(prof).sort_stats("tottime").print_stats(18)


def main(n):
    from asyncpipe.kernels.sgemm import sgemm
    from asyncpipe.kernels.wgmma_gemm import bf16_bits, wgmma_gemm

    rng = np.random.default_rng(0)
    a = cuda.to_device(bf16_bits(rng.standard_normal((n, n), dtype=np.float32)))
    b = cuda.to_device(bf16_bits(rng.standard_normal((n, n), dtype=np.float32)))
    c = cuda.device_array((n, n), np.uint16)
    profile("wgmma_gemm", lambda: wgmma_gemm(a, b, c))
    profile("wgmma_gemm b_transposed", lambda: wgmma_gemm(a, b, c, b_transposed=True))
    x = cuda.to_device(rng.standard_normal((1024, 1024), dtype=np.float32))
    y = cuda.device_array((1024, 1024), np.float32)
    profile("sgemm 1024", lambda: sgemm(x, x, y))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4096)
