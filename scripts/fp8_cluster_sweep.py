"""The FP8 GEMM at issue 20's shapes in every (block_n, cluster) configuration, beside torch._scaled_mm measured
in the same run (once per shape): JSON lines to OUT, a table to stdout. What ``choose_config`` is read from.
python3 scripts/fp8_cluster_sweep.py OUT.jsonl [--shapes MxNxK,...] [--widths 128,192] [--clusters 1x1,2x2]"""
import argparse
import json

import numpy as np

from asyncpipe.kernels import fp8_gemm as G
from asyncpipe.kernels import fp8_gemm_kernel as FK

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--shapes", help="MxNxK,... (default: the bench's)")
p.add_argument("--widths", help="block_n,... (default: every width)")
p.add_argument("--clusters", help="CMxCN,... (default: every cluster)")
args = p.parse_args()
shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")] if args.shapes else G.BENCH_SHAPES
widths = [int(v) for v in args.widths.split(",")] if args.widths else FK.BLOCK_NS
clusters = [tuple(int(v) for v in c.split("x")) for c in args.clusters.split(",")] if args.clusters else FK.CLUSTERS

with open(args.out, "w") as f:
    for shape in shapes:
        base = None
        operands = G.random_operands(np.random.default_rng(0), *shape)
        for block_n in widths:
            for cluster in clusters:
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
