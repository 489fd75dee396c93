"""The cp.async timeline model: exact against hand-derived closed forms and against an
independent tick-by-tick simulation over many random inputs; the chapter's pitfall; input errors."""

import json
import math

import numpy as np
import pytest

from asyncpipe.errors import AsyncpipeError
from asyncpipe.model.cp_async import cp_async_closed_form, cp_async_start, cp_async_timeline
from asyncpipe.model.timeline import EMPTY_COMMIT_PITFALL
from tests.model import brute_force


def by_kind(tl, kind):
    return {e.tile: e.time for e in tl.events if e.kind == kind and e.tile is not None}


# ---- the three rules of the simplest form, checked on the events themselves ----------------------
@pytest.mark.parametrize("T,S,L,C", [(1, 2, 5, 3), (8, 2, 10, 3), (8, 3, 10, 3), (12, 4, 7, 2), (5, 6, 30, 1),
                                     (9, 3, 0, 4), (9, 3, 4, 0), (3, 5, 2.5, 0.75)])
def test_the_rules_of_the_simplest_form(T, S, L, C):
    tl = cp_async_timeline(T, S, L, C)
    issue, land, start, end = (by_kind(tl, k) for k in ("issue", "land", "compute_start", "compute_end"))
    assert sorted(issue) == list(range(T))
    for k in range(T):
        assert land[k] == issue[k] + L                                       # lands at issue + latency
        assert start[k] == max(end.get(k - 1, 0.0), land[k])                 # after k-1 ended and k landed
        assert end[k] == start[k] + C
        if k + S - 1 < T:
            assert issue[k + S - 1] == start[k]                              # issued when k starts
    assert [issue[s] for s in range(min(S - 1, T))] == [0.0] * min(S - 1, T)   # prologue at t = 0
    assert tl.total_time == end[T - 1] and tl.ok


# ---- closed forms, derived by hand ------------------------------------------------------------------
def test_two_stages_by_hand():
    # S=2: one load ahead. L=10, C=3: each tile waits for the load issued when the previous started,
    # so starts are 10, 20, 30, ... and the total is 10 T + 3.
    tl = cp_async_timeline(5, 2, 10, 3)
    assert [r.start for r in tl.tiles] == [10, 20, 30, 40, 50]
    assert tl.total_time == 53 and tl.stall_time == 53 - 5 * 3


def test_three_stages_by_hand():
    # S=3, L=10, C=2 (latency-bound: (S-1) C = 4 < 10): pairs of tiles every 10.
    tl = cp_async_timeline(6, 3, 10, 2)
    assert [r.start for r in tl.tiles] == [10, 12, 20, 22, 30, 32]
    assert [r.issue for r in tl.tiles] == [0, 0, 10, 12, 20, 22]
    assert tl.total_time == 34


def test_compute_bound_is_one_latency_plus_all_computes():
    # (S-1) C >= L: the loads are hidden after the first; total = L + T C, stall = L.
    for T, S, L, C in [(20, 3, 8, 4), (20, 4, 9, 3), (50, 8, 70, 10)]:
        tl = cp_async_timeline(T, S, L, C)
        assert tl.total_time == L + T * C and tl.stall_time == L


def test_latency_bound_pace_is_one_latency_per_s_minus_1_tiles():
    # (S-1) C < L: tile k starts at L (1 + k div (S-1)) + (k mod (S-1)) C.
    T, S, L, C = 13, 4, 40, 5
    tl = cp_async_timeline(T, S, L, C)
    assert [r.start for r in tl.tiles] == [L * (1 + k // 3) + (k % 3) * C for k in range(T)]
    assert tl.total_time == L * (1 + 12 // 3) + 0 * C + C


def test_closed_form_equals_the_model_everywhere_small():
    for T in range(1, 14):
        for S in range(2, 7):
            for L in (0, 1, 3, 7, 10, 23):
                for C in (0, 1, 2, 5):
                    tl = cp_async_timeline(T, S, L, C)
                    assert tl.total_time == cp_async_closed_form(T, S, L, C), (T, S, L, C)
                    assert [r.start for r in tl.tiles] == [cp_async_start(k, S, L, C) for k in range(T)]


def test_more_stages_never_slower_and_no_gain_past_the_latency():
    T, L, C = 64, 30, 4
    totals = [cp_async_closed_form(T, S, L, C) for S in range(2, 12)]
    assert all(a >= b for a, b in zip(totals, totals[1:]))
    knee = 1 + math.ceil(L / C)                       # the first S with (S-1) C >= L
    assert len(set(totals[knee - 2:])) == 1 and totals[knee - 3] > totals[knee - 2]


# ---- against the brute-force simulation ---------------------------------------------------------------
def compare(T, S, L, C, I=0, x=0, empty_commit=True):
    kw = dict(issue_cost=I, empty_commit=empty_commit)
    if x:
        kw.update(bandwidth=1.0, tile_bytes=x)           # transfer = tile_bytes / bandwidth = x ticks
    tl = cp_async_timeline(T, S, L, C, **kw)
    ref = brute_force.cp_async(T, S, L, C, I, x, empty_commit)
    got = {r.tile: r for r in tl.tiles}
    assert tl.total_time == ref.total, (T, S, L, C, I, x, empty_commit)
    for k in range(T):
        assert (got[k].issue, got[k].land, got[k].start, got[k].end) == (
            ref.issue[k], ref.land[k], ref.start[k], ref.end[k]), (k, T, S, L, C, I, x, empty_commit)
    assert {h.tile for h in tl.hazards if h.kind == "read_before_land"} == ref.early_reads
    assert [h.tile for h in tl.hazards] == tl.extra["uncovered_waits"]     # every uncovered wait is a hazard
    assert tl.stall_time == tl.total_time - T * (C + I)          # the CTA either waits, issues or computes
    # the stalls one by one: the CTA is idle from its last compute (or the prologue's issues) until the
    # wait returns, just before it issues tile k+S-1 and computes tile k; wait_all at the end
    expect, prev = [], min(S - 1, T) * I
    for k in range(T):
        ready = ref.start[k] - (I if k + S - 1 < T else 0)
        if ready > prev:
            expect.append((prev, ready, k))
        prev = ref.end[k]
    if ref.total > prev:
        expect.append((prev, ref.total, max(ref.land, key=ref.land.get)))
    assert [(st.start, st.end, st.tile) for st in tl.stalls] == expect, (T, S, L, C, I, x, empty_commit)
    assert sum(st.end - st.start for st in tl.stalls) == tl.stall_time


def test_matches_brute_force_simplest_form(rng):
    for _ in range(150):
        T, S = int(rng.integers(1, 12)), int(rng.integers(2, 7))
        compare(T, S, int(rng.integers(0, 30)), int(rng.integers(0, 9)))


def test_matches_brute_force_with_issue_cost_and_bandwidth(rng):
    for _ in range(150):
        T, S = int(rng.integers(1, 12)), int(rng.integers(2, 7))
        compare(T, S, int(rng.integers(0, 30)), int(rng.integers(0, 9)), int(rng.integers(0, 4)),
                int(rng.integers(0, 6)))


def test_matches_brute_force_without_the_empty_commit(rng):
    for _ in range(150):
        T, S = int(rng.integers(1, 12)), int(rng.integers(2, 7))
        compare(T, S, int(rng.integers(0, 40)), int(rng.integers(0, 6)), int(rng.integers(0, 3)),
                int(rng.integers(0, 4)), empty_commit=False)


# ---- the chapter's pitfall ---------------------------------------------------------------------------
def test_dropping_the_empty_commit_reads_the_tail_before_it_lands():
    T, S, L, C = 8, 4, 20, 2
    good = cp_async_timeline(T, S, L, C)
    bad = cp_async_timeline(T, S, L, C, empty_commit=False)
    assert good.ok and good.extra["uncovered_waits"] == []
    assert [h.tile for h in bad.hazards] == [6, 7] and all(h.kind == "read_before_land" for h in bad.hazards)
    h = bad.hazards[0]
    assert h.detail == ("tile 6 is read at t=46 ns but lands at t=60 ns: wait_group(2) covered groups 0..5 while "
                        "tile 6 is in group 6: it needed groups 0..6 complete, i.e. wait_group(1) with 8 groups committed")
    assert h.cause == EMPTY_COMMIT_PITFALL and "commit_group every iteration" in h.cause
    assert "i.e. wait_group(0) with 8 groups committed" in bad.hazards[1].detail
    # it is "faster" only because it reads garbage
    assert bad.tiles[6].start < bad.tiles[6].land and bad.total_time <= good.total_time
    assert bad.extra["uncovered_waits"] == [6, 7]


def test_without_the_empty_commit_the_last_s_minus_2_waits_miss_their_group():
    # Committed groups at iteration k: min(T, k + S - 1) (every group holds one tile now), so
    # wait_group(S-2) covers groups 0 .. min(T, k+S-1) - (S-2) - 1, which misses tile k exactly
    # when k >= T - S + 2: the last S-2 tiles (all of them when T <= S-2).
    for T in range(1, 12):
        for S in range(2, 7):
            bad = cp_async_timeline(T, S, 50, 1, empty_commit=False)
            assert bad.extra["uncovered_waits"] == list(range(max(0, T - S + 2), T)), (T, S)
            assert [h.tile for h in bad.hazards] == bad.extra["uncovered_waits"]
            assert all(h.cause == EMPTY_COMMIT_PITFALL for h in bad.hazards)
            if S == 2:
                assert bad.ok                                 # wait_group(0) waits for everything


def test_an_uncovered_wait_that_the_timing_hides_is_a_hazard_still():
    # T=8, S=3, L=20, C=4 without the empty commit: tile 7's wait_group(1) sees 8 groups (0..7, one
    # tile each) and so covers 0..6 only; tile 7 (group 7, issued at 64) lands at 84, the instant
    # tile 6's compute ends, so this run reads it in time. (With S=3 and no issue cost the two always
    # tie: tile 7 is issued one compute after tile 6's load and read one compute after tile 6 starts.)
    bad = cp_async_timeline(8, 3, 20, 4, empty_commit=False)
    assert bad.extra["uncovered_waits"] == [7] and not bad.ok
    [h] = bad.hazards
    assert (h.kind, h.tile, h.time, h.cause) == ("uncovered_wait", 7, 84.0, EMPTY_COMMIT_PITFALL)
    assert h.detail.startswith("tile 7's wait_group(1) covered groups 0..6 while tile 7 is in group 7: it needed "
                               "groups 0..7 complete, i.e. wait_group(0) with 8 groups committed; it landed at t=84 "
                               "ns, by its read at t=84 ns")
    assert bad.tiles[7].land == bad.tiles[7].start == 84
    slower = cp_async_timeline(8, 3, 20, 4, issue_cost=1, empty_commit=False)      # the same wait, exposed
    assert [(h.kind, h.tile) for h in slower.hazards] == [("read_before_land", 7)]
    assert cp_async_timeline(8, 3, 20, 4).ok


def test_stalls_by_hand():
    # S=3, L=20, C=4: tiles 0,1 land at 20; tile 2 (issued at 20) lands at 40, tile 3 (24) at 44...
    tl = cp_async_timeline(8, 3, 20, 4)
    assert [(st.start, st.end, st.tile, st.slot) for st in tl.stalls] == [
        (0, 20, 0, 0), (28, 40, 2, 2), (48, 60, 4, 1), (68, 80, 6, 0)]
    assert tl.stalls[1].detail == "wait_group(1) until tile 2 lands" and tl.stall_time == 56


def test_the_unit_is_ns_unless_named():
    tl = cp_async_timeline(8, 4, 20, 2, empty_commit=False)
    assert tl.unit == "ns" and tl.to_dict()["unit"] == "ns"
    assert tl.summary().splitlines()[:2] == ["cp.async: 8 tiles, 4 stages, load latency 20 ns, compute 2 ns per tile",
                                             "total 62 ns, stalled 46 ns (3 stalls)"]
    assert tl.hazards[0].line().startswith("HAZARD read_before_land (tile 6, t=46 ns): tile 6 is read at t=46 ns")
    cyc = cp_async_timeline(8, 4, 20, 2, empty_commit=False, unit="cycles")
    assert cyc.total_time == tl.total_time and "load latency 20 cycles" in cyc.summary()
    assert "HAZARD read_before_land (tile 6, t=46 cycles): tile 6 is read at t=46 cycles" in cyc.summary()
    assert cp_async_timeline(2, 3, 1, 1).summary().endswith("no hazard")


def test_empty_commits_are_events():
    tl = cp_async_timeline(3, 4, 5, 1)
    commits = [e for e in tl.events if e.kind == "commit"]
    assert [c.detail for c in commits] == ["tiles [0]", "tiles [1]", "tiles [2]", "empty", "empty", "empty"]


# ---- output shape ------------------------------------------------------------------------------------
def test_events_are_in_time_order_and_json_round_trips():
    tl = cp_async_timeline(7, 3, 9.5, 2.25, issue_cost=0.5)
    times = [e.time for e in tl.events]
    assert times == sorted(times)
    d = json.loads(tl.to_json())
    assert d["total_time"] == tl.total_time and len(d["events"]) == len(tl.events)
    assert {e["kind"] for e in d["events"]} == {"issue", "land", "commit", "wait", "compute_start", "compute_end"}
    assert d["params"]["stages"] == 3 and d["hazards"] == [] and d["unit"] == "ns"
    assert [(st["start"], st["end"], st["tile"]) for st in d["stalls"]] == [(st.start, st.end, st.tile)
                                                                            for st in tl.stalls]


def test_fewer_tiles_than_stages():
    tl = cp_async_timeline(2, 6, 10, 3)                 # the prologue issues 2 loads, commits 5 groups
    assert [r.start for r in tl.tiles] == [10, 13] and tl.ok


# ---- bad input -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw,msg", [
    (dict(tiles=0), "cp_async_timeline: tiles must be an integer >= 1 [asyncpipe.model], got 0"),
    (dict(tiles=2.0), "cp_async_timeline: tiles must be an integer >= 1 [asyncpipe.model], got 2.0"),
    (dict(stages=1), "cp_async_timeline: stages must be an integer >= 2 (the pattern keeps S-1 >= 1 loads ahead "
                     "of the compute and waits with wait_group(S-2)) [asyncpipe.model], got 1"),
    (dict(stages=True), "stages must be an integer >= 2"),
    (dict(load_latency=-1), "cp_async_timeline: load_latency must be a finite number >= 0 [asyncpipe.model], got -1"),
    (dict(load_latency=float("nan")), "load_latency must be a finite number >= 0 [asyncpipe.model], got nan"),
    (dict(compute=-0.5), "cp_async_timeline: compute must be a finite number >= 0 [asyncpipe.model], got -0.5"),
    (dict(issue_cost=-1), "cp_async_timeline: issue_cost must be a finite number >= 0 [asyncpipe.model], got -1"),
    (dict(bandwidth=0, tile_bytes=8), "cp_async_timeline: bandwidth must be a finite number > 0 [asyncpipe.model], "
                                      "got 0"),
    (dict(bandwidth=10.0), "cp_async_timeline: tile_bytes is needed with bandwidth (bytes per load) "
                           "[asyncpipe.model], got None"),
    (dict(bandwidth=10.0, tile_bytes=0), "cp_async_timeline: tile_bytes must be an integer >= 1"),
    (dict(ctas_per_sm=0), "cp_async_timeline: ctas_per_sm must be an integer >= 1 [asyncpipe.model], got 0"),
    (dict(unit=""), "cp_async_timeline: unit must be a non-empty string naming the time unit [asyncpipe.model], "
                    "got ''"),
    (dict(unit=1e-9), "cp_async_timeline: unit must be a non-empty string naming the time unit [asyncpipe.model], "
                      "got 1e-09"),
])
def test_bad_input(kw, msg):
    args = dict(tiles=4, stages=3, load_latency=10, compute=2) | kw
    with pytest.raises(AsyncpipeError) as e:
        cp_async_timeline(**args)
    assert msg in str(e.value)


def test_closed_form_checks_its_input_too():
    with pytest.raises(AsyncpipeError, match="cp_async_closed_form: stages must be an integer >= 2"):
        cp_async_closed_form(4, 1, 1, 1)


def test_float_inputs_stay_close_to_the_closed_form():
    r = np.random.default_rng(0)
    for _ in range(50):
        T, S, L, C = int(r.integers(1, 40)), int(r.integers(2, 9)), float(r.uniform(0, 50)), float(r.uniform(0, 9))
        assert cp_async_timeline(T, S, L, C).total_time == pytest.approx(cp_async_closed_form(T, S, L, C))
