"""cp.async.bulk (no tensor map) and the bulk async-group instructions, in the simulator."""

from __future__ import annotations

import ctypes

import numpy as np

from ...constants import BULK_SIZE_ALIGN
from ..arrays import check_global, check_in_array, shared_operand
from ..errors import SimUsageError
from ..where import here
from . import async_ops, mbarrier_state
from .common import enter


def _aligned(th, api, value, what):
    if int(value) % BULK_SIZE_ALIGN:
        raise SimUsageError(api, f"{what} must be a multiple of {BULK_SIZE_ALIGN} bytes", f"{int(value):#x}",
                            "PTX ISA, cp.async.bulk", where=here(th), seed=th.sim.seed)


def load(dst, src, size, bar, api="cp_async_bulk_shared_global"):
    th = enter(api)
    size = int(size)
    dst = shared_operand(th, api, dst, "dst")
    _aligned(th, api, size, "size")
    _aligned(th, api, dst.off, "dst")
    _aligned(th, api, src.off, "src")
    dst.mem.check_range(th, api, dst.off, size, BULK_SIZE_ALIGN, "dst")
    check_in_array(th, api, dst, size, "dst", "PTX ISA, cp.async.bulk")
    check_global(th, api, src, size)
    b = mbarrier_state.use(th, bar, api)
    _check_init_fenced(th, b, api)
    address = src.off
    op = async_ops.AsyncLoad(th, api, "bulk load", size,
                             lambda: np.frombuffer(ctypes.string_at(address, size), np.uint8),
                             [(dst.mem, dst.off + np.arange(size), b)])
    op.issue()


def store(dst, src, size, api="cp_async_bulk_global_shared"):
    th = enter(api)
    size = int(size)
    src = shared_operand(th, api, src, "src")
    _aligned(th, api, size, "size")
    _aligned(th, api, dst.off, "dst")
    _aligned(th, api, src.off, "src")
    src.mem.check_range(th, api, src.off, size, BULK_SIZE_ALIGN, "src")
    check_in_array(th, api, src, size, "src", "PTX ISA, cp.async.bulk")
    check_global(th, api, dst, size)
    address = dst.off

    def write(data):
        ctypes.memmove(address, data.tobytes(), size)

    async_ops.BulkStore(th, api, "bulk store", src.mem, src.off + np.arange(size), write).issue()


def commit(api="cp_async_bulk_commit_group"):
    async_ops.commit(enter(api))


def wait(n, read_only, api):
    async_ops.wait(enter(api), n, read_only)


def _check_init_fenced(th, bar, api):
    """TMA completes on ``bar``: its init must have been published to the async proxy."""
    from ..errors import MbarrierInitError
    from ..where import describe_site, describe_thread
    from .common import fenced

    sim = th.sim
    if not (sim.check_mbarrier and sim.clocks_on) or bar.init_by is None:
        return
    init = bar.init_by
    known = th.vc[init.vci] if init is not th else th.vc[th.vci]
    if not (fenced(init.fences_async, bar.init_clk, known) or fenced(init.fences_cluster, bar.init_clk, known)):
        raise MbarrierInitError(api, "an mbarrier that TMA completes on must have its init made visible to the async "
                                "proxy (fence_proxy_async_shared_cta or fence_mbarrier_init_release_cluster after "
                                "mbarrier_init, then a barrier)", f"{bar.name()} initialised by "
                                f"{describe_thread(init)} at {describe_site(bar.init_site)} with no such fence",
                                "PTX ISA, mbarrier; CUDA programming guide, TMA", where=here(th), seed=sim.seed)
