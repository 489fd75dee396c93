"""Tuning a user's kernel (``KernelSpec``): compile every candidate, read its resources, prune by occupancy and
by the timeline model, then (on a GPU) check, time and cache, through the same loop as the SGEMM
(``asyncpipe.tune.search.tune``).

The model of one candidate, from its compiled kernel and its launch (no hand-typed latency or compute):

* **footprint**: threads from the launch's block, registers and static shared memory from the cubin,
  dynamic shared memory from the launch; ``asyncpipe.model.resources.occupancy`` gives the CTAs per SM
  and the limit that binds, or rules the candidate out (it cannot launch).
* **time** (a spec with a ``pipeline``): the grid runs in waves of ``CTAs per SM x SMs``; one wave takes
  the pipeline's timeline (``model.cp_async`` or ``model.mbarrier_ring``) for one CTA: ``tiles`` loads of
  ``stage_bytes`` each, through a load path of ``load_latency_ns`` and the SM's bandwidth
  ``sm_bytes_per_ns`` shared by the resident CTAs, and a compute per tile estimated from the SASS: the
  main loop's instructions, issued by the SM's four schedulers one a cycle, each warp no faster than one
  instruction per ``dependent_issue_cycles`` (so a lone warp per scheduler is latency-bound), times
  ``compute_scale``. The estimate is crude on purpose: the model prunes (margin), the GPU decides.
* **calibration**: the defaults are H200 figures measured by this project (below); on a GPU,
  ``asyncpipe.tune.gpu.measured_calibration`` replaces the bandwidth with the device's measured copy
  bandwidth, and after timing the latency and the compute scale are refitted to the measurements.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..errors import AsyncpipeError, check
from .kernels import Config
from .spec import CpAsyncPipeline

SCHEDULERS_PER_SM = 4                    # warp schedulers of an SM (sm_70 on)


@dataclass(frozen=True)
class Calibration:
    """The generic model's constants (module doc). Defaults: ``load_latency_ns`` is the effective cp.async
    latency fitted to the chapter's nvcc SGEMM on the H200 (``model.sgemm.DEFAULT_CALIBRATION``);
    ``sm_bytes_per_ns`` the H200's measured device read bandwidth, 4385 GB/s (bench/h200.json, d2d_read)
    over its 132 SMs; ``clock_ghz`` the H200's boost clock (1.98 GHz, the data sheet)."""

    load_latency_ns: float = 1712.3
    sm_bytes_per_ns: float = 33.2
    clock_ghz: float = 1.98
    compute_scale: float = 1.0
    dependent_issue_cycles: float = 4.0
    source: str = "defaults: H200 figures (cp.async latency of the chapter's SGEMM fit, bench/h200.json read bandwidth)"


DEFAULT_CALIBRATION = Calibration()


@dataclass(frozen=True)
class Prediction:
    stages: int
    shared_per_cta: int
    ctas_per_sm: int
    limited_by: str
    time_ns: float | None
    registers: int | None = None
    spills: bool | None = None
    local_bytes: int | None = None
    waves: int = 0
    tiles: int = 0

    @property
    def time_ms(self) -> float | None:
        return None if self.time_ns is None else self.time_ns * 1e-6


def compute_ns(compiled, threads: int, resident: int, cal: Calibration) -> float:
    """One tile's compute with ``resident`` CTAs of ``threads`` on the SM (module doc)."""
    instructions = compiled.loop_instructions or 0
    warps_per_scheduler = resident * math.ceil(threads / 32) / SCHEDULERS_PER_SM
    cycles = instructions * max(warps_per_scheduler, cal.dependent_issue_cycles)
    return cycles / cal.clock_ghz * cal.compute_scale


def cta_ns(pipeline, stages: int, tiles: int, stage_bytes: int, compute: float, resident: int,
           cal: Calibration) -> float:
    from ..model.cp_async import cp_async_timeline
    from ..model.mbarrier_ring import mbarrier_ring_timeline

    common = dict(bandwidth=cal.sm_bytes_per_ns, tile_bytes=max(1, int(stage_bytes)), ctas_per_sm=resident)
    if isinstance(pipeline, CpAsyncPipeline):
        return cp_async_timeline(tiles, stages, cal.load_latency_ns, compute, **common).total_time
    return mbarrier_ring_timeline(tiles, stages, cal.load_latency_ns, compute, consumers=pipeline.consumers,
                                  **common).total_time


def predict(spec, problem: dict, config: Config, compiled, launch, lim, cal: Calibration,
            registers: int | None = None) -> Prediction:
    """The model's answer for one candidate (module doc). Raises ``AsyncpipeError`` for a candidate that
    does not compile or cannot launch (``asyncpipe.tune.search`` prunes it)."""
    from ..model.resources import Footprint, occupancy

    api = f"tune {spec.name}"
    check(compiled is None or compiled.error is None, api, "a candidate must compile (offline, for the device's cc)",
          compiled.error if compiled else None)
    have = compiled is not None and compiled.ok
    regs = registers if registers is not None else (compiled.registers if have else 0)
    static = compiled.shared if have else 0
    static = static - lim.reserved_shared_per_block if static >= lim.reserved_shared_per_block else static
    check(static <= lim.shared_per_block, api,
          f"static shared memory (cuda.shared.array) must be <= {lim.shared_per_block} bytes: more needs dynamic "
          "shared memory and the opt-in", static, "CUDA programming guide, shared memory")
    occ = occupancy(Footprint(launch.threads, regs, static, launch.shared), lim)
    r = occ.ctas_per_sm
    full, rest = divmod(launch.ctas, r * lim.sm_count)
    waves = ((full, r),) if full else ()
    if rest:                                  # the last wave: fewer CTAs share each SM
        waves += ((1, math.ceil(rest / lim.sm_count)),)
    time = tiles = None
    if spec.pipeline is not None and have:
        full_cfg = spec.full(config)
        tiles = int(spec.pipeline.tiles(problem, full_cfg))
        nbytes = int(spec.pipeline.stage_bytes(problem, full_cfg))
        time = sum(n * cta_ns(spec.pipeline, config.stages, tiles, nbytes,
                              compute_ns(compiled, launch.threads, res, cal), res, cal) for n, res in waves)
    return Prediction(config.stages, occ.shared_per_cta, r, occ.limited_by, time, regs or None,
                      compiled.spills if have else None, compiled.local if have else None,
                      sum(n for n, _ in waves), tiles or 0)


def calibrate(spec, problem, compiled, launches, measured_ms: dict, lim, base: Calibration) -> Calibration:
    """Refit ``load_latency_ns`` and ``compute_scale`` to ``{Config: ms}``: the least squared log ratio of
    predicted to measured over a grid, then a finer one around its best."""
    check(len(measured_ms) >= 2, "calibrate", "needs times for at least 2 candidates", dict(measured_ms))

    def loss(lat, scale):
        cal = replace(base, load_latency_ns=lat, compute_scale=scale)
        err = 0.0
        for c, ms in measured_ms.items():
            p = predict(spec, problem, c, compiled[c], launches[c], lim, cal)
            err += math.log(p.time_ns * 1e-6 / ms) ** 2
        return err

    lats, scales = np.geomspace(50, 50000, 13), np.geomspace(0.05, 50, 13)
    for _ in range(3):
        e, lat, scale = min((loss(l, s), float(l), float(s)) for l in lats for s in scales)
        lats = np.geomspace(lat / (lats[1] / lats[0]), lat * (lats[1] / lats[0]), 7)
        scales = np.geomspace(scale / (scales[1] / scales[0]), scale * (scales[1] / scales[0]), 7)
    return replace(base, load_latency_ns=round(lat, 1), compute_scale=round(scale, 3), source="fit to this tuning run")


def argtypes_of(args) -> tuple:
    """numba types of a launch's arguments (host arrays type as the device arrays they become), by numba-cuda's
    typeof as its launch types them (asyncpipe's TensorMap is registered there, not with numba's core typeof)."""
    from numba.cuda.typing.typeof import typeof

    return tuple(typeof(a) for a in args)


def device_cc(lim) -> tuple:
    """The compute capability to compile for: the device's, with Hopper's ``a`` features (sm_90a)."""
    major, minor = lim.compute_capability
    return (major, minor, "a") if major >= 9 else (major, minor)


def prepared(tuned, problem, lim, calibration=None, processes=None, progress=True, seed=0, candidates=None,
             options=None, device: bool = False):
    """``(tunable, problem dict, compiled, launches, inputs)``: the candidates (all of the space, or the stage
    counts ``candidates`` of the option sets ``options``) compiled and the model wired. ``device``: the inputs
    go to the GPU before ``spec.launch`` sees them (a launch that encodes TMA descriptors needs device memory)."""
    spec = tuned.spec
    base = spec.tunable()
    prob = dict(zip(spec.problem, base.problem(problem)))
    inputs = spec.inputs(prob, np.random.default_rng(seed))
    if device:
        from numba import cuda

        inputs = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in inputs]
    configs = base.configs([s for s in base.candidates if candidates is None or s in candidates],
                           [o for o in base.option_sets if options is None or o in options])
    launches = {c: spec.launch(spec.full(c), *inputs) for c in configs}
    from .compile import compile_candidates

    compiled = compile_candidates(spec.kernel, {c: (spec.full(c), argtypes_of(launches[c].args)) for c in configs},
                                  device_cc(lim), processes=processes, progress=progress,
                                  desc=f"compile {spec.name}")
    cal0 = calibration or DEFAULT_CALIBRATION
    tunable = spec.tunable(
        predict=lambda p, c, l, cal, registers=None: predict(spec, prob, c, compiled[c], launches[c], l, cal,
                                                             registers),
        calibrate=lambda ms, p, l, regs=None: calibrate(spec, prob, compiled, launches, ms, l, cal0),
        calibration=cal0)
    return tunable, prob, compiled, launches, inputs


def _gpu_visible() -> bool:
    from numba import cuda

    return bool(cuda.is_available())


def tune_kernel(tuned, problem, *, measure: bool = True, limits=None, gpu: str | None = None, calibration=None,
                candidates=None, options=None, margin: float = 0.10, rounds: int = 3, reps: int = 20,
                measure_pruned: bool = False, use_cache: bool = True, force: bool = False, cache_file=None,
                processes=None, progress: bool = True):
    """Tune ``tuned`` (a ``TunedKernel``) on ``problem`` (a tuple in ``spec.problem`` order or a dict). On a GPU
    (``measure``): compile, predict, prune, check against the reference, time, cache the pick. Without one, or
    with ``measure=False``: the model's table from the compiled candidates (``TuneResult.measured`` False)
    and a note saying why nothing was measured. ``limits`` default: the device, else the H200's table row."""
    from ..model.limits import limits as pick_limits
    from .search import tune

    spec = tuned.spec
    meas, why_not = None, None
    if measure:
        from . import gpu as gpu_side

        try:
            meas = gpu_side.spec_measurement(tuned, problem, reps=reps)
        except AsyncpipeError as exc:
            why_not = str(exc)
    lim = limits or (meas.limits if meas else pick_limits(None))
    cal = calibration or (meas.calibration if meas else None)
    tunable, prob, compiled, launches, _ = prepared(tuned, problem, lim, cal, processes, progress,
                                                    candidates=candidates, options=options,
                                                    device=meas is not None and _gpu_visible())
    common = dict(calibration=tunable.default_calibration, candidates=candidates, margin=margin, options=options,
                  cache_file=cache_file, progress=progress)
    if meas is None:
        res = tune(tunable, problem, gpu=gpu or lim.name, limits=lim, **common)
        res.notes = [n for n in res.notes if not n.startswith("not measured")]
        res.notes.append(f"not measured ({why_not or 'measure=False'}): the pick is the model's")
    else:
        res = tune(tunable, problem, gpu=meas.gpu, limits=lim, check=meas.check, time=meas.time, rounds=rounds,
                   measure_pruned=measure_pruned, use_cache=use_cache, force=force, **common)
    for r in res.rows:                         # what did not compile or could not be read says why
        c = compiled.get(r.config)
        if c is not None and c.unread:
            res.notes.append(f"{r.config.label()}: resources not read ({c.unread})")
    if not res.from_cache:
        res.notes += [f"{r.config.label()} spills: {r.local_bytes} bytes of local memory a thread"
                      for r in res.rows if r.spills]
    return res


def kernel_timeline(tuned, problem, config, limits=None, calibration=None):
    """``(Timeline, Prediction)`` of one CTA of the first wave of ``tuned``'s pipeline in ``config`` (a dict or
    ``Config``) on ``problem``: the candidate compiled offline (one worker process) for the device's cc, its
    CTAs per SM from the cubin's registers and shared memory, its compute per tile from its main loop, the
    latency and bandwidth from ``calibration`` (default: ``DEFAULT_CALIBRATION``). What
    ``python -m asyncpipe timeline --kernel path.py:NAME --config stages=3 --problem ...`` draws."""
    from ..model.cp_async import cp_async_timeline
    from ..model.limits import limits as pick_limits
    from ..model.mbarrier_ring import mbarrier_ring_timeline

    spec = tuned.spec
    check(spec.pipeline is not None, "timeline", f"{spec.name}'s spec must name its pipeline (CpAsyncPipeline or "
          "MbarrierRingPipeline) to be drawn", None)
    c = spec.config(config)
    lim = limits or pick_limits(None)
    cal = calibration or DEFAULT_CALIBRATION
    _, prob, compiled, launches, _ = prepared(tuned, problem, lim, cal, processes=1, progress=False,
                                             candidates=[c.stages], options=[c.kw])
    p = predict(spec, prob, c, compiled[c], launches[c], lim, cal)
    resident = min(p.ctas_per_sm, math.ceil(launches[c].ctas / lim.sm_count))
    full = spec.full(c)
    tiles, nbytes = int(spec.pipeline.tiles(prob, full)), int(spec.pipeline.stage_bytes(prob, full))
    common = dict(bandwidth=cal.sm_bytes_per_ns, tile_bytes=max(1, nbytes), ctas_per_sm=resident)
    compute = compute_ns(compiled[c], launches[c].threads, resident, cal)
    if isinstance(spec.pipeline, CpAsyncPipeline):
        tl = cp_async_timeline(tiles, c.stages, cal.load_latency_ns, compute, **common)
    else:
        tl = mbarrier_ring_timeline(tiles, c.stages, cal.load_latency_ns, compute, consumers=spec.pipeline.consumers,
                                    **common)
    return tl, p


__all__ = ["Calibration", "DEFAULT_CALIBRATION", "Prediction", "calibrate", "predict", "prepared", "tune_kernel", "kernel_timeline"]
