"""The on-disk kernel cache for kernels that link shims (asyncpipe.jit_cache), offline."""

import pickle

import numpy as np
import pytest
from numba.cuda import types

from asyncpipe import jit_cache, ptx
from asyncpipe.codegen import HOPPER_A
from asyncpipe.kernels.unroll import unrolled


def tiny(out):
    ptx.cp_async_commit_group()
    ptx.cp_async_wait_all()
    out[0] = 1


def compiled_library(fn, sig):
    """A real numba code library for ``fn``, compiled as numba compiles a kernel, holding the cubin
    numba's first launch would link. numba links through the driver, absent here, so the cubin comes
    from asyncpipe's offline linker (the same inputs: the kernel's LTO-IR and its shims)."""
    from numba.cuda.compiler import _compile_pyfunc_with_fixup

    from asyncpipe.codegen import compile_kernel

    lib, _ = _compile_pyfunc_with_fixup(fn, sig, device=False, cc=HOPPER_A, abi="numba")
    lib._cubin_cache[HOPPER_A] = compile_kernel(fn, sig).data
    return lib


def test_numba_refuses_what_the_patch_allows():
    """Without the patch numba will not pickle a library with shims to link; with it, the library
    goes to disk with its linked cubin and without the shim files, and comes back whole."""
    from numba.cuda.codegen import CUDACodeLibrary

    lib = compiled_library(tiny, (types.int32[::1],))
    shims = [f for f in lib._linking_files if jit_cache._is_shim(f)]
    assert shims and all(f.endswith("cp_async.cu") for f in shims)
    cubin = lib.get_cubin(cc=HOPPER_A)             # cached: nothing is linked again
    if CUDACodeLibrary._reduce_states.__module__ != jit_cache.__name__:
        with pytest.raises(RuntimeError, match="linking files"):
            pickle.dumps(lib)
    jit_cache.install()
    back = pickle.loads(pickle.dumps(lib))
    assert back._cubin_cache[HOPPER_A] == cubin
    assert not any(jit_cache._is_shim(f) for f in back._linking_files)
    assert set(lib._linking_files) >= set(shims), "the live library keeps its shims"


def test_libraries_without_shims_pickle_as_before():
    def plain(out):
        out[0] = 2

    jit_cache.install()
    lib = compiled_library(plain, (types.int32[::1],))
    assert pickle.loads(pickle.dumps(lib))._cubin_cache[HOPPER_A] == lib._cubin_cache[HOPPER_A]


def test_shim_edit_changes_the_cached_source(tmp_path, monkeypatch):
    """A kernel's unrolled file name hashes the shims: a shim edit means a new file, a new cache entry."""
    monkeypatch.setenv("ASYNCPIPE_CACHE_DIR", str(tmp_path))
    first = unrolled(tiny)
    jit_cache.shims_digest.cache_clear()
    monkeypatch.setattr(jit_cache, "shims_digest", lambda: "edited-shims")
    second = unrolled(tiny)
    assert first.__code__.co_filename != second.__code__.co_filename
    assert first.unrolled_source == second.unrolled_source


def test_switch(monkeypatch):
    monkeypatch.setenv(jit_cache.ENV, "0")
    assert not jit_cache.enabled()
    monkeypatch.delenv(jit_cache.ENV)
    assert jit_cache.enabled()


def test_a_failing_cache_warns_and_compiles(tmp_path, monkeypatch):
    """numba's own cache object, fed what it cannot save or load: a warning, never an exception (the
    kernel is then compiled as without a cache)."""
    from numba.cuda.dispatcher import CUDACache

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    jit_cache.install()
    cache = CUDACache(unrolled(tiny))
    with pytest.warns(jit_cache.CacheWarning, match="not cached: .*tiny"):
        cache.save_overload((types.int32[::1],), object())
    with pytest.warns(jit_cache.CacheWarning, match="not loaded, compiling: .*tiny"):
        assert cache.load_overload((types.int32[::1],), object()) is None


@pytest.mark.slow
def test_wgmma_gemm_links_nothing_but_shims():
    """The cache drops only asyncpipe's shims from a pickled library: a kernel that links any other file
    (numba's bfloat16 helpers once did, in the bf16 epilogues) could never be cached. The H200 run at
    1548b36 showed that: "not cached: wgmma_gemm_kernel ... Cannot pickle CUDACodeLibrary with linking
    files". The TMA epilogue packs bf16 with the same primitive (and links only shims besides); one
    compile of the kernel keeps CI's time down."""
    from numba.cuda.compiler import _compile_pyfunc_with_fixup

    from asyncpipe.kernels import wgmma_gemm as G

    fn = G.make_kernel(epilogue="direct")
    lib, _ = _compile_pyfunc_with_fixup(fn, G.kernel_argtypes(True), device=False, cc=HOPPER_A, abi="numba")
    others = [f for f in lib._linking_files if not jit_cache._is_shim(f)]
    assert not others, others
