"""On the simulator, ``compile_kernel`` compiles in a child process without it: an unrolled kernel reaches the
child as the compiler's expansion, not the simulator's (whose loops are expanded and whose indices are
``sim_index``). Offline compiles: no GPU."""

import pytest
from numba import float32

from asyncpipe.codegen import compile_kernel
from asyncpipe.kernels.unroll import unroll, unrolled

pytestmark = pytest.mark.sim


def test_a_kernel_unrolled_from_a_local_function_compiles_in_the_child():
    """A function the child cannot import (a notebook's, a closure) travels by value: its ``sim_index`` global
    becomes numba's uint64 there."""

    def doubled(src, dst):
        for i in unroll(4, llvm=True):
            dst[i] = src[i] * float32(2)

    fn = unrolled(doubled)
    assert "for " not in fn.unrolled_source                     # the simulator's expansion
    cubin = compile_kernel(fn, (float32[::1], float32[::1]))
    assert cubin.opcodes.count("FADD") + cubin.opcodes.count("FMUL") == 4 and cubin.resources.local == 0


def test_an_importable_unrolled_kernel_travels_as_its_recipe():
    """An asyncpipe kernel goes to the child as (function, constants): unrolled again there, its LLVM loops
    (the SGEMM's register tile) are the compiler's, as on the GPU."""
    import io

    from asyncpipe.codegen import _pickler, _unrolled_again
    from asyncpipe.kernels import sgemm as S

    fn = S.kernel_source("cp_async", 3, 4, 4, False, 8, "8x8")
    assert "for i in range(" not in fn.unrolled_source          # expanded here, on the simulator
    reducer, (original, options) = _pickler(io.BytesIO()).reducer_override(fn)
    assert reducer is _unrolled_again and original is fn.__wrapped__ and options["LLVM_LOOPS"]
