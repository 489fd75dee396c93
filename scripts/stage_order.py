"""Issue 5's open question: why the chapter's SGEMM at 4096^3 ranks its stage counts 3-8 in a repeatable order within
a run (7 first; 8 or 6 second; 5 last) when they differ by under 0.5 % and the timeline model ties them.

Each allocation (``--allocations``) gets fresh operands A, B, C, placed after a spacer of a different size so that
they land at other addresses, and every stage count is timed on them, in interleaved rounds (median of ``--reps`` a
round, median of the rounds), under each condition (``--conditions``):

* ``own``:  as ``sgemm()`` launches it (S stages of shared memory, the driver's carveout);
* ``pad``:  the same kernel given the shared memory of the deepest ring: one allocation, and so one carveout, for
  every S (the extra stages are never touched);
* ``max``:  its own shared memory with the preferred carveout at 100 % (the largest shared-memory split); set on
  the kernels once ``own`` and ``pad`` have run on every allocation.

If ``pad`` and ``max`` keep the order, it comes with the pipeline depth and not the allocation of shared memory; if
the order changes from one allocation of the operands to the next, it belongs to where they sit in memory.

    python3 scripts/stage_order.py [--n 4096] [--rounds 9] [--reps 30] [--allocations 1] [--json out.json]"""

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
    p.add_argument("--allocations", type=int, default=1)
    p.add_argument("--conditions", default="own,pad,max")
    p.add_argument("--json")
    args = p.parse_args()
    import numpy as np
    from numba import cuda

    from asyncpipe.host.device import device_info
    from asyncpipe.host.launch import _set_kernel_attribute
    from asyncpipe.kernels import sgemm as S
    from asyncpipe.timing import time_ms

    from sgemm_sweep import launcher, operands

    stages = [int(s) for s in args.stages.split(",")]
    conds = args.conditions.split(",")
    pad = S.shared_bytes(max(stages))
    allocs, spacers = [], []
    for i in range(args.allocations):
        spacers.append(cuda.device_array((1 + 37 * i) << 18, np.float32))    # (1 + 37 i) MiB, kept alive
        arrays = operands(args.n, seed=i)
        allocs.append({s: {"own": launcher(f"s{s}", args.n, arrays=arrays)[0],
                           "pad": launcher(f"s{s}", args.n, shared_mem=pad, arrays=arrays)[0]} for s in stages})
        allocs[-1]["address"] = arrays[0].device_ctypes_pointer.value
    times = {(i, c): {s: [] for s in stages} for i in range(args.allocations) for c in conds}

    def rounds(i, which):
        for r in range(args.rounds):
            for s in stages[r % len(stages):] + stages[:r % len(stages)]:     # a different one first each round
                for c in which:
                    times[i, c][s].append(time_ms(allocs[i][s]["own" if c == "max" else c], reps=args.reps))
        print(f"allocation {i}: {args.rounds} rounds of {', '.join(which)}", flush=True)

    for i in range(args.allocations):
        rounds(i, [c for c in conds if c != "max"])
    if "max" in conds:
        dev = device_info("stage_order").device_id
        for s in stages:                  # the kernel (numba's _Kernel) is the last thing a launch keeps
            cufunc = allocs[0][s]["own"].keep[-1]._codelibrary.get_cufunc()
            _set_kernel_attribute(cufunc, "CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT", 100, dev)
        for i in range(args.allocations):
            rounds(i, ["max"])
    out = {"n": args.n, "rounds": args.rounds, "reps": args.reps, "pad_bytes": pad, "runs": []}
    print(f"{'alloc':5s} {'cond':5s} " + " ".join(f"{s:>8d}" for s in stages) + "   order")
    for (i, c), by_s in times.items():
        med = {s: statistics.median(v) for s, v in by_s.items()}
        order = sorted(med, key=med.get)
        out["runs"].append({"allocation": i, "a_address": hex(allocs[i]["address"]), "condition": c, "median_ms": med,
                            "order": order, "rounds_ms": by_s})
        print(f"{i:5d} {c:5s} " + " ".join(f"{med[s]:8.4f}" for s in stages) + "   " + " ".join(map(str, order)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
