"""The Gantt chart: one load lane and one compute lane per stage slot, hazards in red."""

import sys

import pytest

from asyncpipe.errors import AsyncpipeError
from asyncpipe.model.cp_async import cp_async_timeline
from asyncpipe.model.mbarrier_ring import mbarrier_ring_timeline
from asyncpipe.model.plot import HAZARD_COLOR, plot_timeline, save_timeline

mpl = pytest.importorskip("matplotlib")


def test_lanes_and_bars():
    tl = cp_async_timeline(10, 4, 20, 3)
    ax = plot_timeline(tl)
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"slot {s} {w}" for s in range(4) for w in ("load", "compute")]
    assert len(ax.collections) == 2 * 10                      # a load bar and a compute bar per tile
    assert f"total {tl.total_time:g}" in ax.get_title()


def test_hazards_are_red():
    from matplotlib.colors import to_rgba

    tl = cp_async_timeline(10, 4, 20, 3, empty_commit=False)
    ax = plot_timeline(tl)
    reds = [c for c in ax.collections if tuple(c.get_facecolor()[0]) == to_rgba(HAZARD_COLOR)]
    assert len(reds) == len(tl.hazards) == 1 and "1 hazards" in ax.get_title()


def test_ring_with_two_consumers_and_a_saved_file(tmp_path):
    tl = mbarrier_ring_timeline(8, 3, 20, 6, consumers=2, schedule="alternate")
    path = save_timeline(tl, tmp_path / "ring.svg")
    assert open(path).read().lstrip().startswith("<?xml")
    labels = [t.get_text() for t in plot_timeline(tl).get_legend().get_texts()]
    assert labels == ["load (issue to land)", "compute, consumer 0", "compute, consumer 1"]


def test_without_matplotlib_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)       # import matplotlib now raises ImportError
    with pytest.raises(AsyncpipeError, match=r"plot_timeline: needs matplotlib \(pip install 'asyncpipe\[plot\]'\), "
                                             r"got not installed"):
        plot_timeline(cp_async_timeline(2, 2, 1, 1))
