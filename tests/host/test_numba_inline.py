"""asyncpipe.backend.numba_inline: numba-cuda's inliner copies a callee's scope once per copy, not once per block.
What it changes is checked structurally (one shared scope copy per IR copy; the same IR copied twice gives two
independent copies; anything else is the copy module's); that the SASS does not change is what every SASS test
compiles with it installed."""

import copy

import pytest

from asyncpipe.backend import numba_inline


@pytest.fixture
def ir():
    from numba.cuda.core import ir

    return ir


def blocks(ir, n=3):
    loc = ir.Loc("f.py", 1)
    scope = ir.Scope(None, loc)
    out = []
    for i in range(n):
        b = ir.Block(scope, loc)
        v = scope.redefine(f"x{i}", loc)
        b.body.append(ir.Assign(ir.Const(i, loc), v, loc))
        out.append(b)
    return scope, out


def test_installed_by_asyncpipe_ptx():
    from numba.cuda.core import inline_closurecall

    import asyncpipe.ptx  # noqa: F401

    assert isinstance(inline_closurecall.copy, numba_inline._InlinerCopy)


def test_the_blocks_of_one_copy_share_one_scope_copy(ir):
    c = numba_inline._InlinerCopy(ir.Block)
    scope, bs = blocks(ir)
    first = [c.deepcopy(b) for b in bs]
    assert all(b.scope is first[0].scope for b in first) and first[0].scope is not scope
    assert [b.body[0].target.name for b in first] == ["x0", "x1", "x2"]
    assert first[1].body[0].target.scope is first[0].scope          # the variables point at the shared copy
    again = [c.deepcopy(b) for b in bs]                              # the same IR again: a copy of its own
    assert again[0].scope is not first[0].scope and all(b.scope is again[0].scope for b in again)
    assert all(a is not b for a, b in zip(first, again))


def test_other_scopes_and_other_objects_pass_through(ir):
    c = numba_inline._InlinerCopy(ir.Block)
    _, bs1 = blocks(ir)
    _, bs2 = blocks(ir)
    x = c.deepcopy(bs1[0])
    y = c.deepcopy(bs2[0])
    assert x.scope is not y.scope
    d = {"a": [1, 2]}
    assert c.deepcopy(d) == d and c.deepcopy(d) is not d and c.copy is copy.copy
