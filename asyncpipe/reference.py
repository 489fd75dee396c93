"""The chapter's nvcc programs as a yardstick: build them from a folder the user points to (such as
``../shared/reference``; asyncpipe never ships them), run them, and read their figures."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# (name, source, extra nvcc flags, program arguments, regex for the figure, unit)
PROGRAMS = [
    *[(f"sgemm_cp_async_s{s}", "gemm_cp_async_bench.cu", [f"-DSTAGES_N={s}"], ["4096"],
       r"([\d.]+) TFLOPS", "tflops") for s in range(2, 7)],
    ("sgemm_v4", "gemm_v4.cu", [], ["4096"], r"([\d.]+) TFLOPS", "tflops"),
    ("tma_add_one", "tma_copy_bench.cu", [], ["16384", "16384"], r"([\d.]+) GB/s", "gbps"),
    ("cluster_sum", "cluster_sum_bench.cu", [], ["8192", "32768"], r"([\d.]+) GB/s", "gbps"),
]


def run_reference(folder: str | Path, log=print) -> dict[str, float]:
    """Build and run each program found in ``folder``; return {name: figure}. Needs nvcc."""
    folder = Path(folder)
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        log("reference: nvcc not found, skipped")
        return {}
    out = Path(tempfile.mkdtemp(prefix="asyncpipe-ref-"))
    todo = [p for p in PROGRAMS if (folder / p[1]).exists()]

    def build(p):
        name, src, flags, *_ = p
        cmd = [nvcc, "-O3", "-std=c++17", "-arch=sm_90", *flags, str(folder / src), "-o", str(out / name), "-lcuda"]
        res = subprocess.run(cmd, capture_output=True, text=True)
        return name, res.returncode, res.stderr

    with ThreadPoolExecutor(8) as pool:
        built = {name: rc for name, rc, err in pool.map(build, todo) if rc == 0 or log(f"reference: {name}: {err}")}
    figures = {}
    for name, _, _, args, pattern, unit in todo:
        if name not in built:
            continue
        res = subprocess.run([str(out / name), *args], capture_output=True, text=True)
        m = re.search(pattern, res.stdout)
        if res.returncode == 0 and m:
            figures[name] = float(m.group(1))
            log(f"reference {name}: {figures[name]} {unit}")
        else:
            log(f"reference {name}: failed (rc {res.returncode}): {res.stdout[-300:]} {res.stderr[-300:]}")
    return figures
