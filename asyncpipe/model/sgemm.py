"""The chapter's cp.async SGEMM as the model sees it: its tile, its footprint, its predicted time.

A CTA computes one 128 x 128 tile of C over ``ceil(K / 8)`` k-tiles; each k-tile is one load (A's
128 x 8 and B's 8 x 128, 8 KB) and one compute (128 * 128 * 8 FMAs by 256 threads). The grid runs
in waves of ``CTAs per SM x SMs``; the CTAs resident on one SM share its FMA units, so each
computes ``r`` times slower when ``r`` are resident (they run in step), which also gives each
load r times longer to hide behind. One wave takes the cp.async timeline of one CTA with that
slower compute; the kernel takes its waves one after the other.

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

    @property
    def threads(self) -> int:
        return (self.bm * self.bn) // (self.tm * self.tn)

    @property
    def stage_bytes(self) -> int:
        """One stage: A's BM x BK tile and B's BK x BN tile (8 KB for the chapter's tile)."""
        return stage_bytes((self.bm, self.bk), (self.bk, self.bn), element_bytes=self.element_bytes)

    def shared_bytes(self, stages: int) -> int:
        """Dynamic shared memory of an S-stage kernel: 16 / 24 / 32 KB for 2 / 3 / 4 stages."""
        return stages * self.stage_bytes

    def footprint(self, stages: int, registers: int | None = None) -> Footprint:
        return Footprint(self.threads, self.registers if registers is None else registers, 0,
                         self.shared_bytes(stages))


CHAPTER_TILE = SgemmTile()


@dataclass(frozen=True)
class SgemmCalibration:
    """The model's two constants for the SGEMM, in nanoseconds (see the module doc), and the
    optional ones: ``issue_ns`` per tile's loads, ``sm_bytes_per_ns`` (None: unlimited)."""

    load_latency_ns: float = 1711.2
    compute_ns: float = 801.7
    issue_ns: float = 0.0
    sm_bytes_per_ns: float | None = None
    source: str = "fit to the chapter's nvcc SGEMM, H200, n=4096, stages 2-6 (2026-11-29)"

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


def cta_time(tiles: int, stages: int, cal: SgemmCalibration, resident: int, tile: SgemmTile = CHAPTER_TILE) -> float:
    """One CTA's time over ``tiles`` k-tiles with ``resident`` CTAs sharing its SM (closed form
    when there is no issue cost and no bandwidth limit, the event model otherwise)."""
    compute = cal.compute_ns * resident
    if cal.issue_ns == 0 and cal.sm_bytes_per_ns is None:
        return cp_async_closed_form(tiles, stages, cal.load_latency_ns, compute)
    return cp_async_timeline(tiles, stages, cal.load_latency_ns, compute, issue_cost=cal.issue_ns,
                             bandwidth=cal.sm_bytes_per_ns, tile_bytes=tile.stage_bytes,
                             ctas_per_sm=resident).total_time


def predict(problem, stages: int, lim: DeviceLimits, cal: SgemmCalibration = DEFAULT_CALIBRATION,
            tile: SgemmTile = CHAPTER_TILE, registers: int | None = None) -> Prediction:
    """Predicted time of the S-stage SGEMM on ``problem`` = (M, N, K) on the GPU ``lim``."""
    m, n, k = _problem(API, problem)
    count(API, "stages", stages, tile.min_stages)
    occ = occupancy(tile.footprint(stages, registers), lim)
    r = occ.ctas_per_sm
    ctas = math.ceil(m / tile.bm) * math.ceil(n / tile.bn)
    tiles = math.ceil(k / tile.bk)
    slots = r * lim.sm_count
    full, rest = divmod(ctas, slots)
    t = full * cta_time(tiles, stages, cal, r, tile)
    if rest:                                  # the last wave: fewer CTAs share each SM
        t += cta_time(tiles, stages, cal, math.ceil(rest / lim.sm_count), tile)
    return Prediction(stages, occ.shared_per_cta, r, occ.limited_by, full + (rest > 0), tiles, t)


def calibrate(measured_ms: dict, problem, lim: DeviceLimits, tile: SgemmTile = CHAPTER_TILE,
              registers: int | None = None, source: str = "fit") -> SgemmCalibration:
    """Fit the latency and the compute time to measured times ``{stages: ms}`` on ``problem``,
    minimising the squared log ratio of predicted to measured (a coarse grid refined three times
    around its best point). With only compute-bound measurements the latency is only bounded
    above; the fit then returns the smallest latency of the best grid cells."""
    check(len(measured_ms) >= 2, "calibrate", "needs times for at least 2 stage counts", dict(measured_ms))
    pts = {count("calibrate", "stages", s, tile.min_stages): duration("calibrate", "measured ms", v, positive=True)
           for s, v in measured_ms.items()}

    def loss(lat, comp):
        cal = SgemmCalibration(lat, comp)
        return sum(math.log(predict(problem, s, lim, cal, tile, registers).time_ms / ms) ** 2 for s, ms in pts.items())

    # start from the compute-bound reading of the fastest point: compute ~ time / (waves * tiles * r)
    s0 = min(pts, key=pts.get)
    p0 = predict(problem, s0, lim, SgemmCalibration(0.0, 1.0), tile, registers)
    comp0 = pts[s0] * 1e6 / p0.time_ns
    lat_lo, lat_hi, comp_lo, comp_hi = 1.0, 100 * comp0 * p0.ctas_per_sm, comp0 / 4, comp0 * 2
    best = (math.inf, 0.0, comp0)
    for _ in range(4):
        lats = [lat_lo * (lat_hi / lat_lo) ** (i / 40) for i in range(41)]
        comps = [comp_lo * (comp_hi / comp_lo) ** (i / 40) for i in range(41)]
        for comp in comps:
            for lat in lats:
                e = loss(lat, comp)
                if e < best[0] - 1e-12:
                    best = (e, lat, comp)
        _, lat, comp = best
        lat_lo, lat_hi = max(lat / 1.5, 1e-3), lat * 1.5
        comp_lo, comp_hi = comp / 1.2, comp * 1.2
    return SgemmCalibration(round(best[1], 1), round(best[2], 1), source=source)
