"""Run each selected pytest test in a process of its own, many at once, and summarise.

A CUDA error such as an illegal instruction is sticky: it poisons the whole process (context), so
every later test in that process fails too and hides which test caused it. One process per test
keeps each result honest. Usage (from the repository root):

    python3 scripts/run_isolated.py [-j 12] [--wrap "compute-sanitizer --tool memcheck ..."] [--log F] [pytest args]

Prints one PASS/FAIL line per test, then ``N passed, M failed``; exits 1 if any failed.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor


SEP = "\x1f"   # joins the node ids of one process (ids may hold spaces: "test_x[a must be 2-D]")


def collect(args: list[str]) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                         capture_output=True, text=True)
    found = [line.strip() for line in out.stdout.splitlines() if "::" in line]
    if not found:                                    # say why, not just "0 tests"
        print(f"collected nothing (pytest exit {out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}",
              flush=True)
    return found


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-j", type=int, default=12)
    ap.add_argument("--wrap", default="", help="command to run pytest under (compute-sanitizer ...)")
    ap.add_argument("--log", default=None, help="write the output of failing tests here")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--per-file", action="store_true",
                    help="one process per test file instead of per test (fewer compiles; for sanitizer runs)")
    opts, rest = ap.parse_known_args()
    tests = collect(rest)
    if opts.per_file:   # the selected tests of each file, by node id, in one process
        by_file: dict[str, list[str]] = {}
        for t in tests:
            by_file.setdefault(t.split("::", 1)[0], []).append(t)
        tests = [SEP.join(ids) for ids in by_file.values()]
    wrap = shlex.split(opts.wrap)
    failures: dict[str, str] = {}

    def run(test: str):
        t0 = time.time()
        cmd = [*wrap, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *test.split(SEP)]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=opts.timeout)
            ok, text = res.returncode == 0, res.stdout[-6000:] + res.stderr[-3000:]
        except subprocess.TimeoutExpired:
            ok, text = False, f"timed out after {opts.timeout} s"
        name = test if SEP not in test else f"{test.split('::', 1)[0]} ({len(test.split(SEP))} tests)"
        print(f"{'PASS' if ok else 'FAIL'} {time.time() - t0:5.1f}s {name}", flush=True)
        if not ok:
            failures[test] = text

    with ThreadPoolExecutor(opts.j) as pool:
        list(pool.map(run, tests))
    if opts.log:
        with open(opts.log, "w") as f:
            for test, text in failures.items():
                f.write(f"===== {test}\n{text}\n")
    unit = "files" if opts.per_file else "tests"
    print(f"{len(tests) - len(failures)} {unit} passed, {len(failures)} failed")
    return 1 if failures or not tests else 0


if __name__ == "__main__":
    sys.exit(main())
