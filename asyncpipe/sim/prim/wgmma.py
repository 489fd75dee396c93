"""wgmma and setmaxnreg in the simulator: warpgroup rendezvous, mmas pending until their group retires.

**Warpgroups.** Every ``wgmma.*`` and ``setmaxnreg`` is ``.sync.aligned``: the 128 threads of a
warpgroup (threads 128*g .. 128*g + 127 of the block) meet at the same instruction, the same source
line, and the last to arrive carries it out for all of them (``rendezvous``). A thread that reaches
another one meanwhile is a divergent warpgroup (``WarpgroupError``); operands the PTX ISA wants
uniform (descriptors, scale-d, the transposes, N, the register count) are compared across the 128.

**Asynchrony.** ``mma_async`` reads its shared-memory operands when issued (the checks of an async
proxy read: nothing pending there, TMA data acquired, generic writes fenced with
``fence.proxy.async`` and ordered before the issue) and computes the product then; the accumulators
change only when a ``wgmma.wait_group`` retires the mma's group (``commit_group`` closes groups), in
issue order, so chained mmas on one accumulator compose as on the GPU. Until then the accumulator
arrays are guarded (any element access raises ``WgmmaPendingError`` naming the group and the mma's
line) and the operand words are marked (a generic or TMA write over them raises). A thread that
exits retires what its warpgroup left pending, as the wait ptxas puts before ``EXIT`` does.

**wgmma.fence.** The PTX ISA requires it before a warpgroup's first mma and between a thread's own
accesses to accumulator registers and the next mma that uses them: ``LocalArray.touched`` records
such an access, the fence clears it, and an mma that finds it set (or a warpgroup with no fence yet)
raises ``WgmmaFenceError``. A's registers in the ``_rs`` forms are values here, so a change to them
while the mma is pending cannot be seen.

**Operands from shared memory** are gathered through the matrix descriptor in the canonical layouts
of the PTX ISA ("Shared Memory Matrix Layout"; CUTLASS's ``GmmaDescriptor`` comments spell the same
layouts), with the swizzle applied to the absolute shared address as TMA writes it (16-byte chunk
bits 4..6 XOR address bits 7..9, fewer bits for 64B and 32B).

**FP8** (``.e4m3``/``.e5m2``, m64nNk32): the same layouts with 1-byte elements (16 per core-matrix row,
K = 32 per instruction: 32 bytes of each K-major row, as for k16 with 2-byte elements); both operands
K-major; A in registers is 16 bytes per thread (``a_row_col_8bit``). Codes decode exactly by OCP OFP8
(``asyncpipe.formats.minifloat``: E4M3 bias 7, no infinities, NaN 0x7F/0xFF, max 448; E5M2 bias 15,
IEEE-like with infinities and NaNs).
"""

from __future__ import annotations

import functools

import numpy as np

from ... import wgmma_layout as W
from ...formats.minifloat import E4M3, E5M2, decode
from ..arrays import LOCAL, LocalArray, Ptr, shared_operand
from ..errors import SimUsageError, WarpgroupError, WgmmaFenceError, WgmmaPendingError
from ..scheduler import EXITED
from ..where import describe_site, describe_thread, here, site
from .common import enter, fenced

WG = W.WARPGROUP_THREADS
WAIT_GROUP_MAX = 7
_SRC = "PTX ISA, wgmma.mma_async"
_SRC_ALIGNED = "PTX ISA, wgmma: .sync.aligned (all threads of the warpgroup execute the same instruction)"
_SRC_FENCE = "PTX ISA, wgmma.fence"
_SRC_SETMAXNREG = "PTX ISA, setmaxnreg"
_SWIZZLE_BYTES = {W.SWIZZLE_NONE: 0, W.SWIZZLE_32B: 32, W.SWIZZLE_64B: 64, W.SWIZZLE_128B: 128}
_SWIZZLE_NAME = {0: "none", 32: "32B", 64: "64B", 128: "128B"}
_SWIZZLE_MASK = {0: 0, 32: 1, 64: 3, 128: 7}      # address bits 7.. XORed into the 16-byte chunk bits 4..
ELEM_BYTES = 2                                      # bf16 / f16
CHUNK = 16                                          # bytes of a core-matrix row
FP8 = {"e4m3": E4M3, "e5m2": E5M2}                  # the 1-byte input types (m64nNk32)


def elem_bytes(ab: str) -> int:
    """Bytes of one A/B element of the input type ``ab``: 1 for e4m3/e5m2, 2 for bf16/f16."""
    return 1 if ab in FP8 else ELEM_BYTES


def k_of(eb: int) -> int:
    """K of one instruction with ``eb``-byte elements: 32 bytes of each row, two core-matrix chunks
    (k16 for 16-bit types, k32 for 8-bit ones)."""
    return 2 * CHUNK // eb


# ---------------------------------------------------------------------------------------------
# Descriptors and fragments (pure)
# ---------------------------------------------------------------------------------------------
def decode_descriptor(desc: int) -> dict:
    """The fields of a 64-bit matrix descriptor, addresses and offsets in bytes."""
    desc = int(desc)
    field = (1 << 14) - 1
    return {"start": (desc & field) << 4, "lbo": ((desc >> W.DESC_LBO_BIT) & field) << 4,
            "sbo": ((desc >> W.DESC_SBO_BIT) & field) << 4,
            "base_offset": (desc >> W.DESC_BASE_OFFSET_BIT) & W.DESC_BASE_OFFSET_MASK,
            "swizzle": _SWIZZLE_BYTES[(desc >> W.DESC_SWIZZLE_BIT) & 3]}


def operand_offsets(desc: int, rows: int, mn_major: bool, elem_bytes: int = ELEM_BYTES) -> np.ndarray:
    """Shared-memory byte offsets (``rows`` x K, int64; K = 16 for 16-bit elements, 32 for 8-bit ones)
    of the elements (mn, k) of an operand (A: rows = M = 64; B: rows = N) that ``desc`` describes,
    K-major (``mn_major`` False) or MN-major.

    Canonical layouts, T = 16 / ``elem_bytes`` elements per 16-byte chunk (8 for bf16/f16, 16 for
    e4m3/e5m2; the formulas below spell T = 8), W the swizzle width in bytes:

    - K-major, no swizzle: core matrices of 8 rows x 16 bytes; mn % 8 steps 16 bytes, mn // 8 steps
      SBO, k % 8 steps 2 bytes, k // 8 steps LBO.
    - K-major, W-byte swizzle: rows of W bytes; mn % 8 steps W, mn // 8 steps SBO, k % 8 steps 2
      bytes, k // 8 steps 16 bytes (LBO unused). For 1-byte elements: k % 16 steps 1 byte, k // 16
      steps 16 bytes.
    - MN-major, no swizzle: mn % 8 steps 2 bytes, mn // 8 steps SBO, k % 8 steps 16 bytes, k // 8
      steps LBO.
    - MN-major, W-byte swizzle: mn % (W / 2) runs along a W-byte row, mn // (W / 2) steps LBO;
      k % 8 steps W, k // 8 steps SBO.
    """
    f = decode_descriptor(desc)
    w, lbo, sbo = f["swizzle"], f["lbo"], f["sbo"]
    eb = elem_bytes
    t = CHUNK // eb
    mn = np.arange(rows, dtype=np.int64)[:, None]
    k = np.arange(k_of(eb), dtype=np.int64)[None, :]
    if not mn_major:
        if w == 0:
            off = (mn % 8) * CHUNK + (mn // 8) * sbo + (k % t) * eb + (k // t) * lbo
        else:
            off = (mn % 8) * w + (mn // 8) * sbo + (k % t) * eb + (k // t) * CHUNK
    else:
        if w == 0:
            off = (mn % t) * eb + (mn // t) * sbo + (k % 8) * CHUNK + (k // 8) * lbo
        else:
            per_row = w // eb
            off = (mn % per_row) * eb + (mn // per_row) * lbo + (k % 8) * w + (k // 8) * sbo
    a = f["start"] + off
    if w:
        a = a ^ (((a >> 7) & _SWIZZLE_MASK[w]) << 4)
    return a


@functools.cache
def d_fragment(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns of D (64 x n) that each warpgroup thread's accumulators hold: (128, n/2) each."""
    rc = np.array([[W.d_row_col(t, i) for i in range(W.accumulators(n))] for t in range(WG)], np.int64)
    return rc[..., 0], rc[..., 1]


@functools.cache
def a_fragment() -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns of A (64 x 16) of each thread's eight 16-bit register halves (``_rs``)."""
    rc = np.array([[W.a_row_col(t, e) for e in range(8)] for t in range(WG)], np.int64)
    return rc[..., 0], rc[..., 1]


@functools.cache
def a_fragment_8bit() -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns of A (64 x 32) of each thread's sixteen register bytes (FP8 ``_rs``)."""
    rc = np.array([[W.a_row_col_8bit(t, e) for e in range(16)] for t in range(WG)], np.int64)
    return rc[..., 0], rc[..., 1]


def to_float(bits: np.ndarray, ab: str) -> np.ndarray:
    """16-bit patterns (uint16) as float64 values: bf16 or f16; 8-bit codes (uint8) of e4m3 or e5m2,
    decoded exactly (NaN codes give NaN, E5M2's infinity codes infinities)."""
    if ab in FP8:
        return decode(np.asarray(bits, np.uint8), FP8[ab]).astype(np.float64)
    bits = np.asarray(bits, np.uint16)
    if ab == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return bits.view(np.float16).astype(np.float64)


# ---------------------------------------------------------------------------------------------
# Warpgroups and the rendezvous
# ---------------------------------------------------------------------------------------------
class Warpgroup:
    """One warpgroup of a CTA: its rendezvous in progress and its wgmma groups."""

    def __init__(self, cta, index: int):
        self.cta, self.index = cta, index
        self.threads = cta.threads[WG * index:WG * (index + 1)]
        self.open = None
        self.fences = 0
        self.uncommitted: list = []       # mmas issued since the last commit
        self.groups: list = []            # [(group index, [mmas])] committed, not retired; oldest first
        self.committed = 0
        self.last_wait = None             # (n, groups committed then, site)

    def name(self) -> str:
        return f"warpgroup {self.index} (threads {WG * self.index}..{WG * self.index + WG - 1}) of block " \
               f"{tuple(self.cta.blockIdx)}"


class _Meeting:
    __slots__ = ("api", "site", "first", "values", "done", "results", "queue")

    def __init__(self, api, s, first):
        self.api, self.site, self.first = api, s, first
        self.values: dict = {}
        self.done, self.results, self.queue = False, None, []


def warpgroup(th, api: str) -> Warpgroup:
    cta = th.cta
    g = th.thread_id // WG
    wg = cta.warpgroups.get(g)
    if wg is None:
        if len(cta.threads) < WG * (g + 1):
            raise WarpgroupError(api, "a warpgroup is four whole warps (128 threads, the first warp a multiple of "
                                 "4): the block must have all of them", f"warpgroup {g} of a block of "
                                 f"{len(cta.threads)} threads", _SRC_ALIGNED, where=here(th), seed=th.sim.seed)
        wg = cta.warpgroups[g] = Warpgroup(cta, g)
    th.wgmma = wg
    return wg


def rendezvous(th, api: str, value, compute):
    """Every thread of ``th``'s warpgroup calls this at the same line; the last one runs
    ``compute(wg, values, site)`` (``values``: 128 ``(thread, value)`` in warpgroup order) and
    everybody returns its result (a list of 128, or None)."""
    wg = warpgroup(th, api)
    sim = th.sim
    s = site()
    rec = wg.open
    if rec is None:
        gone = [t for t in wg.threads if t.state == EXITED]
        if gone:
            raise WarpgroupError(api, "every thread of the warpgroup must execute a .sync.aligned instruction "
                                 "(some have exited)", f"{len(gone)} exited threads of {wg.name()}, the first "
                                 f"{describe_thread(gone[0])}", _SRC_ALIGNED, where=here(th, s), seed=sim.seed)
        rec = wg.open = _Meeting(api, s, th)
    elif rec.api != api or rec.site != s:
        raise WarpgroupError(api, "the 128 threads of a warpgroup must execute the same .sync.aligned instruction "
                             "together (a divergent warpgroup)", f"{describe_thread(th)} is at {api} "
                             f"({describe_site(s)}) while {describe_thread(rec.first)} of {wg.name()} waits at "
                             f"{rec.api} ({describe_site(rec.site)})", _SRC_ALIGNED, where=here(th, s), seed=sim.seed)
    rec.values[th.thread_id - WG * wg.index] = (th, value)
    sim.sched.progress += 1
    if len(rec.values) == WG:
        wg.open = None
        rec.results = compute(wg, [rec.values[i] for i in range(WG)], s)
        rec.done = True
        sim.sched.wake_all(rec.queue)
    else:
        def what():
            missing = [WG * wg.index + i for i in range(WG) if i not in rec.values]
            return (f"{api} of {wg.name()} (.sync.aligned): threads {_runs(missing)} have not arrived")

        while not rec.done:
            sim.sched.block(th, rec.queue, what, s)
    return None if rec.results is None else rec.results[th.thread_id - WG * wg.index]


def _runs(ids) -> str:
    out, i = [], 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}..{ids[j]}")
        i = j + 1
    return ", ".join(out)


def _uniform(api, wg, values, pick, what, s):
    """The operand ``pick(value)`` must be the same in all 128 threads."""
    th0, v0 = values[0]
    want = pick(v0)
    for t, v in values[1:]:
        got = pick(v)
        if got != want:
            raise WarpgroupError(api, f"{what} must be the same in every thread of the warpgroup",
                                 f"{_show(want)} in {describe_thread(th0)}, {_show(got)} in {describe_thread(t)}",
                                 _SRC_ALIGNED, where=here(t, s), seed=t.sim.seed)
    return want


def _show(v):
    return f"{v:#x}" if isinstance(v, int) and v > 255 else repr(v)


# ---------------------------------------------------------------------------------------------
# fence / commit / wait
# ---------------------------------------------------------------------------------------------
def fence(api="wgmma_fence_sync_aligned"):
    th = enter(api)

    def compute(wg, values, s):
        wg.fences += 1
        for t, _ in values:
            for arr in t.local_arrays:
                arr.touched = None
        return None

    rendezvous(th, api, None, compute)


def commit(api="wgmma_commit_group_sync_aligned"):
    th = enter(api)

    def compute(wg, values, s):
        for op in wg.uncommitted:
            op.group = wg.committed
        wg.groups.append((wg.committed, wg.uncommitted))
        wg.uncommitted = []
        wg.committed += 1
        return None

    rendezvous(th, api, None, compute)


def wait_group(n, api="wgmma_wait_group_sync_aligned"):
    th = enter(api)
    n = min(max(int(n), 0), WAIT_GROUP_MAX)

    def compute(wg, values, s):
        _uniform(api, wg, values, lambda v: v, "N (an immediate)", s)
        older = wg.groups[:-n] if n else wg.groups
        for _, ops in older:
            for op in ops:
                op.retire()
        wg.groups = wg.groups[-n:] if n else []
        wg.last_wait = (n, wg.committed, s)
        return None

    rendezvous(th, api, n, compute)


# ---------------------------------------------------------------------------------------------
# mma_async
# ---------------------------------------------------------------------------------------------
class AccGuard:
    """On an accumulator array: the mmas that will still write it (oldest first)."""

    __slots__ = ("thread", "pending")

    def __init__(self, th):
        self.thread = th
        self.pending: list = []

    def access(self, arr, kind, s):
        if self.pending:
            op = self.pending[0]
            th = self.thread
            raise WgmmaPendingError(
                f"accumulator {kind}", "the accumulator registers of a wgmma.mma_async must not be read or written "
                "until a wgmma_wait_group retires its group", f"the accumulators (d) of the {op.api} issued by "
                f"{op.wg.name()} at {describe_site(op.site)}, {op.state()}", _SRC, where=here(th, s), seed=th.sim.seed)


class WgmmaReads:
    """In ``SharedMemory.async_src``: the mmas still reading a word (several warpgroups may read one
    B tile). ``report_overwrite`` is what a write over such a word calls."""

    def __init__(self):
        self.by_word: dict = {}

    def add(self, mem, words, op):
        for w in words:
            ops = self.by_word.get(w)
            if ops is None:
                self.by_word[w] = [op]
                if mem.async_src[w] is None:
                    mem.async_src[w] = self
            else:
                ops.append(op)

    def remove(self, mem, words, op):
        for w in words:
            ops = self.by_word.get(w)
            if ops is None:
                continue
            if op in ops:
                ops.remove(op)
            if not ops:
                del self.by_word[w]
                if mem.async_src[w] is self:
                    mem.async_src[w] = None

    def report_overwrite(self, th, mem, w, s):
        op = self.by_word[w][0]
        raise WgmmaPendingError(
            "shared memory write", "shared memory a wgmma.mma_async reads must not be overwritten until a "
            "wgmma_wait_group retires the mma's group", f"word {w * 4:#x} of block {tuple(mem.cta.blockIdx)}'s "
            f"shared memory, an operand of the {op.api} issued by {op.wg.name()} at {describe_site(op.site)}, "
            f"{op.state()}", _SRC, where=here(th, s), seed=th.sim.seed)


def _reads(mem) -> WgmmaReads:
    r = getattr(mem, "wgmma_reads", None)
    if r is None:
        r = mem.wgmma_reads = WgmmaReads()
    return r


class Mma:
    """One issued ``wgmma.mma_async``: its product, computed at issue, lands in the 128 threads'
    accumulators when its group retires."""

    def __init__(self, wg, api, s, n, product, scale_d, accs, mem, words):
        self.wg, self.api, self.site, self.n = wg, api, s, n
        self.product, self.scale_d, self.accs = product, scale_d, accs
        self.mem, self.words = mem, words
        self.group = None
        self.retired = False

    def state(self) -> str:
        if self.group is None:
            return "not yet committed (wgmma_commit_group)"
        lw = self.wg.last_wait
        if lw is None:
            return f"in wgmma-group {self.group}, which no wgmma_wait_group has retired yet"
        n, committed, ws = lw
        done = committed - n
        retired = "none" if done <= 0 else "group 0" if done == 1 else f"groups 0..{done - 1}"
        return (f"in wgmma-group {self.group}; the last wgmma_wait_group({n}) at {describe_site(ws)} retired "
                f"{retired} of the {committed} committed then, leaving the newest {min(n, committed)} pending")

    def retire(self):
        if self.retired:
            return
        self.retired = True
        rows, cols = d_fragment(self.n)
        vals = self.product[rows, cols]                 # (128, n/2)
        n2 = rows.shape[1]
        for t, acc in enumerate(self.accs):
            plain = acc.view(np.ndarray).reshape(-1)
            if self.scale_d:
                plain[:n2] = (plain[:n2].astype(np.float64) + vals[t]).astype(np.float32)
            else:
                plain[:n2] = vals[t].astype(np.float32)
            g = acc.wgmma
            if g is not None and self in g.pending:
                g.pending.remove(self)
        if self.words is not None:
            _reads(self.mem).remove(self.mem, self.words, self)
        self.product = None


def _acc(th, api, d, n, k=W.WGMMA_K):
    n2 = W.accumulators(n)
    if not isinstance(d, Ptr) or d.space != LOCAL or not isinstance(d.obj, LocalArray):
        got = d.space if isinstance(d, Ptr) else type(d).__name__
        raise SimUsageError(api, f"d must be addr(acc, 0) of a cuda.local.array({n2}, float32)", got, _SRC,
                            where=here(th), seed=th.sim.seed)
    acc = d.obj
    if acc.dtype != np.float32 or acc.size < n2 or d.off != d.lo:
        raise SimUsageError(api, f"d must be addr(acc, 0) of a cuda.local.array of at least {n2} float32 (N/2 "
                            f"accumulators of m64n{n}k{k})", f"element {(d.off - d.lo) // acc.itemsize} of a "
                            f"{acc.size}-element {acc.dtype} array", _SRC, where=here(th), seed=th.sim.seed)
    return acc


def _gather(th, api, mem, desc, rows, mn_major, what, s, eb=ELEM_BYTES):
    f = decode_descriptor(desc)
    if f["base_offset"]:
        raise SimUsageError(api, f"{what}: the simulator models matrix descriptors with base offset 0 only "
                            "(tiles starting on their swizzle pattern)", f"base offset {f['base_offset']}", _SRC,
                            where=here(th, s), seed=th.sim.seed)
    offs = operand_offsets(desc, rows, mn_major, eb)
    lo, hi = int(offs.min()), int(offs.max()) + eb
    if lo < 0 or hi > mem.size:
        raise SimUsageError(api, f"{what} must lie inside the CTA's shared memory ({mem.size} bytes)",
                            f"bytes {lo:#x}..{hi:#x} from descriptor {int(desc):#018x} (start {f['start']:#x}, "
                            f"LBO {f['lbo']}, SBO {f['sbo']}, swizzle {_SWIZZLE_NAME[f['swizzle']]})", _SRC,
                            where=here(th, s), seed=th.sim.seed)
    if eb == 1:
        return offs, mem.buf[offs].astype(np.uint8)
    bits = mem.buf[offs].astype(np.uint16) | (mem.buf[offs + 1].astype(np.uint16) << 8)
    return offs, bits


def _check_reads(th, values, mem, words, s, api):
    """The async proxy reads ``words`` for the warpgroup: nothing pending, writes ordered before the
    issue (by any of the 128 threads: they issue it together), generic writes fenced. 16-bit stores
    live in the byte shadow (``b_write``), wider ones in the word shadow: both are checked."""
    sim = th.sim
    if not sim.track:
        return
    what = f"{api} operand read"
    joined = sim.vc[[t.vci for t, _ in values]].max(axis=0) if sim.clocks_on else None

    def writer_ok(w, wt, clk, wsite):
        if wt >= sim.n_threads:
            if sim.check_race and clk > joined[wt]:
                sim.report_unacquired_async(th, mem, w, s)
            return
        if sim.check_race and clk > joined[wt]:
            mem.report_race(th, w, s, what, wt, clk, wsite, "write")
        if sim.check_proxy and not fenced(sim.threads[wt].fences_async, clk, joined[wt]):
            from ..errors import ProxyFenceError

            raise ProxyFenceError(
                what, "shared memory written by threads (generic proxy) must be fenced with "
                "fence_proxy_async_shared_cta by the writers, before the barrier that orders it with the "
                "wgmma (async proxy) read of it", f"word {w * 4:#x} of block {tuple(mem.cta.blockIdx)}'s shared "
                f"memory, written by {describe_thread(sim.threads[wt])} at {describe_site(wsite)} with no "
                "fence.proxy.async after it", "PTX ISA, proxies; wgmma.mma_async", where=here(th, s), seed=sim.seed)

    narrow = mem.b_write
    for w in words:
        if sim.check_async and mem.pending[w] is not None:
            mem.pending[w].report_generic_access(th, mem, w, s, what + " of")
        if joined is None:
            continue
        wt = mem.w_tid[w]
        if wt >= 0:
            writer_ok(w, wt, mem.w_clk[w], mem.w_site[w])
        if narrow:
            for b in range(4 * w, 4 * w + 4):
                last = narrow.get(b)
                if last is not None:
                    writer_ok(w, last[0], last[1], last[2])


def mma(d, a, b_desc, scale_d, trans_a, trans_b, *, n, ab, form, api):
    """``wgmma.mma_async...m64n{n}k16.f32.{ab}.{ab}`` (``form`` "ss": ``a`` the A descriptor; "rs":
    ``a`` the thread's four A registers); for ``ab`` e4m3/e5m2 ``m64n{n}k32``, K-major A and B
    (``trans_a``/``trans_b`` 0).

    The product of one instruction is computed in float64 from the exactly decoded inputs and lands
    in the fp32 accumulators, with D's old value added in float64, rounded once to fp32 when the
    group retires: one fp32 rounding per k16 (k32) step. For bf16/f16 and e4m3 the float64 sum is
    exact (e4m3 products are multiples of 2^-18 below 2^18, 32 of them need < 53 bits); for e5m2
    (products from 2^-32 to 2^32) it may round in float64 first, far below the fp32 rounding. This is
    the ideal fp32 accumulation: the GPU's FP8 tensor cores are reported to keep fewer bits while
    summing (tests/ptx/test_wgmma.py's tolerance for the GPU says so)."""
    th = enter(api)
    eb = elem_bytes(ab)
    kdim = k_of(eb)
    acc = _acc(th, api, d, n, kdim)
    if form == "ss":
        a_val = int(a)
    else:
        a_val = tuple(int(x) & 0xFFFFFFFF for x in a)
    value = (acc, a_val, int(b_desc), bool(scale_d), 1 if int(trans_a) else 0, 1 if int(trans_b) else 0)

    def compute(wg, values, s):
        last = values[-1][0]
        if form == "ss":
            _uniform(api, wg, values, lambda v: v[1], "a-desc", s)
            _uniform(api, wg, values, lambda v: v[4], "imm-trans-a", s)
        b = _uniform(api, wg, values, lambda v: v[2], "b-desc", s)
        scale = _uniform(api, wg, values, lambda v: v[3], "scale-d", s)
        _uniform(api, wg, values, lambda v: v[5], "imm-trans-b", s)
        if wg.fences == 0:
            raise WgmmaFenceError(api, "wgmma_fence_sync_aligned must come before a warpgroup's first "
                                  "wgmma.mma_async", f"{wg.name()} issues an mma with no fence before it",
                                  _SRC_FENCE, where=here(last, s), seed=last.sim.seed)
        for t, v in values:
            if v[0].touched is not None:
                raise WgmmaFenceError(api, "a wgmma_fence_sync_aligned must come between a thread's accesses to "
                                      "accumulator registers and the next wgmma.mma_async that uses them",
                                      f"{describe_thread(t)} accessed its accumulators (d) at "
                                      f"{describe_site(v[0].touched)} after its warpgroup's last wgmma.fence",
                                      _SRC_FENCE, where=here(t, s), seed=t.sim.seed)
        mem = last.cta.smem
        b_offs, b_bits = _gather(last, api, mem, b, n, values[0][1][5] == 1, "B", s, eb)
        bmat = to_float(b_bits, ab)                             # (n, K): B^T
        offs = [b_offs]
        if form == "ss":
            a_offs, a_bits = _gather(last, api, mem, values[0][1][1], W.WGMMA_M, values[0][1][4] == 1, "A", s, eb)
            amat = to_float(a_bits, ab)                         # (64, K)
            offs.append(a_offs)
        elif eb == 1:                                           # four 8-bit codes per register, lowest byte first
            regs = np.array([v[1] for _, v in values], np.uint32)          # (128, 4)
            e = np.arange(16)
            codes = (regs[:, e // 4] >> (8 * (e & 3)).astype(np.uint32)) & 0xFF
            rows, cols = a_fragment_8bit()
            amat = np.empty((W.WGMMA_M, kdim), np.float64)
            amat[rows, cols] = to_float(codes.astype(np.uint8), ab)
        else:
            regs = np.array([v[1] for _, v in values], np.uint32)          # (128, 4)
            e = np.arange(8)
            halves = (regs[:, e // 2] >> (16 * (e & 1)).astype(np.uint32)) & 0xFFFF
            rows, cols = a_fragment()
            amat = np.empty((W.WGMMA_M, W.WGMMA_K), np.float64)
            amat[rows, cols] = to_float(halves.astype(np.uint16), ab)
        words = np.unique(np.concatenate([o.reshape(-1) for o in offs]) >> 2).tolist()
        _check_reads(last, values, mem, words, s, api)
        op = Mma(wg, api, s, n, amat @ bmat.T, scale, [v[0] for _, v in values], mem,
                 words if last.sim.track else None)
        if op.words is not None:
            _reads(mem).add(mem, words, op)
        for t, v in values:
            arr = v[0]
            if arr.wgmma is None:
                arr.wgmma = AccGuard(t)
            arr.wgmma.pending.append(op)
        wg.uncommitted.append(op)
        return None

    rendezvous(th, api, value, compute)


# ---------------------------------------------------------------------------------------------
# setmaxnreg, cvta
# ---------------------------------------------------------------------------------------------
def setmaxnreg(count, inc: bool):
    api = f"setmaxnreg_{'inc' if inc else 'dec'}_sync_aligned_u32"
    th = enter(api)
    count = int(count)
    if not (W.SETMAXNREG_MIN <= count <= W.SETMAXNREG_MAX and count % W.SETMAXNREG_STEP == 0):
        raise WarpgroupError(api, f"imm-reg-count must be in {W.SETMAXNREG_MIN}..{W.SETMAXNREG_MAX} and a multiple "
                             f"of {W.SETMAXNREG_STEP}", count, _SRC_SETMAXNREG, where=here(th), seed=th.sim.seed)

    def compute(wg, values, s):
        _uniform(api, wg, values, lambda v: v, "imm-reg-count", s)
        return None

    rendezvous(th, api, count, compute)


def cvta_to_shared(p, api="cvta_to_shared_u32"):
    """The ``.shared::cta`` address is the simulator's offset into the CTA's shared memory (the
    address the descriptors, ``mapa`` and the TMA swizzle all use)."""
    th = enter(api)
    p = shared_operand(th, api, p, "a")
    return np.uint32(p.off)


# ---------------------------------------------------------------------------------------------
# exit
# ---------------------------------------------------------------------------------------------
def check_exit(th):
    """A thread that exits with mmas of its warpgroup pending: ptxas ends every kernel that issued
    wgmma with a wait for all of them (``WARPGROUP.DEPBAR.LE gsb0, 0`` before ``EXIT``, seen in
    ``tests/ptx/test_wgmma.py``'s SASS), so they complete here, as that wait retires them: the
    operands are read and the accumulators written before the thread is gone. Not an error."""
    wg = th.wgmma
    ops = [op for _, group in wg.groups for op in group] + wg.uncommitted
    for op in ops:
        op.retire()
    wg.groups, wg.uncommitted = [], []
