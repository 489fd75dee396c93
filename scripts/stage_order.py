"""Issue 5's open question: why the chapter's SGEMM at 4096^3 ranks its stage counts 3-8 in the same order run
after run (7, then 8 or 6; 5 last) when they differ by under 0.5 % and the timeline model ties them. Three
conditions, each stage count timed in interleaved rounds (median of ``--reps`` a round, median of the rounds):

* ``own``:  as ``sgemm()`` launches it (S stages of shared memory, the driver's carveout);
* ``pad``:  the same kernel given the shared memory of 8 stages: the same allocation, and so the same carveout,
  for every S (the extra stages are never touched);
* ``max``:  its own shared memory with the preferred carveout at 100 % (the largest shared-memory split).

If ``pad`` and ``max`` keep the order, it comes with the pipeline depth; if they flatten it, with the allocation.

    python3 scripts/stage_order.py [--n 4096] [--rounds 9] [--reps 30] [--json out.json]"""

from __future__ import annotations

import argparse
import json
import statistics


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--stages", default="2,3,4,5,6,7,8")
    p.add_argument("--json")
    args = p.parse_args()
    from asyncpipe.host.device import device_info
    from asyncpipe.host.launch import _set_kernel_attribute
    from asyncpipe.kernels import sgemm as S
    from asyncpipe.timing import time_ms

    from sgemm_sweep import launcher

    stages = [int(s) for s in args.stages.split(",")]
    pad = S.shared_bytes(max(stages))
    runs = {}
    for s in stages:
        own, keep = launcher(f"s{s}", args.n)
        padded, keep2 = launcher(f"s{s}", args.n, shared_mem=pad)
        runs[s] = {"own": own, "pad": padded, "keep": (keep, keep2)}
    times = {cond: {s: [] for s in stages} for cond in ("own", "pad", "max")}

    def rounds(conds):
        for r in range(args.rounds):
            order = stages[r % len(stages):] + stages[:r % len(stages)]      # a different one first each round
            for s in order:
                for cond in conds:
                    times[cond][s].append(time_ms(runs[s]["own" if cond == "max" else cond], reps=args.reps))
            print(f"round {r + 1}/{args.rounds} ({', '.join(conds)})", flush=True)

    rounds(("own", "pad"))
    dev = device_info("stage_order").device_id
    for s in stages:                      # the kernel (numba's _Kernel) is the last thing the launch keeps
        cufunc = runs[s]["own"].keep[-1]._codelibrary.get_cufunc()
        _set_kernel_attribute(cufunc, "CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT", 100, dev)
    rounds(("max",))
    out = {"n": args.n, "rounds": args.rounds, "reps": args.reps, "pad_bytes": pad, "ms": {}}
    print(f"{'cond':5s} " + " ".join(f"{s:>8d}" for s in stages) + "   order")
    for cond, by_s in times.items():
        med = {s: statistics.median(v) for s, v in by_s.items()}
        spread = {s: (max(v) - min(v)) / statistics.median(v) for s, v in by_s.items()}
        out["ms"][cond] = {"median": med, "spread": spread, "rounds": by_s}
        order = sorted(med, key=med.get)
        print(f"{cond:5s} " + " ".join(f"{med[s]:8.4f}" for s in stages) + "   " + " ".join(map(str, order)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
