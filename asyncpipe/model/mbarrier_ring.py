"""The timeline of an mbarrier full/empty ring: one TMA producer, one or more consumers.

The protocol being modelled (S slots; ``full[s]`` and ``empty[s]`` are mbarriers; tile k uses slot
``s = k % S`` in its ``p = k // S``-th round)::

    producer (one thread):  for k:  wait empty[s] with parity (p & 1) ^ 1   # slot free
                                    arrive.expect_tx full[s]; TMA load tile k -> slot s
    consumer c:             for each tile k it takes:
                                    wait full[s] with parity p & 1          # tile k landed
                                    compute; arrive on empty[s]             # release the slot

The actors run at once, so this model is a small event-driven simulation rather than a recurrence:
time jumps from one event to the next (a load lands, an issue or a compute ends), and at each
instant the events land first (bytes arriving, computes ending and their arrivals on the empty
barriers), then every actor runs its program as far as it can. Waits follow the PTX rule instead of
assuming the protocol works: a barrier that has completed n phases is in phase n, and
``mbarrier.try_wait.parity q`` passes when ``n % 2 != q`` (a fresh barrier lets parity 1 through at
once: that is why the producer's first round passes its empty waits). ``full[s]`` completes a phase
when its tile's bytes have landed; ``empty[s]`` when every consumer that took the tile has arrived.
So the model finds the ring's mistakes by itself: the flipped consumer parity
(``consumer_parity="flipped"``) reads slots before they land or deadlocks, and alternating
consumers with more consumers than slots wait on the wrong phase.

Schedules: ``"split"``: every consumer takes every tile (each its share of it, as cooperative
warpgroups do; ``empty[s]`` then expects all consumers); ``"alternate"``: consumer ``k % n`` takes
tile k (ping-pong). ``compute`` is one consumer's time on one tile it takes.
"""

from __future__ import annotations

import heapq
import itertools

from ..errors import check
from .inputs import common_params, count, load_path, time_unit
from .timeline import (COMPUTE_END, COMPUTE_START, DEADLOCK, FLIPPED_PARITY, ISSUE, LAND, OVERWRITE_BEFORE_RELEASE,
                       READ_BEFORE_LAND, RELEASE, TOO_MANY_CONSUMERS, UNIT, WAIT, EventLog, Hazard, Stall, Timeline,
                       TileTimes)

API = "mbarrier_ring_timeline"
SCHEDULES = ("split", "alternate")
PARITIES = ("correct", "flipped")
PRODUCER = "producer"


class Mbarrier:
    """Phase counting as PTX defines it: ``expected`` arrivals complete a phase; a parity wait
    passes when the current phase's parity differs from the one asked for."""

    def __init__(self, name: str, expected: int):
        self.name, self.expected = name, expected
        self.phase = 0                   # phases completed so far = the current phase's index
        self.pending = expected

    def arrive(self) -> bool:
        """One arrival (or, for a full barrier, the transaction bytes); True if a phase completed."""
        self.pending -= 1
        if self.pending == 0:
            self.phase += 1
            self.pending = self.expected
            return True
        return False

    def passes(self, parity: int) -> bool:
        return self.phase % 2 != parity


class _Actor:
    def __init__(self, name: str, program: list):
        self.name, self.program = name, program
        self.pc = 0
        self.free_at = 0.0               # busy (issuing, computing) until then
        self.waiting_since: float | None = None
        self.stall = 0.0

    @property
    def done(self) -> bool:
        return self.pc == len(self.program)


def mbarrier_ring_timeline(tiles: int, stages: int, load_latency: float, compute: float, *, consumers: int = 1,
                           schedule: str = "split", issue_cost: float = 0.0, bandwidth: float | None = None,
                           tile_bytes: int | None = None, ctas_per_sm: int = 1,
                           consumer_parity: str = "correct", unit: str = UNIT) -> Timeline:
    """Model the TMA + mbarrier ring and return its :class:`Timeline`.

    ``stages`` S >= 1 slots; ``consumers`` >= 1 taking tiles by ``schedule``; ``issue_cost`` is the
    producer's time per TMA issue; memory inputs and ``unit`` as in ``cp_async_timeline``.
    ``consumer_parity="flipped"`` is the classic mistake of waiting ``full[s]`` with parity
    ``(p & 1) ^ 1``. A deadlock ends the run with ``total_time`` infinite and a hazard per stuck actor.
    A consumer's wait that returns before its tile's phase of ``full[s]`` completed (the parity
    named another phase) is a ``read_before_land`` hazard saying which phase it returned in and
    which it needed.
    """
    params = common_params(API, tiles, stages, load_latency, compute, issue_cost, 1, "one slot at least")
    n = count(API, "consumers", consumers, 1)
    check(schedule in SCHEDULES, API, f"schedule must be one of {SCHEDULES}", repr(schedule))
    check(consumer_parity in PARITIES, API, f"consumer_parity must be one of {PARITIES}", repr(consumer_parity))
    path = load_path(API, load_latency, bandwidth, tile_bytes, ctas_per_sm)
    unit = time_unit(API, unit)
    params.update(consumers=n, schedule=schedule, bandwidth=bandwidth, tile_bytes=tile_bytes,
                  ctas_per_sm=ctas_per_sm, consumer_parity=consumer_parity)
    T, S, C, I = params["tiles"], params["stages"], params["compute"], params["issue_cost"]
    flip = 1 if consumer_parity == "flipped" else 0

    full = [Mbarrier(f"full[{s}]", 1) for s in range(S)]
    empty = [Mbarrier(f"empty[{s}]", n if schedule == "split" else 1) for s in range(S)]
    producer = _Actor(PRODUCER, [op for k in range(T) for op in
                                 (("wait", empty[k % S], ((k // S) & 1) ^ 1, k), ("issue", None, None, k))])
    takers = [[k for k in range(T) if schedule == "split" or k % n == c] for c in range(n)]
    cons = [_Actor(f"consumer {c}", [op for k in takers[c] for op in
                                     (("wait", full[k % S], ((k // S) & 1) ^ flip, k), ("compute", None, None, k))])
            for c in range(n)]
    actors = [producer] + cons

    log = EventLog()
    queue: list = []                     # (time, seq, what, tile): departures, lands and compute ends to come
    seq = itertools.count()
    issue_t: dict[int, float] = {}
    land_t: dict[int, float] = {}
    starts: dict[tuple[int, int], float] = {}       # (tile, consumer) -> compute start
    passed: dict[tuple[int, int], int] = {}          # (tile, consumer) -> phases full[s] had completed at its wait
    stalls: list[Stall] = []
    t = 0.0

    def step(a: _Actor) -> bool:
        """Run ``a`` at time t as far as it can go; True if it did anything."""
        moved = False
        while not a.done and a.free_at <= t:
            op, bar, parity, k = a.program[a.pc]
            s = k % S
            if op == "wait":
                if not bar.passes(parity):
                    if a.waiting_since is None:
                        a.waiting_since = t
                    return moved
                since = t if a.waiting_since is None else a.waiting_since
                a.stall += t - since
                a.waiting_since = None
                log.add(t, WAIT, a.name, k, s, k // S, f"{bar.name} parity {parity}, {bar.phase} phases complete")
                if a is not producer:
                    passed[(k, cons.index(a))] = bar.phase
                    if t > since:
                        stalls.append(Stall(since, t, a.name, k, s, cons.index(a), f"{bar.name} parity {parity}"))
            elif op == "issue":
                issue_t[k] = t
                log.add(t, ISSUE, a.name, k, s, k // S)
                a.free_at = t + I
                heapq.heappush(queue, (t + I, next(seq), "depart", k))
            else:                                             # compute, then arrive on empty[s]
                starts[(k, cons.index(a))] = t
                log.add(t, COMPUTE_START, a.name, k, s)
                a.free_at = float("inf")                      # until its compute-end event, below
                heapq.heappush(queue, (t + C, next(seq), "release", (k, a)))
            a.pc += 1
            moved = True
        return moved

    while True:
        progress = True
        while progress:
            progress = False
            while queue and queue[0][0] <= t:
                _, _, what, k = heapq.heappop(queue)
                if what == "depart":                          # the TMA is on its way
                    land_t[k] = path.land(t)
                    heapq.heappush(queue, (land_t[k], next(seq), "land", k))
                elif what == "land":                          # the bytes are in: full[s] completes
                    full[k % S].arrive()
                    log.add(t, LAND, PRODUCER, k, k % S, k // S, f"full[{k % S}] completes phase {k // S}")
                else:                                         # a compute ended: arrive on empty[s]
                    k, a = k
                    a.free_at = t
                    empty[k % S].arrive()
                    log.add(t, COMPUTE_END, a.name, k, k % S)
                    log.add(t, RELEASE, a.name, k, k % S, k // S, f"arrive on empty[{k % S}]")
                progress = True
            for a in actors:
                progress |= step(a)
        if not queue:
            break
        t = queue[0][0]

    hazards: list[Hazard] = []
    u = unit
    cause = FLIPPED_PARITY if flip else TOO_MANY_CONSUMERS if schedule == "alternate" and n > S else ""
    stuck = [a for a in actors if not a.done]
    for a in stuck:
        op, bar, parity, k = a.program[a.pc]
        hazards.append(Hazard(DEADLOCK, k, a.waiting_since if a.waiting_since is not None else t,
                              f"{a.name} waits {bar.name} with parity {parity} for tile {k} forever: "
                              f"{bar.name} is in phase {bar.phase} and nothing can complete it", cause))
    rows = []
    for (k, c), start in sorted(starts.items()):
        land = land_t.get(k, float("inf"))
        rows.append(TileTimes(k, k % S, issue_t.get(k, float("inf")), land, start, start + C, c))
        if land > start:
            p, q, got = k // S, ((k // S) & 1) ^ flip, passed[(k, c)]
            lands = "never lands" if land == float("inf") else f"lands at t={land:g} {u}"
            fix = (f"it should wait with parity {p & 1}" if q != p & 1 else
                   f"parity {q} passes in phase {got} as in phase {p + 1}, two phases apart look alike")
            hazards.append(Hazard(READ_BEFORE_LAND, k, start,
                                  f"consumer {c} reads tile {k} at t={start:g} {u} but it {lands}: its wait on "
                                  f"full[{k % S}] with parity {q} returned with {got} phases of full[{k % S}] "
                                  f"complete, while tile {k} is phase {p} (round k // S) and needed {p + 1} "
                                  f"complete: {fix}", cause))
    for k, t_issue in issue_t.items():
        if k >= S:
            prev = [start + C for (kk, _), start in starts.items() if kk == k - S]
            if prev and t_issue < max(prev):
                hazards.append(Hazard(OVERWRITE_BEFORE_RELEASE, k, t_issue,
                                      f"tile {k} refills slot {k % S} at t={t_issue:g} {u} while tile {k - S} is read "
                                      f"until t={max(prev):g} {u}", cause))
    hazards.sort(key=lambda h: (h.time, h.tile))
    total = float("inf") if stuck else t
    extra = {"producer_stall_time": producer.stall, "consumer_stall_times": [a.stall for a in cons]}
    stalls.sort(key=lambda st: (st.start, st.consumer))
    return Timeline("mbarrier ring", params, log.sorted(), rows, total, sum(a.stall for a in cons), hazards, extra,
                    stalls=stalls, unit=unit)


def mbarrier_ring_closed_form(tiles: int, stages: int, load_latency: float, compute: float) -> float:
    """Closed-form total of :func:`mbarrier_ring_timeline` with the ``"split"`` schedule (any
    number of consumers), no issue cost and unlimited bandwidth.

    Tile k starts at ``max(start_{k-1} + C, start_{k-S} + C + L)`` (its slot frees when tile k-S's
    compute ends, then the load takes L), from ``L + k C`` for k < S. The longest path through that
    recurrence takes a jumps of S tiles and is linear in a, so it is one of its two ends:
    ``start_k = max(L + k C, L (1 + q) + (k - q (S-1)) C)`` with ``q = k div S``.
    """
    common_params("mbarrier_ring_closed_form", tiles, stages, load_latency, compute, 0.0, 1, "one slot at least")
    k = tiles - 1
    q = k // stages
    return max(load_latency + k * compute, load_latency * (1 + q) + (k - q * (stages - 1)) * compute) + compute
