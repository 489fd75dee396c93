"""The SGEMM as the model sees it: its tile agrees with the kernel, its prediction is the
timeline over waves, its calibration refits the figures it came from."""

import math
import os

import pytest

from asyncpipe.errors import AsyncpipeError
from asyncpipe.kernels import sgemm as kernel
from asyncpipe.model import sgemm as M
from asyncpipe.model.cp_async import cp_async_closed_form, cp_async_timeline
from asyncpipe.model.limits import table_limits
from asyncpipe.model.resources import occupancy

H200 = table_limits("H200")
N4096 = (4096, 4096, 4096)


def test_the_tile_is_the_kernels_tile():
    t = M.CHAPTER_TILE
    assert t.stage_bytes == kernel.STAGE_BYTES == 8 * 1024
    assert t.threads == kernel.THREADS
    assert (t.min_stages, t.max_stages) == (kernel.MIN_STAGES, kernel.MAX_STAGES)
    assert all(t.shared_bytes(s) == kernel.shared_bytes(s) for s in range(2, 9))
    dbuf = M.kernel_tile("8x16", 16, "dbuf")      # padded A rows: the model counts the kernel's bytes
    assert all(dbuf.shared_bytes(s) == kernel.shared_bytes(s, 16, "dbuf") for s in range(2, 9))
    # the default register count is what two CTAs per SM leave a thread (the interior kernel's 128)
    threads, ctas = kernel.THREADS, kernel.CTAS_PER_SM
    assert t.registers == H200.registers_per_sm // (threads * ctas)


def test_prediction_is_waves_of_one_cta_timeline():
    cal = M.DEFAULT_CALIBRATION
    for s in range(2, 9):
        p = M.predict(N4096, s, H200, cal)
        # 32 x 32 = 1024 CTAs, 2 per SM on 132 SMs: 3 full waves of 264 and one of 232 (2 per SM)
        assert (p.ctas_per_sm, p.waves, p.tiles_per_cta) == (2, 4, 512)
        one = cp_async_closed_form(512, s, cal.load_latency_ns, 2 * cal.compute_ns)
        assert p.time_ns == pytest.approx(4 * one)


def test_the_last_wave_shares_its_sms_less():
    cal = M.SgemmCalibration(1000.0, 500.0)
    # 17 x 16 = 272 CTAs: one wave of 264, then 8 CTAs alone on their SMs
    p = M.predict((17 * 128, 16 * 128, 64), 3, H200, cal)
    assert p.waves == 2
    assert p.time_ns == cp_async_closed_form(8, 3, 1000, 1000) + cp_async_closed_form(8, 3, 1000, 500)


def test_issue_cost_and_bandwidth_go_through_the_event_model():
    cal = M.SgemmCalibration(1000.0, 500.0, issue_ns=20.0, sm_bytes_per_ns=64.0)
    t = M.cta_time(100, 3, cal, 2)
    ref = cp_async_timeline(100, 3, 1000.0, 1000.0, issue_cost=20.0, bandwidth=64.0, tile_bytes=8192,
                            ctas_per_sm=2).total_time
    assert t == ref and t > M.cta_time(100, 3, M.SgemmCalibration(1000.0, 500.0), 2)


def test_two_stages_are_latency_bound_and_three_to_eight_tie():
    times = {s: M.predict(N4096, s, H200).time_ms for s in range(2, 9)}
    assert times[2] > times[3] * 1.05
    assert len({round(times[s], 9) for s in range(3, 9)}) == 1        # past the latency, no gain


def test_defaults_are_the_fit_to_the_chapters_h200_figures():
    fit = M.calibrate(M.CHAPTER_H200_MS, N4096, H200)
    d = M.DEFAULT_CALIBRATION
    assert fit.load_latency_ns == pytest.approx(d.load_latency_ns, rel=0.01)
    assert fit.compute_ns == pytest.approx(d.compute_ns, rel=0.01)
    for s, ms in M.CHAPTER_H200_MS.items():                           # within 3 % of every figure
        assert M.predict(N4096, s, H200, d).time_ms == pytest.approx(ms, rel=0.03)


def test_calibrate_recovers_the_constants_it_was_given():
    truth = M.SgemmCalibration(2500.0, 600.0)
    problem = (2048, 4096, 2048)
    ms = {s: M.predict(problem, s, H200, truth).time_ms for s in (2, 3, 4)}
    fit = M.calibrate(ms, problem, H200, registers={2: 128, 3: 128, 4: 128})
    assert fit.load_latency_ns == pytest.approx(2500.0, rel=0.02) and fit.compute_ns == pytest.approx(600.0, rel=0.02)


def test_the_kernels_other_tiles():
    """sgemm(tile=..., bk=...) as the model sees it: threads and register caps from the kernel's
    tables, a 16-deep stage twice the bytes and twice the FMAs of the chapter's."""
    assert M.kernel_tile() == M.CHAPTER_TILE
    t = M.kernel_tile("8x16", 16)
    assert (t.threads, t.registers, t.work, t.stage_bytes) == (128, 255, 2.0, 16384)
    b16 = M.kernel_tile("8x8", 16)
    assert (b16.threads, b16.registers, b16.work) == (256, 128, 2.0)
    # half the k-tiles, each twice as long: compute-bound predictions agree with the chapter's tile
    assert M.predict(N4096, 4, H200, tile=b16).time_ms == pytest.approx(M.predict(N4096, 8, H200).time_ms, rel=1e-3)
    p8 = M.predict(N4096, 8, H200, tile=b16)
    assert (p8.ctas_per_sm, p8.limited_by) == (1, "shared memory")          # 8 x 16 KiB: one CTA per SM


def test_one_warp_a_scheduler_computes_slower():
    """The 8 x 16 tile at bk 16 and 8 stages (128 KiB) runs one CTA of four warps per SM: one warp a
    scheduler. On the H200 that was 28 % slower than 7 stages (two CTAs); the model says so through
    warps_to_fill, and not for the chapter's tile (two warps a scheduler even alone)."""
    t = M.kernel_tile("8x16", 16)
    p7, p8 = (M.predict(N4096, s, H200, tile=t) for s in (7, 8))
    assert (p7.ctas_per_sm, p8.ctas_per_sm) == (2, 1)
    assert 1.2 < p8.time_ms / p7.time_ms < 1.4
    assert M.stretch(1, t, 1.28) == pytest.approx(1.28) and M.stretch(2, t, 1.28) == 1.0
    assert M.stretch(1, M.CHAPTER_TILE, 1.28) == 1.0
    no_fill = M.SgemmCalibration(warps_to_fill=1.0)
    assert M.predict(N4096, 8, H200, no_fill, t).time_ms < 1.01 * M.predict(N4096, 7, H200, no_fill, t).time_ms


def test_calibrate_fits_warps_to_fill_when_the_points_tell_it():
    t = M.kernel_tile("8x16", 16)
    truth = M.SgemmCalibration(2500.0, 600.0, warps_to_fill=1.5)
    ms = {(s, t): M.predict(N4096, s, H200, truth, t).time_ms for s in range(2, 9)}
    fit = M.calibrate(ms, N4096, H200)
    assert fit.warps_to_fill == pytest.approx(1.5, abs=0.03)
    for (s, _), v in ms.items():
        assert M.predict(N4096, s, H200, fit, t).time_ms == pytest.approx(v, rel=0.01)
    # every point at two warps a scheduler or more: nothing to fit, the default stays
    same = {s: M.predict(N4096, s, H200, truth).time_ms for s in range(2, 7)}
    assert M.calibrate(same, N4096, H200).warps_to_fill == M.SgemmCalibration.warps_to_fill


def test_calibrate_over_several_tiles():
    truth = M.SgemmCalibration(2500.0, 600.0)
    problem = (2048, 4096, 2048)
    b16 = M.kernel_tile("8x8", 16)
    ms = {(s, t): M.predict(problem, s, H200, truth, tile=t).time_ms for s in (2, 3) for t in (M.CHAPTER_TILE, b16)}
    fit = M.calibrate(ms, problem, H200)
    assert fit.load_latency_ns == pytest.approx(2500.0, rel=0.02) and fit.compute_ns == pytest.approx(600.0, rel=0.02)


@pytest.mark.parametrize("call,msg", [
    (lambda: M.kernel_tile("16x16"), "sgemm_model: tile must be one of ('8x8', '8x16'), got '16x16'"),
    (lambda: M.kernel_tile("8x8", 12), "sgemm_model: bk must be one of (8, 16), got 12"),
    (lambda: M.kernel_tile("8x16", 16, "triple"), "sgemm_model: schedule must be one of ('plain', 'dbuf', 'kmajor'), got 'triple'"),
    (lambda: M.predict((4096, 4096), 3, H200), "sgemm_model: problem is (M, N, K), got (4096, 4096)"),
    (lambda: M.predict((4096, 0, 4096), 3, H200), "sgemm_model: N must be an integer >= 1 [asyncpipe.model], got 0"),
    (lambda: M.predict(N4096, 1, H200), "sgemm_model: stages must be an integer >= 2 [asyncpipe.model], got 1"),
    (lambda: M.predict(N4096, 40, H200), "occupancy: static + dynamic shared memory must be <= 232448 bytes"),
    (lambda: M.calibrate({3: 1.0}, N4096, H200), "calibrate: needs times for at least 2 stage counts, got {3: 1.0}"),
    (lambda: M.calibrate({2: 1.0, 3: -1.0}, N4096, H200), "calibrate: measured ms must be a finite number > 0"),
])
def test_bad_input(call, msg):
    with pytest.raises(AsyncpipeError) as e:
        call()
    assert msg in str(e.value)


@pytest.mark.sass
def test_footprint_of_the_compiled_kernel(request):
    """Registers and shared memory of asyncpipe's own kernel, compiled offline. It takes 15 to 30 s
    (the register count itself is also checked by tests/kernels/test_sgemm.py), so it runs when
    asked for: ``-m sass`` or ``ASYNCPIPE_SLOW_TESTS=1``."""
    if "sass" not in (request.config.option.markexpr or "") and not os.environ.get("ASYNCPIPE_SLOW_TESTS"):
        pytest.skip("compiles the SGEMM offline (15-30 s): run with -m sass or ASYNCPIPE_SLOW_TESTS=1")
    fp = M.compiled_footprint(3)
    threads, min_ctas = kernel.kernel("cp_async", 3).targetoptions["launch_bounds"]
    cap = min(H200.registers_per_thread, H200.registers_per_sm // (threads * min_ctas) // 8 * 8)
    assert fp.threads == threads == 256 and 0 < fp.registers <= cap
    assert fp.static_shared == 0 and fp.dynamic_shared == 24 * 1024        # all of it is the dynamic ring
    occ = occupancy(fp, H200)
    assert occ.ctas_per_sm >= min_ctas and occ.shared_per_cta == 25 * 1024
    assert math.isfinite(M.predict(N4096, 3, H200, registers=fp.registers).time_ns)
