"""TMA loads of random accepted layouts, against a reference written from the documentation (issue 18, section 1).

Each draw is a tiled tensor map that ``validate_tiled`` accepts (interleave "none"): every dtype asyncpipe knows,
every swizzle, ranks 1 to 5, element strides 1..8 (the innermost one too, which the TMA ignores), boxes from one
16-byte row to 24 KB, tensors smaller than, equal to and larger than the box, packed, padded, overlapping and
(where validate_tiled takes it) zero row strides, 16- and 128-byte aligned addresses, zero and NaN fill, every L2
promotion. Its memory is fresh random
bytes; the kernel of its rank loads boxes at random coordinates (inside, hanging over the far edges, negative,
wholly outside; the innermost one a multiple of 16 bytes) into a poisoned shared buffer at a random 128-byte
aligned offset, and copies the whole buffer out. ``tests/ptx/tma_reference.py`` (numpy, from the PTX ISA and the
CUDA documents, not from ``asyncpipe.sim``) says what every byte must hold.

The same test runs on the H200 and, with ``NUMBA_ENABLE_CUDASIM=1``, in asyncpipe's simulator (fewer, smaller
draws), so both are checked against the reference. The seed is printed; ``ASYNCPIPE_TMA_LOADS_SEED=N`` replays
a run.
"""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest
from numba import cuda
from numba.cuda import types

from asyncpipe import ptx
from asyncpipe.backend import simulating
from asyncpipe.constants import BOX_DIM_MAX, BULK_SMEM_ALIGN_TENSOR, ELEMENT_STRIDE_MAX, TMA_COORD_ALIGN
from asyncpipe.errors import AsyncpipeError
from asyncpipe.spec.tensor_map import validate_tiled
from tests.ptx import tma_reference as ref
from tests.ptx.test_bulk import WAIT_NAP_NS, WAIT_TRIES
from tests.ptx.test_bulk_tensor import TMAP
from tests.sass import assert_sass

SMEM_BYTES = 32 * 1024                # the shared buffer every kernel loads into (with the mbarrier: < 48 KB)
SMEM_WORDS = SMEM_BYTES // 4
REPEAT_ALIGN = 1024                   # the 128B swizzle's repeat: the buffer's start is a swizzle row 0
DTYPES = tuple(ref.ITEMSIZE)
SWIZZLES = ("none", "32B", "64B", "128B")
L2_PROMOTIONS = ("none", "64B", "128B", "256B")
RANKS = range(1, 6)
PROBE_ADDRESS = 1 << 20               # 256-byte aligned, like a device allocation: the offset sets the alignment
DRAW_TRIES = 20                       # draws of one (dtype, swizzle) before a refusal is a failure of the draw


class Budget:
    """How much one run draws: on the GPU at least 300 layouts (60 per rank, every dtype x swizzle pair of
    a rank), in the simulator 40 (8 per rank: every dtype and swizzle still drawn) with small boxes."""

    def __init__(self, sim: bool):
        self.layouts = 8 if sim else 60
        self.boxes = 3 if sim else 8            # boxes (blocks) per layout
        self.box_bytes = 512 if sim else 24 * 1024
        self.tensor_bytes = 16 * 1024 if sim else 4 << 20
        self.threads = 32 if sim else 128


# ---------------------------------------------------------------------------------------------
# The kernel: one per rank; block b loads the box at coords[b] into the buffer at word dst_words[b]
# ---------------------------------------------------------------------------------------------
def make_kernel(rank):
    def kernel(tmap, coords, dst_words, box_bytes, nwords, poison, out, timeouts):
        tile = cuda.shared.array(SMEM_WORDS, np.uint32, alignment=REPEAT_ALIGN)
        bar = cuda.shared.array(1, np.uint64)
        t = cuda.threadIdx.x
        b = cuda.blockIdx.x
        i = t
        while i < nwords:                              # poison: what the box does not write must stay so
            tile[i] = poison
            i += cuda.blockDim.x
        ptx.fence_proxy_async_shared_cta()             # the poison lands before the TMA's writes
        if t == 0:
            ptx.mbarrier_init(ptx.addr(bar, 0), 1)
            ptx.fence_mbarrier_init_release_cluster()  # the TMA (async proxy) completes its bytes on it
        cuda.syncthreads()

        # --- one thread issues the load and announces its bytes ------------------------------------
        if t == 0:
            ptx.fence_proxy_tensormap_generic_acquire_gpu(ptx.addr(tmap, 0))
            dst, m, w = ptx.addr(tile, dst_words[b]), ptx.addr(tmap, 0), ptx.addr(bar, 0)
            if rank == 1:
                ptx.cp_async_bulk_tensor_1d_shared_global(dst, m, coords[b, 0], w)
            elif rank == 2:
                ptx.cp_async_bulk_tensor_2d_shared_global(dst, m, coords[b, 0], coords[b, 1], w)
            elif rank == 3:
                ptx.cp_async_bulk_tensor_3d_shared_global(dst, m, coords[b, 0], coords[b, 1], coords[b, 2], w)
            elif rank == 4:
                ptx.cp_async_bulk_tensor_4d_shared_global(dst, m, coords[b, 0], coords[b, 1], coords[b, 2],
                                                          coords[b, 3], w)
            else:
                ptx.cp_async_bulk_tensor_5d_shared_global(dst, m, coords[b, 0], coords[b, 1], coords[b, 2],
                                                          coords[b, 3], coords[b, 4], w)
            ptx.mbarrier_arrive_expect_tx(w, box_bytes)
        landed = False
        for _ in range(WAIT_TRIES):                    # bounded: a test may fail, never hang
            if ptx.mbarrier_test_wait_parity(ptx.addr(bar, 0), 0) != 0:
                landed = True
                break
            cuda.nanosleep(WAIT_NAP_NS)
        if not landed:
            timeouts[b] = 1
            return

        # --- every thread copies the buffer out as it lies ------------------------------------------
        i = t
        while i < nwords:
            out[b, i] = tile[i]
            i += cuda.blockDim.x

    return kernel


KERNEL_ARGS = (TMAP, types.int32[:, ::1], types.int32[::1], types.uint32, types.int32, types.uint32,
               types.uint32[:, ::1], types.int32[::1])
_JITTED: dict = {}


def jitted(rank):
    if rank not in _JITTED:
        _JITTED[rank] = cuda.jit(make_kernel(rank))
    return _JITTED[rank]


# ---------------------------------------------------------------------------------------------
# Drawing layouts (numpy order) and box coordinates
# ---------------------------------------------------------------------------------------------
def _pick(rng, lo, hi):
    """lo..hi inclusive, the ends drawn often."""
    if hi <= lo:
        return lo
    u = rng.random()
    return lo if u < 0.2 else hi if u < 0.4 else int(rng.integers(lo, hi + 1))


def combos(rank, n, rng):
    """(dtype, swizzle) for the ``n`` layouts of ``rank``: every pair (in random order) when n allows, else a
    rotation that still draws every dtype across the ranks and every swizzle in each."""
    pairs = list(itertools.product(DTYPES, SWIZZLES))
    if n >= len(pairs):
        order = rng.permutation(len(pairs)).tolist()
        extra = rng.integers(0, len(pairs), n - len(pairs)).tolist()
        return [pairs[k] for k in order + extra]
    return [(DTYPES[(rank * n + i) % len(DTYPES)], SWIZZLES[i % len(SWIZZLES)]) for i in range(n)]


def draw_box(rng, rank, itemsize, swizzle, budget):
    """(box, element_strides), numpy order, inside validate_tiled's rules and the byte budgets."""
    width = ref.SWIZZLE_WIDTH[swizzle]
    units = _pick(rng, 1, min(width or BOX_DIM_MAX * itemsize, BOX_DIM_MAX * itemsize, budget.box_bytes) // 16)
    inner_bytes = 16 * units
    row_alloc = max(inner_bytes, width or 0)
    rows = max(1, min(budget.box_bytes // inner_bytes, (SMEM_BYTES - REPEAT_ALIGN) // row_alloc))
    counts = [1] * (rank - 1)
    for d in rng.permutation(rank - 1):
        counts[d] = _pick(rng, 1, min(BOX_DIM_MAX, rows // int(np.prod(counts))))
    es = [1 if rng.random() < 0.5 else int(rng.integers(2, ELEMENT_STRIDE_MAX + 1)) for _ in range(rank)]
    box = []
    for d, c in enumerate(counts):
        if (c - 1) * es[d] + 1 > BOX_DIM_MAX:          # c elements every es[d]-th must fit in a box of 256
            es[d] = 1
        box.append(int(rng.integers((c - 1) * es[d] + 1, min(c * es[d], BOX_DIM_MAX) + 1)))
    return tuple(box) + (inner_bytes // itemsize,), tuple(es)


def _extent(rng, cover):
    """A dimension's extent for a box covering ``cover`` elements: equal, smaller (it hangs over), larger."""
    u = rng.random()
    if u < 0.15:
        return cover
    if u < 0.35:
        return int(rng.integers(1, cover + 1))
    if u < 0.8:
        return cover + int(rng.integers(1, max(2, cover) + 1))
    return int(rng.integers(1, 3 * cover + 9))


def _strides(rng, shape, itemsize):
    """Byte strides, numpy order: packed rows rounded up to 16 bytes, padded, overlapping (smaller than a row) or
    0 (kept only where validate_tiled takes it: ``accepted``)."""
    out = [itemsize]
    below = shape[-1] * itemsize
    for n in reversed(shape[:-1]):
        natural = max(16, -(-below // 16) * 16)         # below is 0 under a stride of 0: rows of one granule
        u = rng.random()
        s = natural if u < 0.6 else natural + 16 * int(rng.integers(1, 5)) if u < 0.85 else \
            16 * int(rng.integers(1, natural // 16 + 1)) if u < 0.97 else 0      # 0: every index reads one row
        out.insert(0, s)
        below = s * n
    return tuple(out)


def span_bytes(shape, strides, itemsize):
    return sum((n - 1) * s for n, s in zip(shape, strides)) + itemsize


def draw_layout(rng, rank, dtype, swizzle, budget):
    itemsize = ref.ITEMSIZE[dtype]
    box, es = draw_box(rng, rank, itemsize, swizzle, budget)
    steps = es[:-1] + (1,)
    counts = [-(-b // e) for b, e in zip(box[:-1], es[:-1])] + [box[-1]]
    shape = [_extent(rng, (c - 1) * e + 1) for c, e in zip(counts, steps)]
    strides = _strides(rng, shape, itemsize)
    while span_bytes(shape, strides, itemsize) > budget.tensor_bytes:
        d = int(np.argmax(shape))
        shape[d] = max(1, shape[d] // 2)
        strides = _strides(rng, shape, itemsize)
    oob = "nan" if dtype in ref.FLOAT_BITS and rng.random() < 0.5 else "zero"
    offset = 128 * int(rng.integers(0, 4)) if rng.random() < 0.5 else 16 * int(rng.integers(0, 32))
    return ref.TmaLayout(dtype, tuple(shape), strides, box, es, swizzle, oob, offset), \
        L2_PROMOTIONS[int(rng.integers(len(L2_PROMOTIONS)))]


def accepted(lay, l2) -> bool:
    """Whether ``validate_tiled`` takes the layout (at a made-up address of the same alignment)."""
    try:
        validate_tiled(PROBE_ADDRESS + lay.offset, lay.shape, lay.strides, lay.dtype, lay.box, swizzle=lay.swizzle,
                       l2_promotion=l2, oob_fill=lay.oob_fill, element_strides=lay.element_strides)
    except AsyncpipeError:
        return False
    return True


def draw_coords(rng, lay, k):
    """PTX-order coordinates of box ``k``: 0 at the origin, 1 at the far corner, then inside, over the edges
    (far or negative), or wholly outside in one dimension; the innermost one a multiple of 16 bytes."""
    grain = TMA_COORD_ALIGN // lay.itemsize
    starts = []
    kinds = ("inside", "edges", "edges", "edges", "outside")
    kind = "origin" if k == 0 else "corner" if k == 1 else kinds[rng.integers(len(kinds))]
    out_dim = int(rng.integers(lay.rank))
    for d, (n, c, e) in enumerate(zip(lay.shape, lay.counts(), lay.steps())):
        cover = (c - 1) * e + 1
        where = {"origin": "zero", "corner": "last", "inside": "inside", "outside": "inside"}.get(kind) or \
            ("inside", "far", "near")[rng.integers(3)]
        if kind == "outside" and d == out_dim:
            where = "beyond" if rng.random() < 0.5 else "before"
        s = {"zero": lambda: 0, "last": lambda: n - cover,
             "inside": lambda: int(rng.integers(0, max(0, n - cover) + 1)),
             "far": lambda: int(rng.integers(min(n - cover + 1, n - 1), n)),
             "near": lambda: -int(rng.integers(1, max(2, cover))),
             "beyond": lambda: n + int(rng.integers(0, cover + 1)),
             "before": lambda: -cover - int(rng.integers(0, cover + 1))}[where]()
        if d == lay.rank - 1:                          # TMA_COORD_ALIGN (a broken one stops the GPU kernel),
            s = s // grain * grain if s >= 0 else -(-s // grain * grain)     # rounded towards 0
        starts.append(s)
    return tuple(reversed(starts))


# ---------------------------------------------------------------------------------------------
# Memory the TMA sees: fresh random bytes, the tensor at an offset, described by its own array interface
# ---------------------------------------------------------------------------------------------
class StridedTensor:
    """A tensor view of ``lay.shape`` / ``lay.strides`` at ``lay.offset`` of the device bytes ``dev``."""

    def __init__(self, dev, lay):
        self._dev = dev                                # kept alive for the map
        typestr = "<u2" if lay.dtype == "bfloat16" else np.dtype(lay.dtype).str
        self.__cuda_array_interface__ = {"data": (dev.__cuda_array_interface__["data"][0] + lay.offset, False),
                                         "shape": lay.shape, "strides": lay.strides, "typestr": typestr,
                                         "version": 3}


def describe(lay, l2, address, coords=None):
    at = "" if coords is None else f", box at {coords} (PTX order)"
    return (f"{lay.dtype} shape={lay.shape} strides={lay.strides} box={lay.box} element_strides="
            f"{lay.element_strides} swizzle={lay.swizzle} oob_fill={lay.oob_fill} l2={l2} address%128="
            f"{address % 128}{at}")


def run_layout(rank, lay, l2, rng, budget, nan_bits):
    """Load ``budget.boxes`` boxes of one layout; the problems found (strings)."""
    from asyncpipe.host.tensor_map import TensorMap

    memory = rng.integers(0, 256, lay.offset + span_bytes(lay.shape, lay.strides, lay.itemsize) + 64, np.uint8)
    dev = cuda.to_device(memory)
    tmap = TensorMap.tiled(StridedTensor(dev, lay), lay.box, swizzle=lay.swizzle, l2_promotion=l2,
                           oob_fill=lay.oob_fill, element_strides=lay.element_strides,
                           dtype="bfloat16" if lay.dtype == "bfloat16" else None)
    problems = []
    if tmap.box_bytes != lay.box_bytes():
        problems.append(f"TensorMap.box_bytes is {tmap.box_bytes}, the documents give {lay.box_bytes()}")
    coords = [draw_coords(rng, lay, k) for k in range(budget.boxes)]
    # every other box at a 128-byte aligned offset other than 0: the swizzle's base offset (mostly within
    # the 1024-byte repeat, where it matters)
    room = min(SMEM_BYTES - ref.footprint(lay) - 2 * ref.ROW_BYTES, 2 * REPEAT_ALIGN) // BULK_SMEM_ALIGN_TENSOR
    bases = [BULK_SMEM_ALIGN_TENSOR * int(rng.integers(1, room + 1)) if k % 2 else 0 for k in range(budget.boxes)]
    nbytes = max(bases) + -(-ref.footprint(lay) // ref.ROW_BYTES) * ref.ROW_BYTES + ref.ROW_BYTES
    nwords = min(SMEM_WORDS, nbytes // 4)
    poison = np.uint32(rng.integers(0, 1 << 32))
    out = cuda.to_device(np.zeros((budget.boxes, nwords), np.uint32))
    timeouts = cuda.to_device(np.zeros(budget.boxes, np.int32))
    jitted(rank)[budget.boxes, budget.threads](tmap, cuda.to_device(np.array(coords, np.int32)),
                                               cuda.to_device(np.array(bases, np.int32) // 4),
                                               np.uint32(lay.box_bytes()), np.int32(nwords), poison, out, timeouts)
    got, late = out.copy_to_host(), timeouts.copy_to_host()
    poison_bytes = np.full(nwords, poison, np.uint32).view(np.uint8)
    for k in range(budget.boxes):
        name = f"{describe(lay, l2, tmap.layout.address, coords[k])}, shared offset {bases[k]}"
        if late[k]:
            problems.append(f"{name}: the load never completed the mbarrier phase (expect_tx {lay.box_bytes()})")
            continue
        image = got[k].view(np.uint8)
        found, fills = ref.check_box(lay, image, bases[k], memory, coords[k], poison_bytes)
        if found and lay.swizzle != "none":
            other, _ = ref.check_box(lay, image, bases[k], memory, coords[k], poison_bytes, ref.dense_addresses)
            if not other:
                found.append("the bytes match the dense reading (box rows back to back, then swizzled)")
        problems += [f"{name}: {p}" for p in found]
        if lay.oob_fill == "nan" and fills.size:
            nan_bits.setdefault(lay.dtype, set()).update(int(v) for v in np.unique(fills)[:4])
    return problems


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.simulator_too
@pytest.mark.parametrize("rank", RANKS)
def test_tma_loads_of_random_layouts(rank):
    seed = int(os.environ.get("ASYNCPIPE_TMA_LOADS_SEED") or int.from_bytes(os.urandom(4), "little"))
    print(f"ASYNCPIPE_TMA_LOADS_SEED={seed} (rank {rank})")
    rng = np.random.default_rng([seed, rank])
    budget = Budget(simulating())
    problems, nan_bits = [], {}
    refused = 0
    for dtype, swizzle in combos(rank, budget.layouts, rng):
        for _ in range(DRAW_TRIES):
            lay, l2 = draw_layout(rng, rank, dtype, swizzle, budget)
            if accepted(lay, l2):
                break
            refused += 1
        else:
            pytest.fail(f"validate_tiled refused {DRAW_TRIES} draws in a row, the last: "
                        f"{describe(lay, l2, PROBE_ADDRESS + lay.offset)}")
        problems += run_layout(rank, lay, l2, rng, budget, nan_bits)
    print(f"{budget.layouts} layouts loaded, {refused} draws refused by validate_tiled and drawn again")
    print("NaN fill bits seen:", {d: sorted(f"{b:#x}" for b in bits) for d, bits in nan_bits.items()})
    assert not problems, (f"{len(problems)} of {budget.layouts * budget.boxes} boxes disagree with the documents "
                          f"(seed {seed}):\n" + "\n".join(problems[:12]))


# ---------------------------------------------------------------------------------------------
# The reference itself, on cases worked by hand from the documents' tables
# ---------------------------------------------------------------------------------------------
def test_reference_swizzle_tables():
    """PTX ISA 5.5.7's tables: row r of 128 bytes holds cell j ^ (r % P); the base offset shifts r."""
    cells = np.arange(64, dtype=np.int64) * ref.CELL_BYTES           # 8 rows of 8 cells, 1024-aligned
    for swizzle, period in (("32B", 2), ("64B", 4), ("128B", 8)):
        moved = ref.swizzled(cells, swizzle) // ref.CELL_BYTES
        for r in range(8):
            assert moved[8 * r:8 * r + 8].tolist() == [8 * r + (j ^ (r % period)) for j in range(8)], (swizzle, r)
        shifted = ref.swizzled(cells + 3 * ref.ROW_BYTES, swizzle) // ref.CELL_BYTES - 24
        assert shifted[:8].tolist() == [j ^ (3 % period) for j in range(8)], swizzle
    assert ref.swizzled(cells, "none").tolist() == cells.tolist()


def test_reference_element_strides_and_fill():
    """ceil(box / e) elements every e-th along an outer dimension, the innermost's stride ignored, fill outside."""
    lay = ref.TmaLayout("int32", (5, 8), (32, 4), (5, 4), (2, 3), "none", "zero", 16)
    memory = np.arange(16 + 5 * 32, dtype=np.uint8)
    bits, fill = ref.box_elements(lay, memory, (4, -1))               # columns 4..7, rows -1, 1, 3
    assert lay.counts() == (3, 4) and lay.box_bytes() == 48
    assert fill[0].all() and not fill[1:].any() and (bits[0] == 0).all()
    row1 = memory[16 + 32 + 16:16 + 32 + 32].view(np.uint32)
    np.testing.assert_array_equal(bits[1], row1)
    np.testing.assert_array_equal(bits[2], memory[16 + 96 + 16:16 + 96 + 32].view(np.uint32))


def test_reference_reports_a_wrong_byte_and_a_stray_one():
    lay = ref.TmaLayout("uint8", (4, 32), (32, 1), (2, 32), (1, 1), "32B", "zero", 0)
    memory = np.arange(128, dtype=np.uint8)
    poison = np.full(256, 0xEE, np.uint8)
    image = poison.copy()
    image[ref.dense_addresses(lay, 128)] = memory[:64]
    assert ref.check_box(lay, image, 128, memory, (0, 0), poison)[0] == []
    image[0] = 1
    image[ref.dense_addresses(lay, 128)[5]] ^= 0xFF
    problems, _ = ref.check_box(lay, image, 128, memory, (0, 0), poison)
    assert "1 of 64 box elements differ; box element (0, 5)" in problems[0], problems
    assert "1 bytes outside the box's places changed, first at shared bytes [0]" in problems[1], problems


def test_reference_nan_fill_and_short_copy_messages():
    """A NaN fill is any NaN of the type (its bits are not documented), a number is not; a copy-out too short
    for the box is named as such."""
    lay = ref.TmaLayout("bfloat16", (1, 8), (16, 2), (2, 8), (1, 1), "none", "nan", 0)
    memory = np.arange(16, dtype=np.uint8)
    poison = np.zeros(64, np.uint8)
    image = poison.copy()
    image[:16] = memory
    image[16:32] = np.full(8, 0x7FC1, np.uint16).view(np.uint8)      # row 1 is outside: any bfloat16 NaN
    assert ref.check_box(lay, image, 0, memory, (0, 0), poison)[0] == []
    image[16:18] = np.array([0x7F80], np.uint16).view(np.uint8)       # +inf is no NaN
    problems, _ = ref.check_box(lay, image, 0, memory, (0, 0), poison)
    assert problems == ["1 of 16 box elements differ; box element (1, 0) (tensor index (1, 0)): want a bfloat16 "
                        "NaN (fill), got 0x7f80"], problems
    problems, _ = ref.check_box(lay, image[:24], 0, memory, (0, 0), poison)
    assert problems == ["the box reaches byte 31 of shared memory, past the 24 copied out"], problems


@pytest.mark.sass
def test_load_kernel_sass():
    """The rank-5 kernel compiles offline for sm_90a: the load, the expect_tx, the acquire fence, no CALL."""
    assert_sass(make_kernel(5), KERNEL_ARGS, has=(*ptx.cp_async_bulk_tensor_5d_shared_global.primitive.sass,
                                                  *ptx.mbarrier_arrive_expect_tx.primitive.sass))
