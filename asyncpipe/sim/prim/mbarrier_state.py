"""The mbarrier: expected arrivals, pending arrivals, transaction count and phase, as PTX defines them,
with the checks that catch protocol mistakes.

A barrier lives in the simulator's table, keyed by (CTA rank, shared offset); its 8 bytes in shared
memory are marked so that generic loads and stores to a live barrier are reported. A phase completes
when the pending count and the tx-count are both zero; it then releases to its waiters what the
arriving threads (``release_into``) and the copies that completed on it (the barrier's async-proxy
clock column) made visible.
"""

from __future__ import annotations

import numpy as np

from ..arrays import SHARED, Ptr
from ..errors import MbarrierInitError, MbarrierParityError, MbarrierPhaseError, SimUsageError, TxCountError
from ..where import describe_site, describe_thread, here, site
from .common import acquire, clock, fenced, release_into, zeros

COUNT_MAX = (1 << 20) - 1        # mbarrier.init: count in 1 .. 2**20 - 1
TX_MAX = (1 << 20) - 1           # tx-count range: -(2**20 - 1) .. 2**20 - 1
_SRC = "PTX ISA, mbarrier"
_PARITY_RULE = ("a parity wait waits for the barrier's current phase when that phase has its parity, and returns at "
                "once otherwise (the phase before counts as complete): which of the two happens must not depend on "
                "timing (wrong parity?)")


class Mbarrier:
    def __init__(self, sim, cta, off):
        self.sim, self.cta, self.off = sim, cta, off
        self.key = (cta.rank, off)
        self.valid = False
        self.count = self.pending = self.tx = self.phase = 0
        self.expected = self.delivered = 0
        self.acc = None
        self.done_vc = None
        self.queue: list = []
        self.inflight: list = []          # (op, phase issued in) of copies that complete on it
        self.init_by = None
        self.init_clk = 0
        self.init_site = None
        self.users: dict = {}             # thread vci -> clock of its last use
        self.column = None                # async-proxy clock column of copies completing here
        self.column_phase = 0             # the phase the column was made in: completions from it on are stamped
        self.completer = None             # vci of the thread whose arrival completed the last phase
        self.announced: list = []         # (thread, site, bytes, api) of this phase's expect_tx
        self.prev_announced: list = []    # ... and of the phase before it
        self.last_load = None             # (op, phase it landed in) of the last TMA/bulk load completing here

    def name(self) -> str:
        return f"mbarrier at shared {self.off:#x} of block {tuple(self.cta.blockIdx)}"

    def state(self) -> str:
        return (f"phase {self.phase} (parity {self.phase & 1}): {self.pending} of {self.count} arrivals pending, "
                f"tx-count {self.tx} bytes ({self.expected} expected, {self.delivered} delivered), "
                f"{len(self.inflight)} cop{'y' if len(self.inflight) == 1 else 'ies'} in flight")

    def announced_text(self) -> str:
        """The expect_tx statements of this phase, with the bytes each announced."""
        ann, when = self.announced, ""
        if not ann and self.prev_announced:
            ann, when = self.prev_announced, f" (in phase {self.phase - 1}, the one before)"
        if not ann:
            return "; no expect_tx announced bytes in this phase"
        parts = [f"{api}({n} bytes) by {describe_thread(t)} at {describe_site(s)}" for t, s, n, api in ann[:3]]
        more = f" and {len(ann) - 3} more" if len(ann) > 3 else ""
        return f"; announced{when} by {', '.join(parts)}{more}"

    def report_generic_access(self, th, s):
        raise MbarrierInitError("shared memory", "the 8 bytes of a live mbarrier are accessed only through "
                                "mbarrier instructions (mbarrier_inval it to reuse them as data)", self.name(),
                                _SRC, where=here(th, s), seed=th.sim.seed)

    # ---- the async proxy's clock column -------------------------------------------------------
    def async_column(self):
        sim = self.sim
        if self.column is None and sim.clocks_on and len(sim.pseudo) < sim.n_pseudo:
            self.column = sim.n_threads + len(sim.pseudo)
            self.column_phase = self.phase
            sim.pseudo[self.key] = self.column
        return self.column

    # ---- phase completion ---------------------------------------------------------------------
    def try_complete(self, th=None):
        if self.pending == 0 and self.tx == 0:
            self._complete(th)

    def _complete(self, th):
        sim = self.sim
        ph = self.phase
        early = [op for op, p in self.inflight if p == ph]
        if early and sim.check_txcount:
            op = early[0]
            raise TxCountError(
                "mbarrier", "a phase must not complete while copies that complete on it are still in flight "
                "(expect_tx announced fewer bytes than the copies deliver)",
                f"{self.name()} completed phase {ph} with {sum(o.bytes_for(self) for o in early)} bytes of "
                f"{len(early)} cop{'y' if len(early) == 1 else 'ies'} still in flight ({self.expected} bytes "
                f"expected, {self.delivered} delivered); the first was issued by {describe_thread(op.thread)} "
                f"at {describe_site(op.site)}{self.announced_text()}", _SRC, where=here(th) if th is not None else "", seed=sim.seed)
        done = self.acc
        if self.column is not None:
            done[self.column] = max(done[self.column], ph + 1)
        self.done_vc = done
        self.acc = np.zeros_like(done) if done is not None else None
        self.phase += 1
        self.completer = th.vci if th is not None else None
        self.pending = self.count
        self.tx = 0
        self.expected = self.delivered = 0
        self.prev_announced, self.announced = self.announced, []
        sim.sched.wake_all(self.queue)

    def change_tx(self, th, delta: int, api: str):
        self.tx += delta
        if delta > 0:
            self.expected += delta
            if th is not None and self.sim.check_txcount:
                self.announced.append((th, site(), delta, api))
        else:
            self.delivered -= delta
        if abs(self.tx) > TX_MAX and self.sim.check_txcount:
            raise TxCountError(api, f"the tx-count must stay within +-{TX_MAX} bytes", f"{self.tx} on {self.name()}",
                               _SRC, where=here(th) if th is not None else "", seed=self.sim.seed)


def _lookup(th, p, api) -> Mbarrier:
    if not isinstance(p, Ptr) or p.space != SHARED:
        got = p.space if isinstance(p, Ptr) else type(p).__name__
        raise SimUsageError(api, "the barrier operand must be addr() of a shared np.uint64 array element", got,
                            _SRC, where=here(th), seed=th.sim.seed)
    if p.off % 8:
        raise SimUsageError(api, "an mbarrier must be 8-byte aligned", f"shared offset {p.off:#x}", _SRC,
                            where=here(th), seed=th.sim.seed)
    return th.sim.mbarriers.get((p.mem.cta.rank, p.off))


def use(th, p, api: str, *, remote: bool = False) -> Mbarrier:
    """The live barrier at ``p``, checked to be initialised and its init visible to ``th``."""
    bar = _lookup(th, p, api)
    sim = th.sim
    if bar is None or not bar.valid:
        if bar is None and not sim.check_mbarrier:     # unchecked: an implicit barrier of count 1
            bar = init_at(th, p, 1, api, quiet=True)
        else:
            what = "was invalidated" if bar is not None else "was never initialised"
            raise MbarrierInitError(api, "an mbarrier must be initialised (mbarrier_init) before it is used",
                                    f"the mbarrier at shared {p.off:#x} of block {tuple(p.mem.cta.blockIdx)} {what}",
                                    _SRC, where=here(th), seed=sim.seed)
    if sim.check_mbarrier and sim.clocks_on and bar.init_by is not None and bar.init_by is not th:
        if bar.init_clk > th.vc[bar.init_by.vci]:
            raise MbarrierInitError(api, "an mbarrier's init must be visible before another thread uses it "
                                    "(__syncthreads after mbarrier_init; a cluster barrier for other CTAs)",
                                    f"{bar.name()} initialised by {describe_thread(bar.init_by)} at "
                                    f"{describe_site(bar.init_site)}", _SRC, where=here(th), seed=sim.seed)
        if remote and bar.cta is not th.cta and not fenced(bar.init_by.fences_cluster, bar.init_clk,
                                                           th.vc[bar.init_by.vci]):
            raise MbarrierInitError(api, "an mbarrier used by other CTAs must have its init released to the "
                                    "cluster (fence_mbarrier_init_release_cluster, then a cluster barrier)",
                                    f"{bar.name()} initialised by {describe_thread(bar.init_by)} at "
                                    f"{describe_site(bar.init_site)}", _SRC, where=here(th), seed=sim.seed)
    if sim.clocks_on:
        bar.users[th.vci] = clock(th)
    return bar


def _check_object(th, p, api) -> None:
    """The PTX ISA's mbarrier object: 8 bytes, 8-byte aligned, so its array's elements are 8 bytes."""
    isz = np.dtype(p.dtype).itemsize if p.dtype is not None else 8
    if isz != 8:
        raise MbarrierInitError(api, "an mbarrier object is 8 bytes and 8-byte aligned: keep it in an array "
                                "of 8-byte elements (np.uint64)", f"an element of a {np.dtype(p.dtype).name} "
                                f"shared array ({isz} bytes) at shared offset {p.off:#x}",
                                "PTX ISA, mbarrier object", where=here(th), seed=th.sim.seed)
    if p.off % 8:
        raise MbarrierInitError(api, "an mbarrier object is 8 bytes and 8-byte aligned",
                                f"shared offset {p.off:#x}", "PTX ISA, mbarrier object", where=here(th),
                                seed=th.sim.seed)


def init_at(th, p, count, api, quiet=False) -> Mbarrier:
    sim = th.sim
    count = int(count)
    if not 1 <= count <= COUNT_MAX:
        raise SimUsageError(api, f"the arrival count must be 1..{COUNT_MAX}", count, _SRC, where=here(th),
                            seed=sim.seed)
    _check_object(th, p, api)
    key = (p.mem.cta.rank, p.off)
    bar = sim.mbarriers.get(key)
    if bar is not None and bar.valid and sim.check_mbarrier:
        raise MbarrierInitError(api, "a valid mbarrier must not be initialised again: mbarrier_inval it first, "
                                "once no thread uses it", f"{bar.name()}, in {bar.state()}, initialised by "
                                f"{describe_thread(bar.init_by)} at {describe_site(bar.init_site)}", _SRC,
                                where=here(th), seed=sim.seed)
    mem = p.mem
    if not quiet and sim.track:
        mem.store(th, p.off, 8, site(2))
    if bar is None:
        bar = Mbarrier(sim, mem.cta, p.off)
        sim.mbarriers[key] = bar
    bar.valid = True
    bar.count = bar.pending = count
    bar.tx = bar.phase = bar.expected = bar.delivered = 0
    bar.acc = zeros(th) if sim.clocks_on else None
    bar.done_vc = None
    bar.inflight = []
    bar.announced, bar.prev_announced = [], []
    bar.last_load = bar.completer = None
    bar.column_phase = 0
    bar.users = {}
    bar.init_by, bar.init_clk, bar.init_site = th, clock(th), site(2)
    w = p.off >> 2
    mem.mbar_words[w] = bar
    mem.mbar_words[w + 1] = bar
    return bar


def inval(th, p, api):
    bar = use(th, p, api)
    sim = th.sim
    if sim.check_mbarrier:
        busy = [t for t in bar.queue if t.state != "exited"]
        late = [(t, c) for t, c in bar.users.items() if t != th.vci and sim.clocks_on and c > th.vc[t]]
        if busy or bar.inflight or late:
            who = (f"{len(busy)} waiting thread(s)" if busy else f"{len(bar.inflight)} cop(ies) in flight"
                   if bar.inflight else f"{describe_thread(sim.thread_by_vci(late[0][0]))}, whose last use is not "
                   "ordered before this inval (pass a __syncthreads first)")
            raise MbarrierInitError(api, "an mbarrier must not be invalidated while it is in use", f"{bar.name()}: {who}",
                                    _SRC, where=here(th), seed=sim.seed)
    bar.valid = False
    w = p.off >> 2
    p.mem.mbar_words.pop(w, None)
    p.mem.mbar_words.pop(w + 1, None)


def arrive(th, bar: Mbarrier, count: int, api: str, release: bool = True):
    sim = th.sim
    if release and bar.acc is not None:
        release_into(bar.acc, th)
    bar.pending -= count
    sim.sched.progress += 1
    if bar.pending < 0:
        raise SimUsageError(api, "a phase takes no more arrivals than the count given to mbarrier_init",
                            f"{bar.name()}: {-bar.pending} arrival(s) too many in phase {bar.phase} (count {bar.count})",
                            _SRC, where=here(th), seed=sim.seed)
    token = np.uint64(bar.phase)
    bar.try_complete(th)
    return token


def complete_tx(bar: Mbarrier, nbytes: int, th=None, api="mbarrier complete_tx"):
    bar.change_tx(th, -nbytes, api)
    bar.sim.sched.progress += 1
    bar.try_complete(th)


def _phase_done(bar, waiting_for):
    return bar.phase > waiting_for


def wait(th, bar: Mbarrier, parity, api: str, mode: str) -> int:
    """``mode``: ``block`` (wait_parity), ``poll`` (try_wait/test_wait). Returns 1 or 0."""
    parity = int(parity) & 1
    sim = th.sim
    s = site(2)
    if (bar.phase & 1) != parity:                      # the phase of that parity is the one just completed
        th.last_waits[bar.key] = (parity, bar.phase, s, api)
        acquire(th, bar.done_vc)
        return 1
    target = bar.phase                                  # the current phase: wait for it to complete
    th.last_waits[bar.key] = (parity, target, s, api)
    if sim.check_mbarrier and _phase_before_unknown(th, bar):
        raise _parity_at_wait(th, bar, parity, api, s)

    def what():
        return f"phase {target} (parity {parity}) of the {bar.name()}, now in {bar.state()}"

    if mode == "block":
        while bar.phase <= target and bar.valid:
            sim.sched.block(th, bar.queue, what, s)
    else:
        sim.sched.poll(th, bar.queue, what, s)
        if bar.phase <= target:
            return 0
    if bar.phase > target + 1 and sim.check_mbarrier:
        raise MbarrierPhaseError(api, "a waiting thread must see its phase complete before the barrier completes "
                                 "the next one (an arrival for the next phase came before every wait of this "
                                 "phase returned)", f"{bar.name()} waited on phase {target} (parity {parity}) "
                                 f"but is already in phase {bar.phase}", _SRC, where=here(th, s), seed=sim.seed)
    acquire(th, bar.done_vc)
    return 1


def _phase_before_unknown(th, bar) -> bool:
    """The phase before the current one completed, but nothing orders that before ``th`` (its own wait, or
    a barrier after one): known only for phases stamped in the barrier's async-proxy column (TMA barriers)."""
    ph = bar.phase
    return (th.sim.clocks_on and bar.column is not None and ph >= 1 and ph - 1 >= bar.column_phase
            and th.vc[bar.column] < ph and bar.completer != th.vci)


def _load_of(bar, phase) -> str:
    last = bar.last_load
    if last is None or last[1] != phase:
        return ""
    op = last[0]
    return f" (the {op.kind} issued by {describe_thread(op.thread)} at {describe_site(op.site)} landed)"


def _parity_at_wait(th, bar, parity, api, s):
    ph = bar.phase
    return MbarrierParityError(
        api, _PARITY_RULE, f"the wait asks for parity {parity} while the {bar.name()} is in phase {ph} (parity "
        f"{ph & 1}), so it waits for phase {ph}; but phase {ph - 1} completed{_load_of(bar, ph - 1)} with nothing "
        f"ordering that before this thread (no wait of its own on it, nor a barrier after one): had the wait come "
        f"earlier, in phase {ph - 1}, it would have returned at once", _SRC, where=here(th, s), seed=th.sim.seed)


def parity_error_for_read(th, bar, phase, what, s):
    """The error for ``th``'s access (``what``) to data a copy writes in ``phase`` of ``bar``, when the
    thread's last wait on ``bar`` came in that very phase and returned at once (the other parity); None
    otherwise."""
    last = th.last_waits.get(bar.key) if bar is not None else None
    if last is None or last[1] != phase or (last[1] & 1) == last[0]:
        return None
    parity, _, ws, api = last
    return MbarrierParityError(
        api, _PARITY_RULE, f"the wait at {describe_site(ws)} asked for parity {parity} while the {bar.name()} was in "
        f"phase {phase} (parity {phase & 1}): it returned at once, taking phase {phase - 1} for the one it meant, "
        f"and the thread then made {what}, which a copy completing phase {phase} writes", _SRC,
        where=here(th, s), seed=th.sim.seed)


def tx_deadlock(sim):
    """At a deadlock: a barrier that has all its arrivals but waits for bytes nobody will deliver
    (or got more than it expected) is a tx-count mistake, reported as such."""
    if not sim.check_txcount:
        return None
    for bar in sim.mbarriers.values():
        if bar.valid and bar.pending == 0 and bar.tx != 0 and not bar.inflight:
            waiting = [t for t in sim.threads if t.state in ("blocked", "polling") and t.wait_queue is bar.queue]
            if not waiting:
                continue
            t = waiting[0]
            rule = ("expect_tx must announce exactly the bytes its copies deliver: this phase waits for bytes "
                    "that no copy will bring" if bar.tx > 0 else
                    "the copies of a phase must not deliver more bytes than expect_tx announced")
            return TxCountError("mbarrier", rule, f"{bar.name()} in {bar.state()}; {len(waiting)} thread(s) wait on "
                                f"it, e.g. {describe_thread(t)} at {describe_site(t.wait_site)}{bar.announced_text()}",
                                _SRC, seed=sim.seed)
    return None
