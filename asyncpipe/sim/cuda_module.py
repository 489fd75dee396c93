"""The ``cuda`` a kernel sees while the asyncpipe simulator runs it.

numba's simulator swaps a fake module into the kernel's globals for the launch
(``numba.cuda.simulator.kernelapi.swapped_cuda_module``); asyncpipe reuses that mechanism and
numba's ``FakeCUDAModule`` (indices, dimensions, math helpers, vector types), and replaces what must
know about clusters, warps and the scheduler: shared and local arrays, barriers, warp collectives,
atomics, ``nanosleep``.
"""

from __future__ import annotations

from threading import current_thread

from numba.cuda.simulator.kernelapi import FakeCUDAModule

from . import warps
from .arrays import SharedArray
from .prim import block_barrier
from .prim.common import enter

FULL = 0xFFFFFFFF


class SimAtomics:
    """``cuda.atomic.*``: one thread runs at a time, so a read-modify-write is atomic by itself. On shared
    memory the access is checked like any other (pending copies), but atomics do not race each other."""

    def _rmw(self, ary, idx, update):
        th = enter("cuda.atomic")
        if isinstance(ary, SharedArray):
            flat = ary._flat(idx)
            if flat.__class__ is tuple:
                raise IndexError("cuda.atomic needs one index per dimension")
            old = ary._np[flat]
            new = update(old)
            if new is not None:
                ary._np[flat] = new
            mem = ary._mem
            if th.sim.track:
                w = (ary._off + flat * ary._isz) >> 2
                if mem.pending[w] is not None and th.sim.check_async:
                    mem.pending[w].report_generic_access(th, mem, w, None, "atomic")
                mem.w_tid[w] = -1          # atomics are not tracked as racing accesses
                mem.r_tid[w] = -1
                mem.r_many.pop(w, None)
            th.sim.sched.progress += 1
            return old
        old = ary[idx]
        new = update(old)
        if new is not None:
            ary[idx] = new
        th.sim.sched.progress += 1
        return old

    def add(self, ary, idx, val):
        return self._rmw(ary, idx, lambda o: o + val)

    def sub(self, ary, idx, val):
        return self._rmw(ary, idx, lambda o: o - val)

    def and_(self, ary, idx, val):
        return self._rmw(ary, idx, lambda o: o & val)

    def or_(self, ary, idx, val):
        return self._rmw(ary, idx, lambda o: o | val)

    def xor(self, ary, idx, val):
        return self._rmw(ary, idx, lambda o: o ^ val)

    def max(self, ary, idx, val):
        return self._rmw(ary, idx, lambda o: max(o, val))

    def min(self, ary, idx, val):
        return self._rmw(ary, idx, lambda o: min(o, val))

    def nanmax(self, ary, idx, val):
        return self._rmw(ary, idx, lambda o: val if o != o else (o if val != val else max(o, val)))

    def nanmin(self, ary, idx, val):
        return self._rmw(ary, idx, lambda o: val if o != o else (o if val != val else min(o, val)))

    def exch(self, ary, idx, val):
        return self._rmw(ary, idx, lambda o: val)

    def inc(self, ary, idx, val):
        return self._rmw(ary, idx, lambda o: 0 if o >= val else o + 1)

    def dec(self, ary, idx, val):
        return self._rmw(ary, idx, lambda o: val if (o == 0 or o > val) else o - 1)

    def cas(self, ary, idx, old, val):
        return self._rmw(ary, idx, lambda o: val if o == old else None)

    def compare_and_swap(self, ary, old, val):
        return self.cas(ary, 0, old, val)


class SimCudaModule(FakeCUDAModule):
    """``cuda`` inside a simulated kernel (one per launch)."""

    def __init__(self, launch):
        super().__init__(launch.grid, launch.block, launch.dynamic_bytes)
        self._shared = launch.shared
        self._local = launch.local
        self._atomic = SimAtomics()

    @property
    def laneid(self):
        return current_thread().lane

    # ---- block barriers --------------------------------------------------------------------------
    def syncthreads(self):
        block_barrier.syncthreads()

    def syncthreads_count(self, value):
        return block_barrier.syncthreads(value, "cuda.syncthreads_count")[0]

    def syncthreads_and(self, value):
        return block_barrier.syncthreads(value, "cuda.syncthreads_and")[1]

    def syncthreads_or(self, value):
        return block_barrier.syncthreads(value, "cuda.syncthreads_or")[2]

    def threadfence(self):
        enter("cuda.threadfence")

    def threadfence_block(self):
        enter("cuda.threadfence_block")

    def threadfence_system(self):
        enter("cuda.threadfence_system")

    def nanosleep(self, ns):
        th = enter("cuda.nanosleep")
        if th.sim.sched.ready:                    # a nap: always let someone else run
            th.sim.sched.memory_point(th)

    # ---- warps -----------------------------------------------------------------------------------
    def syncwarp(self, mask=FULL):
        th = current_thread()
        warp = th.cta.warps[th.warp_id]
        warps.collective("__syncwarp", mask, None, warps.syncwarp_join(warp), "cuda.syncwarp")

    def activemask(self):
        th = current_thread()
        return th.cta.warps[th.warp_id].active

    def lanemask_lt(self):
        return (1 << current_thread().lane) - 1

    def shfl_sync(self, mask, value, src_lane):
        return warps.collective("shfl.sync.idx", mask, (value, int(src_lane)),
                                warps.shfl(lambda i, s: s % 32), "cuda.shfl_sync")

    def shfl_up_sync(self, mask, value, delta):
        return warps.collective("shfl.sync.up", mask, (value, int(delta)),
                                warps.shfl(lambda i, d: i - d if i - d >= 0 else None), "cuda.shfl_up_sync")

    def shfl_down_sync(self, mask, value, delta):
        return warps.collective("shfl.sync.down", mask, (value, int(delta)),
                                warps.shfl(lambda i, d: i + d if i + d < 32 else None), "cuda.shfl_down_sync")

    def shfl_xor_sync(self, mask, value, lane_mask):
        return warps.collective("shfl.sync.bfly", mask, (value, int(lane_mask)),
                                warps.shfl(lambda i, m: (i ^ m) if (i ^ m) < 32 else None), "cuda.shfl_xor_sync")

    def _vote(self, kind, mask, pred, combine):
        return warps.collective(kind, mask, bool(pred), lambda vals, m: {i: combine(vals, m) for i in vals},
                                f"cuda.{kind}")

    def all_sync(self, mask, pred):
        return int(self._vote("all_sync", mask, pred, lambda v, m: all(v.values())))

    def any_sync(self, mask, pred):
        return int(self._vote("any_sync", mask, pred, lambda v, m: any(v.values())))

    def eq_sync(self, mask, pred):
        return int(self._vote("eq_sync", mask, pred, lambda v, m: len(set(v.values())) == 1))

    def ballot_sync(self, mask, pred):
        return self._vote("ballot_sync", mask, pred, lambda v, m: sum(1 << i for i, p in v.items() if p))

    def match_any_sync(self, mask, value):
        def compute(vals, m):
            return {i: sum(1 << j for j, w in vals.items() if w == v) for i, v in vals.items()}
        return warps.collective("match_any_sync", mask, value, compute, "cuda.match_any_sync")

    def match_all_sync(self, mask, value):
        def compute(vals, m):
            same = len(set(vals.values())) == 1
            return {i: ((m if same else 0), same) for i in vals}
        return warps.collective("match_all_sync", mask, value, compute, "cuda.match_all_sync")


__all__ = ["SimCudaModule", "SimAtomics"]
