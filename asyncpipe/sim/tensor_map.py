"""Tensor maps in the simulator: no driver encodes them; the map keeps its validated layout and the
simulator reads and writes the described memory through a numpy view of it.

Under ``NUMBA_ENABLE_CUDASIM=1`` "device" arrays are host memory (numba's simulator arrays, whose
``__cuda_array_interface__`` asyncpipe gives a host address), so the layout's address, shape and
strides describe host bytes: ``global_view`` wraps them without copying. The ``TensorMap`` keeps the
array alive, as on the GPU.
"""

from __future__ import annotations

import ctypes

import numpy as np

from ..errors import AsyncpipeError

# what numpy calls each tensor-map dtype (bfloat16 has no numpy type: moved as raw 16-bit words)
_NUMPY = {"bfloat16": np.uint16}
_NAN_BITS = {"float16": np.uint16(0x7E00), "bfloat16": np.uint16(0x7FC0)}
SWIZZLE_MASK = {"none": 0, "32B": 1, "64B": 3, "128B": 7}   # 16-byte chunk bits XORed with bits 7..9
# 4-byte float dtypes the driver encodes but the simulator does not move: whether the TMA flushes their denormals
# or rounds them to tf32 on the way is not measured, so copying their bits might hide a difference
NOT_MOVED = ("float32_ftz", "tfloat32", "tfloat32_ftz")


def _check_moved(name: str) -> None:
    if name in NOT_MOVED:
        raise AsyncpipeError("TensorMap", f"the simulator does not move {', '.join(NOT_MOVED)} tensor maps (whether "
                             "the TMA flushes or rounds their bits is not measured): use dtype='float32' here",
                             repr(name), "asyncpipe.sim")


def numpy_dtype(name: str) -> np.dtype:
    _check_moved(name)
    return np.dtype(_NUMPY.get(name, name))


def simulated_words(layout):
    """The 16 words a kernel receives in place of the encoded map: in the simulator, zeros (the
    simulator reads the ``TensorMap`` object itself). A dtype the simulator cannot move is refused here."""
    from numba import cuda

    _check_moved(layout.dtype)

    return cuda.to_device(np.zeros(16, np.uint64))


def global_view(tmap) -> np.ndarray:
    """A numpy view (numpy order) of the memory ``tmap`` describes, cached on the map."""
    view = getattr(tmap, "_sim_view", None)
    if view is not None:
        return view
    lay = tmap.layout
    if lay.interleave != "none":
        raise AsyncpipeError("TensorMap", "the simulator moves only non-interleaved tensor maps", lay.interleave,
                             "asyncpipe.sim")
    dt = numpy_dtype(lay.dtype)
    span = sum((n - 1) * s for n, s in zip(lay.shape, lay.strides)) + dt.itemsize
    raw = (ctypes.c_uint8 * span).from_address(lay.address)
    base = np.frombuffer(raw, np.uint8)
    view = np.lib.stride_tricks.as_strided(base.view(dt), shape=lay.shape, strides=lay.strides)
    tmap._sim_view = view
    return view


def fill_value(lay):
    """The out-of-bounds fill as a value of ``numpy_dtype(lay.dtype)``: the NaN's bits for the 16-bit floats
    (reinterpreted, not converted: np.float16(np.uint16(0x7E00)) would be 32256.0)."""
    if lay.oob_fill == "nan":
        if lay.dtype in _NAN_BITS:
            return np.array(_NAN_BITS[lay.dtype]).view(numpy_dtype(lay.dtype))[()]
        return numpy_dtype(lay.dtype).type(np.nan)
    return numpy_dtype(lay.dtype).type(0)


def box_indices(lay, coords):
    """Per dimension (numpy order): the tensor indices the box covers. ``coords`` innermost first."""
    c = list(reversed([int(x) for x in coords]))
    elems = lay.box_elements
    out = []
    for d, (start, n) in enumerate(zip(c, elems)):
        step = 1 if d == lay.rank - 1 else lay.element_strides[d]
        out.append(start + step * np.arange(n))
    return out


def load_box(tmap, coords) -> np.ndarray:
    """The box at ``coords`` as the TMA delivers it (row-major, out-of-bounds elements filled)."""
    lay = tmap.layout
    view = global_view(tmap)
    idx = box_indices(lay, coords)
    out = np.full(lay.box_elements, fill_value(lay), numpy_dtype(lay.dtype))
    ok = [(i >= 0) & (i < n) for i, n in zip(idx, lay.shape)]
    if all(o.any() for o in ok):
        out[np.ix_(*ok)] = view[np.ix_(*[i[o] for i, o in zip(idx, ok)])]
    return out


def store_box(tmap, coords, box: np.ndarray) -> None:
    """Write the elements of ``box`` that fall inside the tensor (the TMA clips the rest)."""
    lay = tmap.layout
    view = global_view(tmap)
    idx = box_indices(lay, coords)
    ok = [(i >= 0) & (i < n) for i, n in zip(idx, lay.shape)]
    if all(o.any() for o in ok):
        view[np.ix_(*[i[o] for i, o in zip(idx, ok)])] = box[np.ix_(*ok)]


def smem_offsets(lay, base: int) -> np.ndarray:
    """Shared-memory byte offsets of the box's bytes, in row-major order: box row r at ``r * smem_row_pitch`` (a
    row narrower than the swizzle span starts a span of its own: measured on the H200), then the swizzle (which
    permutes 16-byte chunks by the absolute address: chunk bits 4..6 XOR row bits 7..9)."""
    n = lay.box_bytes
    k = np.arange(n, dtype=np.int64)
    inner = lay.box_elements[-1] * lay.itemsize
    lin = base + (k // inner) * lay.smem_row_pitch + k % inner
    mask = SWIZZLE_MASK[lay.swizzle]
    if mask:
        lin = lin ^ (((lin >> 7) & mask) << 4)
    return lin
