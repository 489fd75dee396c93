"""The compile-time unroller: pure Python, checked on the CPU."""

import pytest

from asyncpipe.kernels.unroll import UnrollError, kernel_part, registers, splice, unroll, unrolled

N = 3


def dot3(a, b):
    acc = registers(2)
    for i in unroll(N):
        acc[i % 2] += a[i] * b[i]
    return acc[0] + acc[1]


def test_unrolled_function_computes_the_same():
    f = unrolled(dot3, c_indexing=False)
    assert f([1, 2, 3], [4, 5, 6]) == 32
    assert "for " not in f.unrolled_source and "acc__0" in f.unrolled_source


def test_constants_fold_and_come_from_keywords():
    def shape():
        return M * 2 + 1

    assert "return 9" in unrolled(shape, M=4).unrolled_source


def test_c_indexing_makes_indices_unsigned():
    def load(a, i):
        return a[i + 1]

    assert "__asyncpipe_uint64(i + 1)" in unrolled(load).unrolled_source


def test_register_index_out_of_range_is_an_error():
    def bad():
        r = registers(2)
        return r[2]

    with pytest.raises(UnrollError, match=r"register index \(2,\) outside r\(2,\)"):
        unrolled(bad)


def test_unroll_count_must_be_constant():
    def bad(n):
        for i in unroll(n):
            pass

    with pytest.raises(UnrollError, match="not a compile-time constant: n"):
        unrolled(bad)


def test_expansion_is_done_once_per_input(tmp_path, monkeypatch):
    """A new process finds the expanded file by what it is made from and skips the AST work (a few
    tenths of a second for a GEMM, paid by every first call before)."""
    from asyncpipe.kernels import unroll as U

    monkeypatch.setenv("ASYNCPIPE_CACHE_DIR", str(tmp_path))

    def twice(out):
        for i in unroll(2):
            out[i] = i

    first = U.unrolled(twice)
    monkeypatch.setattr(U, "_expand", lambda *a, **k: (_ for _ in ()).throw(AssertionError("expanded again")))
    again = U.unrolled(twice)
    assert again.unrolled_source == first.unrolled_source
    assert again.__code__.co_filename == first.__code__.co_filename
    other = tmp_path / "other"
    monkeypatch.setenv("ASYNCPIPE_CACHE_DIR", str(other))        # an empty cache: it must expand
    with pytest.raises(AssertionError, match="expanded again"):
        U.unrolled(twice)


def steps(x, n, out):
    def step(k, v):
        return v + k
    for d in unroll(3):
        if FLAG:
            if d == AT:                       # one call site survives, not three
                x = step(d, x)
        else:
            x = -x
        out[d] = x if not FLAG or (d < n and x > 0) else 0
    return x


def test_static_ifs_keep_only_the_branch_taken():
    s = unrolled(steps, c_indexing=False, static_ifs=True, FLAG=True, AT=1).unrolled_source
    assert s.count("step(") == 2 and "FLAG" not in s and "-x" not in s     # the def and one call
    assert "out[0] = x if 0 < n and x > 0 else 0" in s
    out = [None] * 3
    assert unrolled(steps, c_indexing=False, static_ifs=True, FLAG=True, AT=1)(5, 2, out) == 6 and out == [5, 6, 0]
    out2 = [None] * 3
    assert unrolled(steps, c_indexing=False, FLAG=True, AT=1)(5, 2, out2) == 6 and out2 == out
    # off by default: the text keeps every branch
    assert unrolled(steps, c_indexing=False, FLAG=True, AT=1).unrolled_source.count("if FLAG") == 3
    s = unrolled(steps, c_indexing=False, static_ifs=True, FLAG=False, AT=1).unrolled_source
    assert "step(d" not in s and "step(0" not in s and "out[2] = x\n" in s


# ---- splice: a piece of kernel code kept in one place, pasted into the kernels that use it ----------------
@kernel_part
def accumulate():
    """A part: reads and writes the names of the function it is spliced into."""
    for i in unroll(N):
        acc[i % 2] += a[i] * b[i]  # noqa: F821 - the kernel's names


@kernel_part
def finish():
    splice(accumulate)
    total = acc[0] + acc[1]  # noqa: F821


def dot3_spliced(a, b):
    acc = registers(2)
    splice(finish)
    return total  # noqa: F821 - assigned by the part


def test_splice_pastes_the_part_into_the_kernel():
    """The part's body (without its docstring) takes the splice's place, nested parts too, and is
    expanded with the kernel: the result is the same function as the one written inline."""
    f = unrolled(dot3_spliced, c_indexing=False)
    assert f([1, 2, 3], [4, 5, 6]) == 32
    assert "splice(" not in f.unrolled_source and "A part" not in f.unrolled_source
    body = lambda fn: fn.unrolled_source.split(":", 1)[1].replace("\n    total = acc__0 + acc__1\n    return total",
                                                                  "\n    return acc__0 + acc__1")
    assert body(f) == body(unrolled(dot3, c_indexing=False))


def test_a_kernel_part_cannot_be_called():
    with pytest.raises(RuntimeError, match=r"accumulate is a kernel part: splice\(accumulate\) it into a kernel"):
        accumulate()


def test_splice_takes_a_kernel_part_without_arguments():
    def not_a_part():
        pass

    @kernel_part
    def with_args(x):
        pass

    def bad1():
        splice(not_a_part)

    def bad2():
        splice(with_args)

    def bad3():
        splice(accumulate, finish)

    with pytest.raises(UnrollError, match=r"splice\(not_a_part\): not a function marked @kernel_part"):
        unrolled(bad1, not_a_part=not_a_part)
    with pytest.raises(UnrollError, match="kernel part with_args takes no arguments: it uses the kernel's names"):
        unrolled(bad2, with_args=with_args)
    with pytest.raises(UnrollError, match=r"splice takes one name: splice\(accumulate, finish\)"):
        unrolled(bad3)


@kernel_part
def endless():
    splice(endless)


def test_a_part_that_splices_itself_is_an_error():
    def bad():
        splice(endless)

    with pytest.raises(UnrollError, match=r"splice\(endless\): parts nested more than 8 deep"):
        unrolled(bad)


def tile_sum(a):
    acc = registers(2, 3, dtype=float32, llvm=LLVM)
    frag = registers(3, llvm=LLVM, init=False, local_dtype=float32)
    for i in unroll(2, llvm=LLVM):
        for j in unroll(3, llvm=LLVM):
            frag[j] = a[j]
            acc[i, j] += frag[j] * i
    return acc[1, 2]


def test_llvm_loops_stay_range_loops_over_local_arrays():
    """``llvm=True``: the loops are left for LLVM, the register arrays become cuda.local.array (acc zeroed, the
    fragment not: init=False); ``llvm=False``: expanded as without the keyword."""
    src = unrolled(tile_sum, LLVM=True, float32=float).unrolled_source
    assert "acc = __asyncpipe_cuda.local.array((2, 3), float32)" in src
    assert "frag = __asyncpipe_cuda.local.array((3,), float32)" in src
    assert src.count("for ") == 4                  # two zeroing loops of acc, the i and j loops
    assert "for i in range(2):" in src and "for j in range(3):" in src and "acc__" not in src
    assert "acc[__asyncpipe_uint64(i), __asyncpipe_uint64(j)] +=" in src
    expanded = unrolled(tile_sum, LLVM=False, float32=float, c_indexing=False)
    assert "for " not in expanded.unrolled_source and "local.array" not in expanded.unrolled_source
    assert expanded([4.0, 5.0, 6.0]) == 6.0


def test_the_simulator_runs_llvm_loops_expanded_with_checked_unsigned_indices(tmp_path, monkeypatch):
    """On the simulator (no LLVM) ``llvm=True`` counts as false: the expanded statements, the same answer, a
    cache file of their own; indices are ``sim_index``: the index itself, a negative one refused by name."""
    import asyncpipe.backend as B
    from asyncpipe.kernels import unroll as U

    monkeypatch.setenv("ASYNCPIPE_CACHE_DIR", str(tmp_path))
    gpu = unrolled(tile_sum, LLVM=True, float32=float)
    monkeypatch.setattr(B, "simulating", lambda: True)
    sim = unrolled(tile_sum, LLVM=True, float32=float)
    assert "for " not in sim.unrolled_source and "local.array" not in sim.unrolled_source
    assert sim.__code__.co_filename != gpu.__code__.co_filename
    assert sim([4.0, 5.0, 6.0]) == 6.0
    assert U.sim_index(3) == 3
    with pytest.raises(IndexError, match="negative array index -1: indices are unsigned in unrolled kernels"):
        U.sim_index(-1)

    def back(a, k):
        return a[k - 1]

    f = unrolled(back)
    assert f([7, 8], 2) == 8
    with pytest.raises(IndexError, match="negative array index -1"):
        f([7, 8], 0)


def test_a_source_file_changed_since_import_is_refused(tmp_path, monkeypatch):
    """inspect reads the file as it is now: when an edit moved the function, the source read defines something
    else, and unrolled() says so instead of returning the original function as its own expansion."""
    from asyncpipe.kernels import unroll as U

    monkeypatch.setenv("ASYNCPIPE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(U.inspect, "getsource", lambda fn: "def other(a, b):\n    return a\n")
    with pytest.raises(UnrollError, match=r"dot3: its source in .*test_unroll.py no longer defines it \(the file "
                       r"changed since it was imported\): restart the process or re-import the module"):
        unrolled(dot3, c_indexing=False)


def test_llvm_registers_need_a_dtype():
    def bad():
        r = registers(2, llvm=True)
        return r[0]

    with pytest.raises(UnrollError, match="registers\\(..., llvm=True\\) needs a dtype or local_dtype: r"):
        unrolled(bad)


def nested_sum(a, LLVM=True):
    total = 0.0
    for i in unroll(12, llvm=LLVM, nest=4):
        total += a[i] * (i + 1)
    return total


def test_nest_splits_a_long_llvm_loop_in_two():
    """``unroll(N, llvm=True, nest=K)``: two range loops, N // K by K, with the index rebuilt; the same sum as
    the expanded loop (nest is ignored there) and as plain Python."""
    a = [float(v) for v in range(3, 15)]
    want = sum(v * (i + 1) for i, v in enumerate(a))
    f = unrolled(nested_sum, LLVM=True, c_indexing=False)
    src = f.unrolled_source
    assert "for i__outer in range(3):" in src and "for i__inner in range(4):" in src
    assert "i = i__outer * 4 + i__inner" in src
    assert f(a) == want
    g = unrolled(nested_sum, LLVM=False, c_indexing=False)
    assert "for " not in g.unrolled_source and g(a) == want


def test_nest_must_divide_the_trip_count():
    def bad(a):
        t = 0.0
        for i in unroll(10, llvm=True, nest=4):
            t += a[i]
        return t

    with pytest.raises(UnrollError, match="unroll\\(N, nest=K\\) needs N a multiple of K: 10 and 4"):
        unrolled(bad)


_PART_MODULE = '''
from asyncpipe.kernels.unroll import kernel_part, splice

SCALE = {scale}


@kernel_part
def body():
    out[0] = {value} * SCALE


def kernel(out):
    splice(body)
'''


def _part_module(tmp_path, name, value, scale):
    import importlib.util

    path = tmp_path / f"{name}.py"
    path.write_text(_PART_MODULE.format(value=value, scale=scale))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("value, scale, want", [(7, 1, 7), (7, 3, 21)])
def test_an_edited_kernel_part_or_constant_is_expanded_anew(tmp_path, monkeypatch, value, scale, want):
    """The kernel's own source is unchanged, but the part it splices (or a constant of its module) was edited: the
    expansion cached for the part before must not be loaded (a user's edit in Jupyter, a test's broken copy)."""
    monkeypatch.setenv("ASYNCPIPE_CACHE_DIR", str(tmp_path / "cache"))
    first = _part_module(tmp_path, "parts_a", 2, 1)
    out = [0]
    unrolled(first.kernel, c_indexing=False)(out)
    assert out == [2]
    edited = _part_module(tmp_path, "parts_a", value, scale)       # same module name and file, new text
    unrolled(edited.kernel, c_indexing=False)(out)
    assert out == [want]


def test_a_device_function_edited_in_another_file_changes_the_digest(tmp_path):
    """numba's on-disk cache keys on the expansion's file and does not follow a call into another file: a device
    function's file (imported by name, or through the user's module held whole) is part of what names the
    expansion, so editing it builds the kernel anew."""
    import importlib.util

    from asyncpipe.kernels.unroll import inputs_digest

    def module(name, text):
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    helper = "from numba import cuda\n\n\n@cuda.jit(device=True)\ndef twice(x):\n    return {} * x\n"
    kernel = ("import helpers\nfrom helpers import twice\n\n\ndef kernel(out):\n    out[0] = twice(out[0])\n\n\n"
              "def whole(out):\n    out[0] = helpers.twice(out[0])\n")
    module("helpers", helper.format(2))
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        first = module("kernels_b", kernel)
        before = inputs_digest(first.kernel), inputs_digest(first.whole)
        sys.modules.pop("helpers", None)
        module("helpers", helper.format(3))
        second = module("kernels_b", kernel)
        after = inputs_digest(second.kernel), inputs_digest(second.whole)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("helpers", None)
    assert before[0] != after[0] and before[1] != after[1]


def test_library_modules_are_not_user_files():
    """numpy, numba (site-packages), os (stdlib) and asyncpipe's own modules are not read into the digest."""
    import os

    import numba
    import numpy

    import asyncpipe.ptx
    from asyncpipe.kernels.unroll import _user_file

    assert not any(_user_file(m.__file__) for m in (numpy, numba, os, asyncpipe.ptx))
    assert _user_file(__file__) and not _user_file(None) and not _user_file("/x/lib.so")


class _Touchy:
    """A global that answers every attribute lookup with an error (as some library proxies do)."""

    def __call__(self):
        pass

    def __getattr__(self, name):
        raise RuntimeError(f"no {name} here")


TOUCHY = _Touchy()


def test_a_global_that_refuses_attribute_lookups_does_not_break_the_digest():
    from asyncpipe.kernels.unroll import inputs_digest

    def uses_touchy(out):
        out[0] = N

    assert "TOUCHY" in uses_touchy.__globals__
    assert len(inputs_digest(uses_touchy)) == 12
