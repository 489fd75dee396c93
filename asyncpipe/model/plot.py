"""A Gantt chart of a :class:`~asyncpipe.model.timeline.Timeline`: per stage slot, a lane of
loads (issue to landing) above a lane of computes, so that one sees how far the loads run ahead,
where the compute waits, and (in red) where it read a slot before its load landed.

matplotlib is needed here only (``pip install 'asyncpipe[plot]'``); it is imported on use, and
figures are drawn without pyplot's global state, so this works headless.
"""

from __future__ import annotations

from ..errors import AsyncpipeError

LOAD_COLOR = "#4c72b0"
COMPUTE_COLORS = ("#55a868", "#8172b2", "#ccb974", "#64b5cd")   # one per consumer
HAZARD_COLOR = "#c44e52"


def _matplotlib():
    try:
        import matplotlib  # noqa: F401
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise AsyncpipeError("plot_timeline", "needs matplotlib (pip install 'asyncpipe[plot]')",
                             "not installed") from exc
    return Figure


def plot_timeline(tl, ax=None, title: str | None = None, unit: str | None = None):
    """Draw ``tl`` on ``ax`` (a new figure's axes when None) and return the axes. ``unit`` names
    the time unit on the x axis (``"ns"``)."""
    Figure = _matplotlib()
    S = tl.params["stages"]
    if ax is None:
        ax = Figure(figsize=(11, 0.55 * 2 * S + 1.6)).add_subplot()
    hazard_tiles = {h.tile for h in tl.hazards if h.kind == "read_before_land"}
    lanes = []
    for s in range(S):
        lanes += [f"slot {s} load", f"slot {s} compute"]
    y = {name: i for i, name in enumerate(lanes)}
    for r in tl.tiles:
        yl, yc = y[f"slot {r.slot} load"], y[f"slot {r.slot} compute"]
        ax.broken_barh([(r.issue, max(r.land - r.issue, 1e-9))], (yl - 0.35, 0.7), facecolors=LOAD_COLOR, alpha=0.75)
        bad = r.tile in hazard_tiles and r.start < r.land
        color = HAZARD_COLOR if bad else COMPUTE_COLORS[r.consumer % len(COMPUTE_COLORS)]
        ax.broken_barh([(r.start, max(r.end - r.start, 1e-9))], (yc - 0.35, 0.7), facecolors=color,
                       edgecolors="black", linewidth=0.4)
        for x0, x1, yy in ((r.issue, r.land, yl), (r.start, r.end, yc)):
            ax.text((x0 + x1) / 2, yy, str(r.tile), ha="center", va="center", fontsize=7, color="white", clip_on=True)
    from matplotlib.patches import Patch

    consumers = tl.params.get("consumers", 1)
    handles = [Patch(color=LOAD_COLOR, alpha=0.75, label="load (issue to land)")]
    handles += [Patch(color=COMPUTE_COLORS[c % len(COMPUTE_COLORS)],
                      label="compute" if consumers == 1 else f"compute, consumer {c}") for c in range(consumers)]
    if hazard_tiles:
        handles.append(Patch(color=HAZARD_COLOR, label="compute before its load landed"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False)
    ax.set_yticks(range(len(lanes)), lanes)
    ax.invert_yaxis()
    ax.set_xlabel(f"time ({unit})" if unit else "time")
    ax.grid(axis="x", alpha=0.3)
    p = tl.params
    total = "deadlock" if tl.deadlocked else f"{tl.total_time:g}"
    ax.set_title(title or f"{tl.pattern}: S={S}, T={p['tiles']}, L={p['load_latency']:g}, C={p['compute']:g}: "
                          f"total {total}, stall {tl.stall_time:g}" + (f", {len(tl.hazards)} hazards" if tl.hazards
                                                                          else ""), fontsize=9)
    return ax


def save_timeline(tl, path, title: str | None = None) -> str:
    """Draw ``tl`` and write it to ``path`` (format from the suffix: .png, .svg, .pdf)."""
    ax = plot_timeline(tl, title=title)
    fig = ax.figure
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return str(path)
