"""The Gantt chart, read back from what was drawn (the Axes' artists, ticks, labels), not by eye:
one load lane and one compute lane per stage slot, the stalls, where each wait returns, hazards in
red, the time axis in ns."""

import sys

import numpy as np
import pytest

from asyncpipe.errors import AsyncpipeError
from asyncpipe.model.cp_async import cp_async_timeline
from asyncpipe.model.mbarrier_ring import mbarrier_ring_timeline
from asyncpipe.model.plot import (HAZARD_COLOR, LABEL_LOAD, LABEL_READ_EARLY, LABEL_STALL, LABEL_WAIT,
                                  LABEL_WAIT_ALL, LABEL_WAIT_HAZARD, STALL_COLOR, plot_timeline, save_timeline)

mpl = pytest.importorskip("matplotlib")
from matplotlib.colors import to_rgba  # noqa: E402


def bars(ax, gid):
    """(x0, x1, lane) of every bar drawn with ``gid``, in drawing order."""
    out = []
    for c in ax.collections:
        if c.get_gid() == gid:
            [path] = c.get_paths()
            ext = path.get_extents()
            out.append((ext.x0, ext.x1, round((ext.y0 + ext.y1) / 2)))
    return out


def lines(ax, gid):
    return [ln for ln in ax.get_lines() if ln.get_gid() == gid]


def lane(ax, name):
    return [t.get_text() for t in ax.get_yticklabels()].index(name)


def legend(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_lanes_and_bars(rng):
    T, S, L, C = int(rng.integers(3, 12)), int(rng.integers(2, 6)), float(rng.uniform(5, 40)), float(rng.uniform(1, 9))
    tl = cp_async_timeline(T, S, L, C)
    ax = plot_timeline(tl)
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"slot {s} {w}" for s in range(S) for w in ("load", "compute")]
    tiny = 1e-9                                               # an empty bar is drawn a hair wide
    want_loads = [(r.issue, max(r.land, r.issue + tiny), lane(ax, f"slot {r.slot} load")) for r in tl.tiles]
    want_computes = [(r.start, max(r.end, r.start + tiny), lane(ax, f"slot {r.slot} compute")) for r in tl.tiles]
    np.testing.assert_allclose(bars(ax, "load"), want_loads, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(bars(ax, "compute"), want_computes, rtol=1e-12, atol=1e-12)
    assert f"total {tl.total_time:g} ns" in ax.get_title() and f"L={L:g} ns, C={C:g} ns" in ax.get_title()
    assert ax.get_xlabel() == "time (ns)"
    assert ax.get_ylim()[0] > ax.get_ylim()[1]                # slot 0 on top


def test_stalls_are_hatched_on_the_lane_of_the_tile_waited_for():
    tl = cp_async_timeline(8, 3, 20, 4)                      # stalls (0,20) t0, (28,40) t2, (48,60) t4, (68,80) t6
    ax = plot_timeline(tl)
    drawn = bars(ax, "stall")
    assert drawn == [(0, 20, lane(ax, "slot 0 compute")), (28, 40, lane(ax, "slot 2 compute")),
                     (48, 60, lane(ax, "slot 1 compute")), (68, 80, lane(ax, "slot 0 compute"))]
    assert sum(x1 - x0 for x0, x1, _ in drawn) == tl.stall_time == 56
    stall = [c for c in ax.collections if c.get_gid() == "stall"]
    assert all(c.get_hatch() == "////" and tuple(c.get_facecolor()[0]) == to_rgba(STALL_COLOR) for c in stall)
    assert LABEL_STALL in legend(ax) and LABEL_WAIT in legend(ax) and LABEL_WAIT_HAZARD not in legend(ax)
    # compute-bound: only the first tile waits
    ax = plot_timeline(cp_async_timeline(8, 4, 6, 4))
    assert bars(ax, "stall") == [(0, 6, lane(ax, "slot 0 compute"))]


def test_a_marker_where_each_wait_returns():
    tl = cp_async_timeline(8, 3, 20, 4)
    ax = plot_timeline(tl)
    [marks] = lines(ax, "wait")
    waits = [e for e in tl.events if e.kind == "wait"]
    assert list(marks.get_xdata()) == [e.time for e in waits] == [r.start for r in tl.tiles]   # wait, then compute
    assert [round(y) for y in marks.get_ydata()] == [lane(ax, f"slot {k % 3} compute") for k in range(8)]
    assert lines(ax, "wait_hazard") == [] and lines(ax, "wait_all") == []


def test_the_ring_marks_the_producers_waits_on_the_load_lanes():
    tl = mbarrier_ring_timeline(6, 2, 10, 3, consumers=2, schedule="alternate")
    ax = plot_timeline(tl)
    [marks] = lines(ax, "wait")
    got = sorted(zip(marks.get_xdata(), (round(y) for y in marks.get_ydata())))
    want = sorted((e.time, lane(ax, f"slot {e.slot} {'load' if e.actor == 'producer' else 'compute'}"))
                  for e in tl.events if e.kind == "wait")
    assert got == want and len(want) == 12                   # 6 producer waits (empty), 6 consumer waits (full)
    assert sorted(bars(ax, "stall")) == sorted((st.start, st.end, lane(ax, f"slot {st.slot} compute"))
                                               for st in tl.stalls)
    assert legend(ax) == [LABEL_LOAD, "compute, consumer 0", "compute, consumer 1", LABEL_STALL, LABEL_WAIT]


def test_an_uncovered_wait_is_a_red_marker_even_when_the_timing_hides_it():
    tl = cp_async_timeline(8, 3, 20, 4, empty_commit=False)  # tile 7's wait is uncovered; it lands in time
    ax = plot_timeline(tl)
    [red] = lines(ax, "wait_hazard")
    assert list(red.get_xdata()) == [84] and [round(y) for y in red.get_ydata()] == [lane(ax, "slot 1 compute")]
    assert to_rgba(red.get_color()) == to_rgba(HAZARD_COLOR)
    assert len(lines(ax, "wait")[0].get_xdata()) == 7
    reds = [c for c in ax.collections if tuple(c.get_facecolor()[0]) == to_rgba(HAZARD_COLOR)]
    assert reds == [] and LABEL_READ_EARLY not in legend(ax) and LABEL_WAIT_HAZARD in legend(ax)
    assert ax.get_title().endswith(", 1 hazard")


def test_reads_before_landing_are_red_and_wait_all_is_a_line():
    tl = cp_async_timeline(8, 4, 20, 2, empty_commit=False)  # tiles 6, 7 read early; wait_all waits to 62
    ax = plot_timeline(tl)
    reds = [c for c in ax.collections if tuple(c.get_facecolor()[0]) == to_rgba(HAZARD_COLOR)]
    assert len(reds) == len(tl.hazards) == 2 and "2 hazards" in ax.get_title()
    assert [c.get_gid() for c in reds] == ["compute", "compute"]
    assert list(lines(ax, "wait_hazard")[0].get_xdata()) == [46, 48]
    [wait_all] = lines(ax, "wait_all")
    assert list(wait_all.get_xdata()) == [62, 62] and tl.total_time == 62
    assert bars(ax, "stall")[-1] == (50, 62, lane(ax, "slot 3 compute"))       # waiting for tile 7 to land
    assert legend(ax)[-3:] == [LABEL_WAIT_HAZARD, LABEL_READ_EARLY, LABEL_WAIT_ALL]


def test_the_unit_follows_the_timeline_or_the_caller():
    tl = cp_async_timeline(4, 2, 3.0, 1.0, unit="compute times")
    ax = plot_timeline(tl)
    assert ax.get_xlabel() == "time (compute times)" and "L=3 compute times" in ax.get_title()
    assert plot_timeline(cp_async_timeline(4, 2, 3, 1), unit="cycles").get_xlabel() == "time (cycles)"


def test_ring_with_two_consumers_and_a_saved_file(tmp_path):
    tl = mbarrier_ring_timeline(8, 3, 20, 6, consumers=2, schedule="alternate")
    path = save_timeline(tl, tmp_path / "ring.svg")
    text = open(path).read()
    assert text.lstrip().startswith("<?xml") and "time (ns)" in text
    labels = legend(plot_timeline(tl))
    assert labels[:3] == [LABEL_LOAD, "compute, consumer 0", "compute, consumer 1"]


def test_without_matplotlib_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)       # import matplotlib now raises ImportError
    with pytest.raises(AsyncpipeError, match=r"plot_timeline: needs matplotlib \(pip install 'asyncpipe\[plot\]'\), "
                                             r"got not installed"):
        plot_timeline(cp_async_timeline(2, 2, 1, 1))
