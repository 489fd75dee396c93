"""A simulated launch: the grid, cluster by cluster, every CTA of a cluster running at once.

``run_launch`` is what ``kernel[grid, block](...)`` and ``asyncpipe.host.launch`` come to under the
simulator. Clusters run one after the other, in an order drawn from the seed (CUDA promises nothing
about the order of clusters, nor that two run together). Inside a cluster every thread of every CTA
is a ``SimThread``; ``ClusterRun`` holds what they share: vector clocks, the scheduler, the
in-flight asynchronous copies, the mbarriers and the cluster barrier.

Vector clocks: ``vc[i]`` is thread ``i``'s view of every thread's clock (columns past the threads
stand for the async proxy, one per mbarrier that TMA completes on). Barriers join them; the checks
compare them (``SharedMemory``).
"""

from __future__ import annotations

import ctypes
import math
import random
import threading
import time

import numpy as np
from numba.cuda.simulator.kernelapi import Dim3

from ..constants import STATIC_SMEM_DEFAULT_MAX
from ..errors import AsyncpipeError
from .arrays import LocalAllocator, SharedAllocator
from .errors import DeadlockError, SimTimeoutError, SimUsageError
from . import scheduler
from .scheduler import BLOCKED, EXITED, POLLING, Abort, Scheduler
from .shared_memory import SharedMemory
from .where import describe_site, describe_thread, here, run_kernel, site_from_traceback

SMEM_CAPACITY = 232448            # the opt-in shared memory per block of an H100/H200 (227 KB)
VC_ENTRIES_MAX = 1 << 26          # vector clocks beyond this (huge clusters) turn the clock checks off


def _blocks(dim):
    x, y, z = dim
    return [(i, j, k) for k in range(z) for j in range(y) for i in range(x)]


class Timeout(BaseException):
    """Injected into a thread that ran past ``ASYNCPIPE_SIM_TIMEOUT``."""


class Launch:
    """One launch's shape and what its clusters share (the shared-memory layout)."""

    def __init__(self, fn, args, grid, block, cluster, dynamic_bytes: int, cfg, opt_in: bool = True):
        self.fn, self.args, self.cfg = fn, args, cfg
        self.grid, self.block = tuple(grid), tuple(block)
        self.cluster = tuple(cluster) if cluster else (1, 1, 1)
        self.has_cluster = cluster is not None
        self.dynamic_bytes = int(dynamic_bytes)
        self.dynamic_bytes_aligned = -(-self.dynamic_bytes // 16) * 16
        self.threads_per_cta = math.prod(self.block)
        if self.dynamic_bytes > SMEM_CAPACITY:
            raise SimUsageError("launch", f"dynamic shared memory must be at most {SMEM_CAPACITY} bytes",
                                self.dynamic_bytes, "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")
        # static + dynamic shared memory a CTA may use: the opt-in limit, or 48 KB for numba's own launch
        self.smem_limit = SMEM_CAPACITY if opt_in else STATIC_SMEM_DEFAULT_MAX
        self.shared = SharedAllocator(self)
        self.local = LocalAllocator()

    @property
    def nclusters(self):
        return tuple(g // c for g, c in zip(self.grid, self.cluster))


class CTA:
    """One thread block: its place, its shared memory, its threads and its block barrier."""

    def __init__(self, sim, rank: int, block_idx, local):
        self.sim, self.rank = sim, rank
        self.blockIdx = Dim3(*block_idx)
        self.local = local                       # position inside the cluster
        self.smem = SharedMemory(self, SMEM_CAPACITY)
        self.arrays: dict = {}
        self.threads: list = []
        self.live = 0
        self.warps: list = []
        # __syncthreads: arrivals of the current generation
        self.bar_gen = 0
        self.bar_arrived: list = []
        self.bar_values: list = []
        self.bar_queue: list = []
        self.bar_result: dict = {}
        self.bar_site = None                     # where the current generation's first arrival called it
        self.bar_sites: list = []                # where each arrival called it
        self.bar_mixed = False                   # arrivals at different __syncthreads (prim.block_barrier)
        self.warpgroups: dict = {}               # warpgroup index -> prim.wgmma.Warpgroup


class ClusterRun:
    """Runs the CTAs of one cluster together, to completion or to the first error."""

    def __init__(self, launch: Launch, cluster_pos, order: int):
        self.launch, self.cfg, self.seed = launch, launch.cfg, launch.cfg.seed
        seed = launch.cfg.seed * 1000003 + order
        cfg = launch.cfg
        cx, cy, cz = launch.cluster
        self.ctas = []
        for rank, (i, j, k) in enumerate(_blocks(launch.cluster)):
            b = (cluster_pos[0] * cx + i, cluster_pos[1] * cy + j, cluster_pos[2] * cz + k)
            self.ctas.append(CTA(self, rank, b, (i, j, k)))
        self.cluster_pos = cluster_pos
        self.n_threads = len(self.ctas) * launch.threads_per_cta
        self.n_pseudo = 32 * len(self.ctas)
        width = self.n_threads + self.n_pseudo
        self.clocks_on = self.n_threads * width <= VC_ENTRIES_MAX
        self.vc = np.zeros((self.n_threads, width if self.clocks_on else 1), np.int64)
        if self.clocks_on:
            self.vc[np.arange(self.n_threads), np.arange(self.n_threads)] = 1
        on = cfg.on
        self.check_async = on("async")
        self.check_waitgroup = on("waitgroup")
        self.check_txcount = on("txcount")
        self.check_proxy = on("proxy") and self.clocks_on
        self.check_mbarrier = on("mbarrier")
        self.check_dsmem = on("dsmem") and self.clocks_on
        self.check_race = on("race") and self.clocks_on
        self.track = self.check_async or self.check_race or self.check_mbarrier or self.check_proxy
        self.sched = Scheduler(seed, cfg.switch, self.land_one, self.deadlock_error)
        self.rng = random.Random(seed ^ 0x5EED)          # copy completion order
        self.inflight: list = []                        # async ops that have not landed
        self.mbarriers: dict = {}                       # (rank, offset) -> Mbarrier
        self.pseudo: dict = {}                          # mbarrier key -> async-proxy clock column
        self.cluster_state = None                       # barrier.cluster (see prim.cluster)
        self.threads: list = []
        self.live = 0

    # ---- threads -----------------------------------------------------------------------------
    def build_threads(self):
        from .warps import Warp

        fn, args = self.launch.fn, self.launch.args
        per_cta = self.launch.threads_per_cta
        workers = scheduler.take(per_cta * len(self.ctas))
        vci = 0
        for cta in self.ctas:
            cta.warps = [Warp(cta, w) for w in range(-(-per_cta // 32))]
            for linear, (x, y, z) in enumerate(_blocks(self.launch.block)):
                t = workers[vci]
                t.assign(self, cta, (x, y, z), linear, vci, lambda: run_kernel(fn, args))
                cta.threads.append(t)
                cta.warps[t.warp_id].lanes[t.lane] = t
                vci += 1
            cta.live = len(cta.threads)
        self.threads = workers
        self.live = len(workers)
        self.sched.threads = workers
        self._done = 0
        self._done_lock = threading.Lock()
        self._all_done = threading.Event()

    def role_done(self):
        with self._done_lock:
            self._done += 1
            if self._done == len(self.threads):
                self._all_done.set()

    def thread_by_vci(self, i):
        return self.threads[i] if 0 <= i < len(self.threads) else None

    def run(self):
        self.build_threads()
        try:
            self.sched.start()
            deadline = time.monotonic() + self.cfg.timeout
            while not self._all_done.wait(timeout=max(0.01, min(1.0, deadline - time.monotonic()))):
                if time.monotonic() >= deadline and not self.sched.aborted:
                    self._interrupt(self.sched.current)
                    deadline = time.monotonic() + 30
        finally:
            if self._all_done.is_set():
                scheduler.give_back(self.threads)
        if self.sched.error is not None:
            raise self.sched.error
        self.finish()

    def _interrupt(self, th):
        """Raise ``Timeout`` inside the running thread (a loop that never reaches a switch point)."""
        if th is not None and th.ident is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(th.ident), ctypes.py_object(Timeout))

    def fail(self, th, exc):
        from .errors import SimError

        if isinstance(exc, Timeout):
            exc = SimTimeoutError("simulator", f"a launch must finish within {self.cfg.timeout:g} s "
                                  "(ASYNCPIPE_SIM_TIMEOUT)", "a thread that never reached a switch point",
                                  where=f"thread {tuple(th.threadIdx)} of block {tuple(th.blockIdx)}", seed=self.seed)
        elif not isinstance(exc, SimError):
            _locate(exc, th, self.seed)
        self.sched.fail(exc)

    def thread_exit(self, th):
        from .prim import exit_hooks

        exit_hooks.thread_exits(th)        # may raise (a check), which fails the launch
        th.state = EXITED
        self.live -= 1
        cta = th.cta
        cta.live -= 1
        self.sched.progress += 1
        exit_hooks.after_exit(th)
        if cta.live == 0:
            exit_hooks.cta_exits(cta)
        if self.live == 0:
            return
        self.sched._hand(self.sched._pick(th))

    def report_unacquired_async(self, th, mem, w, s):
        """A generic access to a word a TMA load wrote, by a thread that has not acquired the mbarrier
        phase the load completed in."""
        from .errors import UnwaitedAsyncReadError

        col = mem.w_tid[w]
        key = next((k for k, c in self.pseudo.items() if c == col), None)
        bar = self.mbarriers.get(key)
        from .prim.mbarrier_state import parity_error_for_read

        wrong = parity_error_for_read(th, bar, mem.w_clk[w] - 1, f"an access to word {w * 4:#x}", s)
        if wrong is not None:
            raise wrong
        name = bar.name() if bar is not None else "its mbarrier"
        last = th.last_waits.get(key)
        hint = "this thread has not waited on that barrier (nor passed a barrier after a thread that did)" \
            if last is None else (f"this thread's last wait on it asked for parity {last[0]} at "
                                  f"{describe_site(last[2])} while the barrier was in phase {last[1]}"
                                  + (" and returned at once (the phase before it counts as complete: wrong "
                                     "parity?)" if (last[1] & 1) != last[0] else ""))
        raise UnwaitedAsyncReadError(
            "shared memory access", "data a TMA copy wrote must be acquired (a wait on the mbarrier phase it "
            "completed in returned 1, or a barrier after a thread whose wait did) before threads use it",
            f"word {w * 4:#x} of block {tuple(mem.cta.blockIdx)}'s shared memory, written by a copy that completed "
            f"phase {mem.w_clk[w] - 1} of the {name}; {hint}", "PTX ISA, mbarrier; TMA",
            where=here(th, s), seed=self.seed)

    # ---- asynchronous copies -------------------------------------------------------------------
    def add_inflight(self, op):
        self.inflight.append(op)

    def land_one(self) -> bool:
        """Let one in-flight copy (drawn from the seed) complete. False when there is none."""
        if not self.inflight:
            return False
        i = self.rng.randrange(len(self.inflight))
        op = self.inflight.pop(i)
        op.land()
        self.sched.progress += 1
        return True

    def maybe_land(self):
        """At a switch point: sometimes a copy lands while threads run."""
        if self.inflight and self.rng.random() < 0.25:
            self.land_one()

    def finish(self):
        """After the last thread: what is still in flight lands (bulk stores write global memory)."""
        while self.land_one():
            pass

    # ---- deadlock ------------------------------------------------------------------------------
    def deadlock_error(self):
        from .prim import block_barrier, mbarrier_state

        for cta in self.ctas:
            if block_barrier.divergent(cta):
                return block_barrier.divergence_error(cta)

        tx = mbarrier_state.tx_deadlock(self)
        if tx is not None:
            return tx
        groups: dict = {}
        for t in self.threads:
            if t.state in (BLOCKED, POLLING):
                what = t.wait_what() if callable(t.wait_what) else str(t.wait_what)
                groups.setdefault((what, t.wait_site), []).append(t)
        lines, waiting = [], 0
        for (what, s), ts in groups.items():
            lines.append(f"{describe_threads(ts)} wait at {describe_site(s)}\n    for {what}")
            waiting += len(ts)
        got = (f"{waiting} thread{'s' if waiting != 1 else ''} waiting at {len(groups)} "
               f"place{'s' if len(groups) != 1 else ''}, none of which can ever proceed:")
        return DeadlockError("simulator", "every live thread waits for something no thread or copy will provide "
                             "(a hang on the GPU)", got, "deadlock detection", where="\n".join(lines),
                             seed=self.seed)


def _locate(exc, th, seed) -> None:
    """A Python error raised inside a kernel (a bad index, a float where an int belongs): its message
    gains the kernel line (and the helper's), the thread and the seed; its type stays."""
    where = (f"\n  at {describe_site(site_from_traceback(exc.__traceback__))}\n  {describe_thread(th)}"
             f"\n  (asyncpipe simulator, replay: ASYNCPIPE_SIM_SEED={seed})")
    plain = not isinstance(exc, (KeyError, AsyncpipeError))      # asyncpipe's own messages stay as they are
    if plain and len(exc.args) <= 1 and (not exc.args or isinstance(exc.args[0], str)):
        exc.args = ((exc.args[0] if exc.args else type(exc).__name__) + where,)
    elif hasattr(exc, "add_note"):
        exc.add_note(where.strip())


def describe_threads(ts) -> str:
    """``block (0, 0, 0) threads 0..127`` (runs of consecutive linear ids per block)."""
    by_block: dict = {}
    for t in ts:
        by_block.setdefault(tuple(t.blockIdx), []).append(t.thread_id)
    parts = []
    for b, ids in by_block.items():
        ids.sort()
        runs, start, prev = [], ids[0], ids[0]
        for i in ids[1:] + [None]:
            if i is not None and i == prev + 1:
                prev = i
                continue
            runs.append(f"{start}" if start == prev else f"{start}..{prev}")
            if i is not None:
                start = prev = i
        parts.append(f"block {b} thread{'s' if len(ids) > 1 else ''} {', '.join(runs)}")
    return "; ".join(parts)


def run_launch(launch: Launch):
    """Run every cluster of ``launch``; raise the first error a cluster reports."""
    order = _blocks(launch.nclusters)
    rng = random.Random(launch.cfg.seed)
    rng.shuffle(order)
    for n, pos in enumerate(order):
        ClusterRun(launch, pos, n).run()


__all__ = ["Launch", "ClusterRun", "CTA", "run_launch", "Abort"]
