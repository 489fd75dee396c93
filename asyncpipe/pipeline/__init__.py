"""Pipelines composed from ``asyncpipe.ptx``: the stage state and the producer/consumer protocol of a
ring of shared-memory stages over full/empty mbarriers (CuTe's verbs: ``producer_acquire``,
``producer_commit``, ``consumer_wait``, ``consumer_release``), and the chapter's multi-stage cp.async
loop (``cp_async_ring``, see ``cp_async_ring.py``). Kernel-side only: every function is a
``cuda.jit(device=True, inline="always")`` function, inlined into the calling kernel.

::

    from asyncpipe.pipeline import PipelineState, pipeline_state, advance, pipeline_init, \\
        producer_acquire, producer_commit, consumer_wait, consumer_release

    # producer (one thread)                       # consumers
    st = pipeline_state(0, 0)                     st = pipeline_state(0, 0)
    for k in range(k_tiles):                      for k in range(k_tiles):
        producer_acquire(empty, st)                   consumer_wait(full, st)
        ...TMA copies into slot st.stage...           ...read slot st.stage...
        producer_commit(full, st, STAGE_BYTES)        consumer_release(empty, st, CLUSTER)
        st = advance(st, STAGES)                      st = advance(st, STAGES)

    from asyncpipe.pipeline import cp_async_ring   # every thread: prologue, wait, issue, commit, compute
    acc = cp_async_ring(num_tiles, STAGES, load_tile, compute_tile, acc, (smem, x))

    from asyncpipe.pipeline import unit_coords    # a persistent CTA's next tile (and K slice), see schedule.py
    from asyncpipe.pipeline import warpgroup_index, warp_index   # warp-uniform to ptxas (roles.py)
"""

from .cp_async_ring import MAX_STAGES as CP_ASYNC_RING_MAX_STAGES
from .cp_async_ring import MIN_STAGES as CP_ASYNC_RING_MIN_STAGES
from .cp_async_ring import (CpAsyncRingState, cp_async_ring, cp_async_ring_advance, cp_async_ring_issue,
                            cp_async_ring_prologue, cp_async_ring_wait)
from .roles import warp_index, warpgroup_index
from .ring import consumer_release, consumer_wait, pipeline_init, producer_acquire, producer_commit
from .schedule import tail_coords, unit_coords
from .state import PipelineState, advance, pipeline_state

# (the function cp_async_ring hides the module of the same name as an attribute of this package: import the
# module's other names with ``from asyncpipe.pipeline.cp_async_ring import ...``)
__all__ = ["CP_ASYNC_RING_MAX_STAGES", "CP_ASYNC_RING_MIN_STAGES", "CpAsyncRingState", "PipelineState", "advance",
           "consumer_release", "consumer_wait", "cp_async_ring", "cp_async_ring_advance", "cp_async_ring_issue",
           "cp_async_ring_prologue", "cp_async_ring_wait", "pipeline_init", "pipeline_state", "producer_acquire",
           "producer_commit", "tail_coords", "unit_coords", "warp_index", "warpgroup_index"]
