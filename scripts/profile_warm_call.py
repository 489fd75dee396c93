"""Where a warm first call's time goes (issue 17: warm at most 0.2 s): for each named kernel of
``asyncpipe.first_call.calls()``, a fresh cache is filled by one cold run, then a second fresh process
makes the warm first call under cProfile; prints its top functions by cumulative and by own time.

    python scripts/profile_warm_call.py tma_add_one_chapter sgemm_cp_async_s3 [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import pstats
import subprocess
import sys
import tempfile

WARM = r"""
import cProfile, sys, time
from numba import cuda
from asyncpipe import first_call
table = first_call.calls()
cuda.synchronize()
name = sys.argv[1]
prof = cProfile.Profile()
t0 = time.perf_counter()
prof.enable()
table[name]()
cuda.synchronize()
prof.disable()
print(f"warm first call {name}: {time.perf_counter() - t0:.3f} s", flush=True)
prof.dump_stats(sys.argv[2])
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="+")
    ap.add_argument("--out", default=".")
    ap.add_argument("--top", type=int, default=35)
    args = ap.parse_args()
    for name in args.names:
        with tempfile.TemporaryDirectory(prefix="asyncpipe-warm-") as d:
            env = dict(os.environ, ASYNCPIPE_CACHE_DIR=d, NUMBA_CACHE_DIR=os.path.join(d, "numba"))
            cold = subprocess.run([sys.executable, "-m", "asyncpipe.first_call", name], env=env, capture_output=True,
                                  text=True)
            print(f"cold {name}: {cold.stdout.strip()[-200:]} {cold.stderr.strip()[-300:]}")
            stats = os.path.join(args.out, f"warm_{name}.pstats")
            warm = subprocess.run([sys.executable, "-c", WARM, name, stats], env=env, capture_output=True, text=True)
            print(warm.stdout.strip(), warm.stderr.strip()[-600:])
            if warm.returncode:
                continue
            for key in ("cumulative", "tottime"):
                print(f"---- {name}: by {key}")
                pstats.Stats(stats).sort_stats(key).print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
