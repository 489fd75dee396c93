"""The mbarrier full/empty ring model: closed form, the independent tick simulation, the PTX
parity rule, its pitfalls, and input errors."""

import pytest

from asyncpipe.errors import AsyncpipeError
from asyncpipe.model.mbarrier_ring import Mbarrier, mbarrier_ring_closed_form, mbarrier_ring_timeline
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
    assert {h.tile for h in tl.hazards} == ref.early_reads, case
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
    assert "consumer 0 reads tile 0 at t=0 but it lands at t=10" in tl.hazards[0].detail


def test_flipped_consumer_parity_deadlocks_when_data_is_early():
    tl = mbarrier_ring_timeline(6, 3, 1, 5, consumer_parity="flipped")
    assert tl.deadlocked and tl.total_time == float("inf")
    assert tl.to_dict()["total_time"] is None and tl.to_dict()["deadlock"] is True
    dead = [h for h in tl.hazards if h.kind == "deadlock"]
    assert "consumer 0 waits full[1] with parity 1 for tile 1 forever: full[1] is in phase 1" in dead[0].detail


def test_alternating_consumers_need_no_more_consumers_than_slots():
    # consumer c waits tile k with parity (k div S) & 1, which only names the right phase when
    # tile k-S has landed, i.e. when c's previous tile k-n is not older than k-S: n <= S.
    assert mbarrier_ring_timeline(12, 2, 10, 4, consumers=2, schedule="alternate").ok
    bad = compare(12, 2, 10, 4, 3, "alternate")
    assert not bad.ok and bad.hazards[0].tile == 2


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
])
def test_bad_input(kw, msg):
    with pytest.raises(AsyncpipeError) as e:
        mbarrier_ring_timeline(**(dict(tiles=4, stages=2, load_latency=10, compute=2) | kw))
    assert msg in str(e.value)
