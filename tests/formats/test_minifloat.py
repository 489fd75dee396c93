"""asyncpipe.formats.minifloat: the code tables written out by hand, rounding ties, saturation, subnormals,
every code's round trip, a brute-force nearest-value oracle, ml_dtypes where it is installed, bad input."""

import math

import numpy as np
import pytest

from asyncpipe.errors import AsyncpipeError
from asyncpipe.formats.minifloat import E2M1, E4M3, E5M2, E8M0, decode, encode

ELEMENTS = (E4M3, E5M2, E2M1)


def value(fmt, code):
    return float(decode(np.array([code], np.uint8), fmt)[0])


def codes(fmt, xs, saturate=True, dtype=np.float64):
    return [int(c) for c in encode(np.array(xs, dtype), fmt, saturate)]


@pytest.mark.parametrize("fmt, code, expected", [
    # E4M3: S.EEEE.MMM, bias 7
    (E4M3, 0b0_0000_000, 0.0),
    (E4M3, 0b1_0000_000, -0.0),
    (E4M3, 0b0_0000_001, 2.0**-9),            # smallest subnormal: 1/8 x 2^(1-7)
    (E4M3, 0b0_0000_111, 7 * 2.0**-9),        # largest subnormal
    (E4M3, 0b0_0001_000, 2.0**-6),            # smallest normal
    (E4M3, 0b0_0111_000, 1.0),                # 0x38
    (E4M3, 0b0_0111_100, 1.5),                # 0x3C
    (E4M3, 0b0_1111_000, 256.0),              # 0x78: the all-ones exponent is a normal binade (no inf)
    (E4M3, 0b0_1111_110, 448.0),              # 0x7E: max normal 1.75 x 2^8
    (E4M3, 0b1_1111_110, -448.0),             # 0xFE
    # E5M2: S.EEEEE.MM, bias 15, IEEE specials
    (E5M2, 0b0_00000_01, 2.0**-16),           # smallest subnormal: 1/4 x 2^(1-15)
    (E5M2, 0b0_00001_00, 2.0**-14),           # smallest normal
    (E5M2, 0b0_01111_00, 1.0),                # 0x3C
    (E5M2, 0b0_11110_11, 57344.0),            # 0x7B: max normal 1.75 x 2^15
    (E5M2, 0b0_11111_00, math.inf),           # 0x7C
    (E5M2, 0b1_11111_00, -math.inf),          # 0xFC
    # E2M1: S.EE.M, bias 1
    (E2M1, 0b0000, 0.0), (E2M1, 0b0001, 0.5), (E2M1, 0b0010, 1.0), (E2M1, 0b0011, 1.5),
    (E2M1, 0b0100, 2.0), (E2M1, 0b0101, 3.0), (E2M1, 0b0110, 4.0), (E2M1, 0b0111, 6.0),
    (E2M1, 0b1000, -0.0), (E2M1, 0b1001, -0.5), (E2M1, 0b1111, -6.0),
    # E8M0: 2^(code - 127), no zero
    (E8M0, 0x00, 2.0**-127), (E8M0, 0x7F, 1.0), (E8M0, 0x80, 2.0), (E8M0, 0x7C, 0.125), (E8M0, 0xFE, 2.0**127),
])
def test_hand_decoded_codes(fmt, code, expected):
    got = value(fmt, code)
    assert got == expected and math.copysign(1, got) == math.copysign(1, expected)


@pytest.mark.parametrize("fmt, nans", [(E4M3, [0x7F, 0xFF]), (E5M2, [0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF]),
                                       (E8M0, [0xFF]), (E2M1, [])])
def test_nan_codes_are_exactly_the_specified_ones(fmt, nans):
    assert [c for c in range(1 << fmt.bits) if math.isnan(value(fmt, c))] == nans


def test_format_constants():
    assert [(f.max, f.max_code, f.emax) for f in ELEMENTS] == [(448.0, 0x7E, 8), (57344.0, 0x7B, 15), (6.0, 0x7, 2)]
    assert (E4M3.nan_code, E5M2.nan_code, E5M2.inf_code, E8M0.nan_code) == (0x7F, 0x7F, 0x7C, 0xFF)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ties_round_to_the_even_code(dtype):
    # E4M3 around 1.0: the step is 1/8, so 1 + 1/16 is the midpoint of 0x38 (1.0) and 0x39 (1.125)
    assert codes(E4M3, [1.0625, 1.1875, 1.0625 + 2**-20, 1.1875 - 2**-20], dtype=dtype) == [0x38, 0x3A, 0x39, 0x39]
    # subnormal midpoints (step 2^-9): 2^-10 between 0 and 0x01, 3 x 2^-10 between 0x01 and 0x02,
    # 7.5 x 2^-9 between the largest subnormal 0x07 and the smallest normal 0x08
    assert codes(E4M3, [2**-10, 3 * 2**-10, 7.5 * 2**-9, -(2**-10)], dtype=dtype) == [0x00, 0x02, 0x08, 0x80]
    # E5M2 around 1.0 (step 1/4) and its subnormals (step 2^-16)
    assert codes(E5M2, [1.125, 1.375, 2**-17, 3 * 2**-17], dtype=dtype) == [0x3C, 0x3E, 0x00, 0x02]
    # E2M1 every midpoint: 0.25 0.75 1.25 1.75 2.5 3.5 5 -> 0, 1, 1, 2, 2, 4, 4 (the even code of each pair)
    assert codes(E2M1, [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=dtype) == [0b0000, 0b0010, 0b0010, 0b0100,
                                                                                 0b0100, 0b0110, 0b0110]


def test_saturation_and_the_non_saturating_mode():
    big = [464.0, 465.0, 1e6, math.inf, -math.inf, -1e6]
    # 464 is the midpoint of 448 and the missing 480 (ties to the even 0x7E); 465 rounds past max normal
    assert codes(E4M3, big) == [0x7E, 0x7E, 0x7E, 0x7E, 0xFE, 0xFE]
    assert codes(E4M3, big, saturate=False) == [0x7E, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F]       # overflow -> NaN
    # E5M2: 61440 is the midpoint of 57344 and 65536 = 2^16 and rounds to the even one, which overflows
    assert codes(E5M2, [61439.0, 61440.0, math.inf, -1e9]) == [0x7B, 0x7B, 0x7B, 0xFB]
    assert codes(E5M2, [61439.0, 61440.0, math.inf, -1e9], saturate=False) == [0x7B, 0x7C, 0x7C, 0xFC]
    assert codes(E2M1, [6.5, 7.0, 1e30, -math.inf]) == [0b0111, 0b0111, 0b0111, 0b1111]


def test_nan_signed_zero_and_underflow():
    assert codes(E4M3, [math.nan, -math.nan]) == [0x7F, 0x7F]
    assert codes(E5M2, [math.nan]) == [0x7F]
    assert codes(E4M3, [-0.0, -1e-30, 1e-30]) == [0x80, 0x80, 0x00]
    assert codes(E2M1, [-0.0, -0.2]) == [0b1000, 0b1000]
    assert codes(E4M3, [2.0**-149], dtype=np.float32) == [0x00]          # a float32 subnormal input


@pytest.mark.parametrize("fmt", ELEMENTS, ids=lambda f: f.name)
def test_every_code_round_trips(fmt):
    c = np.arange(1 << fmt.bits, dtype=np.uint8)
    v = decode(c, fmt)
    keep = ~np.isnan(v)
    for x in (v, v.astype(np.float64), v.astype(np.float16)):
        assert np.array_equal(encode(x[keep], fmt, saturate=fmt is E2M1), c[keep])
    if fmt is E2M1:
        return
    finite = keep & np.isfinite(v)
    assert np.array_equal(encode(v[finite], fmt), c[finite])


@pytest.mark.parametrize("fmt", ELEMENTS, ids=lambda f: f.name)
def test_every_midpoint_goes_to_the_even_neighbour(fmt):
    table = decode(np.arange(fmt.max_code + 1, dtype=np.uint8), fmt).astype(np.float64)
    low, high = table[:-1], table[1:]
    mid = (low + high) / 2
    even = np.where(np.arange(fmt.max_code) % 2 == 0, np.arange(fmt.max_code), np.arange(1, fmt.max_code + 1))
    assert np.array_equal(encode(mid, fmt), even)
    assert np.array_equal(encode(-mid, fmt), even | (1 << (fmt.bits - 1)))
    assert np.array_equal(encode(np.nextafter(mid, 0), fmt), np.arange(fmt.max_code))
    assert np.array_equal(encode(np.nextafter(mid, np.inf), fmt), np.arange(1, fmt.max_code + 1))


@pytest.mark.parametrize("fmt", ELEMENTS, ids=lambda f: f.name)
def test_random_values_match_a_brute_force_nearest_search(fmt, rng):
    table = decode(np.arange(fmt.max_code + 1, dtype=np.uint8), fmt).astype(np.float64)
    x = rng.uniform(-1.2, 1.2, 20000) * fmt.max * np.exp2(-rng.integers(0, 2 * fmt.emax + 4, 20000))
    dist = np.abs(np.abs(x)[:, None] - table[None, :])
    nearest = np.argmin(dist, axis=1)                    # first minimum: no exact ties among random values
    expected = np.where(np.abs(x) > fmt.max, fmt.max_code, nearest) | np.where(x < 0, 1 << (fmt.bits - 1), 0)
    assert np.array_equal(encode(x, fmt), expected)


ML_DTYPES = [("float8_e4m3fn", E4M3), ("float8_e5m2", E5M2), ("float4_e2m1fn", E2M1), ("float8_e8m0fnu", E8M0)]


@pytest.mark.parametrize("name, fmt", ML_DTYPES, ids=[n for n, _ in ML_DTYPES])
def test_decode_tables_agree_with_ml_dtypes(name, fmt):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    c = np.arange(1 << fmt.bits, dtype=np.uint8)
    theirs = c.view(getattr(ml_dtypes, name)).astype(np.float32)
    assert np.array_equal(decode(c, fmt), theirs, equal_nan=True)


@pytest.mark.parametrize("name, fmt", ML_DTYPES[:3], ids=[n for n, _ in ML_DTYPES[:3]])
def test_in_range_float32_encoding_agrees_with_ml_dtypes(name, fmt, rng):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    table = decode(np.arange(fmt.max_code + 1, dtype=np.uint8), fmt).astype(np.float64)
    x = rng.uniform(-1, 1, 20000) * fmt.max * np.exp2(-rng.integers(0, 2 * fmt.emax + 4, 20000))
    x = np.concatenate([x, (table[:-1] + table[1:]) / 2, -(table[:-1] + table[1:]) / 2]).astype(np.float32)
    theirs = x.astype(getattr(ml_dtypes, name)).view(np.uint8)
    assert np.array_equal(encode(x, fmt, saturate=fmt is E2M1), theirs)


@pytest.mark.parametrize("call, message", [
    (lambda: encode(np.arange(4), E4M3), "minifloat.encode: x must be a float16, float32 or float64 array, got int64"),
    (lambda: encode(np.ones(2), E8M0), "minifloat.encode: encode needs a signed type with zero and subnormals, "
                                       "got e8m0"),
    (lambda: encode(np.ones(2), E2M1, saturate=False),
     "minifloat.encode: saturate=False needs a type with an infinity or a NaN to overflow to "
     "[OCP OFP8 v1.0, conversion modes], got e2m1"),
    (lambda: encode(np.array([1.0, math.nan]), E2M1),
     "minifloat.encode: e2m1 has no NaN to encode a NaN as [OCP OFP8 v1.0, conversion modes], got NaN"),
    (lambda: decode(np.zeros(2, np.int16), E4M3), "minifloat.decode: codes must be a uint8 array, got int16"),
    (lambda: decode(np.array([3, 0x10], np.uint8), E2M1),
     "minifloat.decode: codes of e2m1 must be below 0x10 (one code a byte, unpacked), got 0x10"),
])
def test_bad_input_messages(call, message):
    with pytest.raises(AsyncpipeError) as err:
        call()
    assert str(err.value) == message
