"""asyncpipe.formats.mx: whole 32-element blocks worked by hand (scale byte and every code), the zero,
NaN, infinity and clamped-scale blocks, axis handling, FP4 packing, a random round trip's error bound and
the messages of bad input."""

import math

import numpy as np
import pytest

from asyncpipe.errors import AsyncpipeError
from asyncpipe.formats import mx
from asyncpipe.formats.minifloat import E2M1, E4M3, E5M2, decode

# MXFP8 E4M3, amax 3.0: floor(log2 3) = 1, X = 1 - 8 = -7, scale byte 127 - 7 = 120 = 0x78; P = 128 x.
# Each P is then rounded in its binade (step 2^(e-3)): e.g. 1.0625 x 128 = 136 = 8.5 steps of 16 -> 8 (even).
E4M3_BLOCK = [
    (3.0, 0x7C),          # 384 = 1.5 x 2^8: 0 1111 100
    (-3.0, 0xFC),
    (2.0, 0x78),          # 256 = 2^8
    (1.0, 0x70),          # 128 = 2^7: 0 1110 000
    (-1.0, 0xF0),
    (0.5, 0x68),          # 64 = 2^6
    (0.0, 0x00),
    (-0.0, 0x80),
    (1.0625, 0x70),       # 136: the midpoint of 128 and 144 -> 128 (mantissa 000)
    (1.1875, 0x72),       # 152: the midpoint of 144 and 160 -> 160 (mantissa 010)
    (2.9, 0x7C),          # 371.2 = 11.6 steps of 32 -> 12 x 32 = 384
    (2.8, 0x7B),          # 358.4 = 11.2 steps of 32 -> 352 = 1.375 x 2^8
    (2.0**-16, 0x01),     # P = 2^-9, the smallest subnormal
    (2.0**-17, 0x00),     # P = 2^-10, the midpoint of 0 and 2^-9 -> 0
    (3 * 2.0**-17, 0x02), # P = 1.5 x 2^-9 -> 2 x 2^-9
    (-7.5 * 2.0**-16, 0x88),  # P = -7.5 x 2^-9: largest subnormal / smallest normal midpoint -> -2^-6
    (2.0**-13, 0x08),     # P = 2^-6, the smallest normal
    (0.1, 0x55),          # 12.8 -> 13 = 1.625 x 2^3: 0 1010 101
    (-0.1, 0xD5),
    (0.01, 0x3A),         # 1.28 = 10.24 steps of 1/8 -> 1.25: 0 0111 010
    (1e-6, 0x00),         # 1.28e-4, below half the smallest subnormal
    (-1e-6, 0x80),
    (0.75, 0x6C),         # 96 = 1.5 x 2^6
    (1.5, 0x74),          # 192 = 1.5 x 2^7
    (0.25, 0x60),         # 32 = 2^5
    (0.125, 0x58),        # 16 = 2^4
    (2.5, 0x7A),          # 320 = 1.25 x 2^8
    (-2.5, 0xFA),
    (1 / 3, 0x63),        # 42.67 = 10.67 steps of 4 -> 44 = 1.375 x 2^5
    (2 / 3, 0x6B),        # 85.33 = 10.67 steps of 8 -> 88 = 1.375 x 2^6
    (0.2, 0x5D),          # 25.6 = 12.8 steps of 2 -> 26 = 1.625 x 2^4
    (-0.3, 0xE2),         # 38.4 = 9.6 steps of 4 -> 40 = 1.25 x 2^5
]

# MXFP4, amax 0.9: floor(log2 0.9) = -1, X = -1 - 2 = -3, scale byte 124 = 0x7C; P = 8 x, then E2M1
# (0 0.5 1 1.5 2 3 4 6), ties to the even code, saturating at 6.
E2M1_BLOCK = [
    (0.9, 0x7), (-0.9, 0xF),     # 7.2 saturates to 6
    (0.75, 0x7), (0.5, 0x6),     # 6, 4
    (0.625, 0x6),                # 5: midpoint of 4 (0110) and 6 (0111) -> 4
    (0.4375, 0x6),               # 3.5: midpoint of 3 (0101) and 4 (0110) -> 4
    (0.375, 0x5),                # 3
    (0.3125, 0x4),               # 2.5 -> 2 (0100)
    (0.25, 0x4),                 # 2
    (0.21875, 0x4),              # 1.75 -> 2 (0100, not 0011)
    (0.1875, 0x3),               # 1.5
    (0.15625, 0x2),              # 1.25 -> 1 (0010)
    (0.125, 0x2),                # 1
    (0.09375, 0x2),              # 0.75 -> 1 (0010, not 0001)
    (0.0625, 0x1),               # 0.5
    (0.03125, 0x0),              # 0.25 -> 0
    (0.03126, 0x1),              # just above the midpoint
    (0.0, 0x0), (-0.0, 0x8),
    (-0.01, 0x8),                # -0.08 rounds to -0
    (-0.5, 0xE), (-0.3, 0xC),    # -4; -2.4 -> -2
    (-0.2, 0xB), (0.1, 0x2),     # -1.6 -> -1.5; 0.8 -> 1
    (0.7, 0x7), (0.45, 0x6),     # 5.6 -> 6; 3.6 -> 4
    (0.35, 0x5), (-0.15, 0xA),   # 2.8 -> 3; -1.2 -> -1
    (0.05, 0x1), (-0.8, 0xF),    # 0.4 -> 0.5; -6.4 saturates
    (0.55, 0x6), (0.6, 0x6),     # 4.4 -> 4; 4.8 -> 4
]
E2M1_PACKED = [0xF7, 0x67, 0x66, 0x45, 0x44, 0x23, 0x22, 0x01, 0x01, 0x88, 0xCE, 0x2B, 0x67, 0xA5, 0xF1, 0x66]


def hand(block):
    return np.array([x for x, _ in block]), np.array([c for _, c in block], np.uint8)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt, block, scale", [("mxfp8_e4m3", E4M3_BLOCK, 0x78), ("mxfp4", E2M1_BLOCK, 0x7C)])
def test_hand_worked_block(fmt, block, scale, dtype):
    x, expected = hand(block)
    codes, scales = mx.quantize(x.astype(dtype), fmt)
    assert scales.tolist() == [scale]
    assert codes.tolist() == expected.tolist()
    element = mx.FORMATS[fmt].element
    assert np.array_equal(mx.dequantize(codes, scales, fmt), decode(expected, element) * 2.0 ** (scale - 127))


def test_hand_worked_fp4_block_packs_low_nibble_first():
    _, expected = hand(E2M1_BLOCK)
    assert mx.pack_fp4(expected).tolist() == E2M1_PACKED
    assert mx.unpack_fp4(np.array(E2M1_PACKED, np.uint8)).tolist() == expected.tolist()
    assert mx.pack_fp4(np.array([[0x1, 0x2], [0xF, 0x0]], np.uint8)).tolist() == [[0x21], [0x0F]]


def test_mxfp8_e5m2_block_saturates_its_largest_element():
    # amax 1.9: floor(log2) = 0, X = 0 - 15 = -15, scale byte 112 = 0x70; P = 2^15 x
    x = np.zeros(32)
    x[:6] = [1.9, 1.0, -0.75, 2.0**-30, 2.0**-31, 2.0**-32]
    codes, scales = mx.quantize(x, "mxfp8_e5m2")
    assert scales.tolist() == [0x70]
    # 1.9 x 2^15 = 7.6 steps of 2^13 -> 8 x 2^13 = 2^16, past 57344: clamped to 0x7B; 2^15 -> 0 11110 00;
    # -0.75 -> -1.5 x 2^14; P = 2^-15, 2^-16, 2^-17 -> subnormals 2, 1 and the tie 0
    assert codes[:6].tolist() == [0x7B, 0x78, 0xF6, 0x02, 0x01, 0x00] and not codes[6:].any()
    assert mx.quantize(x, "mxfp8_e5m2", saturate=False)[0][0] == 0x7C          # +inf instead
    e4m3 = mx.quantize(np.full(32, 3.75), "mxfp8_e4m3", saturate=False)[0]       # 3.75 x 128 = 480 -> NaN
    assert set(e4m3.tolist()) == {0x7F}


@pytest.mark.parametrize("fmt", mx.FORMATS)
def test_zero_nan_and_inf_blocks(fmt):
    x = np.zeros((5, 32), np.float32)
    x[1, 3] = -0.0
    x[2, 7], x[2, 8] = np.nan, 1.0
    x[3, 0] = -np.inf
    x[4, :] = 1.0
    codes, scales = mx.quantize(x, fmt)
    one = {"mxfp8_e4m3": 0x38 + (8 << 3), "mxfp8_e5m2": 0x3C + (15 << 2), "mxfp4": 0b0110}[fmt]  # 2^emax
    nan = 0x7F if fmt != "mxfp4" else 0x0
    assert scales.tolist() == [[0x00], [0x00], [0xFF], [0xFF], [127 - mx.FORMATS[fmt].element.emax]]
    assert not codes[0].any() and codes[1, 3] == (0x80 if fmt != "mxfp4" else 0x8)
    assert set(codes[2].tolist()) == set(codes[3].tolist()) == {nan}
    assert set(codes[4].tolist()) == {one}
    y = mx.dequantize(codes, scales, fmt)
    assert np.isnan(y[2:4]).all() and not np.isnan(y[[0, 1, 4]]).any()
    assert np.array_equal(y[[0, 1, 4]], x[[0, 1, 4]]) and np.signbit(y[1, 3])


def test_tiny_blocks_clamp_the_scale_at_2_to_the_minus_127():
    # amax 2^-130 (a float32 subnormal): floor(log2) - 8 = -138, clamped to -127 (byte 0x00); P = 2^-3
    x = np.zeros(32, np.float32)
    x[0], x[1] = 2.0**-130, 2.0**-149
    codes, scales = mx.quantize(x, "mxfp8_e4m3")
    assert scales.tolist() == [0x00] and codes[:2].tolist() == [0x20, 0x00]     # 2^-3 = 0 0100 000
    assert mx.dequantize(codes, scales, "mxfp8_e4m3")[0] == np.float32(2.0**-130)


def test_float64_overflowing_the_scale_is_a_nan_block():
    codes, scales = mx.quantize(np.full(32, 2.0**200), "mxfp8_e4m3")          # 200 - 8 > 127
    assert scales.tolist() == [0xFF] and set(codes.tolist()) == {0x7F}
    codes, scales = mx.quantize(np.full(32, 2.0**130), "mxfp8_e4m3")          # 130 - 8 = 122: fine
    assert scales.tolist() == [122 + 127] and set(codes.tolist()) == {0x78}   # P = 2^8


def test_axis_and_shapes(rng):
    x = rng.standard_normal((3, 64, 5)).astype(np.float32)
    codes, scales = mx.quantize(x, "mxfp4", axis=1)
    assert codes.shape == (3, 64, 5) and scales.shape == (3, 2, 5)
    t_codes, t_scales = mx.quantize(np.moveaxis(x, 1, -1), "mxfp4")
    assert np.array_equal(np.moveaxis(t_codes, -1, 1), codes) and np.array_equal(np.moveaxis(t_scales, -1, 1), scales)
    y = mx.dequantize(codes, scales, "mxfp4", axis=1)
    assert y.dtype == np.float32 and np.array_equal(np.moveaxis(y, 1, -1), mx.dequantize(t_codes, t_scales, "mxfp4"))
    assert mx.unpack_fp4(mx.pack_fp4(t_codes)).tolist() == t_codes.tolist()


@pytest.mark.parametrize("fmt", mx.FORMATS)
def test_random_round_trip_error_is_within_half_a_step(fmt, rng):
    """Normal random data: each element is off by at most half its step, 2^-(mbits+1) |x| in the normal
    range (1/16 E4M3, 1/8 E5M2, 1/4 E2M1) and half the smallest subnormal step times X below it, except
    the elements above max normal x X (the floor rule leaves up to 2^(emax+1) x X), which come back as
    exactly +-max x X."""
    f = mx.FORMATS[fmt].element
    x = (rng.standard_normal((256, 64)) * np.exp2(rng.integers(-20, 20, (256, 1)))).astype(np.float32)
    codes, scales = mx.quantize(x, fmt)
    y = mx.dequantize(codes, scales, fmt)
    X = np.repeat(2.0 ** (scales.astype(np.float64) - 127), 32, axis=-1)
    x = x.astype(np.float64)
    clamped = np.abs(x) > f.max * X
    assert np.array_equal(y[clamped], np.sign(x[clamped]) * f.max * X[clamped])
    bound = np.maximum(2.0 ** -(f.mbits + 1) * np.abs(x), 2.0 ** (-f.bias - f.mbits) * X)
    assert (np.abs(y - x)[~clamped] <= bound[~clamped]).all()


U8 = np.zeros(32, np.uint8)


@pytest.mark.parametrize("call, message", [
    (lambda: mx.quantize(np.zeros(32, np.int32), "mxfp4"),
     "mx.quantize: x must be a float16, float32 or float64 array, got int32"),
    (lambda: mx.quantize(np.zeros((2, 48), np.float32), "mxfp4"),
     "mx.quantize: the length of axis -1 must be a multiple of the block size 32 [OCP MX v1.0 section 5], got 48"),
    (lambda: mx.quantize(np.zeros(32), "mxfp6_e3m2"),
     "mx.quantize: fmt must be one of 'mxfp8_e4m3', 'mxfp8_e5m2', 'mxfp4', got 'mxfp6_e3m2'"),
    (lambda: mx.quantize(np.zeros(32), "mxfp4", axis=1), "mx.quantize: axis must name one of the array's 1 axes, got 1"),
    (lambda: mx.quantize(np.zeros(32), "mxfp4", saturate=False),
     "mx.quantize: saturate=False needs a type with an infinity or a NaN to overflow to "
     "[OCP OFP8 v1.0, conversion modes], got e2m1"),
    (lambda: mx.dequantize(U8.astype(np.int8), U8[:1], "mxfp4"), "mx.dequantize: codes must be a uint8 array, got int8"),
    (lambda: mx.dequantize(U8, U8[:1].astype(np.float32), "mxfp4"),
     "mx.dequantize: scales must be a uint8 array, got float32"),
    (lambda: mx.dequantize(U8, U8[:2], "mxfp8_e5m2"),
     "mx.dequantize: scales must have the codes' shape with axis -1 divided by 32 [OCP MX v1.0 section 5], "
     "got (2,) for codes (32,)"),
    (lambda: mx.dequantize(U8 + 0x10, U8[:1], "mxfp4"),
     "mx.dequantize: codes of e2m1 must be below 0x10 (one code a byte, unpacked), got 0x10"),
    (lambda: mx.pack_fp4(U8[:3]), "mx.pack_fp4: the last axis must have an even length, got 3"),
    (lambda: mx.unpack_fp4(np.zeros(2, np.int16)),
     "mx.unpack_fp4: packed must be a uint8 array of one or more axes, got int16 of shape (2,)"),
])
def test_bad_input_messages(call, message):
    with pytest.raises(AsyncpipeError) as err:
        call()
    assert str(err.value) == message


def test_the_element_types_are_the_specified_ones():
    assert [mx.FORMATS[n].element for n in ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp4")] == [E4M3, E5M2, E2M1]
    assert {f.block for f in mx.FORMATS.values()} == {32} and math.isnan(mx.dequantize(U8, U8[:1] + 0xFF, "mxfp4")[0])
