"""The tuner's GPU side: for one kernel and problem, the ``check`` and ``time`` callables that
``asyncpipe.tune.search.tune`` calls with a configuration (``Config``: stage count and options).
Needs a CUDA GPU (sm_80 or newer for cp.async); without one, ``UnsupportedDeviceError`` says so
before anything is allocated.

``timer`` is the timing function, ``asyncpipe.timing.time_ms`` by default (CUDA events around
each call after warm-up, the median of ``reps`` calls).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..constants import SM_CP_ASYNC
from .kernels import Config, tunable
from .search import Check

# Relative (Frobenius) error a float32 GEMM with K up to a few thousand stays far below; a wrong
# pipeline (a stage read before it landed, a slot overwritten too early) lands near 1.
SGEMM_TOLERANCE = 1e-4


@dataclass
class Measurement:
    """What the tuner needs from the GPU: the two callables, and the device they ran on."""

    check: Callable[[Config], Check]
    time: Callable[[Config], float]
    gpu: str
    limits: object
    calibration: object = None               # the model's constants measured on this device (None: defaults)


def _registers(kernels_module, config: Config) -> int | None:
    """Registers per thread of the cp.async kernel(s) ``sgemm()`` compiled for ``config`` (numba
    reads them from the loaded function), the most of them if several variants ran; None when
    numba cannot say. Informative only: the table shows a blank then."""
    found = []
    kw = tunable("sgemm").kernel_kw(config)
    try:
        for key, disp in kernels_module._kernels.items():    # (variant, stages, vec_a, vec_b, edges, bk, tile, ..., schedule)
            if key[0] == "cp_async" and (key[1], key[5], key[6], key[-1]) == (kw["stages"], kw["bk"], kw["tile"],
                                                                       kw["schedule"]):
                regs = disp.get_regs_per_thread()
                found += list(regs.values()) if isinstance(regs, dict) else [regs]
    except Exception:  # noqa: BLE001
        return None
    return max(int(r) for r in found) if found else None


def sgemm_measurement(problem, timer: Callable | None = None, reps: int = 20, seed: int = 0) -> Measurement:
    """``check(config)`` runs the cp.async SGEMM once on random data (C poisoned with NaN first)
    and compares it with numpy in float64; ``time(config)`` times it with ``timer``."""
    from numba import cuda

    from ..host.device import require_cc
    from ..kernels import sgemm as S
    from ..model.limits import device_limits

    info = require_cc("tune sgemm", SM_CP_ASYNC)
    limits = device_limits("tune sgemm")
    if timer is None:
        from ..timing import time_ms as timer
    m, n, k = problem
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    ref_norm = max(float(np.linalg.norm(ref)), 1e-30)
    da, db = cuda.to_device(a), cuda.to_device(b)
    dc = cuda.device_array((m, n), np.float32)
    poison = cuda.to_device(np.full((m, n), np.nan, np.float32))

    options = tunable("sgemm").kernel_kw     # every option named (sgemm() fills missing ones from the cache)

    def check(config: Config) -> Check:
        dc.copy_to_device(poison)
        S.sgemm(da, db, dc, **options(config))
        cuda.synchronize()
        err = float(np.linalg.norm(dc.copy_to_host().astype(np.float64) - ref) / ref_norm)
        regs = _registers(S, config)
        ok = bool(np.isfinite(err) and err < SGEMM_TOLERANCE)
        return Check(ok, err, regs, "" if ok else f"(tolerance {SGEMM_TOLERANCE:g})")

    def time(config: Config) -> float:
        kw = options(config)
        return timer(lambda: S.sgemm(da, db, dc, **kw), reps=reps)

    return Measurement(check, time, info.name, limits)


def measured_calibration(limits, nbytes: int = 1 << 28, reps: int = 30, warmup: int = 100):
    """``asyncpipe.tune.user.Calibration`` with this device's bandwidth: a device-to-device copy of ``nbytes``
    timed with CUDA events (read + write: 2 x ``nbytes`` per copy) over its SMs. The latency keeps its
    default until the tuning run refits it. ``warmup`` copies (about 13 ms on an H200) first: on an idle GPU
    the clocks are down (345 MHz SM clock), and with 3 warm-up copies the H200 measured 2236 GB/s, against
    4125 GB/s in a run that had kept the GPU busy before (2026-12-02)."""
    from dataclasses import replace

    from numba import cuda

    from ..timing import time_ms
    from .user import DEFAULT_CALIBRATION

    src = cuda.device_array(nbytes // 4, np.float32)
    dst = cuda.device_array(nbytes // 4, np.float32)
    ms = time_ms(lambda: dst.copy_to_device(src), warmup=warmup, reps=reps)
    per_sm = 2 * nbytes / (ms * 1e6) / limits.sm_count
    return replace(DEFAULT_CALIBRATION, sm_bytes_per_ns=round(per_sm, 2),
                   source=f"bandwidth measured on {limits.name} (d2d copy, {2 * nbytes / (ms * 1e6):.0f} GB/s)")


def _poison(a: np.ndarray) -> np.ndarray:
    """All bits set: NaN for floats, -1 for integers (what the simulator leaves in unlanded copies)."""
    return np.full_like(a, np.nan) if np.issubdtype(a.dtype, np.floating) else np.full_like(a, -1)


def spec_measurement(tuned, problem, timer: Callable | None = None, reps: int = 20, seed: int = 0) -> Measurement:
    """``check(config)`` runs the user's kernel (``TunedKernel``) once on ``spec.inputs`` (its output poisoned
    first) and compares the output with ``spec.reference`` in float64 (relative Frobenius error under
    ``spec.tolerance``); ``time(config)`` times one call with ``timer`` (CUDA events, median of ``reps``)."""
    from numba import cuda

    from ..host.device import require_cc
    from ..model.limits import device_limits

    spec = tuned.spec
    api = f"tune {spec.name}"
    info = require_cc(api, SM_CP_ASYNC)
    limits = device_limits(api)
    if timer is None:
        from ..timing import time_ms as timer
    base = spec.tunable()
    prob = dict(zip(spec.problem, base.problem(problem)))
    host = spec.inputs(prob, np.random.default_rng(seed))
    ref = np.asarray(spec.reference(*host), np.float64)
    ref_norm = max(float(np.linalg.norm(ref)), 1e-30)
    dev = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in host]
    out = dev[spec.output]
    poison = cuda.to_device(_poison(host[spec.output]))

    def check(config: Config) -> Check:
        out.copy_to_device(poison)
        tuned(*dev, config=spec.full(config))
        cuda.synchronize()
        got = out.copy_to_host()
        got = np.asarray(spec.decode(got) if spec.decode else got, np.float64)
        err = float(np.linalg.norm(got - ref) / ref_norm) if got.shape == ref.shape else float("inf")
        regs = None
        try:
            r = tuned.kernel(config).get_regs_per_thread()
            regs = max(r.values()) if isinstance(r, dict) else int(r)
        except Exception:  # noqa: BLE001 - informative only
            pass
        ok = bool(np.isfinite(err) and err < spec.tolerance)
        return Check(ok, err, regs, "" if ok else f"(tolerance {spec.tolerance:g})")

    def time(config: Config) -> float:
        return timer(tuned.prepare(*dev, config=spec.full(config)), reps=reps)

    return Measurement(check, time, info.name, limits, measured_calibration(limits))
