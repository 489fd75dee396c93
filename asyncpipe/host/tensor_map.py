"""TensorMap: the 128-byte TMA descriptor of a tensor in device memory, for ``cp.async.bulk.tensor``.

::

    tmap = TensorMap.tiled(a, box=(16, 32))        # a: any device array (numba, CuPy, PyTorch)
    kernel[grid, block](tmap, ...)                 # arrives in the kernel as a uint64[16] array

    # in the kernel, in the one thread that issues copies:
    ptx.fence_proxy_tensormap_generic_acquire_gpu(ptx.addr(tmap, 0))
    ptx.cp_async_bulk_tensor_2d_shared_global(ptx.addr(tile, 0), ptx.addr(tmap, 0), x, y, ptx.addr(bar, 0))

Shapes, boxes and element strides are given in numpy order (outermost dimension first) and reversed
here into the driver's order (innermost first); the kernel's coordinates are in PTX's order,
innermost first. Every rule of ``cuTensorMapEncodeTiled`` is checked in pure Python first
(``validate_tiled``, ``describe_array``, in ``asyncpipe.spec.tensor_map``), so a mistake names the rule
and the value even with no GPU; the words themselves come from the backend chosen in
``asyncpipe.backend`` (``cuTensorMapEncodeTiled`` on the GPU, a stand-in in the simulator).
"""

from __future__ import annotations

from ..backend import current
from ..backend.gpu import _encode  # noqa: F401  (re-exported)
from ..spec.tensor_map import (INTERLEAVE_32B_ALIGN, INTERLEAVE_RANK_MIN, TENSOR_MAP_WORDS,  # noqa: F401
                               ArrayDesc, EncodedTensorMap, TiledLayout, describe_array, resolve_dtype,
                               validate_tiled)


class TensorMap(EncodedTensorMap):
    """A tiled TMA tensor map over a device array, kept in device memory, passed to kernels as an array.

    Build it with ``TensorMap.tiled(array, box, ...)``. numba cannot pass the 128-byte map by value
    (CUDA C++'s ``const __grid_constant__ CUtensorMap`` parameter), so the map is written once into a
    device buffer of 16 ``uint64`` words that this object owns, and the object exposes that buffer's
    ``__cuda_array_interface__``: ``kernel[grid, block](tmap, ...)`` hands the kernel a ``uint64[16]``
    array, and the kernel passes ``ptx.addr(tmap, 0)`` as the tensor-map operand.

    **Acquire the map before its first use.** The map was written to global memory from the host (a
    copy engine, the generic proxy) while the TMA reads it through the tensormap proxy. The CUDA
    programming guide requires the issuing thread to run
    ``ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tmap, 0))`` (system scope: the host wrote
    the map) before its first
    ``cp.async.bulk.tensor`` with the map. It costs: measured on an H200 (docs/FACTS.md), one such fence
    per CTA cut a TMA add-one from 3912 to 717 GB/s, so persistent kernels (one fence per CTA, many
    boxes) amortise it best; ``prefetch_tensormap`` is a cache hint and replaces no fence.

    The source array is referenced for as long as the map lives (the map holds its raw address).
    ``shape``, ``box`` and ``element_strides`` are in numpy order (outermost first); the kernel's
    coordinates are innermost first. ``box_bytes`` is what one box delivers to shared memory, the
    mbarrier's expected transaction count. Shared-memory boxes must be 128-byte aligned.

    **A map for TMA stores should cover whole 16-byte granules of a row.** Measured on the H200: a store whose
    box hangs over the innermost edge of rows ending inside a granule writes the rest of the granule too (1 to 15
    bytes past each row, unseen by compute-sanitizer); loads are exact. The simulator refuses such a store; see
    ``asyncpipe.ptx.bulk_tensor`` and ``asyncpipe.kernels.tma_add_one.add_one`` for the way around it.
    """

    @classmethod
    def tiled(cls, array, box, *, swizzle="none", interleave="none", l2_promotion="none", oob_fill="zero",
              element_strides=None, dtype=None) -> "TensorMap":
        """Tensor map for copying ``box``-sized tiles of ``array`` (``cuTensorMapEncodeTiled``).

        ``array``: anything with ``__cuda_array_interface__``, innermost dimension contiguous.
        ``box``, ``element_strides``: numpy order. ``swizzle``: ``"none"``, ``"32B"``, ``"64B"``,
        ``"128B"``; ``interleave``: ``"none"``, ``"16B"``, ``"32B"``; ``l2_promotion``: ``"none"``,
        ``"64B"``, ``"128B"``, ``"256B"``; ``oob_fill``: ``"zero"`` or ``"nan"`` (float dtypes only).
        ``dtype``: by default the array's; give one of the same size to reinterpret (``"bfloat16"`` over
        a uint16 array). Raises ``AsyncpipeError`` for a rule broken (checked first, with no GPU needed)
        and ``UnsupportedDeviceError`` when no GPU of compute capability 9.0 or newer is usable.
        """
        desc = describe_array(array, dtype)
        layout = validate_tiled(desc.address, desc.shape, desc.strides, desc.dtype, box, swizzle=swizzle,
                                interleave=interleave, l2_promotion=l2_promotion, oob_fill=oob_fill,
                                element_strides=element_strides)
        return cls(layout, current().tensor_map_words(layout), array)
