"""The tuning loop's CPU side: pruning, checking, round-robin timing, the pick, the table, the
cache. ``check`` and ``time`` here are plain functions returning made-up numbers, and every result
is labelled with the GPU name "synthetic": nothing in this file claims a GPU measurement."""

from dataclasses import replace

import json
import pytest

from asyncpipe import __version__
from asyncpipe.errors import AsyncpipeError, UnsupportedDeviceError
from asyncpipe.model.limits import table_limits
from asyncpipe.model.sgemm import SgemmCalibration
from asyncpipe.tune import Config, cache, cached_config, cached_stages
from asyncpipe.tune.search import Check, TuneResult, predict_rows, tune

H200 = table_limits("H200")
P = (4096, 4096, 4096)
GPU = "synthetic"
MS = {2: 3.50, 3: 3.26, 4: 3.34, 5: 3.30, 6: 3.30, 7: 3.31, 8: 3.35}
CHAPTER = [{}]                    # the chapter's tile only: most tests here are about stage counts


class Fake:
    """A made-up GPU: fixed times, a log of every call, optional failures. Times and failures are
    keyed by stage count for the chapter's tile, by ``Config`` for the others."""

    def __init__(self, ms=MS, bad=(), registers=None):
        self.ms, self.bad, self.registers, self.calls = dict(ms), set(bad), registers, []

    def check(self, c):
        s = c if c.options else c.stages
        self.calls.append(("check", s))
        return Check(s not in self.bad, 0.9 if s in self.bad else 1e-7, self.registers)

    def time(self, c):
        s = c if c.options else c.stages
        self.calls.append(("time", s))
        return self.ms[s]


def run(fake, tmp_path, **kw):
    return tune("sgemm", P, gpu=GPU, limits=H200, check=fake.check, time=fake.time, cache_file=tmp_path / "t.json",
                progress=False, **({"options": CHAPTER} | kw))


def test_prediction_prunes_what_the_model_rules_out():
    slow2 = SgemmCalibration(4000.0, 800.0)                  # S=2, 3 latency-bound (2 CTAs: C = 1600)
    rows = predict_rows("sgemm", P, H200, slow2, margin=0.10, options=CHAPTER)
    assert [r.stages for r in rows] == list(range(2, 9))
    assert rows[0].pruned.startswith("predicted ") and rows[0].pruned.endswith("% slower than the best")
    assert rows[1].pruned and all(r.pruned is None for r in rows if r.stages >= 4)


def test_candidates_that_do_not_fit_are_pruned():
    small = replace(H200, shared_per_block_optin=40 * 1024)
    rows = predict_rows("sgemm", P, small, options=CHAPTER)
    assert [r.stages for r in rows if r.pruned == "does not fit on the GPU"] == [6, 7, 8]   # 48 KB and up
    assert "must be <= 40960 bytes" in rows[-1].limited_by


def test_the_pick_is_the_fastest_correct_and_everything_is_checked_first(tmp_path):
    fake = Fake()
    res = run(fake, tmp_path, rounds=2)
    assert res.best_stages == 3 and res.measured and not res.from_cache
    assert [c for c in fake.calls if c[0] == "check"] == [("check", s) for s in range(2, 9)]
    timed = [s for kind, s in fake.calls if kind == "time"]
    assert timed == list(range(2, 9)) * 2                    # round-robin, one round after the other
    assert fake.calls.index(("time", 2)) > fake.calls.index(("check", 8))
    assert res.row(5).measured_ms == 3.30 and res.row(5).times_ms == [3.30, 3.30]


def test_median_of_rounds_and_ties_go_to_fewer_stages(tmp_path):
    seq = {3: iter([9.0, 1.0, 1.0]), 4: iter([1.0, 1.0, 5.0])}
    res = tune("sgemm", P, gpu=GPU, limits=H200, check=lambda c: Check(True, 0.0), time=lambda c: next(seq[c.stages]),
               candidates=[3, 4], options=CHAPTER, rounds=3, use_cache=False, progress=False)
    assert res.row(3).measured_ms == 1.0 == res.row(4).measured_ms and res.best_stages == 3


def test_a_wrong_result_is_never_picked(tmp_path):
    fake = Fake(ms=MS | {3: 1.0}, bad={3})
    res = run(fake, tmp_path)
    assert res.best_stages == 5 and res.row(3).correct is False and res.row(3).measured_ms is None
    assert ("time", 3) not in fake.calls
    assert any(n.startswith("3 failed the check: error 0.9") for n in res.notes)


def test_nothing_correct_is_an_error(tmp_path):
    with pytest.raises(AsyncpipeError, match="tune: at least one candidate must pass the check against numpy"):
        run(Fake(bad=range(2, 9)), tmp_path)


def test_measure_pruned_times_them_but_does_not_pick_them(tmp_path):
    fake = Fake(ms=MS | {2: 1.0})
    res = run(fake, tmp_path, calibration=SgemmCalibration(4000.0, 800.0), measure_pruned=True)
    assert res.row(2).pruned and res.row(2).measured_ms == 1.0 and res.best_stages == 5
    checks = res.checks()
    assert checks["pick_within_2pct"] is False and checks["pick_vs_best_measured"] == pytest.approx(2.3)
    assert checks["every_candidate_measured"] is True


def test_checks_compare_the_models_best_two_with_the_measured_best_two(tmp_path):
    res = run(Fake(), tmp_path)
    c = res.checks()
    assert c["model_top2"] == ["3", "4"] and c["measured_top2"] == ["3", "5"]
    assert c["model_top2_is_measured_top2"] is False
    assert c["model_best_tied"] == ["3", "4", "5", "6", "7", "8"] and c["pick_within_2pct"] is True


def test_registers_reported_by_the_check_update_the_prediction(tmp_path):
    res = run(Fake(registers=168), tmp_path)                  # above 128: one CTA per SM
    assert all(r.ctas_per_sm == 1 and r.registers == 168 for r in res.rows)


def test_the_table_shows_prediction_beside_measurement(tmp_path):
    res = run(Fake(), tmp_path)
    text = res.table()
    assert "predicted ms" in text and "measured ms" in text and "refit ms" in text
    line3 = next(l for l in text.splitlines() if l.strip().startswith("3 "))
    assert "3.260" in line3 and "<- pick" in line3 and "25 KB" in line3 and "2 (registers)" in line3
    assert "check model_top2: ['3', '4']" in text and res.fitted_calibration is not None


class Noisy(Fake):
    """Each stage count's rounds take its time times 1.000, 1.004, 0.998, 1.000, ... in turn."""

    def time(self, c):
        factor = (1.000, 1.004, 0.998)[sum(1 for call in self.calls if call == ("time", c.stages)) % 3]
        return super().time(c) * factor


def test_the_table_shows_the_spread_of_the_rounds(tmp_path):
    res = run(Noisy(), tmp_path, rounds=3)
    assert res.row(3).times_ms == pytest.approx([3.26, 3.26 * 1.004, 3.26 * 0.998])
    header, _, *lines = res.table().splitlines()[1:]
    assert "spread" in header
    line3 = next(l for l in lines if l.startswith("3 "))
    assert "0.60 %" in line3                                  # (1.004 - 0.998) / 1.000
    # 5 and 6 both take 3.30: the third is no slower than the second
    assert res.checks()["measured_2nd_to_3rd"] == pytest.approx(0.0)
    one = run(Fake(), tmp_path, rounds=1, use_cache=False)
    assert " %" not in next(l for l in one.table().splitlines() if l.startswith("3 ")).split("ok")[0]


def test_the_cache_remembers_per_gpu_kernel_problem_and_version(tmp_path):
    path = tmp_path / "t.json"
    run(Fake(), tmp_path)
    assert cached_stages("sgemm", P, gpu=GPU, path=path) == 3
    assert cached_stages("sgemm", P, gpu="another GPU", path=path) is None
    assert cached_stages("sgemm", (4096, 4096, 2048), gpu=GPU, path=path) is None
    assert cache.lookup(GPU, "sgemm", P, version="0.0.0", path=path) is None
    from asyncpipe.tune.kernels import tunable

    spec = tunable("sgemm")
    assert len(spec.source) == len(spec.space) == 12
    key = f"{GPU}|sgemm|{spec.source}|4096x4096x4096|{spec.space}|{__version__}"
    entry = json.loads(path.read_text())["entries"][key]
    assert entry["best"] == {"stages": 3, "options": {}} and len(entry["rows"]) == 7
    assert cache.lookup(GPU, "sgemm", P, path=path, source=spec.source, space=spec.space) == entry
    # another kernel source or another search space misses
    assert cache.lookup(GPU, "sgemm", P, path=path, source="0" * 12, space=spec.space) is None
    assert cache.lookup(GPU, "sgemm", P, path=path, source=spec.source, space="0" * 12) is None


def test_a_cached_problem_is_not_measured_again_unless_forced(tmp_path):
    run(Fake(), tmp_path)
    again = Fake(ms=MS | {6: 1.0})
    hit = run(again, tmp_path)
    assert hit.from_cache and hit.best_stages == 3 and again.calls == []
    assert "from the cache" in hit.table()
    forced = run(again, tmp_path, force=True)
    assert forced.best_stages == 6 and not forced.from_cache
    assert cached_stages("sgemm", P, gpu=GPU, path=tmp_path / "t.json") == 6


def test_no_cache_writes_nothing(tmp_path):
    run(Fake(), tmp_path, use_cache=False)
    assert not (tmp_path / "t.json").exists()


def test_a_corrupt_cache_reads_as_empty_and_is_replaced(tmp_path):
    path = tmp_path / "t.json"
    path.write_text("{ not json")
    assert cache.read_entries(path) == {} and cached_stages("sgemm", P, gpu=GPU, path=path) is None
    run(Fake(), tmp_path)
    assert cached_stages("sgemm", P, gpu=GPU, path=path) == 3


def test_the_cache_lives_in_asyncpipe_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ASYNCPIPE_CACHE_DIR", str(tmp_path / "c"))
    assert cache.cache_path() == tmp_path / "c" / "tune.json"
    tune("sgemm", P, gpu=GPU, limits=H200, check=Fake().check, time=Fake().time, options=CHAPTER, progress=False)
    assert cached_stages("sgemm", P, gpu=GPU) == 3
    monkeypatch.delenv("ASYNCPIPE_CACHE_DIR")
    assert str(cache.cache_dir()).endswith(".cache/asyncpipe")


def test_cached_stages_without_a_gpu_is_none(tmp_path, no_gpu):
    run(Fake(), tmp_path)
    assert cached_stages("sgemm", P, path=tmp_path / "t.json") is None


def test_predict_only_returns_the_models_pick_and_stores_nothing(tmp_path):
    res = tune("sgemm", P, gpu=GPU, limits=H200, cache_file=tmp_path / "t.json", options=CHAPTER)
    assert res.best_stages == 3 and not res.measured and not (tmp_path / "t.json").exists()
    assert all(r.measured_ms is None for r in res.rows) and "<- model's pick" in res.table()


def test_result_round_trips_through_json(tmp_path):
    res = run(Fake(), tmp_path)
    back = TuneResult.from_dict(json.loads(json.dumps(res.to_dict())))
    assert back.to_dict() == res.to_dict()


def test_the_gpu_side_refuses_without_a_gpu(no_gpu):
    from asyncpipe.tune.gpu import sgemm_measurement

    with pytest.raises(UnsupportedDeviceError, match="tune sgemm: needs a CUDA GPU"):
        sgemm_measurement(P)


@pytest.mark.parametrize("call,msg", [
    (lambda: tune("dgemm", P, gpu=GPU, limits=H200), "tune: kernel must be one of ['sgemm'], got 'dgemm'"),
    (lambda: tune("sgemm", (1, 2), gpu=GPU, limits=H200), "tune sgemm: problem is (m, n, k), got (1, 2)"),
    (lambda: tune("sgemm", (1, 2, -3), gpu=GPU, limits=H200), "tune sgemm: k must be an integer >= 1, got -3"),
    (lambda: tune("sgemm", {"m": 1, "n": 2}, gpu=GPU, limits=H200), "tune sgemm: problem keys must be ('m', 'n', 'k')"),
    (lambda: tune("sgemm", P, gpu=GPU, limits=H200, candidates=[1, 3]),
     "tune: candidates must be a non-empty subset of (2, 3, 4, 5, 6, 7, 8), got (1, 3)"),
    (lambda: tune("sgemm", P, gpu=GPU, limits=H200, margin=-0.1), "tune: margin must be >= 0"),
    (lambda: tune("sgemm", P, gpu=GPU, limits=H200, options=[{"tile": "16x16"}]),
     "tune: options must be a non-empty list of the kernel's option sets [{}, {'bk': 16}, {'tile': '8x16'}, "
     "{'tile': '8x16', 'bk': 16}, {'tile': '8x16', 'schedule': 'dbuf'}, {'tile': '8x16', 'bk': 16, 'schedule': 'dbuf'}, "
     "{'tile': '8x16', 'schedule': 'kmajor'}, {'tile': '8x16', 'bk': 16, 'schedule': 'kmajor'}], "
     "got [{'tile': '16x16'}]"),
    (lambda: tune("sgemm", P, gpu=GPU, limits=H200, options=[]), "tune: options must be a non-empty list"),
    (lambda: tune("sgemm", P, gpu=GPU, limits=H200, check=Fake().check, time=Fake().time, rounds=0,
                  use_cache=False), "tune: rounds must be an integer >= 1, got 0"),
    (lambda: cache.cache_key("", "sgemm", P), "tune cache: gpu name must be a non-empty string, got ''"),
])
def test_bad_input(call, msg):
    with pytest.raises(AsyncpipeError) as e:
        call()
    assert msg in str(e.value)


# ---- the other configurations: thread tile and stage depth ---------------------------------------
TILE16 = Config.of(3, tile="8x16", bk=16)


def test_the_whole_space_is_searched_and_the_fastest_configuration_wins(tmp_path):
    """By default every (tile, bk, schedule) the tuner knows is a candidate beside every stage count."""
    others = ({"bk": 16}, {"tile": "8x16"}, {"tile": "8x16", "bk": 16}, {"tile": "8x16", "schedule": "dbuf"},
              {"tile": "8x16", "bk": 16, "schedule": "dbuf"}, {"tile": "8x16", "schedule": "kmajor"},
              {"tile": "8x16", "bk": 16, "schedule": "kmajor"})
    ms = MS | {c: 3.40 for c in (Config.of(s, **o) for o in others for s in range(2, 9))} | {TILE16: 3.18}
    fake = Fake(ms=ms)
    res = run(fake, tmp_path, options=None)
    assert len(res.rows) == 56 and len([c for c in fake.calls if c[0] == "check"]) == 51
    # the model prunes the 8 x 16 tile where one CTA fits an SM (one warp a scheduler computes slower): 8 stages,
    # and 6 and 7 of the dbuf loop at bk 16, whose padded A rows make a stage 20 KB (two CTAs would need 240 KB)
    assert sorted(r.config.label() for r in res.rows if r.pruned) == [
        "6 bk=16 schedule=dbuf tile=8x16", "7 bk=16 schedule=dbuf tile=8x16", "8 bk=16 schedule=dbuf tile=8x16",
        "8 bk=16 schedule=kmajor tile=8x16", "8 bk=16 tile=8x16"]
    assert res.best == TILE16 and res.best.label() == "3 bk=16 tile=8x16"
    assert res.checks()["measured_top2"] == ["3 bk=16 tile=8x16", "3"]
    line = next(l for l in res.table().splitlines() if l.startswith("3 bk=16 tile=8x16 "))
    assert "<- pick" in line and "3.180" in line
    back = TuneResult.from_dict(json.loads(json.dumps(res.to_dict())))
    assert back.best == TILE16 and back.to_dict() == res.to_dict()


def test_cached_config_answers_with_what_was_given_fixed(tmp_path):
    path = tmp_path / "t.json"
    run(Fake(ms=MS | {TILE16: 3.18, Config.of(4, tile="8x16", bk=16): 3.20}), tmp_path,
        options=[{}, {"tile": "8x16", "bk": 16}], candidates=[3, 4])
    assert cached_config("sgemm", P, gpu=GPU, path=path) == TILE16
    assert cached_config("sgemm", P, gpu=GPU, path=path, stages=4) == Config.of(4, tile="8x16", bk=16)
    assert cached_config("sgemm", P, gpu=GPU, path=path, tile="8x8") == Config.of(3)
    assert cached_config("sgemm", P, gpu=GPU, path=path, tile="8x16", bk=8) is None     # never measured
    assert cached_stages("sgemm", P, gpu=GPU, path=path) == 3                           # the chapter's tile's
    assert cached_config("sgemm", P, gpu="another GPU", path=path) is None


def test_an_older_table_without_options_reads_as_the_chapters_tile(tmp_path):
    """Tables written before the tuner knew the tiles (bench/tune_h200.json at ed9447e) still load."""
    old = run(Fake(), tmp_path).to_dict()
    for r in old["rows"]:
        del r["options"]
    old["best"] = {"stages": 3}
    res = TuneResult.from_dict(old)
    assert res.best == Config.of(3) and res.row(5).config == Config.of(5) and "<- pick" in res.table()


def test_sgemm_fills_what_is_not_given_from_the_tuners_cache(monkeypatch):
    """sgemm(stages=None, tile=None, bk=None): the tuned configuration agreeing with what was given,
    else the chapter's (3, "8x8", 8). No GPU: the arrays here only describe their shapes."""
    import asyncpipe.tune as T
    from asyncpipe.kernels import sgemm as S

    asked = []

    def fake_cache(kernel, problem, **fixed):
        asked.append((kernel, problem, fixed))
        return TILE16 if fixed.get("tile", "8x16") == "8x16" and fixed.get("stages", 3) == 3 else None

    monkeypatch.setattr(T, "cached_config", fake_cache)
    class Described:                         # what sgemm() reads of an array before any check
        def __init__(self, *shape):
            self.__cuda_array_interface__ = {"data": (0, False), "shape": shape, "typestr": "<f4", "version": 3}

    a, b = Described(64, 32), Described(32, 48)
    assert S._configuration(a, b, None, None, None) == (3, "8x16", 16, "plain")
    assert asked[-1] == ("sgemm", (64, 48, 32), {})
    assert S._configuration(a, b, 3, None, None) == (3, "8x16", 16, "plain")
    assert S._configuration(a, b, None, "8x8", None) == (3, "8x8", 8, "plain")       # nothing cached: the chapter's
    assert asked[-1][2] == {"tile": "8x8"}
    assert S._configuration(a, b, 5, None, 8) == (5, "8x8", 8, "plain")
    dbuf = Config.of(4, tile="8x16", bk=16, schedule="dbuf")
    monkeypatch.setattr(T, "cached_config", lambda kernel, problem, **fixed: dbuf)
    assert S._configuration(a, b, None, None, None) == (4, "8x16", 16, "dbuf")
    assert S._configuration(a, b, None, None, None, "plain") == (4, "8x16", 16, "plain")   # given wins
