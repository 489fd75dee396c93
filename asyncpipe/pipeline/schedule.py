"""The persistent walk: which tile (and K slice) a persistent CTA takes next.

A persistent kernel launches P CTAs (or clusters) and lets CTA c take the units c, c + P, c + 2 P, ... of a
tiles_m x slices x tiles_n grid of work, M fastest, then the K slice, then N (consecutive units share B's
tile: their CTAs run in the same wave and read it from L2 once). ``unit_coords`` turns a unit's number into
its (tile_m, k_slice, tile_n) with one 32-bit division by the run-time ``tiles_m`` (inline: about twenty
instructions, no CALL) and a division by the compile-time ``slices`` (a multiply). ::

    unit = cta
    while unit < tiles_m * SLICES * tiles_n:
        tile_m, k_slice, tile_n = unit_coords(unit, tiles_m, SLICES)
        ...
        unit += ctas

Walking by subtraction instead (tile_m += P; while tile_m >= tiles_m: tile_m -= tiles_m; ...) looks cheaper
and is not: at M <= 128 (tiles_m 1) each step runs P iterations of a dependent add-compare-branch chain, about
130 x 25 cycles on 132 SMs, a couple of microseconds per tile in kernels that take 15-40. Timed on an H100
(2026-12-06, bench/h100_fp8_ab_unit_coords_d8a32bd.json): the FP8 GEMM with this division ran 1.41x the walk at
64 x 7168 x 2048 and 1.24x at 128 x 7168 x 2048, 1.01x at 4096^3.

Kernel-side (``cuda.jit(device=True, inline="always")``); on the host call ``unit_coords.py_func``.
"""

from __future__ import annotations

from numba import cuda, int64, uint32


@cuda.jit(device=True, inline="always")
def unit_coords(unit, tiles_m, slices):
    """(tile_m, k_slice, tile_n) of unit ``unit`` of the walk, M fastest, then the K slice (``slices`` of them, a
    compile-time constant; 1 without slices), then N. ``unit`` and ``tiles_m`` are non-negative and below 2^31."""
    # (numba widens uint32 // uint32 to 64 bits; LLVM narrows the division back to div.u32: no CALL)
    q = int64(uint32(unit) // uint32(tiles_m))
    return unit - q * tiles_m, q % slices, q // slices
