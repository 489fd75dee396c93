"""Where something happened: the kernel source line and the thread, as error messages name them.

A *site* is ``(code object, instruction offset)`` of the kernel frame that made a call (``frame.f_lasti``):
cheap to record at every access, turned into ``file:line: source`` only when a message needs it. Not the
line number: CPython computes ``frame.f_lineno`` by walking the code's line table from its start, which
in an unrolled kernel of a thousand lines cost more than everything else an access does (``line_of``
looks the offset up in a table built once per code object). When
the call came from a device function or one of asyncpipe's helpers (``pipeline.ring``), the site
is ``(code, line, caller)``, ``caller`` the site of the frame that called it, up to the kernel:
messages name the kernel's line first, then the helper's. A statement that spans several lines is
printed whole.
"""

from __future__ import annotations

import ast
import io
import linecache
import os
import sys
import tokenize
from bisect import bisect_right

_SKIP = (os.path.join("asyncpipe", "sim") + os.sep, os.path.join("asyncpipe", "ptx") + os.sep)
_NUMBA_SIM = os.path.join("numba", "cuda", "simulator")
_CHAIN_MAX = 8             # caller frames named at most (a recursive device function)
_STATEMENT_MAX = 200       # characters of a statement printed
_skipped_file: dict = {}   # file name -> bool
_line_tables: dict = {}    # id(code) -> (code, instruction offsets where a line starts, their lines)


def run_kernel(fn, args):
    """The frame every simulated thread runs its kernel under: where a site's chain of callers stops."""
    return fn(*args)


_ENTRY = run_kernel.__code__


def _skipped(filename: str) -> bool:
    return any(s in filename for s in _SKIP) or _NUMBA_SIM in filename


def _skip(code) -> bool:
    name = code.co_filename            # a str caches its hash (a code object's hash reads all its bytecode)
    r = _skipped_file.get(name)
    if r is None:
        r = _skipped_file[name] = _skipped(name)
    return r


def line_of(code, offset: int) -> int:
    """The source line of the instruction at byte ``offset`` of ``code`` (what ``f_lineno`` says of a frame
    whose ``f_lasti`` is ``offset``)."""
    table = _line_tables.get(id(code))
    if table is None or table[0] is not code:
        starts, lines = [], []
        for start, _end, line in code.co_lines():
            starts.append(start)
            lines.append(line)
        table = _line_tables[id(code)] = (code, starts, lines)
    i = bisect_right(table[1], offset) - 1
    line = table[2][i] if i >= 0 else None
    return code.co_firstlineno if line is None else line


def _chain(f):
    """The site of frame ``f`` (user code) with its user-code callers up to the kernel."""
    frames = []
    while f is not None and f.f_code is not _ENTRY and len(frames) <= _CHAIN_MAX:
        if not _skip(f.f_code):
            frames.append((f.f_code, f.f_lasti))
        f = f.f_back
    if f is None and frames and len(frames) > 1:      # outside a simulated thread: the innermost only
        frames = frames[:1]
    s = None
    for code, offset in reversed(frames):
        s = (code, offset) if s is None else (code, offset, s)
    return s


def site(depth: int = 1):
    """The nearest calling frame that is kernel code (not asyncpipe's simulator or primitives, nor
    numba's simulator), with its callers up to the kernel. ``depth`` is accepted for symmetry with
    ``fast_site``."""
    f = sys._getframe(1)
    while f is not None and _skip(f.f_code):
        f = f.f_back
    if f is None:
        return None
    return _chain(f)


def fast_site(depth: int):
    """``site`` for callers that know exactly how deep the kernel frame is (shared-memory accesses)."""
    f = sys._getframe(depth + 1)
    return (f.f_code, f.f_lasti)


def with_callers(s):
    """A site recorded without its callers (``fast_site``, a shared-memory access), completed from the
    running thread's stack when that frame is still on it."""
    if s is None or len(s) != 2:
        return s
    f = sys._getframe(1)
    while f is not None and not (f.f_code is s[0] and f.f_lasti == s[1]):
        f = f.f_back
    return s if f is None else (_chain(f) or s)


def site_from_traceback(tb):
    """The innermost user-code frame of traceback ``tb`` (an exception raised in a kernel), with its
    callers up to the kernel; None when no frame is user code."""
    frames = []
    while tb is not None:
        code = tb.tb_frame.f_code
        if code is _ENTRY:
            frames = []
        elif not _skip(code):
            frames.append((code, tb.tb_lasti))
        tb = tb.tb_next
    s = None
    for code, offset in frames[-_CHAIN_MAX:]:
        s = (code, offset) if s is None else (code, offset, s)
    return s


# ---- printing ------------------------------------------------------------------------------------
_trees: dict = {}          # filename -> {line: (first, last)} of each statement (its header for compound ones)


def _spans(filename):
    spans = _trees.get(filename)
    if spans is None:
        spans = {}
        try:
            tree = ast.parse("".join(linecache.getlines(filename)))
        except (SyntaxError, ValueError):
            tree = None
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.stmt):
                body = getattr(node, "body", None)
                last = (body[0].lineno - 1) if isinstance(body, list) and body and \
                    isinstance(body[0], ast.stmt) else node.end_lineno
                last = max(last, node.lineno)
                for ln in range(node.lineno, last + 1):
                    old = spans.get(ln)
                    if old is None or old[1] - old[0] > last - node.lineno:
                        spans[ln] = (node.lineno, last)
        _trees[filename] = spans
    return spans


def statement(filename: str, line: int) -> str:
    """The source of the statement at ``line``, on one line (a statement over several lines joined)."""
    first, last = _spans(filename).get(line, (line, line))
    if last - first > 20:
        first = last = line
    text = " ".join(_code_only(linecache.getline(filename, n)) for n in range(first, last + 1)).strip()
    for a, b in (("( ", "("), ("[ ", "["), (" )", ")"), (" ]", "]")):
        text = text.replace(a, b)
    return text if len(text) <= _STATEMENT_MAX else text[:_STATEMENT_MAX - 3] + "..."


def _code_only(line: str) -> str:
    """``line`` without its comment (a ``#`` outside strings), stripped."""
    if "#" in line:
        try:
            for tok in tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline):
                if tok.type == tokenize.COMMENT:
                    return line.strip()[:tok.start[1]].rstrip()
        except (tokenize.TokenError, IndentationError, SyntaxError):
            pass
    return line.strip()


def _one(code, offset) -> str:
    line = line_of(code, offset)
    text = statement(code.co_filename, line)
    name = os.path.basename(code.co_filename)
    return f"{name}:{line} ({code.co_name}): {text}" if text else f"{name}:{line} ({code.co_name})"


def describe_site(s) -> str:
    """``kernel.py:42 (add_one): tile[i] += 1``; for a call inside a helper or device function, the
    kernel's line first: ``kernel.py:42 (k): ring.wait(r) [in ring.py:88 (wait): ptx.mbarrier_...]``."""
    if s is None:
        return "an unknown line"
    parts = []
    while s is not None:
        parts.append(_one(s[0], s[1]))
        s = s[2] if len(s) > 2 else None
    out = parts[-1]
    for p in reversed(parts[:-1]):
        out += f" [in {p}"
    return out + "]" * (len(parts) - 1)


def describe_thread(th) -> str:
    """``thread (5, 0, 0) of block (1, 0, 0) (warp 0, lane 5)``."""
    if th is None:
        return "the host"
    return f"thread {tuple(th.threadIdx)} of block {tuple(th.blockIdx)} (warp {th.warp_id}, lane {th.lane})"


def here(th, s=None) -> str:
    """The ``where`` line of an error: the source line and the thread."""
    if s is None:
        s = site(2)
    else:
        s = with_callers(s)
    return f"at {describe_site(s)}\n{describe_thread(th)}"
