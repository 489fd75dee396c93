"""What a pipeline model returns: every event, per-tile times, stalls, the total and any hazard.

Both models (``cp_async_timeline``, ``mbarrier_ring_timeline``) return a :class:`Timeline`. Times
are nanoseconds (``Timeline.unit``, ``"unit": "ns"`` in the JSON): the command line takes ns, and
the SGEMM calibration is measured in ns. The arithmetic does not depend on it, so a caller that
counts in another unit (compute times, cycles) says so with the models' ``unit=`` and every label
and summary follows. Events are kept in time order, ties in program order, so that a reader can
replay the pipeline line by line; ``to_dict`` is what ``python -m asyncpipe timeline --json`` prints.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field

# Event kinds, in the words of the chapter's pseudo-code.
ISSUE = "issue"                  # a tile's load is issued (cp.async copies, or one TMA instruction)
LAND = "land"                    # the tile's bytes are in shared memory (its group / full barrier completes)
COMMIT = "commit"                # cp.async.commit_group: everything issued since the last commit is one group
WAIT = "wait"                    # a wait returned (wait_group N, or an mbarrier parity wait)
COMPUTE_START = "compute_start"
COMPUTE_END = "compute_end"
RELEASE = "release"              # a consumer arrives on the tile's empty barrier: the slot may be refilled

# Hazard kinds.
READ_BEFORE_LAND = "read_before_land"    # compute read a stage before its load had landed
OVERWRITE_BEFORE_RELEASE = "overwrite_before_release"   # a load refilled a slot still being read
DEADLOCK = "deadlock"                    # a wait can never return
UNCOVERED_WAIT = "uncovered_wait"        # a wait returned without covering the tile read next; the timing
                                         # of this run hid it (the load landed anyway), a slower load would not

UNIT = "ns"                              # the models' time unit unless a caller names another

# Causes: the pitfall behind a hazard, named in the chapter's words.
EMPTY_COMMIT_PITFALL = ("the empty-commit pitfall: the tail issued nothing and committed nothing, so wait_group(S-2) "
                        "counts older groups; commit_group every iteration, even with nothing issued")
FLIPPED_PARITY = ("flipped parity: consumers must wait full[s] with parity (k // S) & 1, the parity of the phase their "
                  "tile completes")
TOO_MANY_CONSUMERS = ("more alternating consumers than slots: a parity names one of two phases, so a consumer's wait "
                      "on a slot two rounds ahead passes on the round before")


@dataclass(frozen=True)
class Event:
    """One thing that happened at ``time``. ``actor`` is who did it (``"cta"`` for the cp.async
    pattern, where every thread runs the same program; ``"producer"`` / ``"consumer 0"``... for the
    mbarrier ring); ``group`` is the cp.async group, or the mbarrier phase for the ring."""

    time: float
    kind: str
    actor: str
    tile: int | None = None
    slot: int | None = None
    group: int | None = None
    detail: str = ""


@dataclass(frozen=True)
class TileTimes:
    """One tile's life: its load's issue and landing, and the compute that read it."""

    tile: int
    slot: int
    issue: float
    land: float
    start: float
    end: float
    consumer: int = 0


@dataclass(frozen=True)
class Hazard:
    """A protocol mistake the model caught, at ``time``, with the reason in words."""

    kind: str
    tile: int
    time: float
    detail: str
    cause: str = ""          # the pitfall behind it (``EMPTY_COMMIT_PITFALL``...), when the model knows it

    def line(self, unit: str = UNIT) -> str:
        """``HAZARD <kind> (tile k, t=... ns): <detail>. Cause: <cause>``: how the CLI prints it."""
        return (f"HAZARD {self.kind} (tile {self.tile}, t={self.time:g} {unit}): {self.detail}"
                + (f". Cause: {self.cause}" if self.cause else ""))


@dataclass(frozen=True)
class Stall:
    """The compute of ``actor`` waiting for data from ``start`` to ``end`` (its wait's return)
    before reading ``tile`` (in ``slot``); ``detail`` says which wait."""

    start: float
    end: float
    actor: str
    tile: int
    slot: int
    consumer: int = 0
    detail: str = ""


@dataclass
class Timeline:
    """The model's answer for one pipeline run (one CTA, or one producer and its consumers).

    ``total_time`` is when the last compute ended (and, for cp.async, the final ``wait_all`` saw
    every load land); ``inf`` when the run deadlocked. ``stall_time`` is how long the compute
    waited for data, summed over consumers; ``stalls`` are those waits one by one (their durations
    sum to ``stall_time``). Times are in ``unit``.
    """

    pattern: str
    params: dict
    events: list[Event]
    tiles: list[TileTimes]
    total_time: float
    stall_time: float
    hazards: list[Hazard] = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    stalls: list[Stall] = field(default_factory=list)
    unit: str = UNIT

    @property
    def ok(self) -> bool:
        """True when the model found no hazard."""
        return not self.hazards

    @property
    def deadlocked(self) -> bool:
        return any(h.kind == DEADLOCK for h in self.hazards)

    def of_kind(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.kind == kind]

    def to_dict(self) -> dict:
        """A JSON-ready dict. Every infinite time (a deadlock's total, a load that never lands) is
        written as ``null``, so that the JSON is strict (no ``Infinity``)."""
        def finite(x):
            if isinstance(x, float) and math.isinf(x):
                return None
            if isinstance(x, dict):
                return {k: finite(v) for k, v in x.items()}
            if isinstance(x, list):
                return [finite(v) for v in x]
            return x

        return finite({
            "pattern": self.pattern,
            "unit": self.unit,
            "params": dict(self.params),
            "total_time": self.total_time,
            "stall_time": self.stall_time,
            "deadlock": self.deadlocked,
            "hazards": [asdict(h) for h in self.hazards],
            "stalls": [asdict(st) for st in self.stalls],
            "tiles": [asdict(t) for t in self.tiles],
            "events": [asdict(e) for e in self.events],
            **self.extra,
        })

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)

    def headline(self) -> str:
        """What was modelled, in one line: the pattern and its inputs with their unit."""
        p, u = self.params, self.unit
        return (f"{self.pattern}: {p['tiles']} tiles, {p['stages']} stages, load latency {p['load_latency']:g} {u}, "
                f"compute {p['compute']:g} {u} per tile")

    def verdict(self) -> str:
        """The total, the stall and every hazard: one ``HAZARD ...`` line each, or ``no hazard``."""
        u = self.unit
        total = "deadlock" if self.deadlocked else f"{self.total_time:g} {u}"
        n = len(self.stalls)
        lines = [f"total {total}, stalled {self.stall_time:g} {u} ({n} {'stall' if n == 1 else 'stalls'})"]
        lines += [h.line(u) for h in self.hazards] or ["no hazard"]
        return "\n".join(lines)

    def summary(self) -> str:
        """The headline, then the verdict: a few lines for a terminal."""
        return self.headline() + "\n" + self.verdict()


class EventLog:
    """Collects events as a model produces them (not in time order: a load's landing is known when
    it is issued) and sorts them stably by time at the end, so ties keep program order."""

    def __init__(self):
        self._events: list[Event] = []

    def add(self, time, kind, actor, tile=None, slot=None, group=None, detail=""):
        self._events.append(Event(float(time), kind, actor, tile, slot, group, detail))

    def sorted(self) -> list[Event]:
        return sorted(self._events, key=lambda e: e.time)
