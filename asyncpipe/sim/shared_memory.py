"""One CTA's shared memory: the bytes, and per 4-byte word what the checks need to know about it.

Per word the shadow keeps the last write (thread, clock, site), the reads since (one epoch, or a dict
when several unordered threads read it: FastTrack's read-shared mode), the asynchronous copy that
will land in it (``pending``), and the bulk store still reading it (``async_src``). Thread ids index
the cluster's vector clocks; ids at or above ``ClusterRun.n_threads`` are the async proxy (a TMA
load's writes, one id per mbarrier they complete on).

Granularity is the 4-byte word, except for 1- and 2-byte accesses, which are tracked per byte in a
second, sparse shadow (``b_write``/``b_reads``) so that threads writing neighbouring int8 or float16
elements do not race; they are also checked against the word shadow (copies, wider accesses), but a
wider access is not checked against earlier narrow ones.
"""

from __future__ import annotations

import numpy as np

from .errors import SharedMemoryRaceError, SimUsageError, UnwaitedAsyncReadError
from .where import describe_site, describe_thread, here

POISON_BYTE = 0xFF          # all bits set: NaN for every float type, -1 / max for integers
NONE, MANY = -1, -2         # r_tid markers: no read since the last write; several (see r_many)


class SharedMemory:
    """The shared memory of one CTA (``cta``), ``size`` bytes, with its shadow state."""

    def __init__(self, cta, size: int):
        self.cta = cta
        self.size = size
        self.buf = np.full(size, POISON_BYTE, np.uint8)
        n = (size + 3) // 4
        self.w_tid = [NONE] * n
        self.w_clk = [0] * n
        self.w_site = [None] * n
        self.r_tid = [NONE] * n
        self.r_clk = [0] * n
        self.r_site = [None] * n
        self.r_many: dict[int, dict] = {}
        self.pending = [None] * n         # the async copy (an op object) that will land here
        self.async_src = [None] * n       # the bulk store that has not been waited on reading this word
        self.mbar_words: dict[int, object] = {}   # word -> the live mbarrier stored there
        self.b_write: dict = {}           # byte -> (thread, clock, site) of the last narrow write
        self.b_reads: dict = {}           # byte -> {thread: (clock, site)} narrow reads since
        self.alive = True
        self.remote = {}                  # thread id -> (clock, site) of its last DSMEM access here

    # ------------------------------------------------------------------------------------------
    # Checked accesses by a thread (generic proxy)
    # ------------------------------------------------------------------------------------------
    def load(self, th, byte: int, nbytes: int, s):
        self._access(th, byte, nbytes, s, False)

    def store(self, th, byte: int, nbytes: int, s):
        self._access(th, byte, nbytes, s, True)

    def _access(self, th, byte, nbytes, s, write):
        run = th.sim
        if not run.track:
            return
        if nbytes < 4:
            return self._narrow(th, byte, nbytes, s, run, write)
        word = self._write_word if write else self._read_word
        w = byte >> 2
        last = (byte + nbytes - 1) >> 2
        while w <= last:
            word(th, w, s, run)
            w += 1

    def _narrow(self, th, byte, nbytes, s, run, write):
        """A 1- or 2-byte access: word-level checks for copies and wide writes, byte-level for races."""
        w = byte >> 2
        if self.pending[w] is not None and run.check_async:
            self.pending[w].report_generic_access(th, self, w, s, "write" if write else "read")
        if write and self.async_src[w] is not None and run.check_async:
            self.async_src[w].report_overwrite(th, self, w, s)
        if w in self.mbar_words and run.check_mbarrier:
            self.mbar_words[w].report_generic_access(th, s)
        me, vc = th.vci, th.vc
        wt = self.w_tid[w]
        if run.check_race and wt >= 0 and wt != me and self.w_clk[w] > vc[wt]:
            if wt >= run.n_threads:
                run.report_unacquired_async(th, self, w, s)
            self.report_race(th, w, s, "write" if write else "read", wt, self.w_clk[w], self.w_site[w], "write")
        clk = vc[me]
        for b in range(byte, byte + nbytes):
            last = self.b_write.get(b)
            if run.check_race and last is not None and last[0] != me and last[1] > vc[last[0]]:
                self.report_race(th, w, s, "write" if write else "read", last[0], last[1], last[2], "write")
            if write:
                if run.check_race:
                    for t, (c, rs) in self.b_reads.get(b, {}).items():
                        if t != me and c > vc[t]:
                            self.report_race(th, w, s, "write", t, c, rs, "read")
                self.b_write[b] = (me, clk, s)
                self.b_reads.pop(b, None)
            else:
                self.b_reads.setdefault(b, {})[me] = (clk, s)

    def _read_word(self, th, w, s, run):
        if self.pending[w] is not None and run.check_async:
            self.pending[w].report_generic_access(th, self, w, s, "read")
        if w in self.mbar_words and run.check_mbarrier:
            self.mbar_words[w].report_generic_access(th, s)
        me = th.vci
        vc = th.vc
        wt = self.w_tid[w]
        if run.check_race and wt >= 0 and wt != me and self.w_clk[w] > vc[wt]:
            if wt >= run.n_threads:
                run.report_unacquired_async(th, self, w, s)
            else:
                self.report_race(th, w, s, "read", wt, self.w_clk[w], self.w_site[w], "write")
        rt = self.r_tid[w]
        clk = vc[me]
        if rt == me or rt == NONE:
            self.r_tid[w] = me
            self.r_clk[w] = clk
            self.r_site[w] = s
        elif rt == MANY:
            self.r_many[w][me] = (clk, s)
        elif self.r_clk[w] <= vc[rt]:            # the earlier read happens before this one
            self.r_tid[w] = me
            self.r_clk[w] = clk
            self.r_site[w] = s
        else:
            self.r_many[w] = {rt: (self.r_clk[w], self.r_site[w]), me: (clk, s)}
            self.r_tid[w] = MANY

    def _write_word(self, th, w, s, run):
        if run.check_async:
            if self.pending[w] is not None:
                self.pending[w].report_generic_access(th, self, w, s, "write")
            if self.async_src[w] is not None:
                self.async_src[w].report_overwrite(th, self, w, s)
        if w in self.mbar_words and run.check_mbarrier:
            self.mbar_words[w].report_generic_access(th, s)
        me = th.vci
        vc = th.vc
        if run.check_race:
            self.check_write_order(th, w, s, vc, me)
        self.w_tid[w] = me
        self.w_clk[w] = vc[me]
        self.w_site[w] = s
        self.r_tid[w] = NONE
        if w in self.r_many:
            del self.r_many[w]
        if self.b_write:
            for b in range(4 * w, 4 * w + 4):
                self.b_write.pop(b, None)
                self.b_reads.pop(b, None)

    def check_write_order(self, th, w, s, vc, me, what="write", hint="", explain=None):
        """A write (by ``th``, or by a copy ``th`` issued) at word ``w`` must come after every earlier
        access to it: raise ``SharedMemoryRaceError`` naming the first one that is not ordered (or the
        error ``explain(other thread, its access, its site, w)`` gives for it, when not None)."""
        run = th.sim
        wt = self.w_tid[w]
        if wt >= 0 and wt != me and self.w_clk[w] > vc[wt] and wt < run.n_threads:
            self.report_race(th, w, s, what, wt, self.w_clk[w], self.w_site[w], "write", hint, explain)
        rt = self.r_tid[w]
        if rt >= 0:
            if rt != me and self.r_clk[w] > vc[rt]:
                self.report_race(th, w, s, what, rt, self.r_clk[w], self.r_site[w], "read", hint, explain)
        elif rt == MANY:
            for t, (c, rs) in self.r_many[w].items():
                if t != me and c > vc[t]:
                    self.report_race(th, w, s, what, t, c, rs, "read", hint, explain)

    # ------------------------------------------------------------------------------------------
    # Writes that land asynchronously (stamped as the landing's owner)
    # ------------------------------------------------------------------------------------------
    def stamp_words(self, w0: int, w1: int, tid: int, clk: int, s):
        """Words ``w0 .. w1 - 1`` were just written by ``tid`` at ``clk`` (a landed copy)."""
        for w in range(w0, w1):
            self.w_tid[w] = tid
            self.w_clk[w] = clk
            self.w_site[w] = s
            self.r_tid[w] = NONE
            self.r_many.pop(w, None)
        self._clear_narrow(w0, w1)

    def _clear_narrow(self, w0, w1):
        if self.b_write or self.b_reads:
            for b in range(4 * w0, 4 * w1):
                self.b_write.pop(b, None)
                self.b_reads.pop(b, None)

    def stamp_words_list(self, words, tid: int, clk: int, s):
        for w in words:
            self.w_tid[w] = tid
            self.w_clk[w] = clk
            self.w_site[w] = s
            self.r_tid[w] = NONE
            self.r_many.pop(w, None)
            self._clear_narrow(w, w + 1)

    def write_bytes(self, byte: int, data) -> None:
        self.buf[byte:byte + len(data)] = np.frombuffer(data, np.uint8) if isinstance(data, bytes) else data

    def poison(self, byte: int, nbytes: int) -> None:
        self.buf[byte:byte + nbytes] = POISON_BYTE

    def check_range(self, th, api: str, byte: int, nbytes: int, align: int, what: str) -> None:
        if byte % align:
            raise SimUsageError(api, f"{what} must be {align}-byte aligned", f"shared offset {byte:#x}",
                                "PTX ISA", where=here(th), seed=th.sim.seed)
        if byte < 0 or byte + nbytes > self.size:
            raise SimUsageError(api, f"{what} must lie inside the CTA's shared memory ({self.size} bytes)",
                                f"bytes {byte:#x}..{byte + nbytes:#x}", "PTX ISA", where=here(th), seed=th.sim.seed)

    # ------------------------------------------------------------------------------------------
    def report_race(self, th, w, s, what, other, other_clk, other_site, other_what, hint="", explain=None):
        run = th.sim
        other_th = run.thread_by_vci(other)
        if explain is not None and other_th is not None:
            err = explain(other_th, other_what, other_site, w)
            if err is not None:
                raise err
        raise SharedMemoryRaceError(
            "shared memory", "two threads access one word, one of them writing, with no barrier between them",
            f"a {what} of word {w * 4:#x} of block {tuple(self.cta.blockIdx)}'s shared memory by "
            f"{describe_thread(th)} and an earlier {other_what} by {describe_thread(other_th)} "
            f"at {describe_site(other_site)}" + (f"; {hint}" if hint else ""),
            "CUDA programming guide, memory consistency; compute-sanitizer racecheck",
            where=here(th, s), seed=run.seed)
