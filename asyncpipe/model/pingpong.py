"""A model of FlashAttention-3's two consumer warpgroups sharing one SM's tensor cores, for the attention
kernel's notebook: why ping-pong scheduling and the intra-warpgroup overlap pay, and when they do not.

Each warpgroup runs ``rounds`` rounds; round j issues its GEMMs (S_j = Q K_j^T, then P_{j-1} V_{j-1}; the
first round has S only, a last round P V only) and then runs the softmax of S_j on the CUDA cores. The
tensor cores are one resource: GEMMs in flight at the same time share it equally (processor sharing), as
two warpgroups' wgmma do on an SM. The softmax runs on the warpgroup's own CUDA cores (not shared).

``pingpong``: a warpgroup issues its round's GEMMs only after the other warpgroup issued its own (named
barriers: strict alternation), and the tensor cores run them in that order, so one's GEMMs run while the
other's softmax does; without it the two warpgroups' GEMMs in flight share the tensor cores. ``overlap``: the softmax of
S_j starts when S_j is done, while P_{j-1} V_{j-1} still runs (FA3's intra-warpgroup overlap); without it the
softmax waits for both GEMMs. Times are in units of one S GEMM (P V takes ``pv`` of those).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Span:
    warpgroup: int
    kind: str          # "S", "PV" (on the tensor cores) or "softmax"
    round: int
    start: float
    end: float


@dataclass
class PingPongTimeline:
    spans: list[Span] = field(default_factory=list)
    total_time: float = 0.0

    def busy(self, kinds=("S", "PV")) -> float:
        """Time the tensor cores are busy with anything (the union of the GEMM spans)."""
        edges = sorted((s.start, s.end) for s in self.spans if s.kind in kinds)
        busy, end = 0.0, float("-inf")
        for a, b in edges:
            if b > end:
                busy += b - max(a, end)
                end = b
        return busy

    @property
    def tensor_utilization(self) -> float:
        return self.busy() / self.total_time if self.total_time else 0.0


def pingpong_timeline(rounds: int, softmax: float, *, pv: float = 1.0, pingpong: bool = True,
                      overlap: bool = True, warpgroups: int = 2) -> PingPongTimeline:
    """Simulate the consumers (module doc). ``softmax``: one softmax's time in units of one S GEMM."""
    if rounds < 1 or softmax < 0 or pv <= 0 or warpgroups < 1:
        raise ValueError(f"rounds >= 1, softmax >= 0, pv > 0, warpgroups >= 1: got rounds={rounds}, "
                         f"softmax={softmax}, pv={pv}, warpgroups={warpgroups}")
    tl = PingPongTimeline()
    # per warpgroup: next round to issue, the time it may issue (its last softmax done)
    next_round = [0] * warpgroups
    ready = [0.0] * warpgroups
    turn = 0                                   # ping-pong: whose turn it is to issue
    queue: list[list] = []                     # GEMMs on the tensor cores: [warpgroup, kind, round, work left, start]
    waiting: dict[int, dict] = {}              # warpgroup -> {"S": done?, "PV": done?, round}
    now = 0.0
    eps = 1e-12
    while True:
        # issue every warpgroup that may
        progressed = True
        while progressed:
            progressed = False
            for w in range(warpgroups):
                j = next_round[w]
                if j > rounds or w in waiting or ready[w] > now + eps:
                    continue
                if pingpong and turn != w:
                    continue
                gemms = ([("S", 1.0)] if j < rounds else []) + ([("PV", pv)] if j > 0 else [])
                for kind, work in gemms:       # in issue order: S then PV
                    queue.append([w, kind, j, work, None])
                waiting[w] = {kind: False for kind, _ in gemms}
                waiting[w]["round"] = j
                next_round[w] = j + 1
                turn = (turn + 1) % warpgroups
                progressed = True
        if not queue:
            if all(r > rounds for r in next_round) and not waiting:
                break
            now = min(r for w, r in enumerate(ready) if next_round[w] <= rounds and w not in waiting)
            continue
        # with ping-pong the tensor cores take the GEMMs in issue order (the named barriers order the issues);
        # without it each warpgroup's oldest GEMM progresses at once, sharing them (processor sharing)
        heads = {}
        for g in queue[:1] if pingpong else queue:
            heads.setdefault(g[0], g)
        for g in heads.values():
            if g[4] is None:
                g[4] = now                     # it starts when it reaches the head of its warpgroup's GEMMs
        share = 1.0 / len(heads)
        dt = min(g[3] / share for g in heads.values())
        for w in range(warpgroups):            # a warpgroup that becomes ready meanwhile may issue
            if w not in waiting and next_round[w] <= rounds and now + eps < ready[w] < now + dt:
                dt = ready[w] - now
        now += dt
        for g in list(heads.values()):
            g[3] -= dt * share
            if g[3] <= eps:
                queue.remove(g)
                w, kind, j = g[0], g[1], g[2]
                tl.spans.append(Span(w, kind, j if kind == "S" else j - 1, g[4], now))
                waiting[w][kind] = True
        for w in list(waiting):
            state, j = waiting[w], waiting[w]["round"]
            s_done = state.get("S", True)
            all_done = all(v for k, v in state.items() if k != "round")
            start_softmax = j < rounds and (s_done if overlap else all_done)
            if start_softmax and "softmax_at" not in state:
                state["softmax_at"] = now
                tl.spans.append(Span(w, "softmax", j, now, now + softmax))
            if all_done:
                ready[w] = state.get("softmax_at", now) + (softmax if j < rounds else 0.0)
                del waiting[w]
    tl.total_time = max(s.end for s in tl.spans)
    return tl



def plot_pingpong(tl: PingPongTimeline, ax=None, title: str | None = None):
    """Draw ``tl``: one lane per warpgroup for its tensor-core GEMMs and one for its softmax. Returns the axes."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    colors = {"S": "tab:blue", "PV": "tab:green", "softmax": "tab:orange"}
    warpgroups = sorted({s.warpgroup for s in tl.spans})
    if ax is None:
        ax = Figure(figsize=(10, 0.5 * 2 * len(warpgroups) + 1.2)).add_subplot()
    lanes = []
    for w in warpgroups:
        for lane, kinds in (("GEMMs", ("S", "PV")), ("softmax", ("softmax",))):
            y = len(lanes)
            lanes.append(f"consumer {w} {lane}")
            for s in tl.spans:
                if s.warpgroup == w and s.kind in kinds:
                    ax.broken_barh([(s.start, s.end - s.start)], (y - 0.4, 0.8), facecolors=colors[s.kind],
                                   edgecolor="white", linewidth=0.5)
                    ax.text((s.start + s.end) / 2, y, f"{s.kind}{s.round}", ha="center", va="center", fontsize=7)
    ax.set_yticks(range(len(lanes)), lanes)
    ax.invert_yaxis()
    ax.set_xlabel("time (S GEMMs)")
    ax.set_title(title or f"total {tl.total_time:.1f}, tensor cores busy {100 * tl.tensor_utilization:.0f} %")
    ax.legend(handles=[Patch(color=c, label=k) for k, c in colors.items()], loc="upper right", fontsize=7, ncol=3)
    return ax


__all__ = ["PingPongTimeline", "Span", "pingpong_timeline", "plot_pingpong"]
