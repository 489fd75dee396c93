"""A hash of the unrolled source of every configuration of ``sgemm.kernel_source``, to show which ones a change
touched: the configurations not switched to LLVM loops must keep their source byte for byte (so their SASS cannot
change). Run it before and after a change (a checkout of each, or ``git stash``-free: ``git worktree add``) and
compare::

    PYTHONPATH=. python3 scripts/compile_experiments/sources.py --json before.json      # at the old commit
    PYTHONPATH=. python3 scripts/compile_experiments/sources.py --compare before.json   # at the new one

The expansion runs in a temporary ``ASYNCPIPE_CACHE_DIR`` (nothing cached is read).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import sys
import tempfile


def configurations():
    """(name, kernel_source kwargs) of every configuration: v4 (edges or not) and cp_async over stages 2..8, the
    copy widths (16-byte interior; every pair at the edges), bk, tile and schedule (kmajor: vec_a 4 only)."""
    for edges in (False, True):
        yield f"v4 edges={edges}", dict(variant="v4", edges=edges)
    for stages, bk, tile, schedule in itertools.product(range(2, 9), (8, 16), ("8x8", "8x16"),
                                                        ("plain", "dbuf", "kmajor")):
        vecs = [(4, 4, False)] + [(a, b, True) for a in (4, 1) for b in (4, 1) if schedule != "kmajor" or a == 4]
        for vec_a, vec_b, edges in vecs:
            kw = dict(variant="cp_async", stages=stages, vec_a=vec_a, vec_b=vec_b, edges=edges, bk=bk, tile=tile,
                      schedule=schedule)
            yield " ".join(f"{k}={v}" for k, v in kw.items() if k != "variant"), kw


def hashes() -> dict:
    with tempfile.TemporaryDirectory() as cache:
        os.environ["ASYNCPIPE_CACHE_DIR"] = cache
        from asyncpipe.kernels import sgemm as S

        return {name: hashlib.sha1(S.kernel_source(**kw).unrolled_source.encode()).hexdigest()
                for name, kw in configurations()}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--json", help="write the hashes here")
    p.add_argument("--compare", help="hashes written before: print the configurations whose source changed")
    args = p.parse_args()
    now = hashes()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(now, f, indent=1)
    if args.compare:
        with open(args.compare) as f:
            before = json.load(f)
        changed = sorted(k for k in now if before.get(k) != now[k])
        missing = sorted(set(before) - set(now))
        print(f"{len(now)} configurations, {len(changed)} changed, {len(missing)} missing")
        for k in changed:
            print("changed:", k)
        for k in missing:
            print("missing:", k)
        sys.exit(1 if missing else 0)
    print(f"{len(now)} configurations hashed")


if __name__ == "__main__":
    main()
