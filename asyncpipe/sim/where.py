"""Where something happened: the kernel source line and the thread, as error messages name them.

A *site* is ``(code object, line number)`` of the kernel frame that made a call: cheap to record at
every access (no string work), turned into ``file:line: source`` only when a message needs it.
"""

from __future__ import annotations

import linecache
import os
import sys

_SKIP = (os.path.join("asyncpipe", "sim") + os.sep, os.path.join("asyncpipe", "ptx") + os.sep)
_NUMBA_SIM = os.path.join("numba", "cuda", "simulator")


def _skipped(filename: str) -> bool:
    return any(s in filename for s in _SKIP) or _NUMBA_SIM in filename


def site(depth: int = 1):
    """The nearest calling frame that is kernel code (not asyncpipe's simulator or primitives, nor
    numba's simulator): ``(code, line)``. ``depth`` is accepted for symmetry with ``fast_site``."""
    f = sys._getframe(1)
    while f is not None and _skipped(f.f_code.co_filename):
        f = f.f_back
    if f is None:
        return None
    return (f.f_code, f.f_lineno)


def fast_site(depth: int):
    """``site`` for callers that know exactly how deep the kernel frame is (shared-memory accesses)."""
    f = sys._getframe(depth + 1)
    return (f.f_code, f.f_lineno)


def describe_site(s) -> str:
    """``kernel.py:42 (add_one): tile[i] += 1``."""
    if s is None:
        return "an unknown line"
    code, line = s
    text = linecache.getline(code.co_filename, line).strip()
    name = os.path.basename(code.co_filename)
    return f"{name}:{line} ({code.co_name}): {text}" if text else f"{name}:{line} ({code.co_name})"


def describe_thread(th) -> str:
    """``thread (5, 0, 0) of block (1, 0, 0) (warp 0, lane 5)``."""
    if th is None:
        return "the host"
    return f"thread {tuple(th.threadIdx)} of block {tuple(th.blockIdx)} (warp {th.warp_id}, lane {th.lane})"


def here(th, s=None) -> str:
    """The ``where`` line of an error: the source line and the thread."""
    if s is None:
        s = site(2)
    return f"at {describe_site(s)}\n{describe_thread(th)}"
