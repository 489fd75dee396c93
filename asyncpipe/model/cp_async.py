"""The timeline of the chapter's multi-stage cp.async pipeline, for one CTA.

The program being modelled (S stages, T tiles; every thread runs it, so the CTA is one actor)::

    prologue:  for s in 0 .. S-2:   if s < T: issue tile s;   commit_group
    main loop: for k in 0 .. T-1:
                   wait_group(S-2)          # at most S-2 groups still in flight
                   syncthreads
                   if k+S-1 < T: issue tile k+S-1 into slot (k+S-1) % S  (tile k-1's slot)
                   commit_group             # even when nothing was issued
                   compute tile k           # slot k % S
    exit:      wait_all

The model keeps the groups exactly as cp.async does: a commit closes a group holding whatever was
issued since the previous commit, and ``wait_group(N)`` returns once every group except the ``N``
newest has landed. It does not assume that the wait covers tile k: it computes which groups the
wait covers and flags a hazard when compute reads a tile that has not landed. That is how the
chapter's pitfall shows up: with ``empty_commit=False`` the tail commits nothing, so in the last
S-2 iterations ``wait_group(S-2)`` covers older groups and tile k is read while still in flight.

Costs: a load departs when its issue is done (``issue_cost`` of the threads' time, spent before the
compute of the same iteration) and lands through the :class:`~asyncpipe.model.inputs.LoadPath`;
compute takes ``compute`` per tile; waits and syncs cost nothing beyond the waiting. In the
simplest form (no issue cost, unlimited bandwidth) this is exactly: a load issued at t lands at
t + latency; tile k's compute starts when tile k-1's compute has ended and tile k has landed; the
load of tile k+S-1 is issued when tile k's compute starts. :func:`cp_async_closed_form` gives the
total in that case without simulating.
"""

from __future__ import annotations

from .inputs import common_params, load_path, time_unit
from .timeline import (COMMIT, COMPUTE_END, COMPUTE_START, EMPTY_COMMIT_PITFALL, ISSUE, LAND, READ_BEFORE_LAND,
                       UNCOVERED_WAIT, UNIT, WAIT, EventLog, Hazard, Stall, Timeline, TileTimes)

API = "cp_async_timeline"
_WHY_STAGES = "the pattern keeps S-1 >= 1 loads ahead of the compute and waits with wait_group(S-2)"
CTA = "cta"


def cp_async_timeline(tiles: int, stages: int, load_latency: float, compute: float, *, issue_cost: float = 0.0,
                      bandwidth: float | None = None, tile_bytes: int | None = None, ctas_per_sm: int = 1,
                      empty_commit: bool = True, unit: str = UNIT) -> Timeline:
    """Model the chapter's cp.async pipeline and return its :class:`Timeline`.

    ``tiles`` T >= 1, ``stages`` S >= 2; ``load_latency``, ``compute`` (per tile) and
    ``issue_cost`` (per load) are durations >= 0 in ``unit`` (ns unless named). ``bandwidth``
    (bytes per unit of time for the whole SM, None for unlimited) is shared by ``ctas_per_sm`` CTAs,
    each load moving ``tile_bytes``. ``empty_commit=False`` is the chapter's pitfall: commit only
    after an issue.

    Hazards: every iteration whose ``wait_group(S-2)`` does not cover tile k's group is one, a
    ``read_before_land`` when tile k is read before it lands, an ``uncovered_wait`` when this run's
    timing let it land in time anyway (``extra["uncovered_waits"]`` lists those iterations).
    """
    params = common_params(API, tiles, stages, load_latency, compute, issue_cost, 2, _WHY_STAGES)
    path = load_path(API, load_latency, bandwidth, tile_bytes, ctas_per_sm)
    unit = time_unit(API, unit)
    params.update(bandwidth=bandwidth, tile_bytes=tile_bytes, ctas_per_sm=ctas_per_sm, empty_commit=bool(empty_commit))
    T, S, C, I = params["tiles"], params["stages"], params["compute"], params["issue_cost"]

    log = EventLog()
    groups: list[list[int]] = []     # committed groups, oldest first: the tiles each holds
    pending: list[int] = []          # issued since the last commit
    issue_t: dict[int, float] = {}
    land_t: dict[int, float] = {}
    t = 0.0

    def issue(tile: int) -> None:
        nonlocal t
        log.add(t, ISSUE, CTA, tile, tile % S, len(groups))
        issue_t[tile] = t
        t += I                                        # the threads' time spent issuing the copies
        land_t[tile] = path.land(t)
        log.add(land_t[tile], LAND, CTA, tile, tile % S, len(groups))
        pending.append(tile)

    def commit() -> None:
        what = f"tiles {pending}" if pending else "empty"
        log.add(t, COMMIT, CTA, group=len(groups), detail=what)
        groups.append(list(pending))
        pending.clear()

    # ---- prologue: tiles 0 .. S-2 in flight, one group each -------------------------------------
    for s in range(S - 1):
        issued = s < T
        if issued:
            issue(s)
        if issued or empty_commit:
            commit()

    # ---- main loop ------------------------------------------------------------------------------
    rows: list[TileTimes] = []
    hazards: list[Hazard] = []
    stalls: list[Stall] = []
    uncovered: list[int] = []                          # iterations whose wait missed tile k's group
    for k in range(T):
        committed = len(groups)
        covered = max(0, committed - (S - 2))          # wait_group(S-2): groups [0, covered) complete
        waited = [x for g in groups[:covered] for x in g]
        ready = max([t] + [land_t[x] for x in waited])
        if ready > t:
            last = max(waited, key=lambda x: land_t[x])
            stalls.append(Stall(t, ready, CTA, k, k % S, detail=f"wait_group({S - 2}) until tile {last} lands"))
        t = ready
        log.add(t, WAIT, CTA, k, k % S, covered - 1,
                f"wait_group({S - 2}) with {committed} groups committed: {_groups(covered)} complete")
        nxt = k + S - 1
        issued = nxt < T
        if issued:
            issue(nxt)                                 # into slot (k-1) % S, freed by the syncthreads
        if issued or empty_commit:
            commit()
        start = t
        home = next(i for i, g in enumerate(groups) if k in g)
        if home >= covered:
            uncovered.append(k)
            hazards.append(_uncovered_wait(k, S, committed, covered, home, start, land_t[k], empty_commit, unit))
        log.add(start, COMPUTE_START, CTA, k, k % S)
        t = start + C
        log.add(t, COMPUTE_END, CTA, k, k % S)
        rows.append(TileTimes(k, k % S, issue_t[k], land_t[k], start, t))

    # ---- exit: wait_all (nothing may be in flight when the CTA exits) ------------------------------
    ready = max([t] + list(land_t.values()))
    if ready > t:
        log.add(ready, WAIT, CTA, detail="wait_all")
        last = max(land_t, key=land_t.get)
        stalls.append(Stall(t, ready, CTA, last, last % S, detail=f"wait_all until tile {last} lands"))
    stall = sum(st.end - st.start for st in stalls)
    # uncovered_waits: the wait did not cover tile k's group, whether or not timing hid it
    return Timeline("cp.async", params, log.sorted(), rows, ready, stall, hazards, {"uncovered_waits": uncovered},
                    stalls=stalls, unit=unit)


def _groups(n: int) -> str:
    """``groups 0..n-1`` in words."""
    return "no group" if n == 0 else "group 0" if n == 1 else f"groups 0..{n - 1}"


def _uncovered_wait(k: int, S: int, committed: int, covered: int, home: int, start: float, land: float,
                    empty_commit: bool, unit: str) -> Hazard:
    """Tile k's ``wait_group(S-2)`` returned with ``covered`` groups complete of ``committed``, but
    tile k is in group ``home``: read before it landed, or (timing hid it) an uncovered wait."""
    missed = (f"wait_group({S - 2}) covered {_groups(covered)} while tile {k} is in group {home}: it needed "
              f"{_groups(home + 1)} complete, i.e. wait_group({committed - home - 1}) with {committed} groups "
              f"committed")
    cause = "" if empty_commit else EMPTY_COMMIT_PITFALL
    if land > start:
        return Hazard(READ_BEFORE_LAND, k, start,
                      f"tile {k} is read at t={start:g} {unit} but lands at t={land:g} {unit}: {missed}", cause)
    return Hazard(UNCOVERED_WAIT, k, start,
                  f"tile {k}'s {missed}; it landed at t={land:g} {unit}, by its read at t={start:g} {unit}, only through "
                  f"this run's timing (a slower load is read before it lands)", cause)


def cp_async_start(k: int, stages: int, load_latency: float, compute: float) -> float:
    """Closed form of when tile ``k``'s compute starts (no issue cost, unlimited bandwidth).

    Tiles 0..S-2 land at L, so they run back to back from L. Later, tile k waits for the load
    issued when tile k-S+1 started, so starts are the larger of the compute chain ``L + k C`` and
    the latency chain, which advances by L every S-1 tiles: ``L (1 + k div (S-1)) + (k mod (S-1)) C``.
    (Proof by induction on k: the two chains are the two arguments of
    ``start_k = max(start_{k-1} + C, start_{k-S+1} + L)``.)
    """
    q, r = divmod(k, stages - 1)
    return max(load_latency + k * compute, load_latency * (1 + q) + r * compute)


def cp_async_closed_form(tiles: int, stages: int, load_latency: float, compute: float) -> float:
    """Closed-form total time of :func:`cp_async_timeline` with no issue cost and unlimited
    bandwidth: ``start_{T-1} + C``. Compute-bound (``(S-1) C >= L``) it is ``L + T C``; otherwise the
    latency sets the pace, one L per S-1 tiles."""
    common_params("cp_async_closed_form", tiles, stages, load_latency, compute, 0.0, 2, _WHY_STAGES)
    return cp_async_start(tiles - 1, stages, load_latency, compute) + compute
