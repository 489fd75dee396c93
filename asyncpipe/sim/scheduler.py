"""The baton: one Python thread per CUDA thread, exactly one of them running at any time.

Every simulated thread owns a lock it sleeps on. The running thread passes the baton at
*switch points* (each primitive, each barrier, now and then a shared-memory access): a seeded
``random.Random`` picks who runs next among the ready threads, so a seed replays one interleaving
exactly, and state needs no locking because only the baton holder touches it.

A thread that must wait (a barrier, an mbarrier phase, a warp collective) parks itself on a wait
queue and passes the baton; whoever changes the awaited state wakes the queue. When no thread is
ready the scheduler first lets in-flight asynchronous copies land (``on_idle``), then lets polling
threads (``try_wait``/``test_wait`` loops) see a "not yet", and only when nothing can change any
more declares a deadlock, which it reports instead of hanging.
"""

from __future__ import annotations

import _thread
import random
import threading

from numba.cuda.simulator.kernelapi import Dim3

RUNNING, READY, BLOCKED, POLLING, EXITED = "running", "ready", "blocked", "polling", "exited"
THREAD_STACK = 512 * 1024
POLL_ROUNDS = 64          # idle rounds of pollers seeing "not yet" with nothing else changing: a livelock


class Abort(BaseException):
    """Unwinds a simulated thread when the launch is stopped (an error elsewhere, a deadlock)."""


class SimThread(threading.Thread):
    """An OS thread that plays one CUDA thread at a time: its indices, its place in the cluster's vector
    clocks, its baton. Starting an OS thread costs about a millisecond, so they are pooled
    (``take``/``give_back``) and reassigned (``assign``) from CTA to CTA and launch to launch."""

    def __init__(self):
        super().__init__(daemon=True, name="asyncpipe-sim")
        self.baton = _thread.allocate_lock()
        self.baton.acquire()
        self.sim = None

    def assign(self, sim, cta, tid3, linear: int, vci: int, target):
        self.sim, self.cta = sim, cta
        self.threadIdx = Dim3(*tid3)
        self.blockIdx = cta.blockIdx
        self.thread_id = linear
        self.warp_id, self.lane = divmod(linear, 32)
        self.vci = vci
        self.vc = sim.vc[vci]                 # this thread's vector clock (a row view)
        self.state = READY
        self.wait_what = None                 # () -> str: what a blocked thread waits for
        self.wait_site = None
        self.wait_queue = None
        self.poll_timed_out = False
        self.countdown = 1
        self._kernel = target
        self.fences_async: list = []          # own clock at each fence.proxy.async (and mbarrier_init fence)
        self.fences_cluster: list = []        # own clock at each cluster-scope release fence
        self.tmaps: set = set()               # tensor maps this thread acquired (tensormap proxy fence)
        self.cp_async = None                  # cp.async groups (prim.cp_async)
        self.bulk = None                      # bulk async-groups (prim.async_ops)
        self.last_waits: dict = {}            # mbarrier key -> (parity, phase it was in, site, api)
        self.wgmma = None                     # wgmma fences and accumulators (prim.wgmma)
        self.local_arrays: list = []          # this thread's cuda.local.array arrays (arrays.LocalArray)

    def run(self):
        while True:
            self.baton.acquire()
            sim = self.sim
            try:
                if not sim.sched.aborted:
                    self._kernel()
                    sim.thread_exit(self)
            except Abort:
                pass
            except BaseException as exc:  # noqa: BLE001 - reported by the launching thread
                sim.fail(self, exc)
            finally:
                self._kernel = None
                sim.role_done()


_pool: list = []
_pool_lock = threading.Lock()


def take(n: int) -> list:
    """``n`` idle simulator threads (started ones from the pool, new ones when it runs dry)."""
    with _pool_lock:
        out = [_pool.pop() for _ in range(min(n, len(_pool)))]
    fresh = [SimThread() for _ in range(n - len(out))]
    if fresh:
        old = threading.stack_size()
        threading.stack_size(THREAD_STACK)
        try:
            for t in fresh:
                t.start()
        finally:
            threading.stack_size(old)
    return out + fresh


def give_back(threads) -> None:
    with _pool_lock:
        _pool.extend(threads)


class Scheduler:
    """Who runs next. ``on_idle()`` lands one in-flight copy and says whether it did;
    ``deadlock()`` builds the error to raise when nothing can run."""

    def __init__(self, seed: int, switch: float, on_idle, deadlock):
        self.rng = random.Random(seed)
        self.switch_p = switch
        self.mem_every = int(10 / switch) if switch > 0 else 1 << 60
        self.ready: list = []
        self.pollers: list = []
        self.threads: list = []
        self.current = None
        self.progress = 0
        self._poll_mark = -1
        self._idle_rounds = 0
        self.error = None
        self.aborted = False
        self.on_idle = on_idle
        self.deadlock = deadlock

    # ---- the baton -------------------------------------------------------------------------
    def start(self):
        for t in self.threads:
            t.countdown = self.rng.randint(1, 2 * self.mem_every) if self.mem_every < 1 << 59 else 1 << 60
        self.ready = list(self.threads)
        self._hand(self._pick(None))

    def _hand(self, nxt):
        self.current = nxt
        nxt.state = RUNNING
        nxt.baton.release()

    def _park(self, me):
        me.baton.acquire()
        if self.aborted:
            raise Abort()

    def _leave(self, me):
        nxt = self._pick(me)
        if nxt is me:
            me.state = RUNNING
            return
        self._hand(nxt)
        self._park(me)

    # ---- switch points ---------------------------------------------------------------------
    def switch_point(self, me):
        """At a primitive: maybe let another thread run first."""
        if self.ready and self.rng.random() < self.switch_p:
            me.state = READY
            self.ready.append(me)
            self._leave(me)

    def memory_point(self, me):
        """At every few shared-memory accesses (a random countdown): let another thread run."""
        me.countdown = self.rng.randint(1, 2 * self.mem_every)
        if self.ready:
            me.state = READY
            self.ready.append(me)
            self._leave(me)

    def block(self, me, queue: list, what, site):
        """Park ``me`` on ``queue`` until woken (callers re-check their condition in a loop)."""
        me.state, me.wait_what, me.wait_site, me.wait_queue = BLOCKED, what, site, queue
        queue.append(me)
        self._leave(me)

    def poll(self, me, queue: list, what, site) -> bool:
        """Like ``block``, for a thread polling a condition: also returns (False) when the whole
        cluster is otherwise idle, as a ``try_wait`` that times out would."""
        me.state, me.wait_what, me.wait_site, me.wait_queue = POLLING, what, site, queue
        me.poll_timed_out = False
        queue.append(me)
        self.pollers.append(me)
        self._leave(me)
        return not me.poll_timed_out

    def wake(self, t):
        if t.state == POLLING:
            self.pollers.remove(t)
        elif t.state != BLOCKED:
            return
        t.state = READY
        t.wait_queue = None
        self.ready.append(t)

    def wake_all(self, queue: list):
        self.progress += 1
        waiting, queue[:] = list(queue), []
        for t in waiting:
            self.wake(t)

    # ---- who next --------------------------------------------------------------------------
    def _pick(self, me):
        while True:
            ready = self.ready
            if ready:
                i = self.rng.randrange(len(ready))
                t = ready[i]
                ready[i] = ready[-1]
                ready.pop()
                return t
            if self.on_idle():
                continue
            if self.pollers:
                if self.progress == self._poll_mark:
                    self._idle_rounds += 1
                else:
                    self._idle_rounds, self._poll_mark = 0, self.progress
                if self._idle_rounds <= POLL_ROUNDS:
                    for t in self.pollers:
                        t.poll_timed_out = True
                        if t.wait_queue is not None and t in t.wait_queue:
                            t.wait_queue.remove(t)
                        t.wait_queue = None
                        t.state = READY
                        ready.append(t)
                    self.pollers.clear()
                    continue
            self.fail(self.deadlock())
            raise Abort()

    # ---- stopping ----------------------------------------------------------------------------
    def fail(self, exc):
        """Record the launch's error (the first one wins) and release every parked thread."""
        if self.error is None:
            self.error = exc
        if not self.aborted:
            self.aborted = True
            for t in self.threads:
                if t is not self.current and t.state != EXITED:
                    t.baton.release()
