"""The compile-time unroller: pure Python, checked on the CPU."""

import pytest

from asyncpipe.kernels.unroll import UnrollError, registers, unroll, unrolled

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
    monkeypatch.setattr(U, "_expand", lambda *a: (_ for _ in ()).throw(AssertionError("expanded again")))
    again = U.unrolled(twice)
    assert again.unrolled_source == first.unrolled_source
    assert again.__code__.co_filename == first.__code__.co_filename
    other = tmp_path / "other"
    monkeypatch.setenv("ASYNCPIPE_CACHE_DIR", str(other))        # an empty cache: it must expand
    with pytest.raises(AssertionError, match="expanded again"):
        U.unrolled(twice)
