"""A Gantt chart of a :class:`~asyncpipe.model.timeline.Timeline`: per stage slot, a lane of
loads (issue to landing) above a lane of computes, so that one sees how far the loads run ahead,
where the compute stalls waiting for data (hatched grey, up to the wait's return), where each wait
returns (a marker on the lane of the tile it waits for: the compute lane for the CTA or a
consumer, the load lane for the ring's producer waiting for a free slot), and in red where it read
a slot before its load landed or a wait returned without covering its tile. The time axis says its
unit (``Timeline.unit``, ns unless the model was given another).

matplotlib is needed here only (``pip install 'asyncpipe[plot]'``); it is imported on use, and
figures are drawn without pyplot's global state, so this works headless. Every artist carries a
``gid`` (``"load"``, ``"compute"``, ``"stall"``, ``"wait"``, ``"wait_hazard"``, ``"wait_all"``) so
that code (and the tests) can find what was drawn.
"""

from __future__ import annotations

from ..errors import AsyncpipeError
from .timeline import READ_BEFORE_LAND, UNCOVERED_WAIT, WAIT

LOAD_COLOR = "#4c72b0"
COMPUTE_COLORS = ("#55a868", "#8172b2", "#ccb974", "#64b5cd")   # one per consumer
HAZARD_COLOR = "#c44e52"
STALL_COLOR = "#d0d0d0"
WAIT_COLOR = "black"
PRODUCER = "producer"                                           # the ring's producer (its waits: a free slot)

LABEL_LOAD = "load (issue to land)"
LABEL_STALL = "stall: compute waits for data"
LABEL_WAIT = "wait returns"
LABEL_WAIT_HAZARD = "wait returns without covering its tile"
LABEL_READ_EARLY = "compute before its load landed"
LABEL_WAIT_ALL = "wait_all returns"


def _matplotlib():
    try:
        import matplotlib  # noqa: F401
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise AsyncpipeError("plot_timeline", "needs matplotlib (pip install 'asyncpipe[plot]')",
                             "not installed") from exc
    return Figure


def _bar(ax, x0, x1, y, gid, **style):
    """One horizontal bar on lane ``y`` from ``x0`` to ``x1`` (a hair wide when empty)."""
    bars = ax.broken_barh([(x0, max(x1 - x0, 1e-9))], (y - 0.35, 0.7), **style)
    bars.set_gid(gid)
    return bars


def plot_timeline(tl, ax=None, title: str | None = None, unit: str | None = None):
    """Draw ``tl`` on ``ax`` (a new figure's axes when None) and return the axes. ``unit`` names
    the time unit on the x axis; None takes the timeline's own (``tl.unit``, ``"ns"``)."""
    Figure = _matplotlib()
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    S = tl.params["stages"]
    unit = unit or tl.unit
    if ax is None:
        ax = Figure(figsize=(11, 0.55 * 2 * S + 1.6)).add_subplot()
    hazard_tiles = {h.tile for h in tl.hazards if h.kind == READ_BEFORE_LAND}
    uncovered_tiles = hazard_tiles | {h.tile for h in tl.hazards if h.kind == UNCOVERED_WAIT}
    lanes = []
    for s in range(S):
        lanes += [f"slot {s} load", f"slot {s} compute"]
    y = {name: i for i, name in enumerate(lanes)}
    read_early = False
    for st in tl.stalls:                                   # under the bars: a stall ends where a compute starts
        _bar(ax, st.start, st.end, y[f"slot {st.slot} compute"], "stall", facecolors=STALL_COLOR, hatch="////",
             edgecolors="grey", linewidth=0.4)
    for r in tl.tiles:
        yl, yc = y[f"slot {r.slot} load"], y[f"slot {r.slot} compute"]
        _bar(ax, r.issue, r.land, yl, "load", facecolors=LOAD_COLOR, alpha=0.75)
        bad = r.tile in hazard_tiles and r.start < r.land
        read_early |= bad
        color = HAZARD_COLOR if bad else COMPUTE_COLORS[r.consumer % len(COMPUTE_COLORS)]
        _bar(ax, r.start, r.end, yc, "compute", facecolors=color, edgecolors="black", linewidth=0.4)
        for x0, x1, yy in ((r.issue, r.land, yl), (r.start, r.end, yc)):
            ax.text((x0 + x1) / 2, yy, str(r.tile), ha="center", va="center", fontsize=7, color="white", clip_on=True)

    # where each wait returns: on the compute lane of the tile the CTA / a consumer waits for, on the
    # load lane of the slot the producer waits to refill
    marks = {"wait": ([], [], WAIT_COLOR), "wait_hazard": ([], [], HAZARD_COLOR)}
    wait_all = []
    for e in tl.of_kind(WAIT):
        if e.tile is None:
            wait_all.append(e.time)
            continue
        producer = e.actor == PRODUCER
        gid = "wait_hazard" if not producer and e.tile in uncovered_tiles else "wait"
        marks[gid][0].append(e.time)
        marks[gid][1].append(y[f"slot {e.slot} {'load' if producer else 'compute'}"] - 0.42)
    for gid, (xs, ys, color) in marks.items():
        if xs:
            ax.plot(xs, ys, linestyle="none", marker="v", markersize=5, color=color, gid=gid)
    for x in wait_all:
        ax.axvline(x, color=WAIT_COLOR, linestyle="--", linewidth=0.8, gid="wait_all")

    consumers = tl.params.get("consumers", 1)
    handles = [Patch(color=LOAD_COLOR, alpha=0.75, label=LABEL_LOAD)]
    handles += [Patch(color=COMPUTE_COLORS[c % len(COMPUTE_COLORS)],
                      label="compute" if consumers == 1 else f"compute, consumer {c}") for c in range(consumers)]
    if tl.stalls:
        handles.append(Patch(facecolor=STALL_COLOR, edgecolor="grey", hatch="////", label=LABEL_STALL))
    if marks["wait"][0]:
        handles.append(Line2D([], [], linestyle="none", marker="v", color=WAIT_COLOR, label=LABEL_WAIT))
    if marks["wait_hazard"][0]:
        handles.append(Line2D([], [], linestyle="none", marker="v", color=HAZARD_COLOR, label=LABEL_WAIT_HAZARD))
    if read_early:
        handles.append(Patch(color=HAZARD_COLOR, label=LABEL_READ_EARLY))
    if wait_all:
        handles.append(Line2D([], [], color=WAIT_COLOR, linestyle="--", label=LABEL_WAIT_ALL))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False)
    ax.set_yticks(range(len(lanes)), lanes)
    ax.set_ylim(len(lanes) - 0.5, -0.5)                   # slot 0 on top
    ax.set_xlabel(f"time ({unit})")
    ax.grid(axis="x", alpha=0.3)
    p = tl.params
    total = "deadlock" if tl.deadlocked else f"{tl.total_time:g} {unit}"
    n = len(tl.hazards)
    ax.set_title(title or f"{tl.pattern}: S={S}, T={p['tiles']}, L={p['load_latency']:g} {unit}, "
                          f"C={p['compute']:g} {unit}: total {total}, stall {tl.stall_time:g} {unit}"
                          + (f", {n} {'hazard' if n == 1 else 'hazards'}" if n else ""), fontsize=9)
    return ax


def save_timeline(tl, path, title: str | None = None, unit: str | None = None) -> str:
    """Draw ``tl`` and write it to ``path`` (format from the suffix: .png, .svg, .pdf)."""
    ax = plot_timeline(tl, title=title, unit=unit)
    fig = ax.figure
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return str(path)
