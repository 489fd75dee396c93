"""A thread's role in a warp-specialized kernel, as values the compiler knows to be the same across the warp.

``warpgroup_index()`` is ``threadIdx.x // 128`` broadcast from the warp's lane 0 (CUTLASS's
``canonical_warp_group_idx``): the same number, but ptxas then knows it is warp-uniform, and what derives from
it (a consumer warpgroup's rows, the wgmma descriptors of its A) lives in uniform registers, where wgmma reads
its descriptors. Computed from ``threadIdx.x`` alone it sits in ordinary registers and every k-step pays an
``R2UR`` to move each descriptor across (the FP8 GEMM's k-loop: 183 -> 156 SASS instructions a k-block at 128
wide, 2026-12-06). Call it with the warp converged (every lane), e.g. at the top of the kernel.
"""

from __future__ import annotations

from numba import cuda, int32

FULL_MASK = 0xFFFFFFFF
WARPGROUP_THREADS = 128


@cuda.jit(device=True, inline="always")
def warpgroup_index():
    """This thread's warpgroup (``threadIdx.x // 128``), warp-uniform as far as ptxas knows."""
    return cuda.shfl_sync(FULL_MASK, int32(cuda.threadIdx.x // WARPGROUP_THREADS), 0)   # (int32: one SHFL, not two)
