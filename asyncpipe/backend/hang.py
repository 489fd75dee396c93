"""Hangs that explain themselves: the host side of ``ASYNCPIPE_DEBUG=1`` on the GPU.

With the switch on, kernels call the bounded forms of the blocking waits (``ptx_shims/debug.cu``:
mbarrier waits, named barriers, the cluster barrier). A wait that lasts longer than
``ASYNCPIPE_DEBUG_TIMEOUT`` seconds (default 1) gives up, records which barrier, phase, block and
thread in the kernel module's ``ap_debug`` record and releases every other wait, so the kernel ends.
Around each launch of such a kernel, whether numba launches it (``kernel[grid, block](...)``, patched
here) or asyncpipe does (``asyncpipe.host.launch`` and prepared launches), the host

1. resets the record (the timeout, a fresh nonce for the named-barrier state, and for a cluster launch
   zeroed arrival counters the software cluster barrier counts in),
2. launches, then waits for the kernel at most ``2 * timeout + 5`` seconds, and
3. raises ``HangError`` naming the barrier, the phase, the block and the thread if a wait gave up, or,
   if the kernel still runs (a hang in something no debug form bounds: ``cuda.syncthreads()`` in a
   branch, a spin loop of the kernel's own), a ``HangError`` saying so.

A kernel that links none of the debug forms has no record and launches as before. Launches are
synchronous in debug mode.
"""

from __future__ import annotations

import os
import time

import numpy as np

from ..errors import AsyncpipeError

ENV_TIMEOUT = "ASYNCPIPE_DEBUG_TIMEOUT"
SYMBOL = "ap_debug"
_U4, _U8 = np.uint32, np.uint64
# ptx_shims/debug.cu's struct ap_debug_record, field for field
RECORD = np.dtype([
    ("timeout_ns", _U8), ("cluster_words", _U8), ("thread_arrivals", _U8), ("poll_slots", _U8),
    ("nonce", _U4), ("recorded", _U4), ("given_up", _U4), ("released", _U4),
    ("kind", _U4), ("barrier", _U4), ("phase", _U4), ("arrived", _U4), ("expected", _U4),
    ("block", _U4, 3), ("thread", _U4, 3), ("smid", _U4), ("elapsed_ns", _U8),
], align=True)
KINDS = {1: "mbarrier_wait_parity", 2: "mbarrier_try_wait_parity", 3: "a named barrier", 4: "the cluster barrier",
         5: "mbarrier_test_wait_parity"}
POLL_SLOT_WORDS = 2          # ptx_shims/debug.cu's struct ap_poll: one u64 and two u32 per thread


class HangError(AsyncpipeError):
    """A launch under ``ASYNCPIPE_DEBUG=1`` would have hung: a wait gave up (or the kernel did not end).
    ``record`` holds what the wait that gave up first wrote (``RECORD``'s fields), None when no wait did."""

    def __init__(self, api: str, rule: str, got, record=None):
        super().__init__(api, rule, got, "ASYNCPIPE_DEBUG")
        self.record = record


def timeout_s() -> float:
    raw = os.environ.get(ENV_TIMEOUT, "1")
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise AsyncpipeError(ENV_TIMEOUT, "the debug wait timeout is a number of seconds above 0", repr(raw))
    return value


def _record_symbol(cufunc):
    """The ``ap_debug`` record of ``cufunc``'s module as ``(MemoryPointer, size)``, or None when the kernel
    links no debug form."""
    from numba.cuda.cudadrv.driver import CudaAPIError

    try:
        return cufunc.module.get_global_symbol(SYMBOL)
    except CudaAPIError:      # CUDA_ERROR_NOT_FOUND: no debug form in this kernel
        return None


class _Scratch:
    """Zeroed device memory for the software cluster barrier, kept and grown across launches."""

    arrays: dict = {}

    @classmethod
    def zeroed(cls, name: str, count: int, dtype) -> int:
        """The device address of ``count`` zeroed elements of ``dtype``."""
        from numba import cuda
        from numba.cuda.cudadrv import driver

        have = cls.arrays.get(name)
        if have is None or have.size < count:
            have = cls.arrays[name] = cuda.device_array(max(count, 1), dtype)
        driver.device_memset(have, 0, max(count, 1) * have.dtype.itemsize)
        return have.device_ctypes_pointer.value


class Armed:
    """One launch's record, reset; ``check`` after the launch."""

    def __init__(self, name: str, memory, grid, block, cluster):
        from numba import cuda
        from numba.cuda.cudadrv import driver

        self.name, self.memory, self.timeout = name, memory, timeout_s()
        record = np.zeros(1, RECORD)
        record["timeout_ns"] = int(self.timeout * 1e9)
        record["nonce"] = int(np.random.default_rng().integers(1, 2**32))
        blocks = int(np.prod(grid))
        record["poll_slots"] = _Scratch.zeroed("polls", POLL_SLOT_WORDS * blocks * int(np.prod(block)), np.uint64)
        if cluster is not None:
            record["cluster_words"] = _Scratch.zeroed("clusters", blocks // int(np.prod(cluster)), np.uint64)
            record["thread_arrivals"] = _Scratch.zeroed("threads", blocks * int(np.prod(block)), np.uint32)
        driver.host_to_device(memory, record.ctypes.data, RECORD.itemsize)
        cuda.synchronize()          # the record is in place before the kernel starts, whatever its stream

    def check(self, stream) -> None:
        """Wait for the launch (bounded) and raise ``HangError`` if a wait gave up or the kernel still runs."""
        from cuda.bindings import driver as cu
        from numba.cuda.cudadrv import driver

        err, event = cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING)
        _ok(err, "cuEventCreate")
        _ok(cu.cuEventRecord(event, _stream_handle(stream))[0], "cuEventRecord")
        limit = time.monotonic() + 2 * self.timeout + 5
        try:
            while True:
                err = cu.cuEventQuery(event)[0]
                if err == cu.CUresult.CUDA_SUCCESS:
                    break
                if err != cu.CUresult.CUDA_ERROR_NOT_READY:
                    raise RuntimeError(f"kernel {self.name}: the launch failed under ASYNCPIPE_DEBUG "
                                       f"({cu.cuGetErrorName(err)[1].decode()}); the CUDA context is unusable, "
                                       "restart the process")
                if time.monotonic() > limit:
                    raise HangError(
                        f"kernel {self.name}", "every debug wait gives up within the timeout, so a kernel "
                        "still running after 2 x timeout + 5 s hangs in something asyncpipe does not bound: "
                        "cuda.syncthreads() not reached by every thread of the block, or a spin loop of "
                        "the kernel's own; the GPU stays busy until the process ends",
                        f"still running after {2 * self.timeout + 5:.1f} s")
                time.sleep(0.001)
        finally:
            cu.cuEventDestroy(event)
        record = np.zeros(1, RECORD)
        driver.device_to_host(record.ctypes.data, self.memory, RECORD.itemsize)
        if record["recorded"][0]:
            raise HangError(f"kernel {self.name}", _rule(record[0], self.timeout), _got(record[0]), record[0])


def _ok(err, what: str) -> None:
    from cuda.bindings import driver as cu

    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{what} failed: {cu.cuGetErrorName(err)[1].decode()}")


def _stream_handle(stream):
    from numba.cuda.cudadrv.driver import _to_core_stream

    return _to_core_stream(stream).handle


def _where(r) -> str:
    return f"block {tuple(int(v) for v in r['block'])} thread {tuple(int(v) for v in r['thread'])}"


def _rule(r, timeout: float) -> str:
    kind = int(r["kind"])
    after = f"after {timeout:g} s"
    if kind in (1, 2, 5):
        what = "gave up" if kind == 1 else "kept answering 0 to this thread's polls"
        return (f"{KINDS[kind]} {what} {after}: the phase it waited for never completed. A phase completes "
                "when the arrivals mbarrier_init asked for have come and every byte announced with expect_tx "
                "has arrived: look for a missing arrive, an expect_tx above the bytes copied, a copy that "
                "signals another barrier, or a wait for the wrong parity (a fresh barrier is in phase 0)")
    if kind == 3:
        return (f"{KINDS[kind]} gave up {after}: fewer threads than its count arrived. bar_sync(a, b) and "
                "bar_arrive(a, b) complete barrier a when b threads (whole warps) have arrived: look for a "
                "warp that skips it, or a count b that is not the number of threads that call it")
    if kind == 4:
        return (f"{KINDS[kind]} gave up {after}: not every thread of the cluster arrived. Every thread of "
                "every CTA in the cluster must call barrier_cluster_arrive and then barrier_cluster_wait: "
                "look for a CTA or warp that returns early or skips it")
    return f"a debug wait gave up {after} (kind {kind})"


def _got(r) -> str:
    kind = int(r["kind"])
    where = _where(r)
    others = f"{int(r['given_up']) - 1} other wait(s) gave up, {int(r['released'])} were released"
    if kind in (1, 2, 5):
        what = (f"{where} waited for parity {int(r['phase'])} of the mbarrier at shared offset "
                f"{int(r['barrier']):#x}")
    elif kind == 3:
        what = (f"{where} waited at named barrier {int(r['barrier'])} for {int(r['expected'])} threads, "
                f"{int(r['arrived'])} arrived (use {int(r['phase'])} of it in that block)")
    else:
        what = (f"{where} waited at the cluster barrier of cluster {int(r['barrier'])} for "
                f"{int(r['expected'])} threads, {int(r['arrived'])} arrived (use {int(r['phase'])} of it)")
    return f"{what}, {int(r['elapsed_ns']) / 1e9:.2f} s on SM {int(r['smid'])}; {others}"


def arm(cufunc, name: str, grid, block, cluster=None) -> Armed | None:
    """Reset ``cufunc``'s record before a launch; None when the kernel has no debug form."""
    found = _record_symbol(cufunc)
    if found is None:
        return None
    memory, size = found
    if size != RECORD.itemsize:
        raise RuntimeError(f"{SYMBOL} is {size} bytes in the kernel, {RECORD.itemsize} here: "
                           "ptx_shims/debug.cu and asyncpipe/backend/hang.py disagree")
    return Armed(name, memory, grid, block, cluster)


def install() -> None:
    """Make numba's own launch (``kernel[grid, block](...)``) arm and check kernels with debug forms."""
    from numba.cuda.dispatcher import _Kernel

    if getattr(_Kernel.launch, "asyncpipe_debug", False):
        return
    original = _Kernel.launch

    def launch(self, args, griddim, blockdim, stream=0, sharedmem=0):
        name = getattr(getattr(self, "py_func", None), "__qualname__", self.entry_name)
        armed = arm(self._codelibrary.get_cufunc(), name, griddim, blockdim)
        original(self, args, griddim, blockdim, stream, sharedmem)
        if armed is not None:
            armed.check(stream)

    launch.asyncpipe_debug = True
    _Kernel.launch = launch
