"""The FP8 GEMM at issue 20's shapes in every (block_n, cluster) configuration, beside torch._scaled_mm measured
in the same run (once per shape): JSON lines to argv[1], a table to stdout. What ``choose_config`` is read from.
python3 scripts/fp8_cluster_sweep.py OUT.jsonl"""
import json
import sys

import numpy as np

from asyncpipe.kernels import fp8_gemm as G
from asyncpipe.kernels import fp8_gemm_kernel as FK

with open(sys.argv[1], "w") as f:
    for shape in G.BENCH_SHAPES:
        base = None
        operands = G.random_operands(np.random.default_rng(0), *shape)
        for block_n in FK.BLOCK_NS:
            for cluster in FK.CLUSTERS:
                try:
                    r = G.benchmark(*shape, block_n=block_n, cluster=cluster, yardsticks=base is None,
                                    operands=operands)
                except Exception as exc:  # noqa: BLE001 - one failing configuration must not hide the rest
                    r = dict(kernel=f"fp8_gemm_bn{block_n}_c{cluster}", shape=list(shape), error=repr(exc), vs={})
                base = base or {k: v for k, v in r.items() if k.startswith("scaled_mm")}
                r.update({k: v for k, v in base.items() if k not in r})
                if "tflops" in r and "scaled_mm_tensorwise_tflops" in base:
                    r["vs"] = {"scaled_mm_tensorwise": r["tflops"] / base["scaled_mm_tensorwise_tflops"]}
                f.write(json.dumps(r) + "\n")
                f.flush()
                print(f"{'x'.join(map(str, shape)):>18} {r['kernel']:<44} {r.get('tflops', float('nan')):8.1f} "
                      f"{r['vs'].get('scaled_mm_tensorwise', float('nan')):6.2f}", flush=True)
