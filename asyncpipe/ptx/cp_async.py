"""cp.async: each thread copies 4, 8 or 16 bytes from global to shared memory without passing
through registers, and later waits for whole *groups* of its copies (the chapter's first section).

``dst`` and ``src`` are ``addr(...)`` of a shared and a global array element; both must be aligned
to the copy size. A copy is not visible to other threads until this thread has waited for its group
(``cp_async_wait_group``/``cp_async_wait_all``) and the block has passed a barrier.
"""

from ..sim.prim import cp_async as _sim
from ._registry import primitive

_WHO = "each thread, for its own copies (groups are per thread)"
_COPY = "void(voidptr, voidptr)"
_COPY_ZFILL = "void(voidptr, voidptr, uint32)"


@primitive(_COPY, ptx="cp.async.ca.shared.global [dst], [src], 4;", isa=70, sm=80, who=_WHO, sass=("LDGSTS.E",))
def cp_async_ca_shared_global_4(dst, src):
    """Copies 4 bytes, caching in L1 and L2 (.ca)."""
    _sim.copy(dst, src, 4, 4, "cp_async_ca_shared_global_4")


@primitive(_COPY, ptx="cp.async.ca.shared.global [dst], [src], 8;", isa=70, sm=80, who=_WHO, sass=("LDGSTS.E.64",))
def cp_async_ca_shared_global_8(dst, src):
    """Copies 8 bytes, caching in L1 and L2 (.ca)."""
    _sim.copy(dst, src, 8, 8, "cp_async_ca_shared_global_8")


@primitive(_COPY, ptx="cp.async.ca.shared.global [dst], [src], 16;", isa=70, sm=80, who=_WHO, sass=("LDGSTS.E.128",))
def cp_async_ca_shared_global_16(dst, src):
    """Copies 16 bytes, caching in L1 and L2 (.ca)."""
    _sim.copy(dst, src, 16, 16, "cp_async_ca_shared_global_16")


@primitive(_COPY, ptx="cp.async.cg.shared.global [dst], [src], 16;", isa=70, sm=80, who=_WHO,
           sass=("LDGSTS.E.BYPASS.128",))
def cp_async_cg_shared_global_16(dst, src):
    """Copies 16 bytes, caching in L2 only (.cg: bypasses L1; 16 bytes is its only size)."""
    _sim.copy(dst, src, 16, 16, "cp_async_cg_shared_global_16")


@primitive(_COPY_ZFILL, ptx="cp.async.ca.shared.global [dst], [src], 4, src_size;", isa=70, sm=80, who=_WHO,
           sass=("LDGSTS.E.ZFILL",))
def cp_async_ca_shared_global_4_src_size(dst, src, src_size):
    """Copies ``src_size`` (0..4) bytes and zero-fills the rest of the 4: ``src_size=0`` writes zeros
    and reads nothing, which is how a predicated or out-of-bounds element is loaded."""
    _sim.copy(dst, src, 4, src_size, "cp_async_ca_shared_global_4_src_size")


@primitive(_COPY_ZFILL, ptx="cp.async.ca.shared.global [dst], [src], 8, src_size;", isa=70, sm=80, who=_WHO,
           sass=("LDGSTS.E.64.ZFILL",))
def cp_async_ca_shared_global_8_src_size(dst, src, src_size):
    """Copies ``src_size`` (0..8) bytes and zero-fills the rest of the 8."""
    _sim.copy(dst, src, 8, src_size, "cp_async_ca_shared_global_8_src_size")


@primitive(_COPY_ZFILL, ptx="cp.async.ca.shared.global [dst], [src], 16, src_size;", isa=70, sm=80, who=_WHO,
           sass=("LDGSTS.E.128.ZFILL",))
def cp_async_ca_shared_global_16_src_size(dst, src, src_size):
    """Copies ``src_size`` (0..16) bytes and zero-fills the rest of the 16."""
    _sim.copy(dst, src, 16, src_size, "cp_async_ca_shared_global_16_src_size")


@primitive(_COPY_ZFILL, ptx="cp.async.cg.shared.global [dst], [src], 16, src_size;", isa=70, sm=80, who=_WHO,
           sass=("LDGSTS.E.BYPASS.128.ZFILL",))
def cp_async_cg_shared_global_16_src_size(dst, src, src_size):
    """Copies ``src_size`` (0..16) bytes through L2 only and zero-fills the rest of the 16."""
    _sim.copy(dst, src, 16, src_size, "cp_async_cg_shared_global_16_src_size")


@primitive("void()", ptx="cp.async.commit_group;", isa=70, sm=80, who=_WHO, sass=("LDGDEPBAR",))
def cp_async_commit_group():
    """Closes this thread's not yet committed cp.async operations into one group. Commit every
    iteration, even with no copy issued, so that group counts stay aligned with iterations."""
    _sim.commit("cp_async_commit_group")


@primitive("void(int32)", ptx="cp.async.wait_group N;", isa=70, sm=80, who=_WHO, sass=("DEPBAR.LE",))
def cp_async_wait_group(n):
    """Waits until at most ``n`` of this thread's most recent groups are pending. ``n`` is a PTX
    immediate 0..7: pass a compile-time constant (a larger ``n`` waits as for 7, a negative one as for 0)."""
    _sim.wait_group(n, "cp_async_wait_group")


@primitive("void()", ptx="cp.async.wait_all;", isa=70, sm=80, who=_WHO, sass=("DEPBAR.LE",))
def cp_async_wait_all():
    """Commits this thread's pending copies and waits for all of them (``commit_group; wait_group 0``)."""
    _sim.wait_all("cp_async_wait_all")


@primitive("void(voidptr)", ptx="cp.async.mbarrier.arrive.shared::cta.b64 [addr];", isa=78, sm=80, who=_WHO,
           sass=("ARRIVES.LDGSTSBAR",))
def cp_async_mbarrier_arrive(addr):
    """Makes the mbarrier at ``addr`` see one arrival from this thread once all of its prior cp.async
    have completed; the pending count is incremented first, so the arrival does not count against
    the barrier's expected count."""
    _sim.mbarrier_arrive(addr, False, "cp_async_mbarrier_arrive")


@primitive("void(voidptr)", ptx="cp.async.mbarrier.arrive.noinc.shared::cta.b64 [addr];", isa=78, sm=80,
           who=_WHO, sass=("ARRIVES.LDGSTSBAR",))
def cp_async_mbarrier_arrive_noinc(addr):
    """As ``cp_async_mbarrier_arrive``, but the arrival counts against the barrier's expected count
    (no increment first): initialise the barrier with the copying threads included."""
    _sim.mbarrier_arrive(addr, True, "cp_async_mbarrier_arrive_noinc")
