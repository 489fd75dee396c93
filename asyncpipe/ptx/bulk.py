"""cp.async.bulk: one thread has the TMA unit copy a contiguous run of bytes between global and shared
memory, with no tensor map (the chapter's bulk copies; ``bulk_tensor`` copies boxes of a tensor).

A load ``global -> shared`` completes on an mbarrier: the issuing thread announces the bytes with
``mbarrier_arrive_expect_tx`` (or ``mbarrier_expect_tx``) and the copy's ``complete_tx`` lowers the
barrier's transaction count by the same number as it lands, so the phase completes only once every
byte is in shared memory. A store ``shared -> global`` joins this thread's open *bulk async-group*:
``cp_async_bulk_commit_group`` closes the group and ``cp_async_bulk_wait_group[_read]`` waits for it.

``dst``, ``src`` and ``bar`` are ``addr(...)`` of array elements. Both addresses and ``size`` must be
multiples of 16 bytes (``constants.BULK_SIZE_ALIGN``). Before the TMA (the async proxy) reads shared
memory that threads wrote, those threads must run ``fence_proxy_async_shared_cta`` and the block
must pass a barrier.
"""

from ..sim.prim import bulk as _sim
from ._registry import primitive

_ONE = "one thread (typically elected); the TMA unit does the copy"
_GROUPS = "the thread that issued the stores (bulk async-groups are per thread)"


@primitive("void(voidptr, voidptr, uint32, voidptr)",
           ptx="cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [src], size, [bar];",
           isa=80, sm=90, who=_ONE, sass=("UBLKCP.S.G",))
def cp_async_bulk_shared_global(dst, src, size, bar):
    """Copies ``size`` bytes from global ``src`` to this CTA's shared ``dst``; as the bytes land the
    copy performs ``complete_tx(size)`` on the mbarrier ``bar`` (a ``np.uint64`` shared array element)
    of the same CTA. The barrier must expect them: ``mbarrier_arrive_expect_tx(bar, size)`` in the same
    phase, before or after the copy is issued. ``dst``, ``src`` and ``size`` are multiples of 16."""
    _sim.load(dst, src, size, bar)


@primitive("void(voidptr, voidptr, uint32)",
           ptx="cp.async.bulk.global.shared::cta.bulk_group [dst], [src], size;",
           isa=80, sm=90, who=_ONE, sass=("UBLKCP.G.S",))
def cp_async_bulk_global_shared(dst, src, size):
    """Copies ``size`` bytes from this CTA's shared ``src`` to global ``dst``, in this thread's open bulk
    async-group. Fence first (``fence_proxy_async_shared_cta`` by the writers, then a block barrier) so
    the TMA reads what the threads wrote; ``cp_async_bulk_commit_group`` then
    ``cp_async_bulk_wait_group_read(0)`` before ``src`` is overwritten or the block exits."""
    _sim.store(dst, src, size)


@primitive("void()", ptx="cp.async.bulk.commit_group;", isa=80, sm=90, who=_GROUPS,
           sass=("UTMACMDFLUSH",))
def cp_async_bulk_commit_group():
    """Closes this thread's not yet committed bulk stores (``cp.async.bulk`` and ``cp.async.bulk.tensor``
    into global memory) into one bulk async-group."""
    _sim.commit()


@primitive("void(int32)", ptx="cp.async.bulk.wait_group N;", isa=80, sm=90, who=_GROUPS,
           sass=("DEPBAR.LE", "CCTL.IVALL"))
def cp_async_bulk_wait_group(n):
    """Waits until all but the ``n`` most recent of this thread's bulk async-groups have *completed*:
    their writes to global memory are done and visible to this thread (the SASS follows the wait with
    an L1 invalidation, ``CCTL.IVALL``). ``n`` is a PTX immediate 0..7: pass a compile-time constant
    (a larger ``n`` waits as for 7, a negative one as for 0)."""
    _sim.wait(n, False, "cp_async_bulk_wait_group")


@primitive("void(int32)", ptx="cp.async.bulk.wait_group.read N;", isa=80, sm=90, who=_GROUPS,
           sass=("DEPBAR.LE",))
def cp_async_bulk_wait_group_read(n):
    """Waits until all but the ``n`` most recent of this thread's bulk async-groups have finished
    *reading* their shared-memory sources: the sources may then be overwritten, though the writes to
    global memory may still be in flight (the next kernel launch, or ``cp_async_bulk_wait_group``, sees
    them). ``n`` is an immediate 0..7, as in ``cp_async_bulk_wait_group``. Wait for 0 before the block
    exits: shared memory must outlive the copies that read it."""
    _sim.wait(n, True, "cp_async_bulk_wait_group_read")
