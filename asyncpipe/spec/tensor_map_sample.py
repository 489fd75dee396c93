"""Random tiled tensor-map layouts drawn from the whole parameter space of ``cuTensorMapEncodeTiled``, and
the two verdicts on each: asyncpipe's (``validate_tiled``: ``"ok"`` or the broken rule's message) and the
driver's (the ``CUresult`` name of ``cuTensorMapEncodeTiled`` called on the raw parameters, bypassing
``validate_tiled``). Issue 18, section 1: the two must agree; ``scripts/tensor_map_verdicts.py`` writes
them side by side, ``tests/host/test_tensor_map_driver.py`` draws the same way.

Pure, like the rest of ``asyncpipe.spec``: nothing here imports CUDA. The driver's side (``DriverEncoder``,
``open_driver``) is handed ``cuda.bindings.driver`` by its caller.

A draw is seeded (``random.Random(seed)``) and each layout is one of four kinds:

* ``valid``: inside asyncpipe's rules, spread over the space (every known dtype, ranks 1..5, boxes
  1..256, boxes larger than the tensor or equal to it, extents up to 2**32, strides up to 2**40 - 16,
  element strides 1..8, every swizzle, interleave, L2 promotion and OOB fill);
* ``edge:<what>``: a valid layout with one parameter moved onto the last value asyncpipe accepts;
* ``off:<what>``: a valid layout with one parameter moved just past one of asyncpipe's rules;
* ``wild``: every parameter drawn on its own from the whole space, valid and invalid values alike.

Shapes, strides (bytes, the innermost included), boxes and element strides are in numpy order
(outermost first), as in ``TiledLayout`` (which ``Layout`` extends, unvalidated); ``cuda_*`` and
``driver_args()`` give the driver's order (innermost first). The innermost byte stride is
always the element size: the driver has no such parameter, so there is nothing to compare there.
"""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass, replace

from ..constants import (
    BOX_DIM_MAX,
    BOX_INNER_BYTES_ALIGN,
    ELEMENT_STRIDE_MAX,
    GLOBAL_ADDRESS_ALIGN,
    GLOBAL_DIM_MAX,
    GLOBAL_STRIDE_ALIGN,
    GLOBAL_STRIDE_MAX,
    SWIZZLE_SPAN_BYTES,
    TENSOR_RANK_MAX,
)
from ..errors import AsyncpipeError, check
from .tensor_map import (_DTYPES, _INTERLEAVE, _L2_PROMOTION, _OOB_FILL, _SWIZZLE, INTERLEAVE_32B_ALIGN, TiledLayout,
                         validate_tiled)

_API = "tensor_map_sample"
MADE_UP_BASE = 0x7F00_0000_0000       # a device-looking address, 256-byte aligned; offsets set the alignment
ADDRESS_BASE_ALIGN = 256              # a base must keep every offset's alignment (offsets are < 256)
DATA_TYPE_PREFIX = "CU_TENSOR_MAP_DATA_TYPE_"

# dtype name -> (CUtensorMapDataType suffix, bits per element). asyncpipe's own first, then the members of
# CUtensorMapDataType that asyncpipe does not know (CUDA 12.8+); the packed ones store 16 elements in 8
# bytes (16U4_ALIGN8B) or in 16 (16U4_ALIGN16B, 16U6_ALIGN16B: 8 and 12 bytes of data, then a gap).
DATA_TYPES = {name: (suffix, 8 * size) for name, (suffix, size, _) in _DTYPES.items()}
UNKNOWN_DATA_TYPES = {
    "float32_ftz": ("FLOAT32_FTZ", 32),
    "tfloat32": ("TFLOAT32", 32),
    "tfloat32_ftz": ("TFLOAT32_FTZ", 32),
    "16u4_align8b": ("16U4_ALIGN8B", 4),
    "16u4_align16b": ("16U4_ALIGN16B", 8),
    "16u6_align16b": ("16U6_ALIGN16B", 8),
}
DATA_TYPES.update(UNKNOWN_DATA_TYPES)
KNOWN_DTYPES = tuple(_DTYPES)
FLOAT_DTYPES = tuple(n for n, (_, _, is_float) in _DTYPES.items() if is_float)
INT_DTYPES = tuple(n for n in KNOWN_DTYPES if n not in FLOAT_DTYPES)

# option name -> CUDA enum member name: asyncpipe's, and the swizzle modes it does not know (CUDA 12.8+)
UNKNOWN_SWIZZLES = {"128B_atom_32B": "CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B",
                    "128B_atom_32B_flip_8B": "CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B",
                    "128B_atom_64B": "CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B"}
SWIZZLES = {**_SWIZZLE, **UNKNOWN_SWIZZLES}
INTERLEAVES, L2_PROMOTIONS, OOB_FILLS = dict(_INTERLEAVE), dict(_L2_PROMOTION), dict(_OOB_FILL)

# Edge values of the space (each with the rule it tests)
DIM_EDGES = (0, 1, GLOBAL_DIM_MAX, GLOBAL_DIM_MAX + 1)            # globalDim: 1..2**32
DIM_OVER = (GLOBAL_DIM_MAX + 1, 2 * GLOBAL_DIM_MAX, 1 << 40)
STRIDE_OVER = (GLOBAL_STRIDE_MAX, GLOBAL_STRIDE_MAX + GLOBAL_STRIDE_ALIGN, 2 * GLOBAL_STRIDE_MAX, 1 << 48)
BOX_OVER = (BOX_DIM_MAX + 1, 2 * BOX_DIM_MAX, 1 << 16)             # boxDim: 1..256
ELEMENT_STRIDE_OFF = (0, ELEMENT_STRIDE_MAX + 1)                  # elementStrides: 1..8
MISALIGN = (1, 2, 4, 8)                                           # bytes off a 16-byte boundary
RANK_OFF = TENSOR_RANK_MAX + 1                                    # tensorRank: 1..5

KINDS = ("valid", "edge", "off", "wild")
KIND_WEIGHTS = (35, 15, 40, 10)       # about half near the boundary (edge + off), a good share accepted


# ---------------------------------------------------------------------------------------------
# A layout: the raw parameters, numpy order, and the driver's order
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Layout(TiledLayout):
    """One draw: ``cuTensorMapEncodeTiled``'s parameters as a ``TiledLayout`` holds them (numpy order, strides
    in bytes with the innermost included; ``cuda_*`` the driver's order), and the kind of draw. Unlike its
    base it is *not* validated: the point is to ask ``validate_tiled`` and the driver about it."""

    kind: str = "valid"

    def driver_args(self) -> dict:
        """``cuTensorMapEncodeTiled``'s parameters by their names, in its order; enums by member name."""
        return {"tensorDataType": DATA_TYPE_PREFIX + DATA_TYPES[self.dtype][0], "tensorRank": self.rank,
                "globalAddress": self.address, "globalDim": self.cuda_dims, "globalStrides": self.cuda_strides,
                "boxDim": self.cuda_box, "elementStrides": self.cuda_element_strides,
                "interleave": INTERLEAVES[self.interleave], "swizzle": SWIZZLES[self.swizzle],
                "l2Promotion": L2_PROMOTIONS[self.l2_promotion], "oobFill": OOB_FILLS[self.oob_fill]}

    def rebased(self, base: int) -> "Layout":
        """The same layout over ``base`` instead of ``MADE_UP_BASE`` (a null address stays null)."""
        check(base % ADDRESS_BASE_ALIGN == 0, f"{_API}.Layout.rebased",
              f"a base address must be {ADDRESS_BASE_ALIGN}-byte aligned (the offsets drawn set the alignment)",
              f"{base:#x}")
        return self if self.address == 0 else replace(self, address=base + self.address - MADE_UP_BASE)

    def asyncpipe_verdict(self) -> tuple[str, str | None]:
        """``("ok", None)``, or ``validate_tiled``'s message and rule for the first rule it breaks."""
        try:
            validate_tiled(self.address, self.shape, self.strides, self.dtype, self.box, swizzle=self.swizzle,
                           interleave=self.interleave, l2_promotion=self.l2_promotion, oob_fill=self.oob_fill,
                           element_strides=self.element_strides)
        except AsyncpipeError as exc:
            return str(exc), exc.rule
        except Exception as exc:    # not a rule: a bug in validate_tiled, recorded rather than ending the run
            return f"python {type(exc).__name__}: {exc}", None
        return "ok", None

    def record(self, driver_verdict: str | None = None) -> dict:
        """The layout as one JSON-ready line: every parameter in numpy order and in the driver's, and both verdicts."""
        verdict, rule = self.asyncpipe_verdict()
        return {
            "kind": self.kind,
            "numpy": {"dtype": self.dtype, "address": self.address, "shape": list(self.shape),
                      "strides": list(self.strides), "box": list(self.box),
                      "element_strides": list(self.element_strides), "swizzle": self.swizzle,
                      "interleave": self.interleave, "l2_promotion": self.l2_promotion, "oob_fill": self.oob_fill},
            "driver": self.driver_args(),
            "asyncpipe": verdict,
            "asyncpipe_rule": rule,
            "driver_verdict": driver_verdict,
        }

    @classmethod
    def from_record(cls, rec: dict) -> "Layout":
        """The layout of a ``record`` line (its numpy-order half)."""
        try:
            np_ = rec["numpy"]
            return cls(int(np_["address"]), *(tuple(int(v) for v in np_[k]) for k in ("shape", "strides")),
                       np_["dtype"], *(tuple(int(v) for v in np_[k]) for k in ("box", "element_strides")),
                       np_["swizzle"], np_["interleave"], np_["l2_promotion"], np_["oob_fill"], rec["kind"])
        except (KeyError, TypeError, ValueError) as exc:
            raise AsyncpipeError(f"{_API}.Layout.from_record",
                                 "a verdict line must hold a layout's 'kind' and 'numpy' fields (Layout.record)",
                                 f"{type(exc).__name__}: {exc} in {str(rec)[:200]}") from None


def _bytes(elements: int, bits: int) -> int:
    return -(-elements * bits // 8)


def _align_up(n: int, align: int) -> int:
    return -(-n // align) * align


# ---------------------------------------------------------------------------------------------
# Drawing: the valid core, then one parameter moved to the edge or past it, or everything wild
# ---------------------------------------------------------------------------------------------
def _box_size(r: random.Random) -> int:
    """1..256, with the ends and the powers of two drawn often."""
    pick = r.random()
    if pick < 0.15:
        return 1
    if pick < 0.30:
        return BOX_DIM_MAX
    if pick < 0.45:
        return 1 << r.randint(1, 7)
    if pick < 0.75:
        return r.randint(2, 16)
    return r.randint(17, BOX_DIM_MAX - 1)


def _extent(r: random.Random, box: int) -> int:
    """A global dimension for a box of ``box``: equal to it, smaller (the box hangs over), larger, or huge."""
    pick = r.random()
    if pick < 0.15:
        return box
    if pick < 0.25:
        return r.randint(1, box - 1) if box > 1 else 1
    if pick < 0.30:
        return 1
    if pick < 0.55:
        return box + r.randint(1, 64)
    if pick < 0.80:
        return r.randint(1, 10_000)
    if pick < 0.95:
        return r.randint(10_001, GLOBAL_DIM_MAX)
    return GLOBAL_DIM_MAX


def _strides(r: random.Random, shape, bits: int, align: int) -> tuple[int, ...]:
    """Byte strides, numpy order: mostly the packed rows (rounded up to ``align``), else padded, random,
    overlapping or at the top of the range; always positive multiples of ``align`` below 2**40."""
    top = GLOBAL_STRIDE_MAX - align
    out = [max(1, bits // 8)]
    below = _bytes(shape[-1], bits)                   # bytes spanned by the dimension below
    for n in reversed(shape[:-1]):
        natural = _align_up(below, align)
        pick = r.random()
        if pick < 0.60:
            s = natural
        elif pick < 0.70:
            s = natural + align * r.randint(1, 4)
        elif pick < 0.85:
            s = align * r.randint(1, 1 << 20)
        elif pick < 0.92:
            s = align                                 # rows overlap
        else:
            s = top - align * r.randint(0, 3)
        if s > top:
            s = align * r.randint(1, top // align)
        out.insert(0, s)
        below = s * n
    return tuple(out)


def _valid(r: random.Random, rank: int | None = None) -> Layout:
    """A layout inside every rule of ``validate_tiled``."""
    dtype = r.choice(KNOWN_DTYPES)
    bits = DATA_TYPES[dtype][1]
    size = bits // 8
    rank = r.randint(1, TENSOR_RANK_MAX) if rank is None else rank
    interleave = "none" if rank < 3 else r.choices(("none", "16B", "32B"), (6, 2, 2))[0]
    swizzle = "32B" if interleave == "32B" else r.choice(tuple(_SWIZZLE))
    if interleave == "none":
        span = SWIZZLE_SPAN_BYTES[swizzle] or BOX_DIM_MAX * size
        rows = min(span, BOX_DIM_MAX * size) // BOX_INNER_BYTES_ALIGN     # 16-byte rows the inner box may span
        pick = r.random()
        units = 1 if pick < 0.25 else rows if pick < 0.5 else r.randint(1, rows)
        inner = units * BOX_INNER_BYTES_ALIGN // size
    else:
        inner = _box_size(r)
    box = tuple(_box_size(r) for _ in range(rank - 1)) + (inner,)
    shape = tuple(_extent(r, b) for b in box)
    align = INTERLEAVE_32B_ALIGN if interleave == "32B" else GLOBAL_STRIDE_ALIGN
    strides = _strides(r, shape, bits, align)
    element_strides = tuple(1 if r.random() < 0.6 else r.randint(1, ELEMENT_STRIDE_MAX) for _ in range(rank))
    offset = INTERLEAVE_32B_ALIGN * r.randint(0, ADDRESS_BASE_ALIGN // INTERLEAVE_32B_ALIGN - 1)
    if interleave != "32B" and r.random() < 0.5:
        offset += GLOBAL_ADDRESS_ALIGN                 # 16- but not 32-byte aligned
    oob_fill = "nan" if dtype in FLOAT_DTYPES and r.random() < 0.3 else "zero"
    return Layout(MADE_UP_BASE + offset, shape, strides, dtype, box, element_strides, swizzle, interleave,
                  r.choice(tuple(L2_PROMOTIONS)), oob_fill, "valid")


def _set(values: tuple, i: int, v) -> tuple:
    return values[:i] + (v,) + values[i + 1:]


def _dim(r: random.Random, lay: Layout) -> int:
    return r.randrange(lay.rank)


def _outer(r: random.Random, lay: Layout) -> int | None:
    """A dimension with a byte stride of its own (not the innermost), or None for rank 1."""
    return r.randrange(lay.rank - 1) if lay.rank > 1 else None


def _stride_align(lay: Layout) -> int:
    return INTERLEAVE_32B_ALIGN if lay.interleave == "32B" else GLOBAL_STRIDE_ALIGN


def _edge(r: random.Random, lay: Layout) -> Layout:
    """One parameter onto the last value asyncpipe accepts."""
    what = r.choice(("dim_max", "stride_max", "box_max", "box_eq_extent", "box_over_extent", "element_stride_max",
                     "inner_box_span", "address_null"))
    i = _dim(r, lay)
    if what == "dim_max":
        lay = replace(lay, shape=_set(lay.shape, i, GLOBAL_DIM_MAX))
    elif what == "stride_max" and (j := _outer(r, lay)) is not None:
        lay = replace(lay, strides=_set(lay.strides, j, GLOBAL_STRIDE_MAX - _stride_align(lay)))
    elif what == "box_max" and i < lay.rank - 1:
        lay = replace(lay, box=_set(lay.box, i, BOX_DIM_MAX))
    elif what == "box_eq_extent":
        lay = replace(lay, shape=_set(lay.shape, i, lay.box[i]))
    elif what == "box_over_extent" and lay.box[i] > 1:
        lay = replace(lay, shape=_set(lay.shape, i, lay.box[i] - 1))
    elif what == "element_stride_max":
        lay = replace(lay, element_strides=_set(lay.element_strides, i, ELEMENT_STRIDE_MAX))
    elif what == "inner_box_span" and lay.interleave == "none":
        size = DATA_TYPES[lay.dtype][1] // 8
        span = SWIZZLE_SPAN_BYTES[lay.swizzle] or BOX_DIM_MAX * size
        lay = replace(lay, box=_set(lay.box, lay.rank - 1, min(span, BOX_DIM_MAX * size) // size))
    elif what == "address_null":
        lay = replace(lay, address=0)
    else:
        return replace(lay, kind="valid")              # the edge does not apply to this layout
    return replace(lay, kind=f"edge:{what}")


_OFF = ("dtype_unknown", "oob_nan_int", "rank_over", "interleave_low_rank", "dim_zero", "dim_over",
        "address_misaligned", "stride_zero", "stride_misaligned", "stride_over", "box_zero", "box_over",
        "inner_box_bytes", "inner_box_span", "interleave32_swizzle", "element_stride", "swizzle_unknown")


def _off(r: random.Random) -> Layout:
    """A valid layout with one parameter moved just past one of asyncpipe's rules."""
    what = r.choice(_OFF)
    lay = _valid(r, rank=r.randint(1, 2) if what == "interleave_low_rank" else
                 r.randint(3, TENSOR_RANK_MAX) if what == "interleave32_swizzle" else
                 TENSOR_RANK_MAX if what == "rank_over" else None)
    i, j = _dim(r, lay), _outer(r, lay)
    bits = DATA_TYPES[lay.dtype][1]
    if what == "dtype_unknown":                         # the innermost stride follows (the element size, as always)
        dtype = r.choice(tuple(UNKNOWN_DATA_TYPES))
        lay = replace(lay, dtype=dtype, strides=lay.strides[:-1] + (max(1, DATA_TYPES[dtype][1] // 8),))
    elif what == "oob_nan_int":
        same_size = [d for d in INT_DTYPES if DATA_TYPES[d][1] == bits] or list(INT_DTYPES)
        lay = replace(lay, dtype=r.choice(same_size), oob_fill="nan")
    elif what == "rank_over":
        below = lay.strides[0] * lay.shape[0]
        outer = min(_align_up(below, _stride_align(lay)), GLOBAL_STRIDE_MAX - _stride_align(lay))
        lay = replace(lay, shape=(r.randint(1, 8),) + lay.shape, strides=(outer,) + lay.strides,
                      box=(_box_size(r),) + lay.box, element_strides=(1,) + lay.element_strides)
    elif what == "interleave_low_rank":
        lay = replace(lay, interleave=r.choice(("16B", "32B")), swizzle="32B")
    elif what == "dim_zero":
        lay = replace(lay, shape=_set(lay.shape, i, 0))
    elif what == "dim_over":
        lay = replace(lay, shape=_set(lay.shape, i, r.choice(DIM_OVER)))
    elif what == "address_misaligned":
        off = INTERLEAVE_32B_ALIGN // 2 if lay.interleave == "32B" and r.random() < 0.5 else r.choice(MISALIGN)
        lay = replace(lay, address=lay.address + off)
    elif what == "stride_zero" and j is not None:
        lay = replace(lay, strides=_set(lay.strides, j, 0))
    elif what == "stride_misaligned" and j is not None:
        off = INTERLEAVE_32B_ALIGN // 2 if lay.interleave == "32B" and r.random() < 0.5 else r.choice(MISALIGN)
        lay = replace(lay, strides=_set(lay.strides, j, lay.strides[j] + off))
    elif what == "stride_over" and j is not None:
        lay = replace(lay, strides=_set(lay.strides, j, r.choice(STRIDE_OVER)))
    elif what == "box_zero":
        lay = replace(lay, box=_set(lay.box, i, 0))
    elif what == "box_over":
        lay = replace(lay, box=_set(lay.box, i, r.choice(BOX_OVER)))
    elif what == "inner_box_bytes" and lay.interleave == "none" and bits < 8 * BOX_INNER_BYTES_ALIGN:
        up = lay.box[-1] == 1 or (lay.box[-1] < BOX_DIM_MAX and r.random() < 0.5)
        inner = lay.box[-1] + (1 if up else -1)
        lay = replace(lay, box=_set(lay.box, lay.rank - 1, inner))
    elif what == "inner_box_span" and lay.interleave == "none":
        spans = [s for s, span in SWIZZLE_SPAN_BYTES.items() if span is not None and span < _bytes(lay.box[-1], bits)]
        if spans:                                       # a swizzle narrower than the inner box
            lay = replace(lay, swizzle=r.choice(spans))
        else:                                           # the inner box one 16-byte row past a swizzle's span
            swizzle = r.choice(("32B", "64B"))
            inner = (SWIZZLE_SPAN_BYTES[swizzle] + BOX_INNER_BYTES_ALIGN) * 8 // bits
            lay = replace(lay, swizzle=swizzle, box=_set(lay.box, lay.rank - 1, inner))
    elif what == "interleave32_swizzle":
        lay = replace(lay, interleave="32B", swizzle=r.choice(("none", "64B", "128B")),
                      address=lay.address - lay.address % INTERLEAVE_32B_ALIGN,
                      strides=tuple(min(_align_up(s, INTERLEAVE_32B_ALIGN), GLOBAL_STRIDE_MAX - INTERLEAVE_32B_ALIGN)
                                    for s in lay.strides[:-1]) + lay.strides[-1:])
    elif what == "element_stride":
        lay = replace(lay, element_strides=_set(lay.element_strides, i, r.choice(ELEMENT_STRIDE_OFF)))
    elif what == "swizzle_unknown":
        lay = replace(lay, swizzle=r.choice(tuple(UNKNOWN_SWIZZLES)))
    else:
        return lay                                      # the rule does not apply to this layout: kept valid
    return replace(lay, kind=f"off:{what}")


def _wild(r: random.Random) -> Layout:
    """Every parameter on its own, from the whole space."""
    dtype = r.choice(tuple(DATA_TYPES))
    bits = DATA_TYPES[dtype][1]
    rank = r.randint(1, RANK_OFF)
    shape = tuple(r.choice(DIM_EDGES) if r.random() < 0.3 else r.randint(1, 1 << r.randint(1, 20))
                  for _ in range(rank))

    def stride() -> int:
        pick = r.random()
        if pick < 0.1:
            return 0
        if pick < 0.2:
            return r.choice(STRIDE_OVER + (GLOBAL_STRIDE_MAX - GLOBAL_STRIDE_ALIGN,))
        if pick < 0.4:
            return r.randint(1, 1 << 24)
        return GLOBAL_STRIDE_ALIGN * r.randint(1, 1 << 20)

    box = tuple(r.choice((0,) + BOX_OVER) if r.random() < 0.15 else r.randint(1, BOX_DIM_MAX) for _ in range(rank))
    address = 0 if r.random() < 0.05 else MADE_UP_BASE + r.randrange(ADDRESS_BASE_ALIGN)
    strides = tuple(stride() for _ in range(rank - 1)) + (max(1, bits // 8),)
    element_strides = tuple(r.randint(0, ELEMENT_STRIDE_MAX + 1) for _ in range(rank))
    return Layout(address, shape, strides, dtype, box, element_strides, r.choice(tuple(SWIZZLES)),
                  r.choice(tuple(INTERLEAVES)), r.choice(tuple(L2_PROMOTIONS)), r.choice(tuple(OOB_FILLS)), "wild")


def draw(n: int, seed: int) -> list[Layout]:
    """``n`` layouts drawn with ``random.Random(seed)``: the same seed gives the same layouts, and a longer
    draw starts with a shorter one's."""
    check(isinstance(n, int) and not isinstance(n, bool) and n >= 0, f"{_API}.draw",
          "n must be a non-negative integer", repr(n))
    check(isinstance(seed, int) and not isinstance(seed, bool), f"{_API}.draw",
          "seed must be an integer", repr(seed))
    r = random.Random(seed)
    out = []
    for _ in range(n):
        kind = r.choices(KINDS, KIND_WEIGHTS)[0]
        if kind == "valid":
            out.append(_valid(r))
        elif kind == "edge":
            out.append(_edge(r, _valid(r)))
        elif kind == "off":
            out.append(_off(r))
        else:
            out.append(_wild(r))
    return out


# ---------------------------------------------------------------------------------------------
# The driver's verdict (cuda.bindings.driver passed in: nothing here imports CUDA)
# ---------------------------------------------------------------------------------------------
class DriverEncoder:
    """``verdict(layout)``: the ``CUresult`` name of ``cuTensorMapEncodeTiled`` on the layout's raw
    parameters, one cuda.bindings call each (enum members looked up once, here)."""

    def __init__(self, driver):
        self._call = driver.cuTensorMapEncodeTiled
        self._u64, self._u32 = driver.cuuint64_t, driver.cuuint32_t
        self._enums = {}
        for kind, cls, names in (
                ("dtype", driver.CUtensorMapDataType, {k: DATA_TYPE_PREFIX + s for k, (s, _) in DATA_TYPES.items()}),
                ("swizzle", driver.CUtensorMapSwizzle, SWIZZLES), ("interleave", driver.CUtensorMapInterleave,
                                                                  INTERLEAVES),
                ("l2_promotion", driver.CUtensorMapL2promotion, L2_PROMOTIONS),
                ("oob_fill", driver.CUtensorMapFloatOOBfill, OOB_FILLS)):
            self._enums[kind] = {k: getattr(cls, member, None) for k, member in names.items()}
        self.absent = sorted(f"{k}={v}" for kind, m in self._enums.items() for k, v in m.items() if v is None)

    def verdict(self, lay: Layout) -> str:
        e = self._enums
        members = (e["dtype"][lay.dtype], e["interleave"][lay.interleave], e["swizzle"][lay.swizzle],
                   e["l2_promotion"][lay.l2_promotion], e["oob_fill"][lay.oob_fill])
        if None in members:
            return "absent from cuda.bindings"
        u64, u32 = self._u64, self._u32
        args = lay.driver_args()
        strides = args["globalStrides"]
        if not strides:
            # as asyncpipe.backend.gpu._encode: an empty globalStrides reaches the driver as a null pointer,
            # which it refuses (CUDA_ERROR_INVALID_VALUE on an H200), so rank 1 passes one it ignores
            strides = [_align_up(_bytes(lay.shape[0], DATA_TYPES[lay.dtype][1]), GLOBAL_STRIDE_ALIGN)]
        try:
            err, _ = self._call(members[0], lay.rank, lay.address, [u64(v) for v in args["globalDim"]],
                                [u64(v) for v in strides], [u32(v) for v in args["boxDim"]],
                                [u32(v) for v in args["elementStrides"]], *members[1:])
        except (OverflowError, TypeError, ValueError) as exc:   # a value the binding's C types cannot hold, or a
            # list longer than the binding takes (cuda.bindings 13.3 on the H200: "Argument 'elementStrides' too
            # long, must be <= 5" for rank 6): refused before the driver sees it
            return f"python {type(exc).__name__}: {exc}"
        return err.name


def driver_call(driver, fn, *args):
    """``fn(*args)`` of cuda.bindings (which returns ``(CUresult, *values)``): its value(s), or
    ``AsyncpipeError`` naming the call and the CUresult."""
    err, *out = fn(*args)
    check(err == driver.CUresult.CUDA_SUCCESS, f"{_API}.driver_call", f"{fn.__name__} must succeed", err.name,
          "CUDA driver")
    return out[0] if len(out) == 1 else tuple(out)


def open_driver(driver) -> dict:
    """``cuInit``, the primary context of device 0 made current; what was found (driver version, device)."""
    driver_call(driver, driver.cuInit, 0)
    dev = driver_call(driver, driver.cuDeviceGet, 0)
    driver_call(driver, driver.cuCtxSetCurrent, driver_call(driver, driver.cuDevicePrimaryCtxRetain, dev))
    attr = driver.CUdevice_attribute
    cc = [driver_call(driver, driver.cuDeviceGetAttribute, getattr(attr, f"CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_{m}"),
                      dev) for m in ("MAJOR", "MINOR")]
    name = driver_call(driver, driver.cuDeviceGetName, 128, dev)
    if isinstance(name, bytes):
        name = name.decode(errors="replace")
    return {"driver_version": driver_call(driver, driver.cuDriverGetVersion), "device": name.split("\0", 1)[0],
            "compute_capability": cc}


def address_probe(driver, encoder: DriverEncoder, layouts, nbytes: int = 1 << 20) -> tuple[int, int]:
    """Encode ``layouts`` at ``MADE_UP_BASE`` and inside a real allocation of ``nbytes``; return the
    allocation's address and how many verdicts differ (0: the driver does not look at the memory)."""
    base = int(driver_call(driver, driver.cuMemAlloc, nbytes))
    check(base % ADDRESS_BASE_ALIGN == 0, f"{_API}.address_probe",
          f"cuMemAlloc must return a {ADDRESS_BASE_ALIGN}-byte aligned address", f"{base:#x}", "CUDA driver")
    differ = sum(encoder.verdict(lay) != encoder.verdict(lay.rebased(base)) for lay in layouts)
    return base, differ


# ---------------------------------------------------------------------------------------------
# Verdict files: one JSON line per layout, gzip; the first line is the run's metadata
# ---------------------------------------------------------------------------------------------
ACCEPTED = "CUDA_SUCCESS"
CLASSES = ("agree", "asyncpipe accepts, driver refuses", "asyncpipe refuses, driver accepts")


def verdict_class(asyncpipe: str, driver: str | None) -> str | None:
    """Which of ``CLASSES`` a pair of verdicts falls in; None without a driver verdict."""
    if driver is None:
        return None
    a_ok, d_ok = asyncpipe == "ok", driver == ACCEPTED
    return CLASSES[0] if a_ok == d_ok else CLASSES[1] if a_ok else CLASSES[2]


def write_records(path, meta: dict, records) -> int:
    """Write ``{"meta": meta}`` then one line per record to the gzip file ``path``; the count of records."""
    check(str(path).endswith(".jsonl.gz"), f"{_API}.write_records",
          "a verdict file's name must end in .jsonl.gz", str(path))
    n = 0
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=6) as f:
        f.write(json.dumps({"meta": meta}) + "\n")
        for rec in records:
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")
            n += 1
    return n


def read_records(path) -> tuple[dict, list[dict]]:
    """(metadata, records) of a file written by ``write_records``."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = [json.loads(line) for line in f if line.strip()]
    check(bool(lines) and "meta" in lines[0], f"{_API}.read_records",
          "a verdict file must open with its {\"meta\": ...} line", f"{str(lines[:1])[:200]} in {path}")
    return lines[0]["meta"], lines[1:]


def disagreements(records) -> list[tuple[dict, str]]:
    """Records whose driver verdict differs from asyncpipe's verdict *now* (``validate_tiled`` re-run on the
    layout, not the verdict stored), each with its class; records without a driver verdict are skipped."""
    out = []
    for rec in records:
        verdict, _ = Layout.from_record(rec).asyncpipe_verdict()
        cls = verdict_class(verdict, rec.get("driver_verdict"))
        if cls not in (None, CLASSES[0]):
            out.append((dict(rec, asyncpipe=verdict), cls))
    return out


def describe(rec: dict) -> str:
    """One line for a record: kind, parameters (numpy order), both verdicts."""
    p = rec["numpy"]
    opts = "/".join(str(p[k]) for k in ("swizzle", "interleave", "l2_promotion", "oob_fill"))
    return (f"{rec['kind']}: {p['dtype']} shape={tuple(p['shape'])} strides={tuple(p['strides'])} "
            f"box={tuple(p['box'])} es={tuple(p['element_strides'])} {opts} addr%32={p['address'] % 32}"
            f"{' (null)' if p['address'] == 0 else ''} -> asyncpipe: {rec['asyncpipe']} | driver: "
            f"{rec['driver_verdict']}")


__all__ = ["Layout", "DriverEncoder", "draw", "open_driver", "driver_call", "address_probe", "write_records",
           "read_records", "disagreements", "verdict_class", "describe"]
