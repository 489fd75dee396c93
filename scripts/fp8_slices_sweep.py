"""k_slices and split_k at the few-tile shapes, on the GPU: every (split_k, k_slices) at each shape's default tile and
cluster, torch._scaled_mm tensorwise in the same run. One line per configuration; --json writes the records.

    python3 scripts/fp8_slices_sweep.py [--shapes 64x2112x7168,...] [--slices 1,2,4,8] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="64x2112x7168,128x2112x7168,64x7168x2048,128x7168x2048")
    p.add_argument("--slices", default="1,2,4,8")
    p.add_argument("--widths", default="")
    p.add_argument("--json")
    args = p.parse_args()

    import numpy as np
    from numba import cuda

    from asyncpipe.host import device_info
    from asyncpipe.kernels import fp8_gemm as G
    from asyncpipe.timing import time_ms, tflops

    sms = device_info(G.API).sm_count
    records = []
    for shape in args.shapes.split(","):
        m, n, k = (int(v) for v in shape.split("x"))
        a, sa, b, sb = G.random_operands(np.random.default_rng(0), m, n, k)
        dev = (cuda.to_device(a), G.to_device_scales(sa), cuda.to_device(b), cuda.to_device(sb))
        d = cuda.device_array((m, n), np.uint16)
        torch_tf = G._scaled_mm_tflops(a, b, 50).get("tensorwise")
        widths = [int(w) for w in args.widths.split(",") if w] or [G.choose_block_n(m, n, sms)]
        for bn in widths:
            cluster = G.choose_cluster(m, n, bn, sms)
            splits = (1, 2) if m <= 64 and bn <= 128 else (1,)
            for split in splits:
                for ks in (int(v) for v in args.slices.split(",")):
                    if ks > G.k_blocks(k):
                        continue
                    run = lambda: G.fp8_gemm(*dev, d, block_n=bn, cluster=cluster, split_k=split, k_slices=ks)  # noqa: E731
                    run()
                    ms = time_ms(run, reps=50)
                    tf = tflops(2.0 * m * n * k, ms)
                    rec = dict(shape=[m, n, k], block_n=bn, cluster=list(cluster), split_k=split, k_slices=ks,
                               us=ms * 1e3, tflops=tf, scaled_mm_tensorwise_tflops=torch_tf,
                               default=ks == G.choose_k_slices(m, n, k, bn, cluster, sms))
                    records.append(rec)
                    print(f"{shape:>14} bn{bn:<3} c{cluster[0]}x{cluster[1]} split{split} k{ks:<2} {ms * 1e3:8.2f} us "
                          f"{tf:7.1f} TF  {tf / torch_tf if torch_tf else float('nan'):.2f}x torch", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=cuda.get_current_device().name.decode() if isinstance(
                cuda.get_current_device().name, bytes) else cuda.get_current_device().name, records=records), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
