"""The persistent walk: unit_coords gives every unit's (tile_m, k_slice, tile_n), M fastest, then the K slice, then N,
with one inline 32-bit division (no CALL, no loop whose trip count grows with the grid); tail_coords walks the first
tiles whole and the last ones' K slices."""

import re

import numpy as np
import pytest
from numba import cuda, types

from asyncpipe.pipeline import tail_coords, unit_coords
from tests.sass import assert_sass


def expected(unit, tiles_m, slices):
    q, tile_m = divmod(unit, tiles_m)
    return tile_m, q % slices, q // slices


@pytest.mark.parametrize("slices", [1, 2, 3, 4, 16])
@pytest.mark.parametrize("tiles_m", [1, 2, 5, 32, 131])
def test_unit_coords_walks_m_then_slice_then_n(tiles_m, slices):
    seen = set()
    for unit in range(3 * tiles_m * slices + 7):
        got = tuple(int(v) for v in unit_coords.py_func(unit, tiles_m, slices))
        assert got == expected(unit, tiles_m, slices), (unit, tiles_m, slices)
        seen.add(got)
    assert len(seen) == 3 * tiles_m * slices + 7          # no unit repeated


def test_unit_coords_at_the_top_of_int32():
    for unit, tiles_m in [(2**31 - 1, 1), (2**31 - 1, 7), (2**31 - 2, 2**31 - 1), (123456789, 65536)]:
        got = tuple(int(v) for v in unit_coords.py_func(unit, tiles_m, 3))
        assert got == expected(unit, tiles_m, 3)


def walk_kernel(out, tiles_m, units):
    """Every unit's coordinates, a thread each. (Not a grid-strided loop: LLVM unrolls that one with a run-time
    trip count, (units - unit) / gridsize, a 64-bit division of its own.)"""
    unit = cuda.grid(1)
    if unit < units:
        tm, ks, tn = unit_coords(unit, tiles_m, 3)
        out[3 * unit] = tm
        out[3 * unit + 1] = ks
        out[3 * unit + 2] = tn


WALK_ARGS = (types.int32[::1], types.int32, types.int32)


@pytest.mark.sass
def test_unit_coords_sass_divides_inline():
    """One reciprocal-based 32-bit division (MUFU.RCP), no CALL, no loop (walking by subtraction is a loop that runs
    grid / tiles_m times per step)."""
    cubin = assert_sass(walk_kernel, WALK_ARGS, has=("MUFU.RCP",), lacks=("CALL", "LDL", "STL"))
    backward = [m for m in re.finditer(r"/\*([0-9a-f]{4})\*/\s+(?:@!?P\d\s+)?BRA\s+0x([0-9a-f]+)", cubin.sass)
                if int(m.group(2), 16) < int(m.group(1), 16)]
    assert backward == [], cubin.sass
    assert cubin.opcodes.count("MUFU.RCP") == 1


@pytest.mark.gpu
@pytest.mark.simulator_too
@pytest.mark.parametrize("tiles_m, units", [(1, 400), (7, 7 * 3 * 5), (32, 32 * 3 * 4 + 5)])
def test_unit_coords_gpu(tiles_m, units):
    out = cuda.to_device(np.full(3 * units, -1, np.int32))
    cuda.jit(walk_kernel)[(units + 63) // 64, 64](out, tiles_m, units)
    got = out.copy_to_host().reshape(units, 3)
    want = np.array([expected(u, tiles_m, 3) for u in range(units)], np.int32)
    np.testing.assert_array_equal(got, want)


def tail_walk(tiles_m, tiles, whole, slices):
    """Every unit of a tail-sliced walk as tail_coords gives it."""
    return [tuple(int(v) for v in tail_coords.py_func(u, tiles_m, whole, tiles - whole))
            for u in range(whole + (tiles - whole) * slices)]


@pytest.mark.parametrize("tiles_m, tiles, whole, slices", [
    (32, 704, 660, 3),      # 4096^3 in 128 x 192 tiles on 132 SMs: 5 whole rounds, 44 tiles in 3 slices
    (1, 33, 0, 4),          # every tile sliced (k_slices)
    (5, 17, 12, 2),         # the tail starts inside an M column (whole not a multiple of tiles_m)
    (3, 9, 9, 5),           # no tail: every tile whole
])
def test_tail_coords_covers_every_tile_and_slice_once(tiles_m, tiles, whole, slices):
    walk = tail_walk(tiles_m, tiles, whole, slices)
    assert [w[:3] for w in walk[:whole]] == [expected(u, tiles_m, 1) for u in range(whole)]
    assert all(w[3] == -1 for w in walk[:whole])
    tail = walk[whole:]
    for v, (tm, ks, tn, slot) in enumerate(tail):       # slice v // tail of tile whole + v % tail
        assert (ks, slot) == divmod(v, tiles - whole)
        assert (tm, tn) == (expected(whole + slot, tiles_m, 1)[0], expected(whole + slot, tiles_m, 1)[2])
    got = sorted((tm, tn, ks) for tm, ks, tn, _ in walk)
    want = sorted([(t % tiles_m, t // tiles_m, 0) for t in range(whole)] +
                  [(t % tiles_m, t // tiles_m, s) for t in range(whole, tiles) for s in range(slices)])
    assert got == want


def tail_kernel(out, tiles_m, whole, tail, units):
    unit = cuda.grid(1)
    if unit < units:
        tm, ks, tn, slot = tail_coords(unit, tiles_m, whole, tail)
        out[4 * unit] = tm
        out[4 * unit + 1] = ks
        out[4 * unit + 2] = tn
        out[4 * unit + 3] = slot


@pytest.mark.gpu
@pytest.mark.simulator_too
@pytest.mark.parametrize("tiles_m, tiles, whole, slices", [(32, 704, 660, 3), (5, 17, 12, 2), (1, 33, 0, 4)])
def test_tail_coords_gpu(tiles_m, tiles, whole, slices):
    units = whole + (tiles - whole) * slices
    out = cuda.to_device(np.full(4 * units, -7, np.int32))
    cuda.jit(tail_kernel)[(units + 63) // 64, 64](out, tiles_m, whole, tiles - whole, units)
    np.testing.assert_array_equal(out.copy_to_host().reshape(units, 4),
                                  np.array(tail_walk(tiles_m, tiles, whole, slices), np.int32))
