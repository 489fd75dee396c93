"""A thread's role in a warp-specialized kernel, as values the compiler knows to be the same across the warp.

``warpgroup_index()`` is ``threadIdx.x // 128`` broadcast from the warp's lane 0 (CUTLASS's
``canonical_warp_group_idx``): the same number, but ptxas then knows it is warp-uniform, and what derives from
it (a consumer warpgroup's rows, the wgmma descriptors of its A) lives in uniform registers, where wgmma reads
its descriptors. Computed from ``threadIdx.x`` alone it sits in ordinary registers and every k-step pays an
``R2UR`` to move each descriptor across (the FP8 GEMM's k-loop: 183 -> 156 SASS instructions a k-block at 128
wide, 2026-12-06). Call it with the warp converged (every lane), e.g. at the top of the kernel.

``warp_index()`` is ``threadIdx.x // 32`` the same way: a condition on it (a warp's rows past the matrix's edge) is
then a warp-uniform branch to ptxas. On ``threadIdx.x // 32`` itself, one such branch around the FP8 GEMM's TMA
epilogue made ptxas treat the whole persistent loop as divergent: the k-loop's descriptors went back to ordinary
registers (16 ``R2UR`` a k-block), each ``syncwarp`` became a ``WARPSYNC``, and at 192 wide a word spilled
(2026-12-07: 149 -> 117 SASS instructions a k-block at 64 wide, 181 -> 149 at 128, 225 -> 202 at 192).
"""

from __future__ import annotations

from numba import cuda, int32

FULL_MASK = 0xFFFFFFFF
WARPGROUP_THREADS = 128
WARP_THREADS = 32


@cuda.jit(device=True, inline="always")
def warpgroup_index():
    """This thread's warpgroup (``threadIdx.x // 128``), warp-uniform as far as ptxas knows."""
    return cuda.shfl_sync(FULL_MASK, int32(cuda.threadIdx.x // WARPGROUP_THREADS), 0)   # (int32: one SHFL, not two)


@cuda.jit(device=True, inline="always")
def warp_index():
    """This thread's warp in the block (``threadIdx.x // 32``), warp-uniform as far as ptxas knows."""
    return cuda.shfl_sync(FULL_MASK, int32(cuda.threadIdx.x // WARP_THREADS), 0)
