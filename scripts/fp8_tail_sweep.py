"""tail_slices on the GPU: at each shape and tile width (default cluster), the kernel with the last round's tiles whole
(tail 1) and in K slices (choose_tail_slices' count, marked *, and the others of --tails), alternated ROUNDS times on the same
operands, torch._scaled_mm tensorwise timed once per shape beside them. One line per configuration: TFLOPS (median of
the rounds' medians), the ratio to tail 1 and to torch; --json writes the records (COMMIT from the environment).

    python3 scripts/fp8_tail_sweep.py [--shapes 4096x4096x4096,...] [--widths 128,192] [--tails 2,3,4] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHAPES = ("4096x4096x4096,8192x8192x8192,4096x7168x2048,4096x2112x7168,4096x24576x1536,512x7168x2048,"
          "512x2112x7168,512x24576x1536")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default=SHAPES)
    p.add_argument("--widths", default="128,192")
    p.add_argument("--tails", default="")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json")
    args = p.parse_args()

    import numpy as np
    from numba import cuda

    from asyncpipe.host import device_info
    from asyncpipe.kernels import fp8_gemm as G
    from asyncpipe.timing import time_ms, tflops

    sms = device_info(G.API).sm_count
    name = cuda.get_current_device().name
    records = []
    for shape in args.shapes.split(","):
        m, n, k = (int(v) for v in shape.split("x"))
        a, sa, b, sb = G.random_operands(np.random.default_rng(0), m, n, k)
        dev = (cuda.to_device(a), G.to_device_scales(sa), cuda.to_device(b), cuda.to_device(sb))
        d = cuda.device_array((m, n), np.uint16)
        torch_tf = G._scaled_mm_tflops(a, b, 50).get("tensorwise")
        for bn in (int(w) for w in args.widths.split(",")):
            cluster = G.choose_cluster(m, n, bn, sms)
            chosen = G.choose_tail_slices(m, n, k, bn, cluster, sms)
            if G.choose_k_slices(m, n, k, bn, cluster, sms) > 1:
                continue                             # k_slices' shapes: no tail to slice
            tails = sorted({1, chosen, *(int(t) for t in args.tails.split(",") if t)} - {0})
            tails = [t for t in tails if t <= G.k_blocks(k)]
            runs = {t: (lambda t=t: G.fp8_gemm(*dev, d, block_n=bn, cluster=cluster, tail_slices=t)) for t in tails}
            times = {t: [] for t in tails}
            for run in runs.values():
                run()                                # compile and check outside the timing
            for _ in range(args.rounds):
                for t, run in runs.items():
                    times[t].append(time_ms(run, reps=30))
            base = None
            for t in tails:
                ms = statistics.median(times[t])
                tf = tflops(2.0 * m * n * k, ms)
                base = base or tf
                rec = dict(shape=[m, n, k], block_n=bn, cluster=list(cluster), tail_slices=t, default=t == chosen,
                           us=ms * 1e3, tflops=tf, vs_tail1=tf / base, scaled_mm_tensorwise_tflops=torch_tf)
                records.append(rec)
                print(f"{shape:>16} bn{bn:<3} c{cluster[0]}x{cluster[1]} tail{t:<2}{'*' if t == chosen else ' '} "
                      f"{ms * 1e3:9.2f} us {tf:7.1f} TF  {tf / base:.3f}x tail1  "
                      f"{tf / torch_tf if torch_tf else float('nan'):.3f}x torch", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=name.decode() if isinstance(name, bytes) else name,
                           commit=os.environ.get("COMMIT", "unknown"), records=records), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
