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

**Slicing the last round only** (stream-K's remedy for wave quantization, in its simplest form). With T tiles on P
persistent CTAs the walk takes ceil(T / P) rounds, and when T % P = r is small the last round keeps r SMs busy
and the rest idle (4096^3 in 128 x 192 tiles: 704 tiles on 132 SMs, 5.33 rounds run as 6). ``tail_coords`` walks
the first ``whole`` = T - r tiles whole (``unit_coords``' order), then the last r tiles' K slices, S of each:
the last round runs r S units of 1/S of a tile each. ::

    unit = cta
    while unit < whole + (tiles - whole) * SLICES:
        tile_m, k_slice, tile_n, slot = tail_coords(unit, tiles_m, whole, tiles - whole)
        ...                    # slot -1: a whole tile; else the sliced tile's number among the last (0 .. r - 1)

With ``whole`` 0 every tile is sliced.

Kernel-side (``cuda.jit(device=True, inline="always")``); on the host call ``unit_coords.py_func`` and
``tail_coords.py_func``.
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


@cuda.jit(device=True, inline="always")
def tail_coords(unit, tiles_m, whole, tail):
    """(tile_m, k_slice, tile_n, slot) of unit ``unit`` of a walk whose first ``whole`` units are whole tiles, in
    ``unit_coords``' order (k_slice 0, slot -1), and whose later units are the K slices of the ``tail`` tiles
    after them, tile fastest: unit whole + s tail + i is slice s of tile whole + i, ``slot`` i. Non-negative
    arguments below 2^31, ``tail`` >= 1 where ``unit`` >= ``whole``."""
    tile = int64(unit)
    s = int64(0)
    slot = int64(-1)
    if unit >= whole:
        v = int64(unit - whole)
        s = int64(uint32(v) // uint32(tail))
        slot = v - s * tail
        tile = whole + slot
    q = int64(uint32(tile) // uint32(tiles_m))   # the tile's (tile_m, tile_n), as unit_coords' (M fastest)
    return tile - q * tiles_m, s, q, slot
