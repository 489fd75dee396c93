"""What one TMA tile-mode load (``cp.async.bulk.tensor.Nd.shared::cluster.global.tile``) writes into shared
memory, modelled in numpy from NVIDIA's documentation alone: not from ``asyncpipe.sim``, whose model
``tests/ptx/test_tma_random_loads.py`` checks against this one (and the GPU against both).

What the documents say, and where:

- **Which elements** (CUDA driver API, ``cuTensorMapEncodeTiled``): ``elementStrides[i]`` is the iteration
  step along dimension ``i``; "if elementStrides[i] is not equal to one, then TMA loads ceil(boxDim[i] /
  elementStrides[i]) number of elements along i-th dimension", and "when interleave is
  CU_TENSOR_MAP_INTERLEAVE_NONE, the first element of this array is ignored since TMA doesn't support the
  stride for dimension zero". PTX ISA 5.5.3.2 (traversal stride): the stride is "the exact number of
  elements to be skipped" while the box iterates a dimension. So along an outer dimension the box takes
  elements ``c, c + e, c + 2e, ...`` (``ceil(box / e)`` of them), along the innermost ``box`` consecutive ones.
- **In which order** (PTX ISA 5.5.3, tiled mode; 5.5.7): the box lands in shared memory dense and row-major,
  innermost dimension fastest, before the swizzle permutes it.
- **Out of bounds** (PTX ISA 5.5.3.1 and ``oobFill``): elements whose index lies outside the tensor in any
  dimension (negative coordinates included) are filled with zero, or with "a special NaN constant"
  (``CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA``, floating-point types only). The documents do not
  give that NaN's bits, so a NaN-filled element is checked for being a NaN of its type, nothing more.
- **The swizzle** (PTX ISA 5.5.7, swizzling modes; CUDA programming guide, TMA swizzle): shared memory is
  cut into 128-byte rows of eight 16-byte cells; in row ``r`` cell ``j`` holds what would otherwise be in
  cell ``j ^ (r % P)``, ``P`` = 2, 4, 8 for the 32-, 64- and 128-byte modes (the pattern repeats every 256,
  512, 1024 bytes). ``r`` counts rows from the repeat boundary, not from the box: when the destination is
  not on it, the guide's "swizzle base offset" ``(dstMem / 128) % P`` is added to the box's row index. In
  address bits: a byte at shared address ``A`` goes to ``A ^ (((A >> 7) & (P - 1)) << 4)``.

One thing the documents leave open: the CUDA programming guide asks that "if the swizzle width exceeds the
inner dimension, the shared memory is allocated to accommodate the full swizzle width". Two readings: the box
dense, then permuted (``dense_addresses``), or each box row starting a swizzle span of its own
(``padded_addresses``). The H200 does the second (this test's first GPU run and
scripts/experiments/tma_swizzle_rows.py, 2026-12-02; the mbarrier counts the dense bytes all the same), so the
model is ``padded_addresses``; ``dense_addresses`` is kept to say which reading a disagreeing GPU matches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# element size in bytes, and the float format's (exponent mask, mantissa mask) for the NaN test
ITEMSIZE = {"uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "int32": 4, "int64": 8, "float16": 2,
            "bfloat16": 2, "float32": 4, "float64": 8}
FLOAT_BITS = {"float16": (0x7C00, 0x03FF), "bfloat16": (0x7F80, 0x007F), "float32": (0x7F80_0000, 0x007F_FFFF),
              "float64": (0x7FF0_0000_0000_0000, 0x000F_FFFF_FFFF_FFFF)}
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
CELL_BYTES = 16                       # PTX ISA 5.5.7: the swizzle moves 16-byte cells
ROW_BYTES = 128                       # ... within rows of 128 bytes (eight cells)
SWIZZLE_PERIOD = {"none": 1, "32B": 2, "64B": 4, "128B": 8}    # rows after which the pattern repeats
SWIZZLE_WIDTH = {"none": None, "32B": 32, "64B": 64, "128B": 128}


@dataclass(frozen=True)
class TmaLayout:
    """A tiled tensor map as the reference needs it, numpy order (outermost first); ``strides`` in bytes
    (the innermost is the element size); ``offset``: the tensor's first byte in the memory handed to
    ``box_elements``."""

    dtype: str
    shape: tuple
    strides: tuple
    box: tuple
    element_strides: tuple
    swizzle: str = "none"
    oob_fill: str = "zero"
    offset: int = 0

    @property
    def itemsize(self) -> int:
        return ITEMSIZE[self.dtype]

    @property
    def rank(self) -> int:
        return len(self.shape)

    def steps(self) -> tuple:
        """The traversal step of each dimension: the element stride, 1 along the innermost (ignored there)."""
        return tuple(self.element_strides[:-1]) + (1,)

    def counts(self) -> tuple:
        """Elements the box delivers along each dimension: ceil(box / element stride), the innermost box."""
        return tuple(math.ceil(b / e) for b, e in zip(self.box[:-1], self.element_strides[:-1])) + (self.box[-1],)

    def box_bytes(self) -> int:
        return math.prod(self.counts()) * self.itemsize

    def inner_bytes(self) -> int:
        return self.box[-1] * self.itemsize


def box_indices(lay: TmaLayout, coords) -> list:
    """Per dimension (numpy order), the tensor indices the box reads; ``coords`` in PTX order (innermost first)."""
    starts = [int(c) for c in reversed(tuple(coords))]
    return [s + e * np.arange(n, dtype=np.int64) for s, e, n in zip(starts, lay.steps(), lay.counts())]


def box_elements(lay: TmaLayout, memory: np.ndarray, coords) -> tuple[np.ndarray, np.ndarray]:
    """The box at ``coords`` (PTX order) as raw element bits, shape ``lay.counts()``, and the mask of its
    out-of-bounds elements. ``memory``: the bytes of the allocation (uint8), the tensor at ``lay.offset``.
    Out-of-bounds elements hold 0 (a NaN fill's bits are not documented: see ``check_box``)."""
    idx = box_indices(lay, coords)
    grids = np.meshgrid(*idx, indexing="ij")
    inside = np.ones(lay.counts(), bool)
    for g, n in zip(grids, lay.shape):
        inside &= (g >= 0) & (g < n)
    where = np.full(lay.counts(), lay.offset, np.int64)
    for g, s in zip(grids, lay.strides):
        where += np.where(inside, g, 0) * s
    raw = memory[where[..., None] + np.arange(lay.itemsize)]           # the element's bytes, little-endian
    bits = np.ascontiguousarray(raw).view(UINT[lay.itemsize])[..., 0]
    bits[~inside] = 0
    return bits, ~inside


def swizzled(addresses: np.ndarray, swizzle: str) -> np.ndarray:
    """Where the bytes meant for shared ``addresses`` land: cell bits 4..6 XOR row bits 7..9, as the PTX ISA's
    tables (and the CUDA guide's ``smem[y][((y + offset) % P) ^ x]``) say."""
    mask = SWIZZLE_PERIOD[swizzle] - 1
    return addresses ^ (((addresses >> 7) & mask) << 4)


def dense_addresses(lay: TmaLayout, base: int) -> np.ndarray:
    """The shared address of each byte of the box (row-major, innermost fastest) for a destination at ``base``."""
    return swizzled(base + np.arange(lay.box_bytes(), dtype=np.int64), lay.swizzle)


def padded_addresses(lay: TmaLayout, base: int) -> np.ndarray:
    """The model (measured on the H200): every box row starts a swizzle width of its own when the inner box is
    narrower than it. The same as ``dense_addresses`` otherwise."""
    width, inner = SWIZZLE_WIDTH[lay.swizzle], lay.inner_bytes()
    k = np.arange(lay.box_bytes(), dtype=np.int64)
    if width is None or inner >= width:
        return dense_addresses(lay, base)
    return swizzled(base + k // inner * width + k % inner, lay.swizzle)


def footprint(lay: TmaLayout) -> int:
    """Bytes from the destination to the last one either reading may write (before the 128-byte row round-up)."""
    width = SWIZZLE_WIDTH[lay.swizzle] or 0
    rows = lay.box_bytes() // lay.inner_bytes()
    return rows * max(width, lay.inner_bytes())


def is_nan(bits: np.ndarray, dtype: str) -> np.ndarray:
    """Whether raw ``bits`` of a float ``dtype`` are a NaN (exponent all ones, mantissa not zero)."""
    exp, man = FLOAT_BITS[dtype]
    b = bits.astype(np.uint64)
    return ((b & np.uint64(exp)) == np.uint64(exp)) & ((b & np.uint64(man)) != 0)


def check_box(lay: TmaLayout, got: np.ndarray, base: int, memory: np.ndarray, coords, poison: np.ndarray,
              addresses=padded_addresses) -> tuple[list[str], np.ndarray]:
    """Compare ``got`` (the bytes of shared memory from the buffer's start, as the kernel copied them out) with
    the load of the box at ``coords`` into the buffer at byte ``base``; ``poison``: the bytes the buffer held
    before. Returns (problems, the bits of the fill elements seen) with problems empty when they agree: the
    box's elements at their swizzled places (in-bounds ones bit for bit; fill ones 0, or a NaN of the type for
    ``oob_fill="nan"``) and every other byte of ``got`` still the poison."""
    want, fill = box_elements(lay, memory, coords)
    where = addresses(lay, base)
    problems = []
    if where.max() >= got.size:
        return [f"the box reaches byte {where.max()} of shared memory, past the {got.size} copied out"], want[:0]
    seen = np.ascontiguousarray(got[where]).view(UINT[lay.itemsize]).reshape(lay.counts())
    nan_fill = lay.oob_fill == "nan" and lay.dtype in FLOAT_BITS
    if nan_fill:
        bad = (~fill & (seen != want)) | (fill & ~is_nan(seen, lay.dtype))
    else:
        bad = seen != want
    if bad.any():
        first = [tuple(int(i) for i in ix) for ix in np.argwhere(bad)[:4]]
        idx = box_indices(lay, coords)

        def wanted(ix):
            return f"a {lay.dtype} NaN (fill)" if nan_fill and fill[ix] else \
                f"{int(want[ix]):#x} ({'fill' if fill[ix] else 'inside'})"

        parts = [f"box element {ix} (tensor index {tuple(int(idx[d][i]) for d, i in enumerate(ix))}): want "
                 f"{wanted(ix)}, got {int(seen[ix]):#x}" for ix in first]
        problems.append(f"{int(bad.sum())} of {bad.size} box elements differ; " + "; ".join(parts))
    untouched = np.ones(got.size, bool)
    untouched[where] = False
    stray = untouched & (got != poison[:got.size])
    if stray.any():
        at = np.flatnonzero(stray)
        problems.append(f"{at.size} bytes outside the box's places changed, first at shared bytes {at[:6].tolist()}")
    return problems, seen[fill]
