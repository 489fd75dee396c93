"""cp.async: per-thread copies global -> shared that land only when their group is waited for.

Each thread keeps its copies not yet committed and its committed groups, oldest first. A copy reads
global memory when issued; its destination holds poison and is marked pending until the thread's
``wait_group`` covers its group (or ``cp.async.mbarrier.arrive`` fires), when the bytes land and the
words count as written by that thread at that moment (others need a ``__syncthreads`` to read them).
A read of a pending word says which copy, which group, and what the owner's last wait covered.
"""

from __future__ import annotations

from ..arrays import check_in_array, read_global, shared_operand
from ..errors import SimUsageError, UnwaitedAsyncReadError, WaitGroupError
from ..where import describe_site, describe_thread, here, site
from . import mbarrier_state
from .common import clock, enter, release_into

WAIT_GROUP_MAX = 7
_SRC = "PTX ISA, cp.async; the chapter's multi-stage pipeline"


REFILL_HINT = ("nothing orders the read and the copy: every read of a buffer must come before a __syncthreads that "
               "precedes the copy refilling it (a double buffer's trailing barrier)")


class Copy:
    __slots__ = ("thread", "mem", "off", "data", "site", "group", "landed", "api", "clk")

    def __init__(self, th, mem, off, data, s, api):
        self.thread, self.mem, self.off, self.data, self.site, self.api = th, mem, off, data, s, api
        self.group = None
        self.landed = False
        self.clk = clock(th) if th.sim.clocks_on else 0     # the issuer's clock: who has seen the issue

    def land(self):
        if self.landed:
            return
        self.landed = True
        th, mem = self.thread, self.mem
        n = len(self.data)
        mem.write_bytes(self.off, self.data)
        w0, w1 = self.off >> 2, (self.off + n + 3) >> 2
        for w in range(w0, w1):
            if mem.pending[w] is self:
                mem.pending[w] = None
        if th.sim.track:
            mem.stamp_words(w0, w1, th.vci, clock(th), self.site)

    def report_generic_access(self, th, mem, w, s, kind):
        owner = self.thread
        sim = th.sim
        if owner is not th and sim.check_race and self.clk > th.vc[owner.vci]:
            # the issue is not ordered before this access: a race with the copy (whether or not it landed),
            # not a wait that fell short
            mem.report_race(th, w, s, kind, owner.vci, self.clk, self.site, f"{self.api} (not landed yet)",
                            REFILL_HINT)
        where = f"word {w * 4:#x} of block {tuple(mem.cta.blockIdx)}'s shared memory"
        copy = f"the {self.api} issued by {describe_thread(owner)} at {describe_site(self.site)}"
        cls, rule = UnwaitedAsyncReadError, ("shared memory a cp.async is still writing must not be accessed before "
                                             "the issuing thread's wait_group covers the copy (then __syncthreads "
                                             "for other threads)")
        if self.group is not None and owner.cp_async.last_wait is not None and sim.check_waitgroup:
            cls = WaitGroupError
            rule = ("wait_group N must leave in flight only groups newer than the data read: N counts groups, "
                    "so every iteration must commit one, even an empty one (the chapter's rule)")
        raise cls(f"shared memory {kind}", rule, f"{where}: destination of {copy}, {self.state_text()}", _SRC,
                  where=here(th, s), seed=sim.seed)

    def state_text(self) -> str:
        """Why the copy has not landed: never committed, never waited for, or the last wait_group fell short."""
        st = self.thread.cp_async
        if self.group is None:
            return "never committed (cp_async_commit_group) and so never waited for"
        if st.last_wait is None:
            return f"in cp.async group {self.group}, which its thread has not waited for yet"
        n, committed, ws = st.last_wait
        return (f"in cp.async group {self.group}; the last cp_async_wait_group({n}) at {describe_site(ws)} waited for "
                f"{_groups_text(committed - n)} of the {committed} committed then, leaving the newest "
                f"{min(n, committed)} in flight")


def _groups_text(covered: int) -> str:
    """The groups a wait_group covered: the oldest ``covered`` ones (none when it left them all in flight)."""
    if covered <= 0:
        return "no group"
    return "group 0" if covered == 1 else f"groups 0..{covered - 1}"


class Groups:
    def __init__(self):
        self.uncommitted: list = []
        self.groups: list = []             # [(index, [copies])], committed, not yet landed; oldest first
        self.committed = 0
        self.last_wait = None              # (n, groups committed at that wait, site)


def state(th) -> Groups:
    if th.cp_async is None:
        th.cp_async = Groups()
    return th.cp_async


def copy(dst, src, size: int, src_size: int, api: str):
    th = enter(api)
    sim = th.sim
    dst = shared_operand(th, api, dst, "dst")
    src_size = int(src_size)
    if not 0 <= src_size <= size:
        raise SimUsageError(api, f"src_size must be 0..{size}", src_size, _SRC, where=here(th), seed=sim.seed)
    mem = dst.mem
    mem.check_range(th, api, dst.off, size, size, "dst")
    check_in_array(th, api, dst, size, "dst", "PTX ISA, cp.async")
    if src_size:
        if src.off % size:
            raise SimUsageError(api, f"src must be {size}-byte aligned", f"address {src.off:#x}", _SRC,
                                where=here(th), seed=sim.seed)
        data = read_global(th, api, src, src_size) + bytes(size - src_size)
    else:
        data = bytes(size)
    s = site()
    w0, w1 = dst.off >> 2, (dst.off + size + 3) >> 2
    if sim.track:
        vc, me = th.vc, th.vci
        for w in range(w0, w1):
            if sim.check_async and mem.pending[w] is not None:
                mem.pending[w].report_generic_access(th, mem, w, s, "cp.async write over")
            if sim.check_async and mem.async_src[w] is not None:
                mem.async_src[w].report_overwrite(th, mem, w, s)
            if sim.check_race:
                mem.check_write_order(th, w, s, vc, me, "cp.async write", REFILL_HINT)
    c = Copy(th, mem, dst.off, data, s, api)
    for w in range(w0, w1):
        mem.pending[w] = c
    mem.poison(dst.off, size)
    state(th).uncommitted.append(c)


def commit(api="cp_async_commit_group"):
    th = enter(api)
    st = state(th)
    for c in st.uncommitted:
        c.group = st.committed
    st.groups.append((st.committed, st.uncommitted))
    st.uncommitted = []
    st.committed += 1


def wait_group(n, api="cp_async_wait_group"):
    th = enter(api)
    n = min(max(int(n), 0), WAIT_GROUP_MAX)
    st = state(th)
    keep = st.groups[-n:] if n else []
    for _, copies in (st.groups[:-n] if n else st.groups):
        for c in copies:
            c.land()
    st.groups = keep
    st.last_wait = (n, st.committed, site())


def check_exit(th):
    """A thread must not exit with copies no wait covered: only it can wait for them, and they would
    write shared memory after it (or after the CTA's end)."""
    st = th.cp_async
    if st is None or not th.sim.check_async:
        return
    left = [c for c in st.uncommitted if not c.landed] + [c for _, cs in st.groups for c in cs if not c.landed]
    if not left:
        return
    c = left[0]
    raise UnwaitedAsyncReadError(
        "thread exit", "a thread must wait for its cp.async copies (cp_async_wait_all, or cp_async_wait_group(0) "
        "after its last commit) before it exits: no other thread can wait for them, and they still write shared "
        "memory", f"{len(left)} cop{'y' if len(left) == 1 else 'ies'} in flight, the first "
        f"({c.api}) issued at {describe_site(c.site)}, {c.state_text()}", _SRC,
        where=f"{describe_thread(th)} exits", seed=th.sim.seed)


def wait_all(api="cp_async_wait_all"):
    commit(api)
    wait_group(0, api)


def mbarrier_arrive(bar_ptr, noinc: bool, api: str):
    """The barrier sees one arrival once all of this thread's earlier copies have landed: they land
    now (the earliest the hardware could), and the arrival releases them to the barrier's waiters."""
    th = enter(api)
    bar = mbarrier_state.use(th, bar_ptr, api)
    st = state(th)
    for c in st.uncommitted:
        c.land()
    for _, copies in st.groups:
        for c in copies:
            c.land()
    if bar.acc is not None:
        release_into(bar.acc, th)
    if noinc:
        mbarrier_state.arrive(th, bar, 1, api, release=False)
    else:
        th.sim.sched.progress += 1
