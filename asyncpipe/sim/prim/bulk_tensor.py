"""cp.async.bulk.tensor (TMA with a tensor map) in the simulator: boxes gathered from and scattered
to the described array, out-of-bounds fill and clipping, the shared-memory swizzle, multicast."""

from __future__ import annotations

import numpy as np

from ...constants import BULK_SMEM_ALIGN_TENSOR, TMA_COORD_ALIGN, TMA_STORE_GRANULE
from ..arrays import TMAP, Ptr, check_in_array, describe_operand, shared_operand
from ..errors import ProxyFenceError, SimUsageError
from ..tensor_map import load_box, smem_offsets, store_box
from ..where import here
from . import async_ops, mbarrier_state
from .bulk import _check_init_fenced
from .common import enter

_SRC = "PTX ISA, cp.async.bulk.tensor"


def tensor_map(th, p, api):
    if not isinstance(p, Ptr) or p.space != TMAP:
        got = describe_operand(p)
        raise SimUsageError(api, "tmap must be addr(tmap, 0) of an asyncpipe TensorMap kernel argument", got, _SRC,
                            where=here(th), seed=th.sim.seed)
    tmap = p.obj
    if th.sim.check_proxy and id(tmap) not in th.tmaps:
        raise ProxyFenceError(api, "a tensor map written from the host must be acquired by the issuing thread "
                              "(fence_proxy_tensormap_generic_acquire_sys/_gpu on addr(tmap, 0)) before its first copy",
                              repr(tmap), "CUDA programming guide, TMA; PTX ISA, fence.proxy.tensormap",
                              where=here(th), seed=th.sim.seed)
    return tmap


def _rank(th, tmap, coords, api):
    if len(coords) != tmap.rank:
        raise SimUsageError(api, "the instruction's dimension must be the tensor map's rank",
                            f"a {len(coords)}-d copy with a rank-{tmap.rank} map", _SRC, where=here(th), seed=th.sim.seed)


def _coords(th, lay, coords, api, store):
    """The two rules measured on the H200 (ptx.bulk_tensor's doc): a broken one stops the GPU kernel
    with CUDA_ERROR_ILLEGAL_INSTRUCTION, so the simulator names it instead."""
    coords = tuple(int(c) for c in coords)
    if coords[0] * lay.itemsize % TMA_COORD_ALIGN:
        raise SimUsageError(api, f"the innermost coordinate times the element size must be a multiple of "
                            f"{TMA_COORD_ALIGN} bytes", f"c0 = {coords[0]} x {lay.itemsize} bytes",
                            "measured on the H200 (asyncpipe.ptx.bulk_tensor)", where=here(th), seed=th.sim.seed)
    if store and min(coords) < 0:
        raise SimUsageError(api, "a TMA store's coordinates must not be negative", f"coordinates {coords}",
                            "measured on the H200 (asyncpipe.ptx.bulk_tensor)", where=here(th), seed=th.sim.seed)
    return coords


def _store_granule(th, lay, coords, api):
    """The store's third measured rule: the H200 writes whole 16-byte granules of a row, so a box hanging over
    the innermost edge of rows that end inside a granule would write box data past the edge (undetected by
    compute-sanitizer). Refused when the box writes anything (every dimension reaches into the tensor)."""
    extent, box0 = lay.shape[-1], lay.box_elements[-1]
    row_bytes = extent * lay.itemsize
    if not row_bytes % TMA_STORE_GRANULE or not coords[0] < extent < coords[0] + box0:
        return
    starts = list(reversed(coords))
    if any(s >= n for s, n in zip(starts[:-1], lay.shape[:-1])):
        return                                            # the box lies past an outer edge: nothing written
    past = -(-row_bytes // TMA_STORE_GRANULE) * TMA_STORE_GRANULE // lay.itemsize
    raise SimUsageError(api, f"a TMA store hanging over the innermost edge needs rows of a multiple of "
                        f"{TMA_STORE_GRANULE} bytes: the TMA writes whole {TMA_STORE_GRANULE}-byte granules, so this "
                        f"one would also write elements {extent}..{past - 1} past the edge of every row (make the "
                        f"map's innermost extent a multiple of {TMA_STORE_GRANULE // lay.itemsize} elements, or keep "
                        f"the box inside)",
                        f"innermost extent {extent} x {lay.itemsize} bytes = {row_bytes} bytes, box at c0 = {coords[0]} "
                        f"of {box0} elements",
                        "measured on the H200 (asyncpipe.ptx.bulk_tensor)", where=here(th), seed=th.sim.seed)


def _box_target(th, api, mem, p, lay, what):
    """The shared-memory bytes of the box at ``p`` (in ``mem``: this CTA's, or a multicast target's)."""
    off = p.off
    if off % BULK_SMEM_ALIGN_TENSOR:
        raise SimUsageError(api, f"the shared-memory box must be {BULK_SMEM_ALIGN_TENSOR}-byte aligned",
                            f"shared offset {off:#x}", _SRC, where=here(th), seed=th.sim.seed)
    mem.check_range(th, api, off, lay.smem_bytes, 1, "the box")       # smem_bytes: rows padded to a swizzle span
    check_in_array(th, api, p, lay.smem_bytes, what, _SRC)
    return smem_offsets(lay, off)


def load(dst, tmap_ptr, coords, bar, cta_mask=None, api="cp_async_bulk_tensor_shared_global"):
    th = enter(api)
    sim = th.sim
    dst = shared_operand(th, api, dst, "dst")
    tmap = tensor_map(th, tmap_ptr, api)
    _rank(th, tmap, coords, api)
    lay = tmap.layout
    own = mbarrier_state.use(th, bar, api)
    _check_init_fenced(th, own, api)
    if cta_mask is None:
        ranks = [th.cta.rank]
    else:
        mask = int(cta_mask) & 0xFFFF
        ranks = [r for r in range(len(sim.ctas)) if (mask >> r) & 1]
        if not ranks or max(ranks) >= len(sim.ctas):
            raise SimUsageError(api, f"cta_mask must name CTAs of this cluster (ranks 0..{len(sim.ctas) - 1})",
                                f"{int(cta_mask):#06x}", _SRC, where=here(th), seed=sim.seed)
    targets = []
    for r in ranks:
        cta = sim.ctas[r]
        bptr = Ptr(bar.space, cta.smem, bar.off)
        b = own if r == th.cta.rank else mbarrier_state.use(th, bptr, api, remote=True)
        if b is not own:
            _check_init_fenced(th, b, api)
        targets.append((cta.smem, _box_target(th, api, cta.smem, dst, lay, "dst"), b))
    coords = _coords(th, lay, coords, api, store=False)
    kind = "TMA load" if cta_mask is None else f"TMA multicast load (ranks {ranks})"
    op = async_ops.AsyncLoad(th, api, kind, lay.box_bytes,
                             lambda: np.ascontiguousarray(load_box(tmap, coords)).view(np.uint8).reshape(-1), targets)
    op.issue()


def store(tmap_ptr, coords, src, api="cp_async_bulk_tensor_global_shared"):
    th = enter(api)
    src = shared_operand(th, api, src, "src")
    tmap = tensor_map(th, tmap_ptr, api)
    _rank(th, tmap, coords, api)
    lay = tmap.layout
    offs = _box_target(th, api, src.mem, src, lay, "src")
    coords = _coords(th, lay, coords, api, store=True)
    _store_granule(th, lay, coords, api)
    from ..tensor_map import numpy_dtype

    def write(data):
        store_box(tmap, coords, data.view(numpy_dtype(lay.dtype)).reshape(lay.box_elements))

    async_ops.BulkStore(th, api, "TMA store", src.mem, offs, write).issue()


def prefetch(tmap_ptr, api="prefetch_tensormap"):
    th = enter(api)
    if not isinstance(tmap_ptr, Ptr) or tmap_ptr.space != TMAP:
        raise SimUsageError(api, "tmap must be addr(tmap, 0) of an asyncpipe TensorMap kernel argument",
                            describe_operand(tmap_ptr), _SRC, where=here(th), seed=th.sim.seed)
