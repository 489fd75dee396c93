"""PipelineState: k slots into a ring of S stages sit at (k % S, (k // S) & 1)."""

import pytest

from asyncpipe.pipeline import PipelineState, advance, pipeline_state


@pytest.mark.parametrize("stages", [1, 2, 3, 4, 8])
def test_advance_walks_the_ring(stages):
    st = pipeline_state.py_func(0, 0)
    for k in range(5 * stages + 3):
        assert (int(st.stage), int(st.phase)) == (k % stages, (k // stages) & 1), k
        st = advance.py_func(st, stages)


def test_state_is_a_named_pair():
    st = pipeline_state.py_func(2, 1)
    assert isinstance(st, PipelineState) and st._fields == ("stage", "phase")
    assert advance.py_func(st, 3) == (0, 0)
