"""The FP8 GEMM's epilogues on the GPU: at each shape's default configuration, the direct epilogue and the TMA one
with each staging buffer count (1 .. block_n / 64), alternated ROUNDS times on the same operands, torch._scaled_mm
tensorwise timed once per shape beside them. One line per configuration: TFLOPS (median of the rounds' medians), the
ratio to the direct epilogue and to torch; --json writes the records (COMMIT from the environment).

    python3 scripts/fp8_epilogue_sweep.py [--shapes 4096x4096x4096,...] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHAPES = ("4096x4096x4096,8192x8192x8192,4096x7168x2048,4096x2112x7168,4096x24576x1536,512x7168x2048,"
          "512x24576x1536,128x7168x2048,64x7168x2048,64x2112x7168")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default=SHAPES)
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
        bn = G.choose_block_n(m, n, sms)
        cluster = G.choose_cluster(m, n, bn, sms)
        forms = [("direct", None)] + [("tma", b) for b in range(1, G.FK.epilogue_chunks(bn) + 1)]
        runs = {f: (lambda f=f: G.fp8_gemm(*dev, d, block_n=bn, cluster=cluster, epilogue=f[0], epilogue_buffers=f[1]))
                for f in forms}
        times = {f: [] for f in forms}
        outs = {}
        for f, run in runs.items():
            run()                                    # compile and check outside the timing
            outs[f] = d.copy_to_host()
        for _ in range(args.rounds):
            for f, run in runs.items():
                times[f].append(time_ms(run, reps=30))
        base = None
        for f in forms:
            ms = statistics.median(times[f])
            tf = tflops(2.0 * m * n * k, ms)
            base = base or tf
            rec = dict(shape=[m, n, k], block_n=bn, cluster=list(cluster), epilogue=f[0], epilogue_buffers=f[1],
                       us=ms * 1e3, tflops=tf, vs_direct=tf / base, scaled_mm_tensorwise_tflops=torch_tf,
                       same_d_as_direct=bool(np.array_equal(outs[f], outs[forms[0]])))
            records.append(rec)
            print(f"{shape:>16} bn{bn:<3} c{cluster[0]}x{cluster[1]} {f[0]:>6} {f[1] or '':<2} {ms * 1e3:9.2f} us "
                  f"{tf:7.1f} TF  {tf / base:.3f}x direct  {tf / torch_tf if torch_tf else float('nan'):.3f}x torch"
                  f"  same D {rec['same_d_as_direct']}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=name.decode() if isinstance(name, bytes) else name,
                           commit=os.environ.get("COMMIT", "unknown"), records=records), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
