"""Independent references for the timeline models: tick-by-tick simulations of the programs.

Nothing here is shared with ``asyncpipe.model``. Time advances one integer tick at a time; at each
tick the memory system, the barriers and every actor are stepped until nothing more can happen at
that tick. Instructions are interpreted as the hardware defines them (a cp.async group is complete
when all its copies landed; ``wait_group N`` passes when every group but the N newest is complete; an mbarrier
parity wait passes when the barrier's current phase parity differs from the one asked for). Integer
inputs only, so every time is exact.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class Memory:
    """Loads arrive ``latency`` ticks after departing, then queue for one transfer engine that
    takes ``transfer`` ticks per load, first come first served."""

    def __init__(self, latency: int, transfer: int):
        self.latency, self.transfer = latency, transfer
        self.inflight: list[tuple[int, int]] = []      # (arrival tick, load id), in departure order
        self.queue: list[int] = []
        self.engine_free = 0
        self.current: tuple[int, int] | None = None    # (done tick, load id)
        self.landed: dict[int, int] = {}               # load id -> tick

    def depart(self, load: int, tick: int) -> None:
        self.inflight.append((tick + self.latency, load))

    def step(self, t: int) -> bool:
        moved = False
        while self.inflight and self.inflight[0][0] <= t:
            self.queue.append(self.inflight.pop(0)[1])
            moved = True
        while True:
            if self.current and self.current[0] <= t:
                self.landed[self.current[1]] = self.current[0]
                self.current = None
                moved = True
            if self.current is None and self.queue:
                self.current = (t + self.transfer, self.queue.pop(0))
                moved = True
                continue
            break
        return moved


@dataclass
class Result:
    total: int | None                       # None: deadlock
    issue: dict = field(default_factory=dict)
    land: dict = field(default_factory=dict)
    start: dict = field(default_factory=dict)
    end: dict = field(default_factory=dict)

    @property
    def early_reads(self) -> set:
        """Tiles whose compute started before they landed (or that never landed)."""
        return {k for k, s in self.start.items() if k not in self.land or s < self.land[k]}


def cp_async(T, S, L, C, I=0, transfer=0, empty_commit=True) -> Result:
    prog = []
    for s in range(S - 1):
        if s < T:
            prog.append(("issue", s))
        if s < T or empty_commit:
            prog.append(("commit", None))
    for k in range(T):
        prog.append(("wait", S - 2))
        if k + S - 1 < T:
            prog.append(("issue", k + S - 1))
        if k + S - 1 < T or empty_commit:
            prog.append(("commit", None))
        prog.append(("compute", k))
    prog.append(("wait", 0))
    mem = Memory(L, transfer)
    res = Result(None)
    groups, open_group = [], []
    pc, busy, t = 0, 0, 0
    departing: list[tuple[int, int]] = []      # (tick, tile): a load leaves when its issue is done
    while True:
        progress = True
        while progress:
            progress = False
            for when, tile in [d for d in departing if d[0] <= t]:
                mem.depart(tile, when)
                departing.remove((when, tile))
                progress = True
            progress |= mem.step(t)
            if pc == len(prog) or busy > t:
                continue
            op, arg = prog[pc]
            if op == "issue":
                res.issue[arg] = t
                busy = t + I
                departing.append((t + I, arg))
                open_group.append(arg)
            elif op == "commit":
                groups.append(open_group)
                open_group = []
            elif op == "wait":
                older = groups[:max(0, len(groups) - arg)]     # all but the newest N must be complete
                if any(x not in mem.landed for g in older for x in g):
                    continue
            elif op == "compute":
                res.start[arg] = t
                busy = t + C
                res.end[arg] = t + C
            pc += 1
            progress = True
        if pc == len(prog) and busy <= t:
            res.total = t
            res.land = dict(mem.landed)
            return res
        t += 1


def mbarrier_ring(T, S, L, C, consumers=1, schedule="split", I=0, transfer=0, flipped=False) -> Result:
    n = consumers
    takes = [[k for k in range(T) if schedule == "split" or k % n == c] for c in range(n)]
    per_tile = n if schedule == "split" else 1
    full_phase = [0] * S             # completed phases
    empty_phase = [0] * S
    empty_count = [0] * S
    mem = Memory(L, transfer)
    res = Result(None)
    starts = [{} for _ in range(n)]
    prod_k, prod_busy = 0, 0
    departing: list[tuple[int, int]] = []
    seen_landed: set = set()
    cons_i = [0] * n
    cons_busy = [0] * n
    cons_computing: list[int | None] = [None] * n
    limit = 50 + 4 * (T + S) * (L + C + I + transfer + 1)
    t = 0
    while t <= limit:
        progress = True
        while progress:
            progress = False
            for when, tile in [d for d in departing if d[0] <= t]:
                mem.depart(tile, when)
                departing.remove((when, tile))
                progress = True
            progress |= mem.step(t)
            for tile in sorted(set(mem.landed) - seen_landed):          # tx bytes in: full phase completes
                seen_landed.add(tile)
                full_phase[tile % S] += 1
                progress = True
            for c in range(n):                                          # compute done: arrive on empty
                k = cons_computing[c]
                if k is not None and cons_busy[c] <= t:
                    cons_computing[c] = None
                    s = k % S
                    empty_count[s] += 1
                    if empty_count[s] == per_tile:
                        empty_count[s] = 0
                        empty_phase[s] += 1
                    progress = True
            if prod_k < T and prod_busy <= t:                           # producer
                k = prod_k
                s, p = k % S, k // S
                if empty_phase[s] % 2 != (p & 1) ^ 1:
                    res.issue[k] = t
                    prod_busy = t + I
                    departing.append((t + I, k))
                    prod_k += 1
                    progress = True
            for c in range(n):                                          # consumers
                if cons_computing[c] is not None or cons_i[c] == len(takes[c]) or cons_busy[c] > t:
                    continue
                k = takes[c][cons_i[c]]
                s, p = k % S, k // S
                q = (p & 1) ^ (1 if flipped else 0)
                if full_phase[s] % 2 != q:
                    starts[c][k] = t
                    res.start[k] = min(res.start.get(k, t), t)
                    cons_busy[c] = t + C
                    res.end[k] = max(res.end.get(k, 0), t + C)
                    cons_computing[c] = k
                    cons_i[c] += 1
                    progress = True
        done = prod_k == T and all(cons_i[c] == len(takes[c]) and cons_computing[c] is None for c in range(n))
        if done and not departing and not mem.inflight and not mem.queue and mem.current is None:
            res.total = t
            break
        t += 1
    res.land = dict(mem.landed)
    res.consumer_starts = starts
    return res
