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
