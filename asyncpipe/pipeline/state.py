"""``PipelineState``: where a producer or a consumer stands in a ring of ``stages`` shared-memory slots.

``stage`` is the slot's index (0 .. stages - 1) and ``phase`` the parity (0 or 1) of the round through
the ring: it flips each time ``stage`` wraps to 0. Both sides start at ``(0, 0)`` and advance once per
slot they handle, so the k-th slot handled (k = 0, 1, ...) has ``stage = k % stages`` and
``phase = (k // stages) & 1``: kernels never write that arithmetic themselves. (The index field is
called ``stage``: numba's tuples already have an ``index`` method.)

Kernel-side: ``PipelineState`` is a named tuple numba compiles to two registers; ``pipeline_state``
and ``advance`` are inlined into the kernel (``cuda.jit(device=True, inline="always")``). On the host
call ``advance.py_func``.
"""

from __future__ import annotations

from collections import namedtuple

from numba import cuda, uint32

PipelineState = namedtuple("PipelineState", ["stage", "phase"])
PipelineState.__doc__ = "Slot index ``stage`` (0 .. stages - 1) and round parity ``phase`` (0 or 1) in a ring."


@cuda.jit(device=True, inline="always")
def pipeline_state(stage, phase):
    """A ``PipelineState`` of two uint32 (the start of a ring: ``pipeline_state(0, 0)``)."""
    return PipelineState(uint32(stage), uint32(phase))


@cuda.jit(device=True, inline="always")
def advance(state, stages):
    """The state one slot further round a ring of ``stages`` slots (the phase flips when the stage wraps)."""
    # (numba widens uint32 arithmetic to 64 bits: the casts keep both fields uint32)
    stage = uint32(state.stage + uint32(1))
    if stage == uint32(stages):
        return PipelineState(uint32(0), uint32(state.phase ^ uint32(1)))
    return PipelineState(stage, state.phase)
