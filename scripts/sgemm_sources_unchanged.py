"""Checks that the SGEMM interior kernels' unrolled sources are byte-identical to those of a given commit
(default ca47735, the sources measured on the H200): every ``kernel_source("cp_async", s, 4, 4, False, bk,
tile)`` (s 2..8, bk 8 and 16, both tiles) and ``kernel_source("v4", edges=False)``. Edits meant for the edge
kernels only must pass it. No GPU needed (about 15 s a side).

    python3 scripts/sgemm_sources_unchanged.py [REV]"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DUMP = """
import json, sys
from asyncpipe.kernels import sgemm as S
out = {f"cp_async s{s} bk{bk} {t}": S.kernel_source("cp_async", s, 4, 4, False, bk, t).unrolled_source
       for s in range(2, 9) for bk in (8, 16) for t in ("8x8", "8x16")}
out["v4"] = S.kernel_source("v4", edges=False).unrolled_source
json.dump(out, sys.stdout)
"""


def sources(root: Path, cache: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root), "ASYNCPIPE_CACHE_DIR": cache}
    out = subprocess.run([sys.executable, "-c", DUMP], cwd=root, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main(rev: str = "ca47735") -> int:
    with tempfile.TemporaryDirectory() as d:
        old_root = Path(d) / "old"
        old_root.mkdir()
        archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old_root)], input=archive, check=True)
        old, new = sources(old_root, f"{d}/cache-old"), sources(ROOT, f"{d}/cache-new")
    differ = sorted(k for k in old if old[k] != new.get(k))
    print(f"{len(old) - len(differ)} of {len(old)} interior sources identical to {rev}" +
          (f"; differ: {', '.join(differ)}" if differ else ""))
    return 1 if differ or set(old) != set(new) else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
