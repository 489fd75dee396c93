"""The chapter's multi-stage cp.async loop as one device function, and the verbs it is made of.

The program (S stages, T tiles, every thread of the block runs it)::

    prologue:  for s in 0 .. S-2:  if s < T: issue(slot s, tile s);  commit_group
    main loop: for kt in 0 .. T-1:
                   wait_group(S-2); syncthreads          # tile kt landed, for every thread
                   if kt+S-1 < T: issue(slot of tile kt-1, tile kt+S-1)
                   commit_group                          # ALWAYS, even with nothing issued
                   compute(slot of tile kt, tile kt)

``cp_async_ring(num_tiles, stages, issue, compute, acc, args)`` runs it with the user's ``issue`` and
``compute`` (``@cuda.jit(device=True, inline="always")`` functions passed as arguments)::

    @cuda.jit(device=True, inline="always")
    def load_tile(slot, tile, args):            # this thread's cp.async copies of `tile` into `slot`
        smem, x = args                          # smem: cuda.shared.array((STAGES, 4 * THREADS), float32, alignment=16)
        e = 4 * cuda.threadIdx.x                # 16 bytes a thread
        ptx.cp_async_cg_shared_global_16(ptx.addr(smem, (slot, e)), ptx.addr(x, tile * 4 * THREADS + e))

    @cuda.jit(device=True, inline="always")
    def sum_tile(slot, tile, acc, args):        # reads `slot` (any thread's part of it); returns the new acc
        smem, x = args
        return acc + smem[slot, (cuda.threadIdx.x * 7) % (4 * THREADS)]

    acc = cp_async_ring(num_tiles, STAGES, load_tile, sum_tile, float32(0), (smem, x))

(A complete kernel, a row-sum with edges, is ``docs/guide/01_cp_async.md``.)

The commit is inside the ring, after the ``if``: the tail's empty groups are committed whatever the
user writes, so ``wait_group(S-2)`` always covers tile kt (the chapter's pitfall, "空组也要提交", cannot
be written). The copies of tile kt+S-1 go into the slot tile kt-1 used, which the ``syncthreads``
has just released (every thread finished computing on it). ``slot`` is 0 .. S-1 (tile k sits in slot
k % S), counted by a wrapping increment, not a modulo.

=========================  ==============================================================================
verb                       what every thread of the block does
=========================  ==============================================================================
``cp_async_ring_prologue``  ``issue(s, s, args)`` for tiles 0 .. S-2 that exist, one commit_group each
                            (always); returns the ``CpAsyncRingState`` of tile 0
``cp_async_ring_wait``      ``wait_group(S-2)``: this thread's copies of the tile about to be read have
                            landed; ``syncthreads``: so have everyone's, and everyone has finished the
                            tile before it (whose slot is written next)
``cp_async_ring_issue``     ``issue(state.write, kt + S-1, args)`` if that tile exists, then
                            commit_group (always)
``cp_async_ring_advance``   the state of tile kt + 1 (``read`` and ``write`` one slot on)
``cp_async_ring``           all of the above: the chapter's loop, ``compute(state.read, kt, acc, args)``
                            right after the issue; returns ``acc``
=========================  ==============================================================================

The verbs are for a loop that issues elsewhere in the iteration (the shipped SGEMM issues after the
shared reads of its first k-steps): call ``cp_async_ring_issue`` once per iteration, anywhere between
``cp_async_ring_wait`` and the next one, and the groups stay aligned. Nothing is in flight when the
loop ends: the groups the last wait left pending are the tail's empty ones.

``stages`` is 2 .. ``CP_ASYNC_WAIT_GROUP_MAX`` + 2 (9): pass a compile-time constant, so that
``wait_group(stages - 2)`` becomes one ``DEPBAR.LE`` and the prologue unrolls. numba types every
argument of a device function as a plain integer, so the stage count cannot be checked when the GPU
kernel compiles: the simulator checks it (``AsyncpipeError``) in ``cp_async_ring_prologue``. Why not closures:
numba refuses a closure that captures a kernel's arrays as an argument ("Cannot capture the
non-constant value ..."), so the kernel's arrays and scalars travel in ``args``, a tuple.

All functions are inlined into the calling kernel (``inline="always"``, at numba's IR level: the
offline SASS of a kernel written with ``cp_async_ring`` is that of the hand-written loop, opcode
for opcode; ``tests/pipeline/test_cp_async_ring.py``). They only call ``asyncpipe.ptx`` and
``cuda.syncthreads``.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import cuda

from .. import ptx
from ..constants import CP_ASYNC_WAIT_GROUP_MAX
from ..errors import check

MIN_STAGES = 2                                     # one tile in flight while one is computed
MAX_STAGES = CP_ASYNC_WAIT_GROUP_MAX + 2          # wait_group(S-2) spells N = 0..7
API = "cp_async_ring"
_SOURCE = "the chapter's multi-stage cp.async loop; PTX ISA, cp.async.wait_group N"

CpAsyncRingState = namedtuple("CpAsyncRingState", ["read", "write"])
CpAsyncRingState.__doc__ = ("Slots of a cp.async ring in one iteration: ``read`` holds the tile computed now, "
                            "``write`` receives the tile ``stages - 1`` ahead (the slot of the tile before).")


def _check_stages_sim(stages):
    check(isinstance(stages, (int, np.integer)) and not isinstance(stages, bool), API,
          "stages must be an integer (a compile-time constant: wait_group takes an immediate)", repr(stages), _SOURCE)
    check(MIN_STAGES <= stages <= MAX_STAGES, API,
          f"stages must be {MIN_STAGES}..{MAX_STAGES} (S-1 tiles ahead of the compute, wait_group(S-2) with "
          f"N <= {CP_ASYNC_WAIT_GROUP_MAX})", stages, _SOURCE)


def _check_stages_gpu(stages):
    pass    # inlined to nothing: numba's types carry no value to check (see the module's docstring)


_check_stages = cuda.jit(device=True, inline="always")(_check_stages_sim if ptx.simulating() else _check_stages_gpu)


@cuda.jit(device=True, inline="always")
def cp_async_ring_prologue(num_tiles, stages, issue, args):
    """Every thread: ``issue(s, s, args)`` for the tiles s = 0 .. stages-2 below ``num_tiles``, each
    followed by a ``cp_async_commit_group`` (also when the tile does not exist: group g is tile g).
    Returns the ring's state for tile 0 (``read`` slot 0, ``write`` slot stages - 1)."""
    _check_stages(stages)
    for s in range(stages - 1):
        if s < num_tiles:
            issue(s, s, args)
        ptx.cp_async_commit_group()
    return CpAsyncRingState(0, stages - 1)


@cuda.jit(device=True, inline="always")
def cp_async_ring_wait(stages):
    """Every thread, at the top of each iteration: ``wait_group(stages - 2)`` (at most S-2 of this
    thread's groups still in flight: with kt + S-1 committed, groups 0 .. kt, tile kt among them, have
    landed), then ``syncthreads`` (every thread's copies of tile kt are visible, and every thread has
    finished reading tile kt-1, whose slot the next issue overwrites)."""
    ptx.cp_async_wait_group(stages - 2)
    cuda.syncthreads()


@cuda.jit(device=True, inline="always")
def cp_async_ring_issue(state, kt, num_tiles, stages, issue, args):
    """Every thread, once per iteration after ``cp_async_ring_wait``: ``issue(state.write, kt + stages - 1,
    args)`` if that tile exists, then ``cp_async_commit_group`` whether or not it did (the empty group
    of the tail keeps group g = tile g, so the next waits still cover their tiles)."""
    nxt = kt + stages - 1
    if nxt < num_tiles:
        issue(state.write, nxt, args)
    ptx.cp_async_commit_group()


@cuda.jit(device=True, inline="always")
def cp_async_ring_advance(state, stages):
    """The state of the next iteration: the slot just read receives the next tile, and ``read`` moves one
    slot on (wrapping from ``stages - 1`` to 0 without a modulo)."""
    return CpAsyncRingState(state.read + 1 if state.read < stages - 1 else 0, state.read)


@cuda.jit(device=True, inline="always")
def cp_async_ring(num_tiles, stages, issue, compute, acc, args):
    """Every thread of the block: the chapter's multi-stage loop over tiles 0 .. ``num_tiles``-1 through
    ``stages`` shared-memory slots. ``issue(slot, tile, args)`` starts this thread's cp.async copies of
    ``tile`` into ``slot`` (no commit: the ring commits); ``compute(slot, tile, acc, args)`` reads the tile
    from ``slot`` and returns the new ``acc`` (a number, a tuple, or a local array it updates). Both are
    ``@cuda.jit(device=True, inline="always")`` functions. Returns the last ``acc``."""
    state = cp_async_ring_prologue(num_tiles, stages, issue, args)
    for kt in range(num_tiles):
        cp_async_ring_wait(stages)
        cp_async_ring_issue(state, kt, num_tiles, stages, issue, args)
        acc = compute(state.read, kt, acc, args)
        state = cp_async_ring_advance(state, stages)
    return acc
