"""The SGEMM kernels with their register tile in LLVM loops (shipped since issue 17) against the same kernels with
every statement expanded (``sgemm.kernel_source(..., llvm_loops=False)``, the form before), on the GPU, in one run:
every configuration the bench times at 4096^3 (interior kernels) and the edge kernels of EDGE_CONFIGS at 4000^3
(M, N not multiples of 128), the two forms alternated ROUNDS times, cuBLAS beside them.

    python3 scripts/llvm_ab.py [--jobs 14] [--rounds 3] [--json out.json]

Both forms are first compiled into numba's disk cache by ``--jobs`` child processes at once (the expanded ones take
minutes); the timing process then loads them. Prints one line per kernel and form; the JSON holds every timing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# (variant, stages, bk, tile, schedule) of the edge kernels timed too (the bench times interior kernels only)
EDGE_CONFIGS = (("cp_async", 3, 8, "8x8", "plain"), ("v4", 1, 8, "8x8", "plain"), ("cp_async", 3, 16, "8x16", "kmajor"))
FORMS = ("llvm", "expanded", "llvm_cols")   # llvm_cols: the plain loop's FFMAs columns outer (sgemm.COLS_OUTER)
N_INTERIOR, N_EDGES = 4096, 4000


def make_kernel(form: str):
    """An ``sgemm.kernel`` building ``form``'s kernels (``llvm_loops`` True or False)."""
    from asyncpipe.jit_cache import jit
    from asyncpipe.kernels import sgemm as S

    built = {}

    def kernel(variant="cp_async", stages=3, vec_a=4, vec_b=4, edges=True, bk=S.BK, tile=S.TILE, issue_after=None,
               schedule=S.SCHEDULE):
        key = (variant, stages, vec_a, vec_b, edges, bk, tile, issue_after, schedule)
        if key not in built:
            fn = S.kernel_source(variant, stages, vec_a, vec_b, edges, bk, tile, issue_after, schedule,
                                 llvm_loops=form != "expanded", cols_outer=True if form == "llvm_cols" else None)
            built[key] = jit(fn, launch_bounds=S.launch_bounds(edges, bk, tile, schedule))
        return built[key]

    return kernel


def install(form: str) -> None:
    from asyncpipe.kernels import sgemm as S

    S.kernel = make_kernel(form)


def kwargs(cfg) -> dict:
    variant, stages, bk, tile, schedule = cfg
    return dict(variant=variant) if variant == "v4" else dict(stages=stages, bk=bk, tile=tile, schedule=schedule)


def operands(n, seed=1):
    import numpy as np
    from numba import cuda

    rng = np.random.default_rng(seed)
    return (cuda.to_device(rng.standard_normal((n, n)).astype(np.float32)),
            cuda.to_device(rng.standard_normal((n, n)).astype(np.float32)))


def compile_one(cfg, form: str, edges: bool) -> float:
    """Compile (or load) one kernel in this process by running it on a small problem of its kind."""
    from asyncpipe.kernels import sgemm as S

    install(form)
    a, b = operands(260 if edges else 256)
    t0 = time.perf_counter()
    S.sgemm(a, b, **kwargs(cfg))
    from numba import cuda

    cuda.synchronize()
    return time.perf_counter() - t0


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--jobs", type=int, default=14)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json")
    p.add_argument("--plain", action="store_true", help="only the plain loop's configurations (cp.async, plain)")
    p.add_argument("--smoke", action="store_true", help="two configurations at 256 / 260 (a check of the script)")
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        cfg, form, edges = json.loads(args.child[0]), args.child[1], args.child[2] == "1"
        print(json.dumps({"seconds": compile_one(tuple(cfg), form, edges)}))
        return 0

    from asyncpipe.bench_configs import sgemm_configs

    global N_INTERIOR, N_EDGES
    cases = [(tuple(c), False) for c in sgemm_configs()] + [(c, True) for c in EDGE_CONFIGS]
    if args.plain:
        cases = [(c, e) for c, e in cases if c[0] == "cp_async" and c[4] == "plain"]
    if args.smoke:
        cases, N_INTERIOR, N_EDGES = [cases[1], cases[-1]], 256, 260
    def forms(cfg):
        return FORMS if cfg[0] == "cp_async" and cfg[4] == "plain" else FORMS[:2]

    jobs = [(c, f, e) for c, e in cases for f in forms(c)]
    jobs.sort(key=lambda j: (j[1] != "expanded", "8x16" not in j[0]))        # the longest compiles first

    def child(job):
        cfg, form, edges = job
        out = subprocess.run([sys.executable, __file__, "--child", json.dumps(cfg), form, "1" if edges else "0"],
                             capture_output=True, text=True)
        if out.returncode:
            return job, {"error": out.stderr[-600:]}
        return job, json.loads(out.stdout.strip().splitlines()[-1])

    t0 = time.perf_counter()
    with ThreadPoolExecutor(args.jobs) as pool:
        compiled = dict(pool.map(child, jobs))
    print(f"compiled {len(jobs)} kernels in {time.perf_counter() - t0:.0f} s", flush=True)

    from numba import cuda

    from asyncpipe.bench import cublas_sgemm_tflops
    from asyncpipe.kernels import sgemm as S
    from asyncpipe.timing import time_ms, tflops

    ops = {n: operands(n) for n in (N_INTERIOR, N_EDGES)}
    outs = {(n, f): cuda.device_array((n, n), "float32") for n in ops for f in FORMS}   # one plan per form
    kernels = {f: make_kernel(f) for f in FORMS}
    records = []
    for cfg, edges in cases:
        n = N_EDGES if edges else N_INTERIOR
        a, b = ops[n]
        ms = {f: [] for f in forms(cfg)}
        for _ in range(args.rounds):
            for form in forms(cfg):
                S.kernel = kernels[form]
                c = outs[(n, form)]
                S._plans.clear()
                ms[form].append(time_ms(lambda: S.sgemm(a, b, c, **kwargs(cfg)), reps=20))
        rec = dict(config=list(cfg), edges=edges, n=n)
        for form in forms(cfg):
            med = statistics.median(ms[form])
            rec[form] = dict(ms=ms[form], tflops=tflops(2.0 * n ** 3, med),
                             compile_s=compiled[(cfg, form, edges)].get("seconds"),
                             error=compiled[(cfg, form, edges)].get("error"))
        rec["llvm_over_expanded"] = rec["llvm"]["tflops"] / rec["expanded"]["tflops"]
        cols = (f", columns outer {rec['llvm_cols']['tflops']:.1f} TF ({rec['llvm_cols']['tflops'] / rec['expanded']['tflops']:.3f})"
                if "llvm_cols" in rec else "")
        records.append(rec)
        print(f"{'/'.join(map(str, cfg))} {'edges' if edges else 'interior'} n={n}: llvm {rec['llvm']['tflops']:.1f} "
              f"TF, expanded {rec['expanded']['tflops']:.1f} TF, ratio {rec['llvm_over_expanded']:.3f}{cols}; compile "
              f"{rec['llvm']['compile_s'] or 0:.1f} / {rec['expanded']['compile_s'] or 0:.1f} s", flush=True)
    from ab_record import write

    doc = write(args.json, cublas_tflops_4096=cublas_sgemm_tflops(N_INTERIOR), rounds=args.rounds, records=records)
    print(f"cuBLAS {doc['cublas_tflops_4096']:.1f} TF at 4096^3")
    return 0


if __name__ == "__main__":
    sys.exit(main())
