"""The mbarrier full/empty ring model: closed form, the independent tick simulation, the PTX
parity rule, its pitfalls, and input errors."""

import pytest

from asyncpipe.errors import AsyncpipeError
from asyncpipe.model.mbarrier_ring import Mbarrier, mbarrier_ring_closed_form, mbarrier_ring_timeline
from asyncpipe.model.timeline import FLIPPED_PARITY, TOO_MANY_CONSUMERS
from tests.model import brute_force


def test_mbarrier_phases_follow_the_ptx_rule():
    # A fresh barrier is in phase 0: parity 1 (the "preceding" phase) passes at once, parity 0
    # waits for phase 0 to complete. Two arrivals complete a phase of a barrier expecting two.
    bar = Mbarrier("empty[0]", 2)
    assert bar.passes(1) and not bar.passes(0)
    assert bar.arrive() is False and bar.phase == 0 and not bar.passes(0)
    assert bar.arrive() is True and bar.phase == 1
    assert bar.passes(0) and not bar.passes(1)                  # phase 1 now: parity 1 waits for its end
    bar.arrive(), bar.arrive()
    assert bar.phase == 2 and bar.passes(1) and not bar.passes(0)


def test_one_consumer_by_hand():
    # S=2, L=10, C=3: tiles 0,1 issued at 0, land 10; tile 2 waits for slot 0, freed when tile 0
    # ends at 13, lands 23; tile 3: slot 1 freed at 16, lands 26.
    tl = mbarrier_ring_timeline(4, 2, 10, 3)
    assert [r.issue for r in tl.tiles] == [0, 0, 13, 16]
    assert [r.land for r in tl.tiles] == [10, 10, 23, 26]
    assert [r.start for r in tl.tiles] == [10, 13, 23, 26]
    assert tl.total_time == 29 and tl.stall_time == 29 - 4 * 3 and tl.ok
    assert tl.extra["producer_stall_time"] == 13 + 3


def test_closed_form_equals_the_model_everywhere_small():
    for T in range(1, 13):
        for S in range(1, 6):
            for L in (0, 2, 5, 11, 24):
                for C in (0, 1, 3, 6):
                    for n in (1, 3):
                        tl = mbarrier_ring_timeline(T, S, L, C, consumers=n)
                        assert tl.total_time == mbarrier_ring_closed_form(T, S, L, C), (T, S, L, C, n)


def test_a_ring_of_s_slots_keeps_s_minus_1_loads_ahead_like_cp_async_with_s_stages_or_better():
    from asyncpipe.model.cp_async import cp_async_closed_form

    for S in range(2, 7):
        for L in (5, 20, 60):
            assert mbarrier_ring_closed_form(40, S, L, 4) <= cp_async_closed_form(40, S, L, 4)


def compare(T, S, L, C, n, schedule, I=0, x=0, flipped=False):
    kw = dict(consumers=n, schedule=schedule, issue_cost=I, consumer_parity="flipped" if flipped else "correct")
    if x:
        kw.update(bandwidth=2.0, tile_bytes=2 * x)
    tl = mbarrier_ring_timeline(T, S, L, C, **kw)
    ref = brute_force.mbarrier_ring(T, S, L, C, n, schedule, I, x, flipped)
    case = (T, S, L, C, n, schedule, I, x, flipped)
    assert tl.deadlocked == (ref.total is None), case
    if tl.deadlocked:
        return tl
    assert tl.total_time == ref.total, case
    for r in tl.tiles:
        assert (r.issue, r.land, r.start, r.end) == (ref.issue[r.tile], ref.land[r.tile],
                                                    ref.consumer_starts[r.consumer][r.tile],
                                                    ref.consumer_starts[r.consumer][r.tile] + C), (r, case)
    assert {h.tile for h in tl.hazards if h.kind == "read_before_land"} == ref.early_reads, case
    # stalls: a consumer only waits and computes, so it stalls from its previous compute's end (or 0)
    # until the start of the next tile it takes, whenever those differ
    expect = []
    for c, starts in enumerate(ref.consumer_starts):
        prev = 0
        for k in sorted(starts):
            if starts[k] > prev:
                expect.append((prev, starts[k], k, c))
            prev = starts[k] + C
    assert sorted((st.start, st.end, st.tile, st.consumer) for st in tl.stalls) == sorted(expect), case
    assert sum(st.end - st.start for st in tl.stalls) == tl.stall_time, case
    return tl


# A broken protocol (wrong parity, or alternating consumers outnumbering the slots) lets a wait
# pass on a phase that another event completes at the same instant; with zero durations which one
# wins is a convention of the simulation, not a property of the protocol. Those cases keep L, C >= 1.
def test_matches_brute_force(rng):
    for _ in range(120):
        T, S, n = int(rng.integers(1, 10)), int(rng.integers(1, 5)), int(rng.integers(1, 4))
        schedule = ("split", "alternate")[int(rng.integers(0, 2))]
        lo = 1 if schedule == "alternate" and n > S else 0
        compare(T, S, int(rng.integers(lo, 25)), int(rng.integers(lo, 8)), n, schedule, int(rng.integers(0, 3)),
                int(rng.integers(0, 4)))


def test_matches_brute_force_with_flipped_parity(rng):
    for _ in range(80):
        T, S, n = int(rng.integers(1, 9)), int(rng.integers(1, 5)), int(rng.integers(1, 3))
        schedule = ("split", "alternate")[int(rng.integers(0, 2))]
        compare(T, S, int(rng.integers(1, 25)), int(rng.integers(1, 8)), n, schedule, int(rng.integers(0, 3)),
                flipped=True)


def test_flipped_consumer_parity_reads_before_landing():
    tl = mbarrier_ring_timeline(6, 3, 10, 2, consumer_parity="flipped")
    assert [h.tile for h in tl.hazards] == list(range(6))
    assert tl.hazards[0].detail == ("consumer 0 reads tile 0 at t=0 ns but it lands at t=10 ns: its wait on full[0] "
                                    "with parity 1 returned with 0 phases of full[0] complete, while tile 0 is phase 0 "
                                    "(round k // S) and needed 1 complete: it should wait with parity 0")
    assert "tile 3 is phase 1 (round k // S) and needed 2 complete: it should wait with parity 1" in tl.hazards[3].detail
    assert all(h.cause == FLIPPED_PARITY for h in tl.hazards)
    assert tl.hazards[0].line().startswith("HAZARD read_before_land (tile 0, t=0 ns): consumer 0 reads tile 0")
    assert tl.hazards[0].line().endswith(". Cause: " + FLIPPED_PARITY)


def test_flipped_consumer_parity_deadlocks_when_data_is_early():
    tl = mbarrier_ring_timeline(6, 3, 1, 5, consumer_parity="flipped")
    assert tl.deadlocked and tl.total_time == float("inf")
    assert tl.to_dict()["total_time"] is None and tl.to_dict()["deadlock"] is True
    dead = [h for h in tl.hazards if h.kind == "deadlock"]
    assert "consumer 0 waits full[1] with parity 1 for tile 1 forever: full[1] is in phase 1" in dead[0].detail
    assert dead[0].cause == FLIPPED_PARITY


def test_json_is_strict_where_a_load_never_lands():
    import json

    def refuse(name):
        raise ValueError(f"not JSON: {name}")

    tl = mbarrier_ring_timeline(8, 2, 20, 4, consumers=3, schedule="alternate")      # deadlocks; tile 5 never lands
    assert tl.deadlocked and any(r.land == float("inf") for r in tl.tiles)
    d = json.loads(tl.to_json(), parse_constant=refuse)
    assert d["total_time"] is None and any(r["land"] is None for r in d["tiles"])


def test_alternating_consumers_need_no_more_consumers_than_slots():
    # consumer c waits tile k with parity (k div S) & 1, which only names the right phase when
    # tile k-S has landed, i.e. when c's previous tile k-n is not older than k-S: n <= S.
    assert mbarrier_ring_timeline(12, 2, 10, 4, consumers=2, schedule="alternate").ok
    bad = compare(12, 2, 10, 4, 3, "alternate")
    assert not bad.ok and bad.hazards[0].tile == 2 and bad.hazards[0].cause == TOO_MANY_CONSUMERS
    assert bad.hazards[0].detail.endswith("its wait on full[0] with parity 1 returned with 0 phases of full[0] "
                                          "complete, while tile 2 is phase 1 (round k // S) and needed 2 complete: "
                                          "parity 1 passes in phase 0 as in phase 2, two phases apart look alike")


def test_stalls_by_hand_and_the_unit():
    # test_one_consumer_by_hand's run: the consumer waits 0..10 for tile 0, 16..23 for tile 2, 26 is on time
    tl = mbarrier_ring_timeline(4, 2, 10, 3)
    assert [(st.start, st.end, st.tile, st.detail) for st in tl.stalls] == [
        (0, 10, 0, "full[0] parity 0"), (16, 23, 2, "full[0] parity 1")]
    assert tl.unit == "ns" and tl.to_dict()["unit"] == "ns" and "total 29 ns, stalled 17 ns (2 stalls)" in tl.summary()
    assert "load latency 10 us" in mbarrier_ring_timeline(4, 2, 10, 3, unit="us").summary()


def test_split_consumers_all_take_every_tile():
    tl = mbarrier_ring_timeline(5, 2, 10, 3, consumers=3)
    assert len(tl.tiles) == 15 and {r.consumer for r in tl.tiles} == {0, 1, 2}
    assert tl.stall_time == 3 * tl.extra["consumer_stall_times"][0]


@pytest.mark.parametrize("kw,msg", [
    (dict(stages=0), "mbarrier_ring_timeline: stages must be an integer >= 1 (one slot at least) [asyncpipe.model], "
                     "got 0"),
    (dict(tiles=-3), "mbarrier_ring_timeline: tiles must be an integer >= 1 [asyncpipe.model], got -3"),
    (dict(consumers=0), "mbarrier_ring_timeline: consumers must be an integer >= 1 [asyncpipe.model], got 0"),
    (dict(schedule="pingpong"), "mbarrier_ring_timeline: schedule must be one of ('split', 'alternate'), "
                                "got 'pingpong'"),
    (dict(consumer_parity="wrong"), "mbarrier_ring_timeline: consumer_parity must be one of ('correct', 'flipped'), "
                                    "got 'wrong'"),
    (dict(load_latency=float("inf")), "mbarrier_ring_timeline: load_latency must be a finite number >= 0"),
    (dict(unit=" "), "mbarrier_ring_timeline: unit must be a non-empty string naming the time unit [asyncpipe.model], "
                     "got ' '"),
])
def test_bad_input(kw, msg):
    with pytest.raises(AsyncpipeError) as e:
        mbarrier_ring_timeline(**(dict(tiles=4, stages=2, load_latency=10, compute=2) | kw))
    assert msg in str(e.value)
