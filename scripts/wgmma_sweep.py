"""Times wgmma_gemm configurations beside cuBLAS bf16 on the GPU (a tuning aid; the bench keeps the
chosen one). Configurations compile in parallel processes first (numba's disk cache keeps them), then
each is timed alone: ``python3 scripts/wgmma_sweep.py [n ...]``."""

from __future__ import annotations

import json
import sys
from concurrent.futures import ProcessPoolExecutor

CONFIGS = [
    dict(block_n=256, stages=4, cluster=2, epilogue="direct"),
    dict(block_n=256, stages=4, cluster=2, epilogue="tma"),
    dict(block_n=256, stages=3, cluster=2, epilogue="tma"),
    dict(block_n=256, stages=4, cluster=1, epilogue="direct"),
    dict(block_n=256, stages=4, cluster=2, epilogue="direct", b_transposed=True),
    dict(block_n=128, stages=6, cluster=2, epilogue="direct"),
    dict(block_n=128, stages=6, cluster=2, epilogue="tma"),
]


def _warm(cfg):
    from asyncpipe.kernels.wgmma_gemm import benchmark

    benchmark(256, reps=1, **cfg)
    return cfg


def main(sizes):
    with ProcessPoolExecutor(8) as pool:
        list(pool.map(_warm, CONFIGS))
    from asyncpipe.kernels.wgmma_gemm import benchmark

    rows = []
    for n in sizes:
        for cfg in CONFIGS:
            r = benchmark(n, **cfg)
            rows.append(r)
            print(f"{r['kernel']:40s} n={n:5d} {r['tflops']:7.1f} TF  cublas_bf16={r.get('cublas_bf16_tflops', 0):.1f} "
                  f"ratio={r['vs'].get('cublas_bf16', 0):.2f}", flush=True)
    return rows


if __name__ == "__main__":
    out = main([int(a) for a in sys.argv[1:]] or [4096])
    print(json.dumps(out))
