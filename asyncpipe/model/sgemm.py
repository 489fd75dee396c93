"""The chapter's cp.async SGEMM as the model sees it: its tile, its footprint, its predicted time.

A CTA computes one 128 x 128 tile of C over ``ceil(K / 8)`` k-tiles; each k-tile is one load (A's
128 x 8 and B's 8 x 128, 8 KB) and one compute (128 * 128 * 8 FMAs by 256 threads). The grid runs
in waves of ``CTAs per SM x SMs``; the CTAs resident on one SM share its FMA units, so each
computes ``r`` times slower when ``r`` are resident (they run in step), which also gives each
load r times longer to hide behind. The FMA units run at their full rate only with enough warps
on each of the SM's four schedulers to cover one another's stalls (``warps_to_fill``); with fewer
the compute stretches by ``warps_to_fill / warps``: the 8 x 16 tile's lone CTA of four warps, one
per scheduler, when 8 stages leave room for one CTA per SM. One wave takes the cp.async timeline
of one CTA with that slower compute; the kernel takes its waves one after the other.

Calibration (:class:`SgemmCalibration`): the effective load latency and a tile's compute time in
nanoseconds, for one CTA alone on an SM. The defaults are :func:`calibrate` applied to the
chapter's nvcc kernel on an H200 at n = 4096 (2026-11-29, ``shared/reference/README.md``):
stages 2 / 3 / 4 / 5 / 6 ran at 39.1 / 42.2 / 41.1 / 41.6 / 41.6 TFLOPS. The latency is an
effective one: what a CTA waits between issuing a tile and every thread seeing it after the
barrier, with another CTA sharing the SM; it is not the DRAM latency. Calibrate asyncpipe's own
kernel from a tuner run (``asyncpipe.tune`` does it and stores the fit).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..errors import check
from .cp_async import cp_async_closed_form, cp_async_timeline
from .inputs import count, duration
from .limits import DeviceLimits
from .resources import Footprint, occupancy, stage_bytes

API = "sgemm_model"


@dataclass(frozen=True)
class SgemmTile:
    """The chapter's tile: BM x BN of C per CTA, BK of K per stage, TM x TN per thread, float32.
    ``registers`` defaults to the cap that the kernel's launch bounds (256 threads, 2 CTAs per SM)
    impose: 65536 / (256 * 2) = 128; :func:`asyncpipe.model.resources.compiled_footprint` reads
    the real count from the compiled kernel."""

    bm: int = 128
    bn: int = 128
    bk: int = 8
    tm: int = 8
    tn: int = 8
    element_bytes: int = 4
    registers: int = 128
    min_stages: int = 2
    max_stages: int = 8
    a_pad: int = 0                # floats after each row of the A tile in shared memory (the dbuf kernel's 8)

    @property
    def threads(self) -> int:
        return (self.bm * self.bn) // (self.tm * self.tn)

    @property
    def work(self) -> float:
        """A k-tile's FMAs relative to the chapter's (128 x 128 x 8): the calibration's
        ``compute_ns`` is the chapter's k-tile, so a 16-deep stage computes twice as long."""
        return (self.bm * self.bn * self.bk) / (128 * 128 * 8)

    @property
    def stage_bytes(self) -> int:
        """One stage: A's BM x BK tile (rows padded by ``a_pad``) and B's BK x BN tile (8 KB for the chapter's
        tile)."""
        return stage_bytes((self.bm, self.bk + self.a_pad), (self.bk, self.bn), element_bytes=self.element_bytes)

    def shared_bytes(self, stages: int) -> int:
        """Dynamic shared memory of an S-stage kernel: 16 / 24 / 32 KB for 2 / 3 / 4 stages."""
        return stages * self.stage_bytes

    def footprint(self, stages: int, registers: int | None = None) -> Footprint:
        return Footprint(self.threads, self.registers if registers is None else registers, 0,
                         self.shared_bytes(stages))


CHAPTER_TILE = SgemmTile()


def kernel_tile(tile: str = "8x8", bk: int = 8, schedule: str = "plain") -> SgemmTile:
    """The model's view of ``asyncpipe.kernels.sgemm``'s cp.async kernel with thread tile ``tile``,
    stage depth ``bk`` and main loop ``schedule`` (``sgemm(tile=..., bk=..., schedule=...)``): threads and
    the register cap from the kernel's own tables, the same 128 x 128 CTA tile. The schedule changes only
    the register cap and the shared memory (dbuf pads A's rows; the model has no term for where the loop's
    shared-memory reads sit)."""
    from ..kernels import sgemm as kernels

    check(tile in kernels.TILES, API, f"tile must be one of {tuple(kernels.TILES)}", repr(tile))
    check(bk in kernels.BKS, API, f"bk must be one of {kernels.BKS}", repr(bk))
    check(schedule in kernels.SCHEDULES, API, f"schedule must be one of {kernels.SCHEDULES}", repr(schedule))
    t = kernels.TILES[tile]
    bounds = kernels.launch_bounds(False, bk, tile, schedule)
    if len(bounds) > 1:                       # (threads, CTAs per SM): the most registers a thread may take
        registers = min(255, 65536 // (t.threads * bounds[1]))
    else:                                     # the chapter's tile at bk 8, uncapped: ptxas takes 128
        registers = CHAPTER_TILE.registers    # (tests/kernels/test_sgemm.py checks it)
    return SgemmTile(kernels.BM, kernels.BN, bk, t.tm, t.tn, registers=registers, a_pad=kernels.A_PAD[schedule])


SCHEDULERS_PER_SM = 4                     # warp schedulers of an SM (sm_70 on)


@dataclass(frozen=True)
class SgemmCalibration:
    """The model's two constants for the SGEMM, in nanoseconds (see the module doc), and the
    optional ones: ``issue_ns`` per tile's loads, ``sm_bytes_per_ns`` (None: unlimited), and
    ``warps_to_fill``, the warps per scheduler the FMA units need to run at their full rate.

    The default ``warps_to_fill`` is :func:`calibrate` on asyncpipe's 8 x 16 tile at bk 16, plain loop, on the
    H200 (the tuner at 11b23e1, bench/h200.md): 2 to 7 stages, two CTAs per SM (2 warps a scheduler),
    3.171-3.196 ms; 8 stages, one (1 warp a scheduler), 4.074 ms. The chapter's kernels, which run 2 or 4
    warps a scheduler, cannot tell it."""

    load_latency_ns: float = 1712.3
    compute_ns: float = 805.5
    issue_ns: float = 0.0
    sm_bytes_per_ns: float | None = None
    source: str = "fit to the chapter's nvcc SGEMM, H200, n=4096, stages 2-6 (2026-11-29)"
    warps_to_fill: float = 1.28

    def as_dict(self) -> dict:
        return asdict(self)


DEFAULT_CALIBRATION = SgemmCalibration()

# The figures the defaults were fitted to: stages -> ms at M = N = K = 4096 (from TFLOPS).
CHAPTER_H200_MS = {s: 2.0 * 4096**3 / (tf * 1e12) * 1e3
                   for s, tf in {2: 39.1, 3: 42.2, 4: 41.1, 5: 41.6, 6: 41.6}.items()}


@dataclass(frozen=True)
class Prediction:
    """The model's answer for one stage count on one problem."""

    stages: int
    shared_per_cta: int           # bytes the driver allocates (reserve included)
    ctas_per_sm: int
    limited_by: str
    waves: int
    tiles_per_cta: int
    time_ns: float

    @property
    def time_ms(self) -> float:
        return self.time_ns * 1e-6


def _problem(api: str, problem) -> tuple[int, int, int]:
    check(len(problem) == 3, api, "problem is (M, N, K)", repr(problem))
    m, n, k = (count(api, name, v, 1) for name, v in zip("MNK", problem))
    return m, n, k


def stretch(resident: int, tile: SgemmTile, warps_to_fill: float) -> float:
    """How much slower the SM computes with ``resident`` CTAs of ``tile`` than with enough warps
    (``SgemmCalibration.warps_to_fill``): 1 when each scheduler has that many, else the ratio."""
    warps = resident * tile.threads / 32 / SCHEDULERS_PER_SM
    return max(1.0, warps_to_fill / warps)


def cta_time(tiles: int, stages: int, cal: SgemmCalibration, resident: int, tile: SgemmTile = CHAPTER_TILE) -> float:
    """One CTA's time over ``tiles`` k-tiles with ``resident`` CTAs sharing its SM (closed form
    when there is no issue cost and no bandwidth limit, the event model otherwise)."""
    compute = cal.compute_ns * tile.work * resident * stretch(resident, tile, cal.warps_to_fill)
    if cal.issue_ns == 0 and cal.sm_bytes_per_ns is None:
        return cp_async_closed_form(tiles, stages, cal.load_latency_ns, compute)
    return cp_async_timeline(tiles, stages, cal.load_latency_ns, compute, issue_cost=cal.issue_ns,
                             bandwidth=cal.sm_bytes_per_ns, tile_bytes=tile.stage_bytes,
                             ctas_per_sm=resident).total_time


@dataclass(frozen=True)
class _Plan:
    """How a grid runs: ``tiles`` per CTA and its waves as ``(how many, CTAs resident per SM)``."""

    tiles: int
    waves: tuple[tuple[int, int], ...]
    occupancy: object


def _plan(problem, stages: int, lim: DeviceLimits, tile: SgemmTile, registers: int | None) -> _Plan:
    m, n, k = _problem(API, problem)
    count(API, "stages", stages, tile.min_stages)
    occ = occupancy(tile.footprint(stages, registers), lim)
    r = occ.ctas_per_sm
    ctas = math.ceil(m / tile.bm) * math.ceil(n / tile.bn)
    full, rest = divmod(ctas, r * lim.sm_count)
    waves = ((full, r),) if full else ()
    if rest:                                  # the last wave: fewer CTAs share each SM
        waves += ((1, math.ceil(rest / lim.sm_count)),)
    return _Plan(math.ceil(k / tile.bk), waves, occ)


def predict(problem, stages: int, lim: DeviceLimits, cal: SgemmCalibration = DEFAULT_CALIBRATION,
            tile: SgemmTile = CHAPTER_TILE, registers: int | None = None) -> Prediction:
    """Predicted time of the S-stage SGEMM on ``problem`` = (M, N, K) on the GPU ``lim``."""
    plan = _plan(problem, stages, lim, tile, registers)
    t = sum(n * cta_time(plan.tiles, stages, cal, r, tile) for n, r in plan.waves)
    occ = plan.occupancy
    return Prediction(stages, occ.shared_per_cta, occ.ctas_per_sm, occ.limited_by, sum(n for n, _ in plan.waves),
                      plan.tiles, t)


def calibrate(measured_ms: dict, problem, lim: DeviceLimits, tile: SgemmTile = CHAPTER_TILE,
              registers: int | dict | None = None, source: str = "fit") -> SgemmCalibration:
    """Fit the latency and the compute time to measured times ``{stages: ms}`` on ``problem``,
    minimising the squared log ratio of predicted to measured over a fine grid, refined four times
    around its best point (no issue cost, unlimited bandwidth: the two constants only). A key may
    also be ``(stages, SgemmTile)``, for measurements of several tiles in one fit (``tile`` is the
    one of plain keys). ``registers`` is one count for all, or a count per key as the compiled
    kernels reported (None: the tile's default). With only compute-bound measurements the latency
    is only bounded above; the fit then returns the smallest latency of the best grid cells."""
    import numpy as np

    check(len(measured_ms) >= 2, "calibrate", "needs times for at least 2 stage counts", dict(measured_ms))

    def point(key):                          # (stages, tile) of a key
        s, t = key if isinstance(key, tuple) else (key, tile)
        return count("calibrate", "stages", s, t.min_stages), t

    pts = {point(key): duration("calibrate", "measured ms", v, positive=True) for key, v in measured_ms.items()}
    regs = {point(key): v for key, v in registers.items()} if isinstance(registers, dict) else {}
    plans = {p: _plan(problem, p[0], lim, p[1], regs.get(p, registers if isinstance(registers, int) else None))
             for p in pts}

    def loss(lat, comp, fill):               # arrays of the grid's shape; cp_async_closed_form, vectorised
        err = 0.0
        for (s, t), ms in pts.items():
            k = plans[s, t].tiles - 1
            q, r_ = divmod(k, s - 1)
            total = 0.0
            for n, r in plans[s, t].waves:
                c = comp * t.work * r * stretch(r, t, fill)
                total = total + n * (np.maximum(lat + k * c, lat * (1 + q) + r_ * c) + c)
            err = err + np.log(total * 1e-6 / ms) ** 2
        return err

    # start from the compute-bound reading of the fastest point: compute ~ time / (tiles x waves x r)
    s0 = min(pts, key=pts.get)
    comp0 = pts[s0] * 1e6 / sum(n * r * plans[s0].tiles * s0[1].work for n, r in plans[s0].waves)

    def fit(fill, first=(601, 201)):        # (error, latency, compute) for one warps_to_fill
        lat_lo, lat_hi, comp_lo, comp_hi = 1.0, 100 * comp0 * plans[s0].occupancy.ctas_per_sm, comp0 / 4, comp0 * 2
        for step in range(5):                # a fine first grid (the loss has narrow valleys), then zoom
            lats = np.geomspace(lat_lo, lat_hi, first[0] if step == 0 else 61)
            comps = np.geomspace(comp_lo, comp_hi, first[1] if step == 0 else 61)
            L, C = np.meshgrid(lats, comps)
            e = loss(L, C, fill)
            i = np.flatnonzero(e <= e.min() + 1e-12)
            best = min(i, key=lambda j: (L.flat[j], C.flat[j]))      # the smallest latency among the best
            lat, comp = float(L.flat[best]), float(C.flat[best])
            lat_lo, lat_hi = max(lat / 1.5, 1e-3), lat * 1.5
            comp_lo, comp_hi = comp / 1.2, comp * 1.2
        return float(e.flat[best]), lat, comp

    # warps_to_fill: fitted only when some measured point ran with fewer warps a scheduler than others (else
    # the measurements cannot tell it): a coarse scan from 1 warp, then a finer one around the best. Where
    # the default fits as well as the best (points that cannot tell values apart), the default stays.
    warps = {r * t.threads / 32 / SCHEDULERS_PER_SM for (_, t), plan in plans.items() for _, r in plan.waves}
    fill = default_fill = SgemmCalibration.warps_to_fill
    if len(warps) > 1:
        def best_of(fills):
            errs = {float(f): fit(f, (151, 51))[0] for f in fills} | {default_fill: fit(default_fill, (151, 51))[0]}
            low = min(errs.values())
            tied = [f for f, e in errs.items() if e <= low + 1e-9]
            return default_fill if default_fill in tied else min(tied)

        step = (max(warps) - 1.0) / 20
        f0 = best_of(np.round(np.linspace(1.0, max(warps), 21), 3))
        if f0 != default_fill:
            fill = best_of(np.round(np.linspace(max(1.0, f0 - step), f0 + step, 21), 3))
    _, lat, comp = fit(fill)
    return SgemmCalibration(round(lat, 1), round(comp, 1), source=source, warps_to_fill=round(fill, 2))


def compiled_footprint(stages: int, tile: SgemmTile = CHAPTER_TILE, **kernel_kw) -> Footprint:
    """The footprint of asyncpipe's own cp.async SGEMM with ``stages`` stages, read from the kernel
    compiled offline for sm_90a (``asyncpipe.codegen``; no GPU, about 15 s): its registers per
    thread under its own launch bounds, its static shared memory, and the dynamic shared memory
    ``sgemm()`` launches it with. ``kernel_kw`` selects the variant as
    ``asyncpipe.kernels.sgemm.kernel`` does."""
    from numba.cuda import types

    from ..kernels import sgemm as kernels
    from .resources import compiled_footprint as read

    disp = kernels.kernel("cp_async", stages, **kernel_kw)
    argtypes = (types.int32, types.int32, types.int32, types.float32, types.float32[::1], types.float32[::1],
                types.float32, types.float32[::1])
    return read(disp, argtypes, tile.threads, tile.shared_bytes(stages),
                launch_bounds=disp.targetoptions.get("launch_bounds"))
