"""asyncpipe.model.pingpong: the consumers of the attention kernel on one SM's tensor cores."""

import pytest

from asyncpipe.model.pingpong import pingpong_timeline


@pytest.mark.parametrize("pingpong", [True, False])
@pytest.mark.parametrize("overlap", [True, False])
@pytest.mark.parametrize("softmax", [0.0, 0.7, 1.0, 2.5])
def test_every_gemm_and_softmax_runs_once_and_in_order(pingpong, overlap, softmax):
    rounds = 6
    tl = pingpong_timeline(rounds, softmax, pv=1.0, pingpong=pingpong, overlap=overlap)
    for w in (0, 1):
        for kind in ("S", "PV", "softmax"):
            got = sorted(s.round for s in tl.spans if s.warpgroup == w and s.kind == kind)
            assert got == list(range(rounds)), (w, kind, got)
        spans = {(s.kind, s.round): s for s in tl.spans if s.warpgroup == w}
        for j in range(rounds):
            assert spans["softmax", j].start >= spans["S", j].end - 1e-9     # softmax needs its S
            if j + 1 < rounds:                                              # P_j comes from softmax j
                assert spans["PV", j].start >= spans["softmax", j].end - 1e-9
                assert spans["S", j + 1].start >= spans["softmax", j].end - 1e-9
    # the tensor cores do 2 x rounds x (1 + pv) units of work, at most one unit per unit of time
    assert tl.total_time >= 2 * rounds * 2 - 1e-9
    assert tl.busy() <= tl.total_time + 1e-9
    if pingpong:                                     # one GEMM at a time: the busy time is the work itself
        assert abs(tl.busy() - 2 * rounds * 2) < 1e-6


def test_pingpong_keeps_the_tensor_cores_busy_while_the_softmax_is_shorter_than_a_gemm():
    """FA3's argument: one warpgroup's softmax hides behind the other's GEMMs."""
    tl = pingpong_timeline(16, 1.0, pingpong=True)
    assert tl.tensor_utilization > 0.97
    shared = pingpong_timeline(16, 1.0, pingpong=False, overlap=False)
    assert shared.tensor_utilization < 0.85
    assert shared.total_time > 1.2 * tl.total_time


def test_each_overlap_is_worth_something_on_its_own():
    both = pingpong_timeline(16, 1.5).total_time
    assert pingpong_timeline(16, 1.5, pingpong=False).total_time > both
    assert pingpong_timeline(16, 1.5, overlap=False).total_time > both
    assert pingpong_timeline(16, 1.5, pingpong=False, overlap=False).total_time > both


@pytest.mark.parametrize("args", [dict(rounds=0, softmax=1.0), dict(rounds=2, softmax=-1.0),
                                  dict(rounds=2, softmax=1.0, pv=0)])
def test_bad_input_is_named(args):
    with pytest.raises(ValueError, match=r"rounds >= 1, softmax >= 0, pv > 0, warpgroups >= 1: got rounds="):
        pingpong_timeline(**args)


def test_the_plot_has_a_lane_per_warpgroup_and_unit():
    pytest.importorskip("matplotlib")
    from asyncpipe.model.pingpong import plot_pingpong

    ax = plot_pingpong(pingpong_timeline(3, 1.0))
    assert [t.get_text() for t in ax.get_yticklabels()] == ["consumer 0 GEMMs", "consumer 0 softmax",
                                                            "consumer 1 GEMMs", "consumer 1 softmax"]
    assert len(ax.collections) == 2 * 3 * 3      # S, PV, softmax of 3 rounds, 2 warpgroups
