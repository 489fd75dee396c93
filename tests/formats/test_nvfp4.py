"""asyncpipe.formats.nvfp4: 16-element blocks worked by hand (E4M3 scale byte and every E2M1 code) under
the default and a given tensor scale, zero / NaN / underflowing / saturating blocks, a random round trip's
error bound and the messages of bad input."""

import numpy as np
import pytest

from asyncpipe.errors import AsyncpipeError
from asyncpipe.formats import nvfp4
from asyncpipe.formats.minifloat import E2M1, decode
from asyncpipe.formats.mx import pack_fp4

# Block A, amax 2688 = the tensor's: s_t = 2688 / 2688 = 1; block scale 2688 / 6 / 1 = 448 = 0x7E (0 1111 110);
# q = x / 448, then E2M1 (0 0.5 1 1.5 2 3 4 6) ties to even, saturating at 6.
BLOCK_A = [(2688, 0x7), (-1344, 0xD), (896, 0x4), (224, 0x1),
           (112, 0x0),      # q = 0.25: midpoint of 0 and 0.5 -> 0
           (-112, 0x8),     # -> -0
           (1120, 0x4),     # 2.5 -> 2 (0100)
           (1568, 0x6),     # 3.5 -> 4 (0110)
           (2240, 0x6),     # 5 -> 4 (0110, not 0111)
           (672, 0x3), (336, 0x2),   # 1.5; 0.75 -> 1 (0010)
           (448, 0x2), (0.0, 0x0), (-0.0, 0x8),
           (1000, 0x4),     # 2.23 -> 2
           (-2600, 0xF)]    # -5.80 -> -6
# Block B, amax 1.0: block scale fl(fl(1 / 6) / 1) = 0.16666667 = 10.67 steps of 2^-6 -> 11 x 2^-6 = 0.171875
# = 1.375 x 2^-3 = 0x23 (0 0100 011); q = x / 0.171875 = 64 x / 11.
BLOCK_B = [(1.0, 0x7),      # 5.82 -> 6
           (-1.0, 0xF), (0.5, 0x5), (0.25, 0x3),   # 2.91 -> 3; 1.45 -> 1.5
           (0.0, 0x0), (-0.0, 0x8),
           (0.1, 0x1),      # 0.58 -> 0.5
           (0.75, 0x6),     # 4.36 -> 4
           (-0.6, 0xD),     # -3.49 -> -3
           (0.21484375, 0x2),  # exactly 1.25: midpoint of 1 (0010) and 1.5 (0011) -> 1
           (0.3, 0x3),      # 1.745 -> 1.5
           (-0.05, 0x9),    # -0.29 -> -0.5
           (0.04, 0x0),     # 0.23 -> 0
           (0.9, 0x7),      # 5.24 -> 6
           (0.859375, 0x6),    # exactly 5: midpoint of 4 and 6 -> 4
           (-0.2, 0xA)]     # -1.16 -> -1


def hand(block):
    return [x for x, _ in block], [c for _, c in block]


def test_hand_worked_blocks_with_the_default_tensor_scale():
    (xa, ca), (xb, cb) = hand(BLOCK_A), hand(BLOCK_B)
    xc = [0.0] * 16                                   # a zero block: scale 0, codes 0
    xd = [0.5, np.nan] + [0.0] * 14                    # a NaN block: the E4M3 NaN scale, codes 0
    codes, scales, s_t = nvfp4.quantize(np.array(xa + xb + xc + xd, np.float32))
    assert s_t == np.float32(1.0) and isinstance(s_t, np.float32)
    assert scales.tolist() == [0x7E, 0x23, 0x00, 0x7F]
    assert codes.tolist() == ca + cb + [0] * 32
    y = nvfp4.dequantize(codes, scales, s_t)
    assert np.array_equal(y[:32], np.concatenate([decode(np.array(ca, np.uint8), E2M1) * 448,
                                                  decode(np.array(cb, np.uint8), E2M1) * np.float32(0.171875)]))
    assert not y[32:48].any() and np.isnan(y[48:]).all()
    assert pack_fp4(codes[:4]).tolist() == [0xD7, 0x14]         # (0x7, 0xD) and (0x4, 0x1), low nibble first


def test_float16_input_is_quantized_as_its_exact_float32_value(rng):
    x = rng.standard_normal(64).astype(np.float16)
    assert all(np.array_equal(a, b) for a, b in zip(nvfp4.quantize(x), nvfp4.quantize(x.astype(np.float32))))


def test_hand_worked_block_with_a_given_tensor_scale():
    x, c = hand(BLOCK_B)
    codes, scales, s_t = nvfp4.quantize(np.array(x, np.float32), tensor_scale=1.0)
    assert (scales.tolist(), codes.tolist(), s_t) == ([0x23], c, 1.0)
    # tensor scale 2^-10: the block scale 6 / 6 / 2^-10 = 1024 saturates at 448 (0x7E); denominator
    # 448 x 2^-10 = 0.4375: 6 -> 13.7 saturates, 1 -> 2.29 -> 2, 0.4375 -> 1, 0.21875 -> 0.5
    y = np.zeros(16, np.float32)
    y[:4] = [6, 1, 0.4375, -0.21875]
    codes, scales, _ = nvfp4.quantize(y, tensor_scale=2.0**-10)
    assert scales.tolist() == [0x7E] and codes[:4].tolist() == [0x7, 0x4, 0x2, 0x9] and not codes[4:].any()


def test_a_block_scale_that_rounds_to_zero():
    # amax 6 x 2^-11: block scale 2^-11, below half the smallest E4M3 subnormal 2^-9 -> 0x00; x / 0 is
    # +-inf and saturates at +-6, 0 / 0 keeps the zero; all of it decodes to zero
    x = np.zeros(16, np.float32)
    x[:3] = [6 * 2.0**-11, -3 * 2.0**-11, -0.0]
    codes, scales, _ = nvfp4.quantize(x, tensor_scale=1.0)
    assert scales.tolist() == [0x00] and codes[:4].tolist() == [0x7, 0xF, 0x8, 0x0]
    assert not nvfp4.dequantize(codes, scales, 1.0).any()


def test_infinity_makes_a_nan_block_and_is_left_out_of_the_tensor_scale():
    x = np.ones(32, np.float32)
    x[3] = -np.inf
    codes, scales, s_t = nvfp4.quantize(x)
    assert s_t == np.float32(np.float32(1) / np.float32(2688))
    assert scales.tolist() == [0x7F, 0x7E] and not codes[:16].any() and set(codes[16:].tolist()) == {0x7}
    assert nvfp4.default_tensor_scale(np.zeros(8, np.float32)) == 1.0
    assert nvfp4.default_tensor_scale(np.array([np.nan, -5376.0, np.inf], np.float32)) == 2.0


def test_the_block_holding_the_tensor_amax_uses_the_full_e4m3_and_e2m1_range(rng):
    x = (rng.standard_normal((8, 64)) * np.exp2(rng.integers(-30, 30))).astype(np.float32)
    codes, scales, s_t = nvfp4.quantize(x)
    i = np.unravel_index(np.argmax(np.abs(x)), x.shape)
    assert scales[i[0], i[1] // 16] == 0x7E and codes[i] & 0x7 == 0x7
    assert s_t == np.float32(np.abs(x).max() / np.float32(2688))


def test_axis_and_shapes(rng):
    x = rng.standard_normal((2, 32, 3)).astype(np.float32)
    codes, scales, s_t = nvfp4.quantize(x, axis=1)
    assert codes.shape == (2, 32, 3) and scales.shape == (2, 2, 3)
    t_codes, t_scales, t_s = nvfp4.quantize(np.moveaxis(x, 1, -1))
    assert s_t == t_s and np.array_equal(np.moveaxis(t_codes, -1, 1), codes)
    assert np.array_equal(np.moveaxis(t_scales, -1, 1), scales)
    assert np.array_equal(nvfp4.dequantize(codes, scales, s_t, axis=1),
                          np.moveaxis(nvfp4.dequantize(t_codes, t_scales, t_s), -1, 1))


def test_random_round_trip_error_is_within_half_an_e2m1_step(rng):
    """With d = fl(decode(scale) x s_t) and q = x / d: |q| <= 6 is off by at most half an E2M1 step,
    max(|q| / 4, 1/4) (steps 0.5, 0.5, 1, 2 in [0,1), [1,2), [2,4), [4,6]); a larger |q| (the E4M3 scale
    rounded down by up to 1/16) comes back as +-6, off by |q| - 6; plus float32 rounding."""
    x = (rng.standard_normal((512, 64)) * np.exp2(rng.integers(-4, 5, (512, 1)))).astype(np.float32)
    codes, scales, s_t = nvfp4.quantize(x)
    y = nvfp4.dequantize(codes, scales, s_t).astype(np.float64)
    assert scales.all() and y.dtype == np.float64
    d = np.repeat(decode(scales, nvfp4.E4M3).astype(np.float64) * s_t, 16, axis=-1)
    q = np.abs(x) / d
    bound = d * np.maximum(np.maximum(q / 4, 0.25), q - 6)
    assert (np.abs(y - x) <= bound * (1 + 1e-6) + 1e-6 * np.abs(x)).all()


U8 = np.zeros(16, np.uint8)


@pytest.mark.parametrize("call, message", [
    (lambda: nvfp4.quantize(np.zeros(16)), "nvfp4.quantize: x must be a float16 or float32 array, got float64"),
    (lambda: nvfp4.quantize(np.zeros(24, np.float32)),
     "nvfp4.quantize: the length of axis -1 must be a multiple of the block size 16 "
     "[NVIDIA NVFP4: one E4M3 scale per 16 elements], got 24"),
    (lambda: nvfp4.quantize(np.zeros(16, np.float32), tensor_scale=0.0),
     "nvfp4.quantize: tensor_scale must be a positive finite float32 scalar, got 0.0"),
    (lambda: nvfp4.quantize(np.zeros(16, np.float32), tensor_scale=1e39),
     "nvfp4.quantize: tensor_scale must be a positive finite float32 scalar, got 1e+39"),
    (lambda: nvfp4.quantize(np.zeros(16, np.float32), tensor_scale=[1.0]),
     "nvfp4.quantize: tensor_scale must be a positive finite float32 scalar, got [1.0]"),
    (lambda: nvfp4.dequantize(U8.astype(np.int64), U8[:1], 1.0),
     "nvfp4.dequantize: codes must be a uint8 array, got int64"),
    (lambda: nvfp4.dequantize(U8, U8[:2], 1.0),
     "nvfp4.dequantize: scales must have the codes' shape with axis -1 divided by 16 "
     "[NVIDIA NVFP4: one E4M3 scale per 16 elements], got (2,) for codes (16,)"),
    (lambda: nvfp4.dequantize(U8, U8[:1], float("nan")),
     "nvfp4.dequantize: tensor_scale must be a positive finite float32 scalar, got nan"),
])
def test_bad_input_messages(call, message):
    with pytest.raises(AsyncpipeError) as err:
        call()
    assert str(err.value) == message
