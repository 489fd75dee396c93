"""The TMA unit's copies (``cp.async.bulk`` and ``cp.async.bulk.tensor``), as operations in flight.

A *load* (global -> shared) is issued by one thread and lands when the cluster's seeded copy engine
lets it (``ClusterRun.land_one``): until then its destination holds poison and is marked pending;
when it lands the bytes arrive, the words are stamped as written by the async proxy (the barrier's
clock column, at the phase they complete in) and the barrier sees ``complete_tx``.

A *store* (shared -> global) reads shared memory when issued (the async proxy's read is checked
then: fenced, ordered, nothing pending) and writes global memory when it lands. Its source stays
marked until the issuing thread's ``cp_async_bulk_wait_group_read`` covers its group: a generic
write before that is reported. Stores join the issuing thread's bulk async-groups.
"""

from __future__ import annotations

import numpy as np

from ..errors import ProxyFenceError, SimUsageError, UnwaitedAsyncReadError
from ..where import describe_site, describe_thread, here, site
from . import mbarrier_state
from .common import clock, fenced

_SRC_PROXY = "PTX ISA, proxies; CUDA programming guide, TMA"
_SRC_ASYNC = "PTX ISA, cp.async.bulk"


def words_of(offsets) -> list[int]:
    """The distinct 4-byte words covering the byte offsets (an array) in increasing order."""
    return np.unique(np.asarray(offsets) >> 2).tolist()


def check_async_write(th, mem, words, s, what, explain=None):
    """An async-proxy write (a copy ``th`` issues) into ``words``: after every earlier access, generic
    writes fenced, nothing else pending there (``explain``: see ``SharedMemory.check_write_order``)."""
    sim = th.sim
    if not sim.track:
        return
    vc, me = th.vc, th.vci
    for w in words:
        if sim.check_async and mem.pending[w] is not None:
            mem.pending[w].report_generic_access(th, mem, w, s, f"{what} over")
        if sim.check_async and mem.async_src[w] is not None:     # a store or a wgmma still reads it
            mem.async_src[w].report_overwrite(th, mem, w, s)
        if w in mem.mbar_words and sim.check_mbarrier:
            mem.mbar_words[w].report_generic_access(th, s)
        if sim.check_race:
            mem.check_write_order(th, w, s, vc, me, what, explain=explain)
        if sim.check_proxy:
            _check_fenced(th, mem, w, s, what, "write into")


def check_async_read(th, mem, words, s, what):
    """An async-proxy read of ``words`` (a store's source) issued by ``th``."""
    sim = th.sim
    if not sim.track:
        return
    for w in words:
        if sim.check_async and mem.pending[w] is not None:
            mem.pending[w].report_generic_access(th, mem, w, s, f"{what} of")
        wt = mem.w_tid[w]
        if wt < 0 or not sim.clocks_on:
            continue
        if wt >= sim.n_threads:                        # written by a TMA load: acquired through its barrier?
            if sim.check_race and mem.w_clk[w] > th.vc[wt]:
                sim.report_unacquired_async(th, mem, w, s)
            continue
        if sim.check_race and wt != th.vci and mem.w_clk[w] > th.vc[wt]:
            mem.report_race(th, w, s, what, wt, mem.w_clk[w], mem.w_site[w], "write")
        if sim.check_proxy:
            _check_fenced(th, mem, w, s, what, "read of")


def _check_fenced(th, mem, w, s, what, verb):
    sim = th.sim
    wt = mem.w_tid[w]
    if wt < 0 or wt >= sim.n_threads:
        return
    writer = sim.threads[wt]
    if not fenced(writer.fences_async, mem.w_clk[w], th.vc[wt] if wt != th.vci else clock(th)):
        raise ProxyFenceError(
            what, "shared memory written by threads (generic proxy) must be fenced with fence_proxy_async_shared_cta "
            "by the writers, before the barrier that orders it with the TMA (async proxy) " + verb + " it",
            f"word {w * 4:#x} of block {tuple(mem.cta.blockIdx)}'s shared memory, written by "
            f"{describe_thread(writer)} at {describe_site(mem.w_site[w])} with no fence.proxy.async after it",
            _SRC_PROXY, where=here(th, s), seed=sim.seed)


class AsyncLoad:
    """One TMA load: into one CTA's shared memory, or several (multicast); completes on mbarriers."""

    def __init__(self, th, api, kind, nbytes, fetch, targets):
        # targets: [(mem, byte offsets (np array, the smem positions of the box bytes in order), bar)]
        self.thread, self.api, self.kind = th, api, kind
        self.site = site()
        self.nbytes = nbytes
        self.fetch = fetch
        self.targets = targets
        self.issue_phase = {}
        self.landed = False

    def bytes_for(self, bar):
        return self.nbytes

    def issue(self):
        th, sim = self.thread, self.thread.sim
        for mem, offs, bar in self.targets:
            words = words_of(offs)
            check_async_write(th, mem, words, self.site, self.api, _early_access(bar))
            for w in words:
                mem.pending[w] = self
            mem.buf[offs] = 0xFF
            bar.inflight.append((self, bar.phase))
            bar.async_column()
        sim.add_inflight(self)

    def land(self):
        if self.landed:
            return
        self.landed = True
        data = self.fetch()
        for mem, offs, bar in self.targets:
            mem.buf[offs] = data
            col = bar.column
            words = words_of(offs)
            for w in words:
                if mem.pending[w] is self:
                    mem.pending[w] = None
            if col is not None:
                mem.stamp_words_list(words, col, bar.phase + 1, self.site)
            else:
                mem.stamp_words_list(words, -1, 0, self.site)
            bar.inflight = [(op, p) for op, p in bar.inflight if op is not self]
            bar.last_load = (self, bar.phase)
            mbarrier_state.complete_tx(bar, self.nbytes, None, self.api)

    def report_generic_access(self, th, mem, w, s, kind):
        bar = next(b for m, _, b in self.targets if m is mem)
        phase = next((p for op, p in bar.inflight if op is self), bar.phase)
        wrong = mbarrier_state.parity_error_for_read(th, bar, phase, f"a {kind} of word {w * 4:#x}", s)
        if wrong is not None:
            raise wrong
        last = th.last_waits.get(bar.key)
        if last is None:
            hint = "this thread never waited on that barrier"
        else:
            parity, ph, ls = last[:3]
            hint = (f"this thread's last wait on it, at {describe_site(ls)}, asked for parity {parity} while the "
                    f"barrier was in phase {ph}" + (" and returned at once (the phase before it counts as complete: "
                                                     "wrong parity?)" if (ph & 1) != parity else ""))
        raise UnwaitedAsyncReadError(
            f"shared memory {kind}",
            "shared memory a TMA copy is still writing must not be accessed before the copy's mbarrier phase has "
            "completed and been waited for",
            f"word {w * 4:#x} of block {tuple(mem.cta.blockIdx)}'s shared memory: destination of the {self.kind} "
            f"issued by {describe_thread(self.thread)} at {describe_site(self.site)}, which completes on the "
            f"{bar.name()} in phase {phase} (parity {phase & 1}); {hint}",
            _SRC_ASYNC, where=here(th, s), seed=th.sim.seed)


def _early_access(bar):
    """For a load about to complete on ``bar``: an earlier access to its destination that is not ordered
    before it, by a thread whose last wait on ``bar`` returned at once in this phase, is a wrong parity."""
    phase = bar.phase

    def explain(other, other_what, other_site, w):
        return mbarrier_state.parity_error_for_read(other, bar, phase, f"a {other_what} of word {w * 4:#x}",
                                                    other_site)
    return explain


class BulkStore:
    """One store shared -> global (``cp.async.bulk`` or ``.tensor``), in a bulk async-group."""

    def __init__(self, th, api, kind, mem, offs, write):
        self.thread, self.api, self.kind = th, api, kind
        self.site = site()
        self.mem, self.offs = mem, offs
        self.write = write          # data (np.uint8) -> None: performs the global write
        self.data = None
        self.released = False       # wait_group_read covered it
        self.landed = False
        self.group = None

    def issue(self):
        th, sim = self.thread, self.thread.sim
        words = words_of(self.offs)
        check_async_read(th, self.mem, words, self.site, self.api)
        self.data = self.mem.buf[self.offs].copy()
        if sim.track:
            for w in words:
                self.mem.async_src[w] = self
        self.words = words
        state(th).uncommitted.append(self)
        sim.add_inflight(self)

    def release(self):
        if not self.released:
            self.released = True
            for w in self.words:
                if self.mem.async_src[w] is self:
                    self.mem.async_src[w] = None

    def land(self):
        if not self.landed:
            self.landed = True
            self.write(self.data)

    def report_overwrite(self, th, mem, w, s):
        g = "not yet committed" if self.group is None else f"in bulk group {self.group}"
        raise UnwaitedAsyncReadError(
            "shared memory write", "shared memory a bulk store still reads must not be overwritten before "
            "cp_async_bulk_wait_group_read covers the store",
            f"word {w * 4:#x} of block {tuple(mem.cta.blockIdx)}'s shared memory, source of the {self.kind} issued by "
            f"{describe_thread(self.thread)} at {describe_site(self.site)} ({g})", _SRC_ASYNC,
            where=here(th, s), seed=th.sim.seed)


class BulkGroups:
    """A thread's bulk async-groups: stores not yet committed, then committed groups in order."""

    def __init__(self):
        self.uncommitted: list = []
        self.groups: list = []          # [(index, [ops])], oldest first, not yet read-waited or waited
        self.committed = 0


def state(th) -> BulkGroups:
    if th.bulk is None:
        th.bulk = BulkGroups()
    return th.bulk


def commit(th):
    st = state(th)
    for op in st.uncommitted:
        op.group = st.committed
    st.groups.append((st.committed, st.uncommitted))
    st.uncommitted = []
    st.committed += 1


def wait(th, n, read_only: bool):
    """``cp.async.bulk.wait_group[.read] n``: all but the newest ``n`` groups are done (reading)."""
    n = min(max(int(n), 0), 7)
    st = state(th)
    older = st.groups[:-n] if n else st.groups
    newer = st.groups[-n:] if n else []
    sim = th.sim
    for _, ops in older:
        for op in ops:
            op.release()
            if not read_only and not op.landed:
                if op in sim.inflight:
                    sim.inflight.remove(op)
                op.land()
    # a group read-waited but still writing global memory stays until it is done: it still counts
    st.groups = [(i, ops) for i, ops in older if not all(op.released and op.landed for op in ops)] + newer


def check_exit(th):
    """A thread that issued bulk stores must have waited until they read shared memory."""
    st = th.bulk
    if st is None or not th.sim.check_async:
        return
    left = [op for _, ops in st.groups for op in ops if not op.released] + [op for op in st.uncommitted]
    if left:
        op = left[0]
        raise UnwaitedAsyncReadError(
            "thread exit", "a thread must wait for its bulk stores to read shared memory "
            "(cp_async_bulk_wait_group_read(0)) before it exits: shared memory must outlive the copies that read it",
            f"{len(left)} store(s) still reading, the first ({op.kind}) issued at {describe_site(op.site)}"
            + (" and never committed" if op.group is None else f" in bulk group {op.group}"),
            _SRC_ASYNC, where=f"{describe_thread(th)} exits", seed=th.sim.seed)


def check_size(th, api, value, what, align):
    if int(value) % align:
        raise SimUsageError(api, f"{what} must be a multiple of {align} bytes", value, _SRC_ASYNC,
                            where=here(th), seed=th.sim.seed)
