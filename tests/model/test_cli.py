"""``python -m asyncpipe timeline`` and ``python -m asyncpipe tune`` (its CPU side), and that the
existing subcommands are still there."""

import json
import subprocess
import sys

import pytest

from asyncpipe.__main__ import main
from asyncpipe.model.cp_async import cp_async_closed_form
from asyncpipe.model.mbarrier_ring import mbarrier_ring_closed_form

BASE = ["timeline", "--tiles", "8", "--stages", "3", "--load-latency", "20", "--compute", "4"]


def test_json_is_one_object_with_total_and_events(capsys):
    assert main(BASE + ["--json"]) == 0
    d = json.loads(capsys.readouterr().out)                    # the whole stdout is one JSON object
    assert d["total_time"] == cp_async_closed_form(8, 3, 20, 4)
    kinds = {e["kind"] for e in d["events"]}
    assert {"issue", "land", "compute_start", "compute_end"} <= kinds
    assert sum(e["kind"] == "issue" for e in d["events"]) == 8 and d["hazards"] == []


def test_json_through_the_real_entry_point():
    out = subprocess.run([sys.executable, "-m", "asyncpipe", *BASE, "--issue-cost", "1", "--json"],
                         capture_output=True, text=True, check=True)
    d = json.loads(out.stdout)
    assert d["params"]["issue_cost"] == 1.0 and d["total_time"] > cp_async_closed_form(8, 3, 20, 4)


def test_text_shows_the_pitfall(capsys):
    assert main(["timeline", "--tiles", "8", "--stages", "4", "--load-latency", "20", "--compute", "2",
                 "--no-empty-commit"]) == 0
    out = capsys.readouterr().out.splitlines()
    hazards = [ln for ln in out if ln.startswith("HAZARD")]
    assert out[-2:] == hazards and len(hazards) == 2 and out[-3].startswith("total 62 ns")   # the verdict ends it
    assert hazards[0].startswith("HAZARD read_before_land (tile 6, t=46 ns): tile 6 is read at t=46 ns but lands at "
                                 "t=60 ns: wait_group(2) covered groups 0..5 while tile 6 is in group 6: it needed "
                                 "groups 0..6 complete, i.e. wait_group(1) with 8 groups committed. Cause: the "
                                 "empty-commit pitfall")
    assert hazards[1].startswith("HAZARD read_before_land (tile 7, t=48 ns)")
    assert out[0] == "cp.async: 8 tiles, 4 stages, load latency 20 ns, compute 2 ns per tile"
    assert out[1].split() == ["time", "(ns)", "actor", "event", "where"]


def test_an_uncovered_wait_the_timing_hides_is_printed(capsys):
    # the issue's command: --json had it (uncovered_waits) and the text did not
    assert main(BASE + ["--no-empty-commit"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [ln for ln in out if ln.startswith("HAZARD")] == out[-1:]
    assert out[-1].startswith("HAZARD uncovered_wait (tile 7, t=84 ns): tile 7's wait_group(1) covered groups 0..6 "
                              "while tile 7 is in group 7: it needed groups 0..7 complete, i.e. wait_group(0) with 8 "
                              "groups committed; it landed at t=84 ns, by its read at t=84 ns, only through this run's "
                              "timing")
    assert "Cause: the empty-commit pitfall" in out[-1] and out[-2] == "total 88 ns, stalled 56 ns (4 stalls)"
    assert main(BASE + ["--no-empty-commit", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["uncovered_waits"] == [7] and [(h["kind"], h["tile"]) for h in d["hazards"]] == [("uncovered_wait", 7)]


def test_no_hazard_is_said_and_no_events_leaves_out_the_list(capsys):
    assert main(BASE + ["--no-events"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "cp.async: 8 tiles, 3 stages, load latency 20 ns, compute 4 ns per tile",
        "total 88 ns, stalled 56 ns (4 stalls)", "no hazard"]


def test_every_hazard_of_the_ring_is_a_line(capsys):
    from asyncpipe.model.mbarrier_ring import mbarrier_ring_timeline

    for extra, kw in ((["--flipped-parity"], dict(consumer_parity="flipped")),
                      (["--consumers", "3", "--schedule", "alternate", "--stages", "2"],
                       dict(consumers=3, schedule="alternate", stages=2))):
        assert main(BASE + ["--pattern", "ring", "--no-events"] + extra) == 0
        got = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("HAZARD")]
        tl = mbarrier_ring_timeline(**(dict(tiles=8, stages=3, load_latency=20, compute=4) | kw))
        assert got == [h.line() for h in tl.hazards] and len(got) >= 3
    assert "its wait on full[0] with parity 1 returned with 0 phases of full[0] complete" in got[0]
    assert "Cause: more alternating consumers than slots" in got[0]


def test_the_unit_is_ns_in_the_help_and_the_json(capsys):
    assert main(BASE + ["--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["unit"] == "ns" and sum(s["end"] - s["start"] for s in d["stalls"]) == d["stall_time"] == 56
    with pytest.raises(SystemExit):
        main(["timeline", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "L: ns from issuing a load to its landing" in text and "C: compute ns per tile" in text
    assert "bytes per ns (GB/s)" in text


def test_ring_pattern(capsys):
    assert main(BASE + ["--pattern", "ring", "--consumers", "2", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["pattern"] == "mbarrier ring" and d["total_time"] == mbarrier_ring_closed_form(8, 3, 20, 4)


def test_plot_writes_a_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png = tmp_path / "t.png"
    assert main(BASE + ["--plot", str(png), "--json"]) == 0
    json.loads(capsys.readouterr().out)                        # --plot keeps stdout one JSON object
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_input_exits_2_with_the_rule(capsys):
    assert main(["timeline", "--tiles", "8", "--stages", "1", "--load-latency", "20", "--compute", "4"]) == 2
    assert "error: cp_async_timeline: stages must be an integer >= 2" in capsys.readouterr().err
    assert main(BASE[:-1] + ["-3"]) == 2
    assert "compute must be a finite number >= 0" in capsys.readouterr().err


def test_tune_predict_only(capsys, tmp_path):
    js = tmp_path / "pred.json"
    assert main(["tune", "sgemm", "--m", "4096", "--n", "4096", "--k", "4096", "--predict-only", "--gpu", "H200",
                 "--json", str(js)]) == 0
    out = capsys.readouterr().out
    assert "predicted ms" in out and "<- model's pick" in out
    d = json.loads(js.read_text())
    assert d["measured"] is False
    # every stage count of every (tile, bk) sgemm() takes, the chapter's tile first, then the 8 x 16 tile's
    # "dbuf" and "kmajor" schedules
    assert [(r["stages"], r["options"]) for r in d["rows"]] == [
        (s, o) for o in ({}, {"bk": 16}, {"tile": "8x16"}, {"tile": "8x16", "bk": 16},
                         {"tile": "8x16", "schedule": "dbuf"}, {"tile": "8x16", "bk": 16, "schedule": "dbuf"},
                         {"tile": "8x16", "schedule": "kmajor"}, {"tile": "8x16", "bk": 16, "schedule": "kmajor"})
        for s in range(2, 9)]
    # 16-deep stages: 8 of them (128 KiB) leave room for one CTA per SM only
    eight = next(r for r in d["rows"] if r["stages"] == 8 and r["options"] == {"bk": 16})
    assert eight["ctas_per_sm"] == 1 and eight["limited_by"] == "shared memory"


def test_tune_tile_and_bk_narrow_the_search(capsys, tmp_path):
    js = tmp_path / "pred.json"
    assert main(["tune", "sgemm", "--m", "4096", "--n", "4096", "--k", "4096", "--predict-only", "--gpu", "H200",
                 "--tile", "8x8", "--bk", "8", "--json", str(js)]) == 0
    assert [(r["stages"], r["options"]) for r in json.loads(js.read_text())["rows"]] == [(s, {}) for s in range(2, 9)]
    assert main(["tune", "sgemm", "--m", "4096", "--n", "4096", "--k", "4096", "--predict-only", "--gpu", "H200",
                 "--tile", "8x16", "--stages", "3", "--schedule", "plain", "--json", str(js)]) == 0
    rows = json.loads(js.read_text())["rows"]
    assert [(r["stages"], r["options"]) for r in rows] == [(3, {"tile": "8x16"}), (3, {"tile": "8x16", "bk": 16})]
    assert "3 bk=16 tile=8x16" in capsys.readouterr().out
    assert main(["tune", "sgemm", "--m", "4096", "--n", "4096", "--k", "4096", "--predict-only", "--gpu", "H200",
                 "--bk", "16", "--schedule", "dbuf", "--stages", "3", "--json", str(js)]) == 0
    rows = json.loads(js.read_text())["rows"]
    assert [(r["stages"], r["options"]) for r in rows] == [(3, {"tile": "8x16", "bk": 16, "schedule": "dbuf"})]
    assert "3 bk=16 schedule=dbuf tile=8x16" in capsys.readouterr().out
    assert main(["tune", "sgemm", "--m", "64", "--n", "64", "--k", "64", "--predict-only", "--tile", "16x16"]) == 2
    assert "error: tune sgemm: --tile values must be among ('8x8', '8x16'), got '16x16'" in capsys.readouterr().err
    assert main(["tune", "sgemm", "--m", "64", "--n", "64", "--k", "64", "--predict-only", "--bk", "12"]) == 2
    assert "error: tune sgemm: --bk values must be among (8, 16), got 12" in capsys.readouterr().err
    assert main(["tune", "sgemm", "--m", "64", "--n", "64", "--k", "64", "--predict-only", "--schedule", "triple"]) == 2
    assert "error: tune sgemm: --schedule values must be among ('plain', 'dbuf', 'kmajor'), got 'triple'" in capsys.readouterr().err


def test_tune_without_a_gpu_says_so(capsys, monkeypatch, tmp_path, no_gpu):
    monkeypatch.setenv("ASYNCPIPE_CACHE_DIR", str(tmp_path))
    assert main(["tune", "sgemm", "--m", "1024", "--n", "1024", "--k", "512", "--stages", "2", "3"]) == 0
    cap = capsys.readouterr()
    said = [line for line in cap.out.splitlines() if "not measured" in line]
    assert len(said) == 1 and "not measured (tune sgemm: needs a CUDA GPU" in said[0], cap.out
    assert "<- model's pick" in cap.out and cap.err == ""
    assert not (tmp_path / "tune.json").exists()
    # --problem names the SGEMM's dims too; a missing dim is an error, exit 2
    assert main(["tune", "sgemm", "--problem", "m=64,n=64,k=64", "--predict-only", "--stages", "3", "--tile", "8x8",
                 "--bk", "8"]) == 0
    assert "not measured (--predict-only)" in capsys.readouterr().out
    assert main(["tune", "sgemm", "--problem", "m=64,n=64"]) == 2
    assert "error: tune: --problem must name each of ('m', 'n', 'k'), got 'm=64,n=64'" in capsys.readouterr().err
    assert main(["tune", "sgemm", "--m", "64"]) == 2
    assert "error: tune: sgemm needs --m, --n and --k" in capsys.readouterr().err


def test_tune_calibration_from_the_command_line(capsys):
    assert main(["tune", "sgemm", "--m", "4096", "--n", "4096", "--k", "4096", "--predict-only", "--gpu", "H200",
                 "--load-latency-ns", "5000", "--compute-ns", "800"]) == 0
    out = capsys.readouterr().out
    assert "load_latency_ns=5000.0" in out and "pruned: predicted" in out


def test_existing_subcommands_are_intact():
    for cmd in ("demo", "bench", "primitives", "timeline", "tune"):
        with pytest.raises(SystemExit) as e:
            main([cmd, "--help"])
        assert e.value.code == 0
