"""numba's on-disk kernel cache for kernels that link asyncpipe's shims.

numba-cuda 0.30 refuses to cache such kernels: pickling a code library that still has files to link
raises "Cannot pickle CUDACodeLibrary with linking files", because a library loaded from the cache
might be asked to link again for another GPU and would no longer have them. asyncpipe's shims are
inputs to the link and nothing else, so the library is made complete before it is saved: the cubin
for the current GPU is linked (numba would do it at the first launch anyway), then the shim files
are left out of the pickle. numba keys its cache index on the compute capability and the CUDA
version (``JITCUDACodegen.magic_tuple``), so a cached library is only ever loaded where its cubin
is the one needed.

numba's index notices a changed kernel source but not a changed shim, so asyncpipe's cached kernels
come from ``unrolled`` sources, whose file names hash the shims' text too (``shims_digest``).

``jit(fn, **options)`` is ``cuda.jit(fn, cache=True, **options)`` with the patch installed;
``ASYNCPIPE_JIT_CACHE=0`` turns caching off, and so does ``ASYNCPIPE_DEBUG=1``.
"""

from __future__ import annotations

import functools
import hashlib
import os

from .ptx._registry import shim_dir

ENV = "ASYNCPIPE_JIT_CACHE"


def enabled() -> bool:
    """On unless ``ASYNCPIPE_JIT_CACHE=0``, and off under ``ASYNCPIPE_DEBUG=1``: numba's index would not tell
    a kernel built with the debug forms of the waits from one built without them."""
    from .backend import debugging

    return os.environ.get(ENV, "1") not in ("0", "", "false", "no") and not debugging()


@functools.lru_cache(maxsize=None)
def shims_digest() -> str:
    """A hash of every shim's text: part of each cached kernel's file name, so editing a shim
    recompiles the kernels that link it instead of loading stale cubins."""
    h = hashlib.sha1()
    for path in sorted(shim_dir().glob("*.cu*")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def _is_shim(path) -> bool:
    return isinstance(path, str) and os.path.dirname(os.path.abspath(path)) == str(shim_dir())


@functools.lru_cache(maxsize=None)
def install() -> None:
    """Let numba pickle code libraries that link asyncpipe shims (see the module doc). Idempotent."""
    from numba.cuda.codegen import CUDACodeLibrary

    original = CUDACodeLibrary._reduce_states

    def _reduce_states(self):
        shims = {f for f in self._linking_files if _is_shim(f)}
        if not shims:
            return original(self)
        if not self._cubin_cache:
            self.get_cubin()                  # the current GPU's cubin, linked with the shims
        kept = self._linking_files
        self._linking_files = kept - shims
        try:
            return original(self)
        finally:
            self._linking_files = kept

    CUDACodeLibrary._reduce_states = _reduce_states
    _fail_soft()


def _fail_soft() -> None:
    """A cache that cannot save or load a kernel must cost a compile, never the kernel: numba lets
    any error there (a pickling refusal, a stale or foreign file) end the compile. Here it becomes a
    warning naming the kernel and the reason, and numba compiles as if there were no cache."""
    import warnings

    from numba.cuda.dispatcher import CUDACache

    save, load = CUDACache.save_overload, CUDACache.load_overload

    def save_overload(self, sig, data):
        try:
            return save(self, sig, data)
        except Exception as exc:  # noqa: BLE001 - see the docstring
            warnings.warn(f"asyncpipe: not cached: {self._name} {sig}: {type(exc).__name__}: {exc}",
                          CacheWarning, stacklevel=2)

    def load_overload(self, sig, target_context):
        try:
            return load(self, sig, target_context)
        except Exception as exc:  # noqa: BLE001 - see the docstring
            warnings.warn(f"asyncpipe: cached kernel not loaded, compiling: {self._name} {sig}: "
                          f"{type(exc).__name__}: {exc}", CacheWarning, stacklevel=2)
            return None

    CUDACache.save_overload, CUDACache.load_overload = save_overload, load_overload


class CacheWarning(UserWarning):
    """The on-disk kernel cache failed for one kernel; it was compiled instead."""


def jit(fn, **options):
    """``cuda.jit(fn, **options)``, cached on disk unless ``ASYNCPIPE_JIT_CACHE=0`` or simulating."""
    from numba import cuda

    from .ptx._registry import simulating

    if enabled() and not simulating():
        install()
        options.setdefault("cache", True)
    return cuda.jit(fn, **options)
