"""The FP8 GEMM (its defaults) and torch._scaled_mm tensorwise in alternating rounds, on the same codes, so that
both meet the same clocks: at 8192^3 the kernel's time moved by 3-15 % between rounds of one process on an H100
(scripts/fp8_placement_probe.py), and the bench and fp8_sweep.py time torch once, before or after the kernel.
One line per shape: each one's median over the rounds, the ratio of the medians, and the median and range of the
rounds' own ratios (a round: the kernel's median of REPS launches and torch's, who goes first alternating from round
to round: ``timing.time_rounds``, as the bench times them); --json writes every round, after each shape.

    python3 scripts/fp8_vs_torch.py [--shapes 8192x8192x8192,4096x4096x4096] [--rounds 10] [--json out.json]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="8192x8192x8192,4096x4096x4096,4096x7168x2048,4096x2112x7168,4096x24576x1536")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--json")
    args = p.parse_args()

    import numpy as np
    from numba import cuda

    from asyncpipe.kernels import fp8_gemm as G
    from asyncpipe.timing import time_rounds, tflops

    records = []
    for shape in args.shapes.split(","):
        m, n, k = (int(v) for v in shape.split("x"))
        a, sa, b, sb = G.random_operands(np.random.default_rng(0), m, n, k)
        d = cuda.device_array((m, n), np.uint16)
        ours = functools.partial(G.fp8_gemm, *G.to_device_operands(a, sa, b, sb), d)
        theirs = G.working_scaled_mm_calls(a, b).get("tensorwise")
        if theirs is None:
            print("torch is not installed: there is nothing to alternate with")
            return 1
        ours()
        t = time_rounds({"ours": ours, "torch": theirs}, rounds=args.rounds, reps=args.reps)
        rounds = [dict(ours_first=r % 2 == 0, ours_ms=o, torch_ms=q)
                  for r, (o, q) in enumerate(zip(t["ours"], t["torch"]))]
        flop = 2.0 * m * n * k
        med_o = statistics.median(r["ours_ms"] for r in rounds)
        med_t = statistics.median(r["torch_ms"] for r in rounds)
        ratios = [r["torch_ms"] / r["ours_ms"] for r in rounds]
        rec = dict(shape=[m, n, k], ours_tflops=tflops(flop, med_o), torch_tensorwise_tflops=tflops(flop, med_t),
                   ratio_of_medians=med_t / med_o, round_ratio_median=statistics.median(ratios),
                   round_ratio_min=min(ratios), round_ratio_max=max(ratios), rounds=rounds)
        records.append(rec)
        spread_o = (max(r["ours_ms"] for r in rounds) - min(r["ours_ms"] for r in rounds)) / med_o
        spread_t = (max(r["torch_ms"] for r in rounds) - min(r["torch_ms"] for r in rounds)) / med_t
        print(f"{shape:>16}  ours {rec['ours_tflops']:7.1f} TF (spread {spread_o * 100:4.1f} %)  torch "
              f"{rec['torch_tensorwise_tflops']:7.1f} TF (spread {spread_t * 100:4.1f} %)  ratio {med_t / med_o:.3f}x  "
              f"rounds {min(ratios):.3f}-{max(ratios):.3f}x (median {statistics.median(ratios):.3f}x)", flush=True)
        if args.json:                                # after every shape: a run cut short keeps what it measured
            from ab_record import write

            write(args.json, records=records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
