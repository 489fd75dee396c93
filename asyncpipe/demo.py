"""``python -m asyncpipe demo``: the chapter's programs, checked against numpy, with timings.

On a GPU each program runs at the chapter's size and is compared with numpy in float64 (exactly
for integers). Without a GPU the demo says why, then runs the same programs at small sizes on
asyncpipe's CPU simulator (``asyncpipe.demo_sim``), checked the same way.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import backend


@dataclass
class Outcome:
    ok: bool
    detail: str
    ms: float | None = None


def gpu_status() -> str | None:
    """None when a usable GPU is present, else the reason there is none."""
    if backend.simulating():
        return "NUMBA_ENABLE_CUDASIM=1 selects numba's simulator"
    from numba import cuda

    try:
        if not cuda.is_available():
            return "no CUDA driver or GPU is visible (numba.cuda.is_available() is False)"
        cc = cuda.get_current_device().compute_capability
    except Exception as exc:  # noqa: BLE001
        return f"CUDA could not start: {exc}"
    if cc < (8, 0):
        return f"the GPU is sm_{cc[0]}{cc[1]}; cp.async needs sm_80 and TMA/clusters sm_90"
    return None


def sgemm_program(quick: bool) -> Outcome:
    """gemm_cp_async.cu: the 3-stage cp.async SGEMM, checked at 256^3 (as the chapter does), timed at 4096^3."""
    from numba import cuda

    from .kernels.sgemm import sgemm
    from .timing import time_ms, tflops

    rng = np.random.default_rng()
    n = 256
    a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    c = cuda.to_device(np.full((n, n), np.nan, np.float32))
    sgemm(cuda.to_device(a), cuda.to_device(b), c, stages=3, tile="8x8", bk=8)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = np.linalg.norm(c.copy_to_host() - ref) / np.linalg.norm(ref)
    if not err < 1e-5:
        return Outcome(False, f"relative error {err:.2e} at n={n}")
    n = 1024 if quick else 4096
    da = cuda.to_device(rng.uniform(-1, 1, (n, n)).astype(np.float32))
    db = cuda.to_device(rng.uniform(-1, 1, (n, n)).astype(np.float32))
    dc = cuda.device_array((n, n), np.float32)
    ms = time_ms(lambda: sgemm(da, db, dc, stages=3, tile="8x8", bk=8))
    return Outcome(True, f"rel. error {err:.1e} at 256^3; {tflops(2.0 * n**3, ms):.1f} TFLOPS at {n}^3", ms)


def tma_program(quick: bool) -> Outcome:
    """tma_copy.cu: add one to a 1024 x 2048 int32 matrix in 16 x 32 boxes through TMA (the chapter's
    kernel), then the pipelined kernel at 16384 x 16384 (4096 x 4096 quick), both checked exactly."""
    from numba import cuda

    from .kernels.tma_add_one import add_one
    from .timing import gbps, time_ms

    rng = np.random.default_rng()
    a = rng.integers(0, 1000, (1024, 2048), dtype=np.int32)
    d = cuda.to_device(a)
    add_one(d, pipelined=False)
    bad = int(np.count_nonzero(d.copy_to_host() != a + 1))
    if bad:
        return Outcome(False, f"chapter kernel: {bad} mismatches")
    n = 4096 if quick else 16384
    big = rng.integers(0, 1000, (n, n), dtype=np.int32)
    d = cuda.to_device(big)
    add_one(d)
    bad = int(np.count_nonzero(d.copy_to_host() != big + 1))
    if bad:
        return Outcome(False, f"pipelined kernel: {bad} mismatches at {n}x{n}")
    ms = time_ms(lambda: add_one(d))
    return Outcome(True, f"0 mismatches; pipelined {gbps(2.0 * big.nbytes, ms):.0f} GB/s (read+write) at {n}x{n}", ms)


def cluster_program(quick: bool) -> Outcome:
    """cluster_sum.cu: 64 clusters of 2 CTAs, 10000 floats each, partial sums over DSMEM; then the
    full cluster sum of 2^29 floats (2^24 quick)."""
    from numba import cuda

    from .kernels.cluster_sum import cluster_sum, pair_sums
    from .timing import gbps, time_ms

    rng = np.random.default_rng()
    x = rng.uniform(-1, 1, 64 * 2 * 10000).astype(np.float32)
    got = pair_sums(cuda.to_device(x), 10000, 64).copy_to_host()
    ref = x.astype(np.float64).reshape(64, -1).sum(axis=1)
    if not np.allclose(got, ref, rtol=1e-4, atol=1e-3):
        return Outcome(False, f"pair sums off by up to {np.abs(got - ref).max():.2e}")
    n = 1 << (24 if quick else 29)
    big = cuda.to_device(rng.uniform(-1, 1, n).astype(np.float32))
    total = cluster_sum(big, cluster_size=2).copy_to_host()[0]
    ref_total = float(big.copy_to_host().astype(np.float64).sum())
    if abs(total - ref_total) > 1e-6 * n:
        return Outcome(False, f"cluster sum {total} vs {ref_total}")
    ms = time_ms(lambda: cluster_sum(big, cluster_size=2))
    return Outcome(True, f"64 pair sums match; sum of 2^{n.bit_length() - 1} floats within "
                         f"{abs(total - ref_total):.1e}, {gbps(4.0 * n, ms):.0f} GB/s read", ms)


PROGRAMS: list[tuple[str, Callable[[bool], Outcome], tuple[int, int]]] = [
    ("gemm_cp_async (3-stage cp.async SGEMM)", sgemm_program, (8, 0)),
    ("tma_copy (TMA add-one)", tma_program, (9, 0)),
    ("cluster_sum (2-CTA cluster over DSMEM)", cluster_program, (9, 0)),
]


def run_demo(quick: bool = False) -> int:
    reason = gpu_status()
    if reason:   # the CPU path: the same programs, smaller, on asyncpipe's simulator
        print(f"asyncpipe demo: no GPU run: {reason}.")
        print("Running the chapter's programs on asyncpipe's CPU simulator instead (small sizes, "
              "asynchronous copies and pipeline checks modelled; no timings):", flush=True)
        from .demo_sim import run_on_simulator

        return run_on_simulator()
    from numba import cuda

    cc = cuda.get_current_device().compute_capability
    failed = 0
    for name, fn, need in PROGRAMS:
        if cc < need:
            print(f"  NOT RUN  {name}: needs sm_{need[0]}{need[1]}, this GPU is sm_{cc[0]}{cc[1]}")
            continue
        t0 = time.perf_counter()
        try:
            out = fn(quick)
        except Exception as exc:  # noqa: BLE001 - report and carry on with the other programs
            out = Outcome(False, f"{type(exc).__name__}: {exc}")
        failed += not out.ok
        print(f"  {'PASS' if out.ok else 'FAIL'}  {name}: {out.detail} ({time.perf_counter() - t0:.1f} s with compile)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run_demo())
