"""Arrays as kernels see them in the simulator, and pointers to their elements (``ptx.addr``).

``cuda.shared.array`` returns a ``SharedArray``: numpy underneath (a view of the CTA's shared-memory
bytes), with every element read and write passing through the CTA's checks. Global arrays stay numba
simulator arrays (plain numpy): their accesses are not tracked.

``addr(arr, i)`` returns a ``Ptr``: which memory (this CTA's shared memory, a global buffer, a tensor
map) and the byte offset of ``arr[i]`` in it. Primitives take ``Ptr`` operands exactly where the GPU
shims take ``void*``.
"""

from __future__ import annotations

import ctypes
import math
import operator
import sys
from threading import current_thread

import numpy as np

from ..spec.tensor_map import EncodedTensorMap
from .errors import SharedBoundsError, SimUsageError
from .where import describe_site, here

SHARED, GLOBAL, TMAP, LOCAL = "shared", "global", "tensor map", "local"
DEFAULT_SHARED_ALIGN = 16     # what nvcc gives any shared array of 16 bytes or more


def as_dtype(dtype) -> np.dtype:
    """A numpy dtype from a numba type (``float32``), a numpy type or a dtype."""
    from numba.cuda import types
    from numba.cuda.np import numpy_support

    if isinstance(dtype, types.Type):
        return numpy_support.as_dtype(dtype)
    return np.dtype(dtype)


def as_shape(shape) -> tuple[int, ...]:
    if isinstance(shape, (tuple, list)):
        return tuple(operator.index(s) for s in shape)
    return (operator.index(shape),)


class SharedAlloc:
    """One ``cuda.shared.array`` declaration (the dynamic shared memory is one too): the bytes
    ``lo .. hi`` it owns, at the same offsets in every CTA of the launch, and where it was declared.
    Pointers into it (``addr``) carry it, so that a copy through one is checked to stay inside it."""

    __slots__ = ("lo", "hi", "shape", "dtype", "site", "dynamic")

    def __init__(self, lo, hi, shape, dtype, s, dynamic=False):
        self.lo, self.hi, self.shape, self.dtype, self.site, self.dynamic = lo, hi, shape, dtype, s, dynamic

    def describe(self) -> str:
        what = "dynamic shared memory" if self.dynamic else f"shared array of shape {self.shape}"
        return (f"the {self.hi - self.lo}-byte {self.dtype} {what} (shared {self.lo:#x}..{self.hi:#x}) declared at "
                f"{describe_site(self.site)}")


class SharedArray:
    """A shared-memory array of one CTA: element accesses are checked (see ``SharedMemory``)."""

    __slots__ = ("_mem", "_np", "_off", "_isz", "shape", "dtype", "ndim", "size", "_st", "_alloc")

    def __init__(self, mem, off: int, shape: tuple[int, ...], dtype: np.dtype, alloc: SharedAlloc | None = None):
        self._mem, self._off, self.dtype, self._isz = mem, off, dtype, dtype.itemsize
        self._alloc = alloc           # the declaration it belongs to (a sub-array: its parent's)
        self.shape, self.ndim = shape, len(shape)
        self.size = math.prod(shape)
        self._np = np.frombuffer(mem.buf, dtype, count=self.size, offset=off) if self.size else \
            np.zeros(0, dtype)
        st, step = [], 1
        for n in reversed(shape):
            st.insert(0, step)
            step *= n
        self._st = tuple(st)

    # ---- indexing ---------------------------------------------------------------------------
    def _flat(self, idx):
        """Flat element index of ``idx``, or None when ``idx`` picks a sub-array (fewer indices)."""
        if idx.__class__ is tuple:
            if len(idx) > self.ndim:
                raise IndexError(f"too many indices for a {self.ndim}-D shared array")
            flat = 0
            for k, i in enumerate(idx):
                i = operator.index(i)
                if not 0 <= i < self.shape[k]:
                    raise IndexError(f"index {i} is out of bounds for axis {k} with size {self.shape[k]}")
                flat += i * self._st[k]
            return flat if len(idx) == self.ndim else (flat, len(idx))
        i = operator.index(idx)
        if not 0 <= i < self.shape[0]:
            raise IndexError(f"index {i} is out of bounds for axis 0 with size {self.shape[0]}")
        return i * self._st[0] if self.ndim == 1 else (i * self._st[0], 1)

    def _sub(self, flat_k):
        flat, k = flat_k
        return SharedArray(self._mem, self._off + flat * self._isz, self.shape[k:], self.dtype, self._alloc)

    def __getitem__(self, idx):
        flat = self._flat(idx)
        if flat.__class__ is tuple:
            return self._sub(flat)
        th = current_thread()
        run = th.sim
        if run.track:
            f = sys._getframe(1)
            self._mem.load(th, self._off + flat * self._isz, self._isz, (f.f_code, f.f_lasti))
        th.countdown -= 1
        if th.countdown <= 0:
            run.sched.memory_point(th)
        return self._np[flat]

    def __setitem__(self, idx, value):
        flat = self._flat(idx)
        if flat.__class__ is tuple:
            raise NotImplementedError("the simulator assigns shared-memory arrays one element at a time")
        th = current_thread()
        run = th.sim
        if run.track:
            f = sys._getframe(1)
            self._mem.store(th, self._off + flat * self._isz, self._isz, (f.f_code, f.f_lasti))
        self._np[flat] = value
        th.countdown -= 1
        if th.countdown <= 0:
            run.sched.memory_point(th)

    def __len__(self):
        return self.shape[0]

    @property
    def itemsize(self):
        return self._isz

    def __repr__(self):
        return f"SharedArray(shape={self.shape}, dtype={self.dtype}, offset={self._off:#x})"


class Ptr:
    """``&arr[i]``: a memory (``space``), a byte offset (an absolute address for global memory). ``obj``
    is what it points into: the ``SharedAlloc`` of a shared array, the array of a global or local one, the
    tensor map."""

    __slots__ = ("space", "mem", "off", "dtype", "lo", "hi", "obj")

    def __init__(self, space, mem, off, dtype=None, lo=0, hi=0, obj=None):
        self.space, self.mem, self.off, self.dtype, self.lo, self.hi, self.obj = space, mem, off, dtype, lo, hi, obj

    def __repr__(self):
        if self.space == SHARED:
            return f"<shared {self.off:#x} of block {tuple(self.mem.cta.blockIdx)}>"
        return f"<{self.space} {self.off:#x}>"


def _host_array(arr):
    """The numpy array inside a numba simulator device array (or the array itself)."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray, FakeWithinKernelCUDAArray

    if isinstance(arr, FakeWithinKernelCUDAArray):
        arr = arr._item
    if isinstance(arr, FakeCUDAArray):
        arr = arr._ary
    return arr if isinstance(arr, np.ndarray) else None


def _buffer_bounds(a: np.ndarray) -> tuple[int, int]:
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    return np.lib.array_utils.byte_bounds(root)


def addr(arr, idx) -> Ptr:
    """The simulator's ``ptx.addr``: a ``Ptr`` to ``arr[idx]``."""
    if isinstance(arr, SharedArray):
        flat = arr._flat(idx)
        if flat.__class__ is tuple:
            raise IndexError(f"addr: give one index per dimension of the {arr.ndim}-D shared array")
        return Ptr(SHARED, arr._mem, arr._off + flat * arr._isz, arr.dtype, obj=arr._alloc)
    if isinstance(arr, EncodedTensorMap):
        return Ptr(TMAP, None, 0, obj=arr)
    if isinstance(arr, LocalArray):      # wgmma accumulators: the primitive needs the array itself
        index = idx if isinstance(idx, tuple) else (idx,)
        off = arr.__array_interface__["data"][0]
        for i, st in zip(index, arr.strides):
            off += operator.index(i) * st
        lo, hi = _buffer_bounds(arr)
        return Ptr(LOCAL, None, off, arr.dtype, lo, hi, obj=arr)
    a = _host_array(arr)
    if a is None:
        th = current_thread()
        raise SimUsageError("addr", "the array must be a shared, global or local array (or a TensorMap)",
                            type(arr).__name__, where=here(th) if hasattr(th, "run") else "")
    index = idx if isinstance(idx, tuple) else (idx,)
    if len(index) != a.ndim:
        raise IndexError(f"addr: give one index per dimension of the {a.ndim}-D array, got {idx!r}")
    off = a.__array_interface__["data"][0]
    for i, st in zip(index, a.strides):
        off += operator.index(i) * st
    lo, hi = _buffer_bounds(a)
    return Ptr(GLOBAL, None, off, a.dtype, lo, hi, obj=a)


def describe_operand(p) -> str:
    """What a kernel passed where a pointer of another kind was expected, for a ``got``: the space, and
    for a global pointer the array's dtype and shape (a data array where a tensor map belongs)."""
    if not isinstance(p, Ptr):
        return f"a {type(p).__name__} ({p!r}), not addr() of an array"
    if p.space == GLOBAL:
        a = p.obj
        what = f"a {a.dtype} array of shape {tuple(a.shape)}" if isinstance(a, np.ndarray) else "a global buffer"
        return (f"addr() of {what} in global memory: a data array, not a TensorMap "
                "(make one on the host with asyncpipe.host.TensorMap.tiled(array, box) and pass it instead)")
    if p.space == SHARED:
        return f"addr() of a shared-memory array element (offset {p.off:#x} of block {tuple(p.mem.cta.blockIdx)})"
    return f"addr() of a {p.space} array"


def read_global(th, api: str, p: Ptr, nbytes: int) -> bytes:
    """``nbytes`` at the global pointer ``p``, checked to lie inside the buffer ``p`` points into."""
    check_global(th, api, p, nbytes)
    return ctypes.string_at(p.off, nbytes)


def write_global(th, api: str, p: Ptr, data: bytes) -> None:
    check_global(th, api, p, len(data))
    ctypes.memmove(p.off, data, len(data))


def check_global(th, api: str, p: Ptr, nbytes: int) -> None:
    if p.space != GLOBAL:
        raise SimUsageError(api, "this operand must point to global memory", f"a {p.space} pointer",
                            "PTX ISA", where=here(th, None), seed=th.sim.seed)
    if p.off < p.lo or p.off + nbytes > p.hi:
        raise SimUsageError(api, "the access must lie inside the array the pointer was taken from",
                            f"bytes {p.off - p.lo}..{p.off - p.lo + nbytes} of a {p.hi - p.lo}-byte buffer",
                            "compute-sanitizer memcheck", where=here(th, None), seed=th.sim.seed)


def shared_operand(th, api: str, p, what: str) -> Ptr:
    """``p`` must point into this CTA's shared memory (``.shared::cta``)."""
    if not isinstance(p, Ptr) or p.space != SHARED:
        got = p.space if isinstance(p, Ptr) else type(p).__name__
        raise SimUsageError(api, f"{what} must be addr() of a shared-memory array element", got, "PTX ISA",
                            where=here(th, None), seed=th.sim.seed)
    if p.mem is not th.cta.smem:
        raise SimUsageError(api, f"{what} must point into this CTA's own shared memory (use mapa for a peer's)",
                            f"block {tuple(p.mem.cta.blockIdx)}'s shared memory", "PTX ISA",
                            where=here(th, None), seed=th.sim.seed)
    return p


def check_in_array(th, api: str, p: Ptr, nbytes: int, what: str, source: str) -> None:
    """``nbytes`` written or read by a copy at the shared pointer ``p`` must lie inside the shared array
    ``p`` was taken from: past its end lie padding and the next array, which the GPU would overwrite
    (or read) in silence."""
    a = p.obj
    if a is None or p.off + nbytes <= a.hi:
        return
    start = p.off - a.lo
    raise SharedBoundsError(api, f"a copy must stay inside the shared array its {what} points into (past its end "
                            "lie the next arrays, which the GPU overwrites or reads in silence)",
                            f"{nbytes} bytes at byte {start} of {a.describe()}: bytes {start}..{start + nbytes} run "
                            f"{p.off + nbytes - a.hi} bytes past its end", source, where=here(th, None),
                            seed=th.sim.seed)


class SharedAllocator:
    """``cuda.shared.array`` in the simulator: one allocation per call site, at the same offset in every
    CTA of the launch (DSMEM and multicast rely on it); ``shape`` 0 is the dynamic shared memory."""

    def __init__(self, launch):
        self.launch = launch
        self.offsets: dict = {}
        self.allocs: dict = {}            # call site -> SharedAlloc (one per declaration, every CTA)
        self.end = launch.dynamic_bytes_aligned

    def array(self, shape, dtype, alignment=None):
        th = current_thread()
        f = sys._getframe(1)
        key = (f.f_code, f.f_lasti)
        cta = th.cta
        arr = cta.arrays.get(key)
        if arr is not None:
            return arr
        dt = as_dtype(dtype)
        shp = as_shape(shape)
        alloc = self.allocs.get(key)
        if shp == (0,):
            if alloc is None:
                alloc = self.allocs[key] = SharedAlloc(0, self.launch.dynamic_bytes, None, dt.name,
                                                       (f.f_code, f.f_lasti), dynamic=True)
            arr = SharedArray(cta.smem, 0, (self.launch.dynamic_bytes // dt.itemsize,), dt, alloc)
        else:
            nbytes = math.prod(shp) * dt.itemsize
            off = self.offsets.get(key)
            if off is None:
                align = alignment or (DEFAULT_SHARED_ALIGN if nbytes >= DEFAULT_SHARED_ALIGN else dt.itemsize)
                off = -(-self.end // align) * align
                limit = self.launch.smem_limit
                if off + nbytes > limit:
                    how = "" if limit == cta.smem.size else (" (numba's kernel[grid, block, stream, shared] launch "
                                                            "does not opt in to more: use asyncpipe.host.launch)")
                    raise SimUsageError("cuda.shared.array",
                                        f"static + dynamic shared memory must fit in {limit} bytes per block{how}",
                                        f"{off + nbytes} bytes", "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"
                                        if limit == cta.smem.size else "cuLaunchKernel, CUDA_ERROR_INVALID_VALUE",
                                        where=here(th, (f.f_code, f.f_lasti)), seed=th.sim.seed)
                self.offsets[key] = off
                self.end = off + nbytes
            if alloc is None:
                alloc = self.allocs[key] = SharedAlloc(off, off + nbytes, shp, dt.name, (f.f_code, f.f_lasti))
            arr = SharedArray(cta.smem, off, shp, dt, alloc)
        cta.arrays[key] = arr
        return arr


class LocalArray(np.ndarray):
    """A ``cuda.local.array``: numpy, plus what wgmma's rules need to see. Its accumulator registers
    must not be touched while an mma that uses them is pending (``wgmma`` is then the guard that
    says so), and a thread that touched them needs a ``wgmma.fence`` before the next mma that uses
    them (``touched``: where, cleared by the fence). Element accesses cost a frame lookup and an
    attribute test more than a plain numpy array's (only wgmma kernels use local arrays)."""

    wgmma = None            # prim.wgmma.AccGuard once an mma has used the array
    touched = None          # the site (code, line) of the thread's last access since its last wgmma.fence

    def __getitem__(self, idx):
        f = sys._getframe(1)
        s = self.touched = (f.f_code, f.f_lasti)
        if self.wgmma is not None:
            self.wgmma.access(self, "read", s)
        return np.ndarray.__getitem__(self, idx)

    def __setitem__(self, idx, value):
        f = sys._getframe(1)
        s = self.touched = (f.f_code, f.f_lasti)
        if self.wgmma is not None:
            self.wgmma.access(self, "write", s)
        np.ndarray.__setitem__(self, idx, value)


class LocalAllocator:
    """``cuda.local.array``: per-thread numpy (``LocalArray``), filled with poison (local memory starts
    undefined)."""

    def array(self, shape, dtype, alignment=None):
        dt = as_dtype(dtype)
        a = np.empty(as_shape(shape), dt).view(LocalArray)
        a.reshape(-1).view(np.ndarray).view(np.uint8)[:] = 0xFF
        th = current_thread()
        if hasattr(th, "local_arrays"):
            th.local_arrays.append(a)
        return a
