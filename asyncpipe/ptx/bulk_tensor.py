"""cp.async.bulk.tensor: one thread has the TMA unit copy a *box* of a tensor between global and shared
memory, the tensor and box described by a 128-byte tensor map (``asyncpipe.host.TensorMap``).

Operands, as every function below takes them:

- ``dst`` / ``src``: ``addr(...)`` of this CTA's shared memory, 128-byte aligned
  (``constants.BULK_SMEM_ALIGN_TENSOR``); the box lands row-major, innermost dimension fastest
  (permuted as the map's swizzle says). With a swizzle, a box row narrower than the swizzle span starts a
  span of its own (measured on the H200): the box then occupies ``TensorMap.smem_bytes`` of shared memory,
  more than the ``box_bytes`` the mbarrier counts; reserve ``smem_bytes``.
- ``tmap``: the generic address of the map, ``addr(tmap, 0)`` of the TensorMap passed as a kernel
  argument (typed ``ptx.tensor_map_type.tensormap``: the address of a data array here fails to compile,
  naming the primitive and what it got). A map written to global memory from the host must first be
  acquired by the issuing thread with ``fence_proxy_tensormap_generic_acquire_gpu(addr(tmap, 0))`` (see
  ``TensorMap``).
- ``c0..c4``: int32 element coordinates of the box's first element, innermost dimension first as in
  PTX (the reverse of numpy's order). A box may hang over the tensor's edges: a load fills the
  missing elements (zero, or NaN for a float map made with ``oob_fill="nan"``) and still delivers the
  whole box's bytes; a store writes the elements inside the tensor, clipped at whole 16-byte granules
  of a row (below). Three rules the PTX ISA does not spell out, measured on the H200 (driver 580):
  ``c0 * itemsize`` must be a multiple of 16 bytes (the box starts on a 16-byte boundary of its row, as
  ``constants.TMA_COORD_ALIGN`` says), and a store's coordinates must not be negative (a load's may
  be: it fills); a broken one stops the kernel with ``CUDA_ERROR_ILLEGAL_INSTRUCTION``. Third, a store
  whose box hangs over the innermost edge of a tensor whose rows end inside a 16-byte granule (innermost
  extent x itemsize not a multiple of 16, ``constants.TMA_STORE_GRANULE``) writes the rest of that
  granule too: 1 to 15 bytes of box data past the edge of every row it covers, into the row's padding
  or whatever follows the allocation, and compute-sanitizer's memcheck does not see it. Loads are exact
  (elements past the edge are filled). The simulator refuses such a store; make the map's innermost
  extent a multiple of 16 bytes (cover the row pitch's padding) or keep the box inside
  (``scripts/experiments/tma_edge_granularity.py`` measures it).
- ``bar``: ``addr(...)`` of an ``np.uint64`` shared mbarrier of this CTA; the copy performs
  ``complete_tx(box bytes)`` on it, so expect ``TensorMap.box_bytes`` with ``mbarrier_arrive_expect_tx``.
- ``cta_mask`` (multicast): uint16, bit ``r`` set = deliver to the CTA of rank ``r`` in the cluster, at
  the same shared offsets ``dst`` and ``bar`` as in the issuing CTA. Each receiving CTA's barrier sees
  ``complete_tx`` of the bytes it received.

Stores join this thread's bulk async-group: ``cp_async_bulk_commit_group`` and
``cp_async_bulk_wait_group_read`` (in ``bulk``) follow them. Before a store, the threads that wrote the
box run ``fence_proxy_async_shared_cta`` and the block passes a barrier.
"""

from ..sim.prim import bulk_tensor as _sim
from ._registry import primitive

_TMAP = ("tmap",)    # the operand that must be addr(tmap, 0) of a TensorMap (ptx.tensor_map_type)
_ONE = "one thread (typically elected); the TMA unit does the copy"
_MC = ("one thread of one CTA (typically elected); every CTA in cta_mask must have initialised its "
       "mbarrier and made it visible cluster-wide first")

# --- 1d ---------------------------------------------------------------------------------------------
@primitive("void(voidptr, voidptr, int32, voidptr)",
           ptx="cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
               "[dst], [tmap, {c0}], [bar];",
           isa=80, sm=90, who=_ONE, sass=("UTMALDG.1D",), tensor_maps=_TMAP)
def cp_async_bulk_tensor_1d_shared_global(dst, tmap, c0, bar):
    """Loads the 1-D box at (c0) into ``dst`` and completes its bytes on ``bar``."""
    _sim.load(dst, tmap, (c0,), bar, None, "cp_async_bulk_tensor_1d_shared_global")


@primitive("void(voidptr, voidptr, int32, voidptr, uint16)",
           ptx="cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               ".multicast::cluster [dst], [tmap, {c0}], [bar], cta_mask;",
           isa=80, sm=90, who=_MC, sass=("UTMALDG.1D.MULTICAST",), arch_specific=True, tensor_maps=_TMAP)
def cp_async_bulk_tensor_1d_shared_global_multicast(dst, tmap, c0, bar, cta_mask):
    """Loads the 1-D box at (c0) once and delivers it to ``dst`` in every CTA of ``cta_mask``, each
    completing its bytes on its own ``bar``."""
    _sim.load(dst, tmap, (c0,), bar, cta_mask, "cp_async_bulk_tensor_1d_shared_global_multicast")


@primitive("void(voidptr, int32, voidptr)",
           ptx="cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group [tmap, {c0}], [src];",
           isa=80, sm=90, who=_ONE, sass=("UTMASTG.1D",), tensor_maps=_TMAP)
def cp_async_bulk_tensor_1d_global_shared(tmap, c0, src):
    """Stores the 1-D box in ``src`` at (c0), in this thread's bulk async-group; elements outside
    the tensor are not written."""
    _sim.store(tmap, (c0,), src, "cp_async_bulk_tensor_1d_global_shared")

# --- 2d ---------------------------------------------------------------------------------------------
@primitive("void(voidptr, voidptr, int32, int32, voidptr)",
           ptx="cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
               "[dst], [tmap, {c0, c1}], [bar];",
           isa=80, sm=90, who=_ONE, sass=("UTMALDG.2D",), tensor_maps=_TMAP)
def cp_async_bulk_tensor_2d_shared_global(dst, tmap, c0, c1, bar):
    """Loads the 2-D box at (c0, c1) into ``dst`` and completes its bytes on ``bar``."""
    _sim.load(dst, tmap, (c0, c1,), bar, None, "cp_async_bulk_tensor_2d_shared_global")


@primitive("void(voidptr, voidptr, int32, int32, voidptr, uint16)",
           ptx="cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               ".multicast::cluster [dst], [tmap, {c0, c1}], [bar], cta_mask;",
           isa=80, sm=90, who=_MC, sass=("UTMALDG.2D.MULTICAST",), arch_specific=True, tensor_maps=_TMAP)
def cp_async_bulk_tensor_2d_shared_global_multicast(dst, tmap, c0, c1, bar, cta_mask):
    """Loads the 2-D box at (c0, c1) once and delivers it to ``dst`` in every CTA of ``cta_mask``, each
    completing its bytes on its own ``bar``."""
    _sim.load(dst, tmap, (c0, c1,), bar, cta_mask, "cp_async_bulk_tensor_2d_shared_global_multicast")


@primitive("void(voidptr, int32, int32, voidptr)",
           ptx="cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [tmap, {c0, c1}], [src];",
           isa=80, sm=90, who=_ONE, sass=("UTMASTG.2D",), tensor_maps=_TMAP)
def cp_async_bulk_tensor_2d_global_shared(tmap, c0, c1, src):
    """Stores the 2-D box in ``src`` at (c0, c1), in this thread's bulk async-group; elements outside
    the tensor are not written."""
    _sim.store(tmap, (c0, c1,), src, "cp_async_bulk_tensor_2d_global_shared")

# --- 3d ---------------------------------------------------------------------------------------------
@primitive("void(voidptr, voidptr, int32, int32, int32, voidptr)",
           ptx="cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
               "[dst], [tmap, {c0, c1, c2}], [bar];",
           isa=80, sm=90, who=_ONE, sass=("UTMALDG.3D",), tensor_maps=_TMAP)
def cp_async_bulk_tensor_3d_shared_global(dst, tmap, c0, c1, c2, bar):
    """Loads the 3-D box at (c0, c1, c2) into ``dst`` and completes its bytes on ``bar``."""
    _sim.load(dst, tmap, (c0, c1, c2,), bar, None, "cp_async_bulk_tensor_3d_shared_global")


@primitive("void(voidptr, voidptr, int32, int32, int32, voidptr, uint16)",
           ptx="cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               ".multicast::cluster [dst], [tmap, {c0, c1, c2}], [bar], cta_mask;",
           isa=80, sm=90, who=_MC, sass=("UTMALDG.3D.MULTICAST",), arch_specific=True, tensor_maps=_TMAP)
def cp_async_bulk_tensor_3d_shared_global_multicast(dst, tmap, c0, c1, c2, bar, cta_mask):
    """Loads the 3-D box at (c0, c1, c2) once and delivers it to ``dst`` in every CTA of ``cta_mask``, each
    completing its bytes on its own ``bar``."""
    _sim.load(dst, tmap, (c0, c1, c2,), bar, cta_mask, "cp_async_bulk_tensor_3d_shared_global_multicast")


@primitive("void(voidptr, int32, int32, int32, voidptr)",
           ptx="cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [tmap, {c0, c1, c2}], [src];",
           isa=80, sm=90, who=_ONE, sass=("UTMASTG.3D",), tensor_maps=_TMAP)
def cp_async_bulk_tensor_3d_global_shared(tmap, c0, c1, c2, src):
    """Stores the 3-D box in ``src`` at (c0, c1, c2), in this thread's bulk async-group; elements outside
    the tensor are not written."""
    _sim.store(tmap, (c0, c1, c2,), src, "cp_async_bulk_tensor_3d_global_shared")

# --- 4d ---------------------------------------------------------------------------------------------
@primitive("void(voidptr, voidptr, int32, int32, int32, int32, voidptr)",
           ptx="cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
               "[dst], [tmap, {c0, c1, c2, c3}], [bar];",
           isa=80, sm=90, who=_ONE, sass=("UTMALDG.4D",), tensor_maps=_TMAP)
def cp_async_bulk_tensor_4d_shared_global(dst, tmap, c0, c1, c2, c3, bar):
    """Loads the 4-D box at (c0, c1, c2, c3) into ``dst`` and completes its bytes on ``bar``."""
    _sim.load(dst, tmap, (c0, c1, c2, c3,), bar, None, "cp_async_bulk_tensor_4d_shared_global")


@primitive("void(voidptr, voidptr, int32, int32, int32, int32, voidptr, uint16)",
           ptx="cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               ".multicast::cluster [dst], [tmap, {c0, c1, c2, c3}], [bar], cta_mask;",
           isa=80, sm=90, who=_MC, sass=("UTMALDG.4D.MULTICAST",), arch_specific=True, tensor_maps=_TMAP)
def cp_async_bulk_tensor_4d_shared_global_multicast(dst, tmap, c0, c1, c2, c3, bar, cta_mask):
    """Loads the 4-D box at (c0, c1, c2, c3) once and delivers it to ``dst`` in every CTA of ``cta_mask``, each
    completing its bytes on its own ``bar``."""
    _sim.load(dst, tmap, (c0, c1, c2, c3,), bar, cta_mask, "cp_async_bulk_tensor_4d_shared_global_multicast")


@primitive("void(voidptr, int32, int32, int32, int32, voidptr)",
           ptx="cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [tmap, {c0, c1, c2, c3}], [src];",
           isa=80, sm=90, who=_ONE, sass=("UTMASTG.4D",), tensor_maps=_TMAP)
def cp_async_bulk_tensor_4d_global_shared(tmap, c0, c1, c2, c3, src):
    """Stores the 4-D box in ``src`` at (c0, c1, c2, c3), in this thread's bulk async-group; elements outside
    the tensor are not written."""
    _sim.store(tmap, (c0, c1, c2, c3,), src, "cp_async_bulk_tensor_4d_global_shared")

# --- 5d ---------------------------------------------------------------------------------------------
@primitive("void(voidptr, voidptr, int32, int32, int32, int32, int32, voidptr)",
           ptx="cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
               "[dst], [tmap, {c0, c1, c2, c3, c4}], [bar];",
           isa=80, sm=90, who=_ONE, sass=("UTMALDG.5D",), tensor_maps=_TMAP)
def cp_async_bulk_tensor_5d_shared_global(dst, tmap, c0, c1, c2, c3, c4, bar):
    """Loads the 5-D box at (c0, c1, c2, c3, c4) into ``dst`` and completes its bytes on ``bar``."""
    _sim.load(dst, tmap, (c0, c1, c2, c3, c4,), bar, None, "cp_async_bulk_tensor_5d_shared_global")


@primitive("void(voidptr, voidptr, int32, int32, int32, int32, int32, voidptr, uint16)",
           ptx="cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               ".multicast::cluster [dst], [tmap, {c0, c1, c2, c3, c4}], [bar], cta_mask;",
           isa=80, sm=90, who=_MC, sass=("UTMALDG.5D.MULTICAST",), arch_specific=True, tensor_maps=_TMAP)
def cp_async_bulk_tensor_5d_shared_global_multicast(dst, tmap, c0, c1, c2, c3, c4, bar, cta_mask):
    """Loads the 5-D box at (c0, c1, c2, c3, c4) once and delivers it to ``dst`` in every CTA of ``cta_mask``, each
    completing its bytes on its own ``bar``."""
    _sim.load(dst, tmap, (c0, c1, c2, c3, c4,), bar, cta_mask, "cp_async_bulk_tensor_5d_shared_global_multicast")


@primitive("void(voidptr, int32, int32, int32, int32, int32, voidptr)",
           ptx="cp.async.bulk.tensor.5d.global.shared::cta.tile.bulk_group [tmap, {c0, c1, c2, c3, c4}], [src];",
           isa=80, sm=90, who=_ONE, sass=("UTMASTG.5D",), tensor_maps=_TMAP)
def cp_async_bulk_tensor_5d_global_shared(tmap, c0, c1, c2, c3, c4, src):
    """Stores the 5-D box in ``src`` at (c0, c1, c2, c3, c4), in this thread's bulk async-group; elements outside
    the tensor are not written."""
    _sim.store(tmap, (c0, c1, c2, c3, c4,), src, "cp_async_bulk_tensor_5d_global_shared")

# --- prefetch ---------------------------------------------------------------------------------------
@primitive("void(voidptr)", ptx="prefetch.tensormap [tmap];", isa=80, sm=90, who="any thread",
           sass=("UTMACCTL.PF",), tensor_maps=_TMAP)
def prefetch_tensormap(tmap):
    """Brings the tensor map at ``tmap`` (generic address) into the TMA unit's cache ahead of the first
    copy that uses it: a hint, no ordering (it replaces no fence)."""
    _sim.prefetch(tmap)
