"""A tiled tensor map as pure data: the array's description (``describe_array``), the layout checked
against every rule of ``cuTensorMapEncodeTiled`` (``validate_tiled``), and ``EncodedTensorMap``, the
layout with its 16 words, which both backends make and read (the GPU's words encoded by the driver,
the simulator's a stand-in). ``asyncpipe.host.TensorMap`` is the user's class, built with ``tiled``.

Shapes, boxes and element strides are given in numpy order (outermost dimension first) and reversed
here into the driver's order (innermost first); the kernel's coordinates are in PTX's order,
innermost first.

The rules are those the driver enforces on an H200 (driver 580.159.04), found from its verdicts on 40,000
random layouts (``tests/data``); a comment by each rule says where that differs from the documentation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..constants import (
    BOX_DIM_MAX,
    BOX_INNER_BYTES_ALIGN,
    ELEMENT_STRIDE_MAX,
    GLOBAL_ADDRESS_ALIGN,
    GLOBAL_DIM_MAX,
    GLOBAL_STRIDE_ALIGN,
    GLOBAL_STRIDE_MAX,
    SWIZZLE_SPAN_BYTES,
    TENSOR_MAP_BYTES,
    TENSOR_RANK_MAX,
    TMA_BOX_BYTES_MAX,
)
from ..errors import AsyncpipeError, check

# Local limits, not (yet) in asyncpipe.constants:
INTERLEAVE_RANK_MIN = 3               # tensorRank >= 3 when interleave is not NONE (cuTensorMapEncodeTiled)
INTERLEAVE_32B_ALIGN = 32             # interleave 32B: globalAddress and globalStrides multiples of 32 bytes
TENSOR_MAP_WORDS = TENSOR_MAP_BYTES // 8   # the map as kernels receive it: uint64[16]

_API = "TensorMap.tiled"
_DRIVER = "cuTensorMapEncodeTiled"
_CAI = "CUDA array interface"

# dtype name -> (CUtensorMapDataType suffix, bytes per element, floating point?). The last three are 4-byte floats
# in memory (an array of numpy's float32 with dtype=...): the H200's driver holds them to float32's rules (273 of
# 1,154 drawn accepted, every refusal one of the rules below). Whether the TMA changes their bits (flush to zero,
# tf32 rounding) is not measured, so the simulator refuses to move them.
_DTYPES = {
    "uint8": ("UINT8", 1, False),
    "uint16": ("UINT16", 2, False),
    "uint32": ("UINT32", 4, False),
    "uint64": ("UINT64", 8, False),
    "int32": ("INT32", 4, False),
    "int64": ("INT64", 8, False),
    "float16": ("FLOAT16", 2, True),
    "bfloat16": ("BFLOAT16", 2, True),
    "float32": ("FLOAT32", 4, True),
    "float64": ("FLOAT64", 8, True),
    "float32_ftz": ("FLOAT32_FTZ", 4, True),
    "tfloat32": ("TFLOAT32", 4, True),
    "tfloat32_ftz": ("TFLOAT32_FTZ", 4, True),
}
# CUtensorMapDataType's packed 4- and 6-bit types (16 elements in 8 or 16 bytes): asyncpipe does not support them
# (the H200's driver refused all 1,065 drawn, but only 11 of those, all 16u4_align8b, kept every documented rule,
# so what it accepts is not known); tests/host/test_tensor_map_driver.py names them the one exception to agreement
_PACKED_DTYPES = {"16u4_align8b": "16U4_ALIGN8B", "16u4_align16b": "16U4_ALIGN16B", "16u6_align16b": "16U6_ALIGN16B"}
_PACKED_RULE = ("asyncpipe does not support the packed 4/6-bit dtypes (16u4_align8b, 16u4_align16b, "
                "16u6_align16b): their box and stride rules are not modelled")
# CUtensorMapSwizzle's 128B_ATOM modes (CUDA 12.8+): the H200's driver refused every one of 2,332 layouts drawn
# with one (674 of them breaking no other rule)
_ATOM_SWIZZLES = ("128B_atom_32B", "128B_atom_32B_flip_8B", "128B_atom_64B")
# option value -> CUDA enum member name
_SWIZZLE = {"none": "CU_TENSOR_MAP_SWIZZLE_NONE", "32B": "CU_TENSOR_MAP_SWIZZLE_32B",
            "64B": "CU_TENSOR_MAP_SWIZZLE_64B", "128B": "CU_TENSOR_MAP_SWIZZLE_128B"}
_INTERLEAVE = {"none": "CU_TENSOR_MAP_INTERLEAVE_NONE", "16B": "CU_TENSOR_MAP_INTERLEAVE_16B",
               "32B": "CU_TENSOR_MAP_INTERLEAVE_32B"}
_L2_PROMOTION = {"none": "CU_TENSOR_MAP_L2_PROMOTION_NONE", "64B": "CU_TENSOR_MAP_L2_PROMOTION_L2_64B",
                 "128B": "CU_TENSOR_MAP_L2_PROMOTION_L2_128B", "256B": "CU_TENSOR_MAP_L2_PROMOTION_L2_256B"}
_OOB_FILL = {"zero": "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE", "nan": "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA"}
assert set(_SWIZZLE) == set(SWIZZLE_SPAN_BYTES)


def _fail(rule: str, got, source: str | None = _DRIVER):
    raise AsyncpipeError(_API, rule, got, source)


def _rule(ok: bool, rule: str, got, source: str | None = _DRIVER) -> None:
    check(ok, _API, rule, got, source)


def _check_dtype(name: str) -> None:
    """The dtype is one asyncpipe knows (a packed one named as unsupported)."""
    _rule(name not in _PACKED_DTYPES, _PACKED_RULE, repr(name), None)
    _rule(name in _DTYPES, f"dtype must be one of {', '.join(_DTYPES)}", repr(name))


def _tuple_of_ints(name: str, value, rank: int) -> tuple[int, ...]:
    try:
        out = tuple(int(v) for v in value)
    except TypeError:
        _fail(f"{name} must be a sequence of integers, one per dimension (rank {rank})", value, None)
    _rule(len(out) == rank, f"{name} must have one entry per dimension (rank {rank}), in numpy order",
          value, None)
    return out


# ---------------------------------------------------------------------------------------------
# The array: address, shape, strides and dtype, read from its __cuda_array_interface__
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ArrayDesc:
    """What a tensor map needs of an array, numpy order; strides in bytes."""

    address: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str


def resolve_dtype(typestr: str, dtype=None) -> str:
    """The tensor-map dtype name for an array of ``typestr``, or the explicit ``dtype`` (same size)."""
    try:
        array_dt = np.dtype(typestr)
    except TypeError:
        _fail("the array's typestr must be a numpy type string", typestr, _CAI)
    _rule(array_dt.isnative, "the array must be in native (little-endian) byte order", typestr, _CAI)
    if dtype is None:
        name = array_dt.name
    elif isinstance(dtype, str):
        name = dtype
    else:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            name = repr(dtype)
    _rule(name not in _PACKED_DTYPES, _PACKED_RULE, repr(name), None)
    if name not in _DTYPES:
        _fail(f"dtype must be one of {', '.join(_DTYPES)} (TMA moves bits: pass dtype= of the same size "
              "to reinterpret, e.g. dtype='uint8' for int8; bfloat16 only as dtype='bfloat16')", name)
    size = _DTYPES[name][1]
    _rule(size == array_dt.itemsize,
          f"dtype {name!r} must have the array's element size, {array_dt.itemsize} bytes ({typestr})",
          f"{name} of {size} bytes", _CAI)
    return name


def describe_array(array, dtype=None) -> ArrayDesc:
    """Address, shape, byte strides (numpy order) and dtype of a device array, from its
    ``__cuda_array_interface__``; no GPU needed (nothing is dereferenced)."""
    cai = getattr(array, "__cuda_array_interface__", None)
    if cai is None:
        _fail("the array must live in device memory and expose __cuda_array_interface__ (numba device "
              "arrays, CuPy, PyTorch CUDA tensors)", type(array).__name__, _CAI)
    _rule(cai.get("mask") is None, "masked arrays cannot be described by a tensor map", "a mask", _CAI)
    name = resolve_dtype(cai["typestr"], dtype)
    itemsize = np.dtype(cai["typestr"]).itemsize
    shape = tuple(int(s) for s in cai["shape"])
    strides = cai.get("strides")
    if strides is None:   # C-contiguous
        strides, step = [], itemsize
        for n in reversed(shape):
            strides.insert(0, step)
            step *= n
    strides = [int(s) for s in strides]
    # An outer dimension of extent 1 is never stepped along: its stride is whatever the array's producer wrote (a
    # one-row view of a pitched array counts as contiguous, and its interface reports cols x itemsize, not the
    # pitch). It takes the smallest stride every layout rule accepts instead: the next dimension's extent in bytes,
    # rounded up to 32 (a multiple of 16, and of 32 with interleave). Otherwise a one-row view of an 8-byte-wide
    # row would be refused for a stride TMA never uses.
    for i in range(len(shape) - 2, -1, -1):
        if shape[i] == 1:
            strides[i] = -(-(shape[i + 1] * strides[i + 1]) // 32) * 32
    return ArrayDesc(int(cai["data"][0]), shape, tuple(strides), name)


# ---------------------------------------------------------------------------------------------
# The layout, validated against every rule of cuTensorMapEncodeTiled (pure Python)
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TiledLayout:
    """A validated tiled tensor map, in numpy order (outermost first); ``cuda_*`` give the driver's order."""

    address: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]            # bytes
    dtype: str
    box: tuple[int, ...]
    element_strides: tuple[int, ...]
    swizzle: str
    interleave: str
    l2_promotion: str
    oob_fill: str

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def itemsize(self) -> int:
        return _DTYPES[self.dtype][1]

    @property
    def box_elements(self) -> tuple[int, ...]:
        """Elements the box delivers along each dimension: ceil(box / element stride), except along the
        innermost one with no interleave, whose element stride the TMA ignores."""
        out = [math.ceil(b / e) for b, e in zip(self.box, self.element_strides)]
        if self.interleave == "none":
            out[-1] = self.box[-1]
        return tuple(out)

    @property
    def box_bytes(self) -> int:
        """Bytes one box delivers to shared memory (out-of-bounds fill included): the mbarrier's tx count."""
        return math.prod(self.box_elements) * self.itemsize

    @property
    def smem_row_pitch(self) -> int:
        """Bytes from one box row (innermost dimension) to the next in shared memory: the row's bytes, or, with a
        swizzle and a row narrower than its span, the span. Measured on the H200 (scripts/experiments/
        tma_swizzle_rows.py, 2026-12-02): each such row starts a span of its own, and the mbarrier still counts
        only ``box_bytes``."""
        inner = self.box_elements[-1] * self.itemsize
        span = SWIZZLE_SPAN_BYTES[self.swizzle] if self.interleave == "none" else None
        return max(inner, span) if span else inner

    @property
    def smem_bytes(self) -> int:
        """Shared memory the box occupies from its start: what a kernel must reserve for it (``box_bytes``
        unless the rows are narrower than the swizzle span, see ``smem_row_pitch``)."""
        rows = math.prod(self.box_elements[:-1])
        return (rows - 1) * self.smem_row_pitch + self.box_elements[-1] * self.itemsize

    @property
    def cuda_dims(self) -> list[int]:
        return list(reversed(self.shape))

    @property
    def cuda_strides(self) -> list[int]:
        """globalStrides: the byte strides of the rank - 1 outer dimensions, innermost-but-one first."""
        return list(reversed(self.strides[:-1]))

    @property
    def cuda_box(self) -> list[int]:
        return list(reversed(self.box))

    @property
    def cuda_element_strides(self) -> list[int]:
        return list(reversed(self.element_strides))


def validate_tiled(address: int, shape, strides, dtype: str, box, *, swizzle="none", interleave="none",
                   l2_promotion="none", oob_fill="zero", element_strides=None) -> TiledLayout:
    """Check a tiled tensor map against ``cuTensorMapEncodeTiled``'s rules; return its layout or raise
    ``AsyncpipeError`` naming the first rule broken. ``shape``, ``strides`` (bytes), ``box`` and
    ``element_strides`` are in numpy order; ``dtype`` is a name (``"int32"``, ``"bfloat16"``)."""
    # options
    _rule(swizzle not in _ATOM_SWIZZLES, "the 128B_ATOM swizzles are refused on sm_90 (by the H200's driver): "
          f"swizzle must be one of {', '.join(map(repr, _SWIZZLE))}", repr(swizzle))
    for name, value, allowed in (("swizzle", swizzle, _SWIZZLE), ("interleave", interleave, _INTERLEAVE),
                                 ("l2_promotion", l2_promotion, _L2_PROMOTION), ("oob_fill", oob_fill, _OOB_FILL)):
        _rule(value in allowed, f"{name} must be one of {', '.join(map(repr, allowed))}", repr(value))
    _check_dtype(dtype)
    itemsize, is_float = _DTYPES[dtype][1], _DTYPES[dtype][2]
    _rule(oob_fill != "nan" or is_float, "oob_fill='nan' needs a floating-point dtype", dtype)

    # rank and global extent
    shape = tuple(int(s) for s in shape)
    rank = len(shape)
    _rule(1 <= rank <= TENSOR_RANK_MAX, f"the tensor must have 1..{TENSOR_RANK_MAX} dimensions",
          f"rank {rank} (shape {shape})")
    _rule(interleave == "none" or rank >= INTERLEAVE_RANK_MIN,
          f"an interleaved tensor must have at least {INTERLEAVE_RANK_MIN} dimensions", f"rank {rank}")
    for i, n in enumerate(shape):
        _rule(1 <= n <= GLOBAL_DIM_MAX, "every dimension must have 1..2**32 elements",
              f"shape[{i}] = {n} (shape {shape})")

    # address and strides
    align = INTERLEAVE_32B_ALIGN if interleave == "32B" else GLOBAL_ADDRESS_ALIGN
    _rule(address % align == 0, f"the global address must be {align}-byte aligned",
          f"{address:#x} ({address % align} bytes past a {align}-byte boundary)")
    strides = _tuple_of_ints("strides", strides, rank)
    _rule(strides[-1] == itemsize,
          f"the innermost dimension must be contiguous (byte stride = element size, {itemsize} bytes): "
          "copy the array to a contiguous one first",
          f"innermost stride {strides[-1]} bytes (strides {strides})")
    stride_align = INTERLEAVE_32B_ALIGN if interleave == "32B" else GLOBAL_STRIDE_ALIGN
    for i, s in enumerate(strides[:-1]):      # 0 is a multiple: the driver takes it (every index reads one row)
        _rule(s >= 0 and s % stride_align == 0,
              f"every byte stride but the innermost must be a non-negative multiple of {stride_align} bytes",
              f"strides[{i}] = {s} bytes (strides {strides})")
        _rule(s < GLOBAL_STRIDE_MAX, "every byte stride must be below 2**40",
              f"strides[{i}] = {s} bytes")

    # box
    box = _tuple_of_ints("box", box, rank)
    for i, (b, n) in enumerate(zip(box, shape)):
        _rule(1 <= b <= BOX_DIM_MAX, f"every box size must be 1..{BOX_DIM_MAX} elements",
              f"box[{i}] = {b} (box {box})")
    inner_bytes = box[-1] * itemsize
    _rule(inner_bytes % BOX_INNER_BYTES_ALIGN == 0,          # with interleave too (documented without only)
          f"the box's innermost row must be a multiple of {BOX_INNER_BYTES_ALIGN} bytes",
          f"{box[-1]} * {itemsize} = {inner_bytes} bytes")
    span = SWIZZLE_SPAN_BYTES[swizzle]
    _rule(interleave != "none" or span is None or inner_bytes <= span,
          f"with swizzle {swizzle!r} and no interleave the box's innermost row must be at most {span} bytes",
          f"{box[-1]} * {itemsize} = {inner_bytes} bytes")
    # interleave '32B' takes every swizzle: the documentation asks for swizzle '32B', the H200's driver does not

    # element strides
    element_strides = (1,) * rank if element_strides is None else _tuple_of_ints("element_strides",
                                                                                   element_strides, rank)
    for i, e in enumerate(element_strides):
        _rule(1 <= e <= ELEMENT_STRIDE_MAX, f"every element stride must be 1..{ELEMENT_STRIDE_MAX}",
              f"element_strides[{i}] = {e}")

    # the box's size as the driver counts it: floor quotients (not the ceil(box / stride) elements the TMA delivers),
    # the innermost one included (which the TMA ignores without interleave); a zero quotient lets any box pass
    counted = math.prod(b // e for b, e in zip(box, element_strides)) * itemsize
    _rule(counted <= TMA_BOX_BYTES_MAX,
          f"the box must fit in {TMA_BOX_BYTES_MAX // 1024} KB, counted as the driver does: the product of "
          f"box[i] // element_strides[i] times the element size at most {TMA_BOX_BYTES_MAX} bytes",
          " * ".join(f"({b} // {e})" for b, e in zip(box, element_strides)) + f" * {itemsize} = {counted} bytes")

    return TiledLayout(int(address), shape, strides, dtype, box, element_strides, swizzle, interleave,
                       l2_promotion, oob_fill)


# ---------------------------------------------------------------------------------------------
# The encoded map
# ---------------------------------------------------------------------------------------------
class EncodedTensorMap:
    """A validated ``TiledLayout``, its encoded words (a device array of 16 ``uint64``: what kernels
    receive) and the array it describes (kept alive: the map holds its raw address). Made by
    ``asyncpipe.host.TensorMap.tiled``; the backends recognise a map by this class."""

    def __init__(self, layout: TiledLayout, words, array):
        """Use ``TensorMap.tiled``."""
        self._layout = layout
        self._words = words          # numba device array, uint64[16]: the encoded map
        self._array = array          # keeps the described memory alive

    @property
    def __cuda_array_interface__(self) -> dict:
        return self._words.__cuda_array_interface__

    @property
    def layout(self) -> TiledLayout:
        return self._layout

    @property
    def array(self):
        """The array the map describes."""
        return self._array

    @property
    def shape(self) -> tuple[int, ...]:
        return self._layout.shape

    @property
    def box(self) -> tuple[int, ...]:
        return self._layout.box

    @property
    def element_strides(self) -> tuple[int, ...]:
        return self._layout.element_strides

    @property
    def dtype(self) -> str:
        return self._layout.dtype

    @property
    def rank(self) -> int:
        return self._layout.rank

    @property
    def box_bytes(self) -> int:
        """Bytes one box delivers: the count for ``mbarrier_arrive_expect_tx``."""
        return self._layout.box_bytes

    @property
    def smem_bytes(self) -> int:
        """Shared memory one box occupies (reserve this much): ``box_bytes``, or more when a swizzle's span is wider
        than the box's rows, each of which then starts a span of its own (measured on the H200)."""
        return self._layout.smem_bytes

    @property
    def swizzle(self) -> str:
        return self._layout.swizzle

    def words(self) -> np.ndarray:
        """The encoded map, 16 uint64 words, copied back to the host."""
        return self._words.copy_to_host()

    def __repr__(self) -> str:
        lay = self._layout
        extras = "".join(f", {k}={getattr(lay, k)!r}" for k in ("swizzle", "interleave", "l2_promotion")
                         if getattr(lay, k) != "none")
        if lay.oob_fill != "zero":
            extras += f", oob_fill={lay.oob_fill!r}"
        if any(e != 1 for e in lay.element_strides):
            extras += f", element_strides={lay.element_strides}"
        return (f"TensorMap.tiled(shape={lay.shape}, box={lay.box}, dtype={lay.dtype!r}{extras}, "
                f"box_bytes={lay.box_bytes}, address={lay.address:#x})")
