"""The block-scaled format codecs (MXFP8 E4M3/E5M2, MXFP4, NVFP4): every input rule's message (no GPU), the
kernels' SASS offline, and on the GPU bit for bit against ``asyncpipe.formats`` (through
``mx_codec.reference``) on fresh random data, into poisoned outputs. The simulator run: tests/sim/test_mx_codec.py
and the tests here marked ``simulator_too`` (NVFP4's rounding thresholds, benchmark's buffer lifetimes)."""

import gc
import importlib
import weakref

import numpy as np
import pytest
from numba import cuda

from asyncpipe.bf16 import bf16_bits
from asyncpipe.errors import AsyncpipeError, UnsupportedDeviceError
from asyncpipe.kernels import mx_codec as C
from asyncpipe.kernels import mx_codec_kernel as K

POISON = 0xA5                   # every output byte before the kernel runs: a byte not written stays visible


@pytest.fixture
def poisoned(monkeypatch):
    """Outputs that start as POISON bytes (numba device arrays; torch outputs are left as allocated)."""
    empty = C._empty

    def fill(*args, **kwargs):
        out, view = empty(*args, **kwargs)
        junk = np.frombuffer(np.full(view.nbytes, POISON, np.uint8).tobytes(), view.dtype).reshape(view.shape)
        view.copy_to_device(junk)
        return out, view

    monkeypatch.setattr(C, "_empty", fill)


# ---------------------------------------------------------------------------------------------
# Data: normal, heavy-tailed, zero blocks, subnormals, NaN and infinities
# ---------------------------------------------------------------------------------------------
def values(rng, shape, block=32, specials=True):
    """float32 of ``shape`` (bf16-exact after bf16_bits): rows of different magnitudes, a heavy-tailed part
    (Student t, 1 degree of freedom), a zero block, bf16 subnormals and, with ``specials``, NaN and +-inf."""
    x = rng.standard_normal(shape).astype(np.float32)
    x *= np.exp2(rng.integers(-30, 30, shape[:-1] + (1,))).astype(np.float32)
    flat = x.reshape(-1, shape[-1])
    k = shape[-1]
    if flat.shape[0] > 1:
        flat[1] = rng.standard_t(1, k).astype(np.float32)                        # heavy tails
    flat[0, :block] = 0.0                                                        # a zero block
    flat[0, block: 2 * block] *= np.float32(2.0 ** -130) if k >= 2 * block else 1   # bf16 subnormals
    if flat.shape[0] > 2:
        flat[2, rng.integers(0, k, 3)] = np.float32(-0.0)
    if specials and x.size >= 8 * block:
        sel = rng.choice(x.size, 3, replace=False)
        x.reshape(-1)[sel] = [np.nan, np.inf, -np.inf]
    return x


def check_quantize(kind, x_bits, got, **kw):
    want = C.reference(kind, x_bits, **kw)
    for g, w in zip(got[:2], want[:2]):
        np.testing.assert_array_equal(np.asarray(g).view(np.uint8), w)
    if kind == "quantize_nvfp4":
        assert np.float32(np.asarray(got[2]).reshape(-1)[0]) == want[2]
    return want


def round_trip(rng, shape, fmt, tensor_scale=None, specials=True):
    """Quantize and dequantize on the device (the host functions unchanged), each bit for bit against the
    references; also the dequantization of random codes (every byte value) and random scales."""
    block = 16 if fmt == "nvfp4" else 32
    bits = bf16_bits(values(rng, shape, block, specials))
    x = cuda.to_device(bits)
    if fmt in ("e4m3", "e5m2"):
        q, s = C.quantize_mxfp8(x, fmt)
        got = (q.copy_to_host(), s.copy_to_host())
        codes, scales = check_quantize("quantize_mxfp8", bits, got, fmt=fmt)
        y = C.dequantize_mxfp8(q, s, fmt).copy_to_host()
        np.testing.assert_array_equal(y, C.reference("dequantize_mxfp8", codes, scales, fmt=fmt))
        rq = rng.integers(0, 256, shape, dtype=np.uint8)
        rs = rng.integers(0, 256, scales.shape, dtype=np.uint8)
        y = C.dequantize_mxfp8(cuda.to_device(rq), cuda.to_device(rs), fmt).copy_to_host()
        np.testing.assert_array_equal(y, C.reference("dequantize_mxfp8", rq, rs, fmt=fmt))
        return
    if fmt == "mxfp4":
        p, s = C.quantize_mxfp4(x)
        packed, scales = check_quantize("quantize_mxfp4", bits, (p.copy_to_host(), s.copy_to_host()))
        y = C.dequantize_mxfp4(p, s).copy_to_host()
        np.testing.assert_array_equal(y, C.reference("dequantize_mxfp4", packed, scales))
        rs = rng.integers(0, 256, scales.shape, dtype=np.uint8)
        rp = rng.integers(0, 256, packed.shape, dtype=np.uint8)
        y = C.dequantize_mxfp4(cuda.to_device(rp), cuda.to_device(rs)).copy_to_host()
        np.testing.assert_array_equal(y, C.reference("dequantize_mxfp4", rp, rs))
        return
    p, s, ts = C.quantize_nvfp4(x, tensor_scale)
    packed, scales, s_t = check_quantize("quantize_nvfp4", bits, (p.copy_to_host(), s.copy_to_host(),
                                                                  ts.copy_to_host()), tensor_scale=tensor_scale)
    y = C.dequantize_nvfp4(p, s, ts).copy_to_host()
    np.testing.assert_array_equal(y, C.reference("dequantize_nvfp4", packed, scales, s_t))
    rs = rng.integers(0, 256, scales.shape, dtype=np.uint8)
    rp = rng.integers(0, 256, packed.shape, dtype=np.uint8)
    y = C.dequantize_nvfp4(cuda.to_device(rp), cuda.to_device(rs), 0.75).copy_to_host()
    np.testing.assert_array_equal(y, C.reference("dequantize_nvfp4", rp, rs, np.float32(0.75)))


# ---------------------------------------------------------------------------------------------
# Host: every rule, each message
# ---------------------------------------------------------------------------------------------
_BF16 = "must hold bfloat16 (a torch bfloat16 tensor, or its bits in a uint16/int16 array)"


def check(shape=(4, 64), dtype="uint16", contiguous=True, address=0x1000, block=32, source=C.MX_SOURCE, **kw):
    return C.check_input("quantize_mxfp8", "x", shape, dtype, contiguous, address, block, source, **kw)


@pytest.mark.parametrize("kwargs, message", [
    (dict(dtype="float32"), f"x {_BF16}, got float32"),
    (dict(shape=()), "x must have at least one axis, got a 0-d array"),
    (dict(shape=(0, 64)), "x must not be empty, got shape (0, 64)"),
    (dict(shape=(4, 48)), "the last axis of x (its row length) must be a multiple of the block size 32 "
                          f"[{C.MX_SOURCE}], got 48"),
    (dict(shape=(4, 40), block=16, source=C.NV_SOURCE), "the last axis of x (its row length) must be a multiple of "
                                                        f"the block size 16 [{C.NV_SOURCE}], got 40"),
    (dict(shape=(4, 8), dtype="uint8", kinds=("uint8",), rule="must be uint8 bytes", per_byte=2),
     f"the last axis of x (its row length) must be a multiple of the block size 32 [{C.MX_SOURCE}], got 8 (2 codes "
     "a byte: 16 elements)"),
    (dict(shape=(65536, 32768)), "x must have fewer than 2^31 elements (32-bit indices), got 2147483648"),
    (dict(contiguous=False), "x must be C-contiguous (row-major, unit stride), got shape (4, 64)"),
    (dict(address=0x1008), "x must start on a 16-byte boundary (16-byte vector loads and stores), got address 0x1008 "
                           "(8 bytes past one)"),
])
def test_input_messages(kwargs, message):
    with pytest.raises(AsyncpipeError) as e:
        check(**kwargs)
    assert str(e.value) == "quantize_mxfp8: " + message


def test_input_accepted():
    assert check() == 256 and check(dtype="bfloat16", shape=(2, 3, 32)) == 192
    assert check(shape=(3, 16), block=16) == 48
    assert check(shape=(2, 16), dtype="uint8", kinds=("uint8",), per_byte=2) == 64


@pytest.mark.parametrize("args, message", [
    (((4, 2), "int8", True, (4, 64), 32), "scales must be uint8 (one E8M0 byte a block), got int8"),
    (((4, 3), "uint8", True, (4, 64), 32), "scales must have the codes' shape with the last axis (in elements) divided "
                                           "by 32, got scales (4, 3) for codes (4, 64)"),
    (((2, 4), "uint8", True, (4, 64), 32), "scales must have the codes' shape with the last axis (in elements) divided "
                                           "by 32, got scales (2, 4) for codes (4, 64)"),
    (((4, 2), "uint8", False, (4, 64), 32), "scales must be C-contiguous (row-major, unit stride), got shape (4, 2)"),
])
def test_scales_messages(args, message):
    with pytest.raises(AsyncpipeError) as e:
        C.check_scales("dequantize_mxfp8", *args)
    assert str(e.value) == "dequantize_mxfp8: " + message
    C.check_scales("dequantize_nvfp4", (4, 4), "uint8", True, (4, 32), 16, per_byte=2, what="E4M3")


def test_fmt_and_tensor_scale_are_checked_first():
    x = np.zeros((2, 32), np.uint16)                  # host memory: the later rule; these come before it
    with pytest.raises(AsyncpipeError) as e:
        C.quantize_mxfp8(x, "e3m4")
    assert str(e.value) == "quantize_mxfp8: fmt must be 'e4m3' or 'e5m2', got 'e3m4'"
    with pytest.raises(AsyncpipeError) as e:
        C.quantize_nvfp4(x, tensor_scale=-1.0)
    assert str(e.value) == "quantize_nvfp4: tensor_scale must be a positive finite float32 scalar, got -1.0"
    with pytest.raises(AsyncpipeError) as e:
        C.dequantize_nvfp4(np.zeros((2, 16), np.uint8), np.zeros((2, 2), np.uint8), float("inf"))
    assert str(e.value).startswith("dequantize_nvfp4: packed must be a CUDA device array")


@pytest.mark.parametrize("fn, args, name", [
    (C.quantize_mxfp8, (np.zeros((2, 32), np.uint16),), "quantize_mxfp8: x"),
    (C.quantize_mxfp4, (np.zeros((2, 32), np.uint16),), "quantize_mxfp4: x"),
    (C.quantize_nvfp4, (np.zeros((2, 32), np.uint16),), "quantize_nvfp4: x"),
    (C.dequantize_mxfp8, (np.zeros((2, 32), np.uint8), np.zeros((2, 1), np.uint8)), "dequantize_mxfp8: codes"),
    (C.dequantize_mxfp4, (np.zeros((2, 16), np.uint8), np.zeros((2, 1), np.uint8)), "dequantize_mxfp4: packed"),
])
def test_host_arrays_are_refused_before_the_gpu_is_asked(fn, args, name):
    with pytest.raises(AsyncpipeError) as e:
        fn(*args)
    assert str(e.value).startswith(f"{name} must be a CUDA device array (numba, CuPy, PyTorch), not host memory")


def test_old_gpu_is_refused_by_name():
    from asyncpipe.spec.device import DeviceInfo

    a100 = DeviceInfo("NVIDIA A100", (8, 0), 108, 1024, (1024, 1024, 64), (2**31 - 1, 65535, 65535), 49152,
                      166912, 167936, False)
    with pytest.raises(UnsupportedDeviceError) as e:
        C.check_device("quantize_mxfp4", a100)
    assert str(e.value).startswith("quantize_mxfp4: needs compute capability 8.9 or newer (cvt.rn.satfinite.e4m3x2/"
                                   "e5m2x2.f32: sm_89) [") and str(e.value).endswith(
        "got NVIDIA A100 (compute capability 8.0)")


def test_reference_round_trip_by_hand():
    """reference() wraps the formats: 1.5 and 6 in MXFP8 E4M3 and MXFP4 round-trip exactly; NVFP4 with s_t = 1
    and a block amax of 6 * 448: scale 448 (0x7E), element 6 (0x7)."""
    x = np.full((1, 32), 1.5, np.float32)
    x[0, 1] = 6.0
    bits = bf16_bits(x)
    codes, scales = C.reference("quantize_mxfp8", bits)
    # amax 6: shared_exp = floor(log2 6) - 8 = -6 (byte 121); 1.5 * 2^6 = 96 = 0.1101.100, 6 * 2^6 = 384 = 0.1111.100
    assert scales[0, 0] == 121 and codes[0, 0] == 0x6C and codes[0, 1] == 0x7C
    np.testing.assert_array_equal(C.reference("dequantize_mxfp8", codes, scales), bits)
    packed, scales = C.reference("quantize_mxfp4", bits)
    assert scales[0, 0] == 127 and packed[0, 0] == 0x73            # 1.5 (0x3) low nibble, 6 (0x7) high
    np.testing.assert_array_equal(C.reference("dequantize_mxfp4", packed, scales), bits)
    y = np.zeros((1, 16), np.float32)
    y[0, 0] = 6.0 * 448.0
    packed, scales, s_t = C.reference("quantize_nvfp4", bf16_bits(y), tensor_scale=1.0)
    assert s_t == 1.0 and scales[0, 0] == 0x7E and packed[0, 0] == 0x07


# ---------------------------------------------------------------------------------------------
# NVFP4's elements without division: the thresholds' arithmetic (numpy, as the kernel does it) against the
# reference's E2M1(fl(x / d)), every finite bf16 x
# ---------------------------------------------------------------------------------------------
FINITE_BF16 = (np.arange(0x10000, dtype=np.uint32) << 16).view(np.float32)
FINITE_BF16 = FINITE_BF16[np.isfinite(FINITE_BF16)]


def f32_rd(p):
    """float32 of the float64 array ``p`` rounded down (numpy rounds to nearest: then a step down if above)."""
    with np.errstate(over="ignore"):
        c = p.astype(np.float32)
    return np.where(c.astype(np.float64) > p, np.nextafter(c, np.float32(-np.inf)), c)


def f32_rn(p):
    with np.errstate(over="ignore"):
        return p.astype(np.float32)


def e2m1_cuts(d, rounded=f32_rd, midpoints=K.E2M1_MIDPOINTS):
    """``mx_codec_kernel._e2m1_cuts`` over an array of float32 divisors: (7, d.size) thresholds RD(M d)."""
    d64 = np.asarray(d, np.float32).astype(np.float64)
    return np.stack([rounded(d64 * m) for m in midpoints])


def e2m1_codes_by_cuts(x, d, rounded=f32_rd, cuts=None):
    """The kernel's element codes (``_thermometer``, ``_e2m1_nv_pair``) of the bf16-exact x (n, m) for the divisors
    d (n,): how many thresholds (``cuts``: others than ``e2m1_cuts(d, rounded)``) the magnitude bits of x exceed,
    each threshold as its bf16 rounded down (the top half of its float32 bits), and x's sign bit."""
    c = e2m1_cuts(d, rounded) if cuts is None else cuts
    h = (np.asarray(x, np.float32).view(np.uint32) >> 16) & 0x7FFF
    floors = np.asarray(c, np.float32).view(np.uint32) >> 16
    count = sum(h > floors[i][:, None] for i in range(len(floors)))
    sign = (np.asarray(x, np.float32).view(np.uint32) >> 28) & 8
    return (sign | count).astype(np.uint8)


def e2m1_codes_by_division(x, d):
    """The reference's element codes: E2M1(fl(x / d)), x itself where x is zero (asyncpipe.formats.nvfp4)."""
    from asyncpipe.formats.minifloat import E2M1, encode

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q = np.where(x == 0, x, x / np.asarray(d, np.float32)[:, None]).astype(np.float32)
    return encode(q, E2M1)


def near_midpoint_divisors(k=1):
    """Divisors d whose x / d lies on or next to a rounding midpoint or an E2M1 value (a tie of the final
    rounding) for some positive finite bf16 x = b: RN(b / M) and its k float32 neighbours each side, with the
    x beside each: (d, x (n, 6): b's bf16 neighbours and b, both signs)."""
    b = np.arange(1, 0x7F80, dtype=np.uint32)
    ds, xs = [], []
    for m in K.E2M1_MIDPOINTS + (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0):
        with np.errstate(over="ignore", under="ignore"):
            q = ((b << 16).view(np.float32).astype(np.float64) / m).astype(np.float32).view(np.uint32)
        for step in range(-k, k + 1):
            ds.append(np.clip(q.astype(np.int64) + step, 0, 0x7F800000).astype(np.uint32).view(np.float32))
            xs.append(b)
    d, b = np.concatenate(ds), np.concatenate(xs)
    near = np.stack([b - 1, b, b + 1], axis=1)
    x = (np.concatenate([near, near | 0x8000], axis=1) << 16).view(np.float32)
    keep = np.isfinite(x).all(axis=1)
    return d[keep], x[keep]


def test_nvfp4_thresholds_round_as_the_division_does():
    """Every finite bf16 x against: each E4M3 scale (zero included) times tensor scales from 2^-149 to FLT_MAX,
    float32 divisors of every exponent (0, subnormals, inf), and divisors chosen so that x / d sits on or next
    to a rounding midpoint; the same data with the thresholds rounded to nearest instead fails (it is hard)."""
    from asyncpipe.formats.minifloat import E4M3

    rng = np.random.default_rng(20)
    tensor_scales = np.array([1.0, 3e-38, 2**-149, 1e30, 3.4028235e38]
                             + list(np.exp(rng.uniform(np.log(1e-44), np.log(3e38), 2))), np.float32)
    with np.errstate(over="ignore"):
        scaled = (E4M3.table[:0x7F][None, :] * tensor_scales[:, None]).astype(np.float32).ravel()
    any_exponent = rng.integers(0, 0x7F800001, 200, dtype=np.uint32).view(np.float32)
    d_near, x_near = near_midpoint_divisors()
    d_all = np.concatenate([scaled, any_exponent, rng.choice(d_near, 200), np.float32([0, np.inf])])
    for i in range(0, d_all.size, 128):
        d = d_all[i:i + 128]
        x = np.broadcast_to(FINITE_BF16, (d.size, FINITE_BF16.size))
        np.testing.assert_array_equal(e2m1_codes_by_cuts(x, d), e2m1_codes_by_division(x, d), f"d {d}")
    np.testing.assert_array_equal(e2m1_codes_by_cuts(x_near, d_near), e2m1_codes_by_division(x_near, d_near))
    assert (e2m1_codes_by_cuts(x_near, d_near, f32_rn) != e2m1_codes_by_division(x_near, d_near)).any()


# ---------------------------------------------------------------------------------------------
# Offline SASS
# ---------------------------------------------------------------------------------------------
KERNELS = [("mxfp8_quantize", "e4m3"), ("mxfp8_quantize", "e5m2"), ("mxfp4_quantize", None),
           ("nvfp4_quantize", None), ("finite_amax", None), ("mxfp8_dequantize", "e4m3"),
           ("mxfp8_dequantize", "e5m2"), ("mxfp4_dequantize", None), ("nvfp4_dequantize", None)]
# (loads: {opcode: count} of the values / codes, {opcode: count} of the stores, conversions) of one lane and step.
# The dequantizers take 8 codes a lane, so that a warp's loads and stores each cover contiguous whole sectors
WIDTHS = {"mxfp8_quantize": ({"LDG.E.128": 2}, {"STG.E.128": 1}, 8),
          "mxfp4_quantize": ({"LDG.E.128": 4}, {"STG.E.128": 1}, 0),
          "nvfp4_quantize": ({"LDG.E.128": 4}, {"STG.E.128": 1}, 2),
          "mxfp8_dequantize": ({"LDG.E.64": 1, "LDG.E.128": 0}, {"STG.E.128": 1}, 4),
          "mxfp4_dequantize": ({"LDG.E": 1, "LDG.E.128": 0}, {"STG.E.128": 1}, 4),
          "nvfp4_dequantize": ({"LDG.E": 2, "LDG.E.128": 0}, {"STG.E.128": 1}, 4)}   # nvfp4: the tensor scale too
SHUFFLES = {"mxfp8_quantize": 1}     # the block amax across its lanes (the FP4 quantizers' lanes are whole blocks)     # the block amax across its lanes
# NVFP4's quantizer keeps the reference's scale divisions (div.rn.f32: an FCHK and a CALL.REL to its slow path
# each): fl(fl(amax_b / 6) / s_t) for each of a lane's two blocks and fl(amax / 2688) once a thread, 5 in all;
# its 32 elements a lane are compared with thresholds instead of divided (37 divisions before). The amax pass's grid-stride loop gets a
# trip-count division from LLVM's unroller (once, before the loop)
CALLS_OK = ("nvfp4_quantize", "finite_amax")
NVFP4_DIVISIONS = 2 * 2 + 1


@pytest.mark.sass
@pytest.mark.parametrize("name, fmt", KERNELS, ids=lambda v: v or "")
def test_codec_sass(name, fmt):
    from tests.sass import assert_sass

    cubin = assert_sass(K.kernel_function(name, fmt), K.kernel_argtypes(name),
                        lacks=("LDL", "STL") + (() if name in CALLS_OK else ("CALL",)))
    ops = cubin.opcodes
    print(name, fmt, cubin.resources, len(ops), "instructions")
    assert cubin.resources.local == 0
    if name == "finite_amax":
        assert ops.count("LDG.E.128") >= 1 and ops.count("SHFL.BFLY") == 5
        return
    loads, stores, cvts = WIDTHS[name]
    assert all(ops.count(op) == k for op, k in {**loads, **stores}.items()), ops
    # ptxas may give the shuffles a second copy on a BRA.DIV path (taken only if the warp is not converged)
    shuffles = SHUFFLES.get(name, 0)
    assert ops.count("SHFL.BFLY") == shuffles or (ops.count("SHFL.BFLY") == 2 * shuffles and "BRA.DIV" in ops)
    if name == "mxfp8_quantize":
        assert sum(o.startswith(f"F2FP.SATFINITE.{fmt.upper()}.F32") for o in ops) == cvts
    elif name == "nvfp4_quantize":
        assert sum(o.startswith("F2FP.SATFINITE.E4M3.F32") for o in ops) == cvts     # the two block scales
        assert ops.count("FCHK") == NVFP4_DIVISIONS and sum(o.startswith("CALL") for o in ops) == NVFP4_DIVISIONS
        assert ops.count("DMUL") == ops.count("F2F.F32.F64.RM") == 2 * 7     # the blocks' thresholds RD(M d)
    elif name.endswith("dequantize"):
        assert ops.count("F2FP.BF16.F32.PACK_AB") == cvts
    if name == "mxfp4_quantize":
        assert not any(o.startswith(("F2FP", "CALL")) for o in ops)      # E2M1 in software, amax in-lane
        # a lane's 16 element pairs: |x| 2^(126 - s) and its three grids, four bf16x2 fmas each (HMUL2 for the
        # product); the grids' minimum and the block amax two lanes at a time
        assert sum(o.startswith(("HFMA2", "HMUL2")) for o in ops) == 4 * 16, ops
        assert sum(o.startswith("VIMNMX") and "U16x2" in o for o in ops) >= 16 + 8, ops   # VIMNMX3: 3 inputs
    if name in ("mxfp4_quantize", "nvfp4_quantize"):
        assert ops.count("PRMT") >= 16                        # every pair regrouped as (e_k, e_k+4)
    if name == "nvfp4_quantize":
        # no per-element float compare or select: the thresholds are integer adds two elements at a time, and each
        # code bit reaches its nibble through an IMAD.HI (3 a pair, 3 a word), none a LEA.HI of the integer pipe
        assert not any(o.startswith("FSEL") for o in ops) and ops.count("IMAD.HI.U32") == 3 * 16 + 3 * 4, ops


# ---------------------------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------------------------
SHAPES = [(1, 32), (3, 96), (64, 4096), (513, 1056), (2, 8, 160), (4096, 8192)]


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "mxfp4", "nvfp4"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_codec_bit_exact_gpu(fmt, shape, rng, poisoned):
    round_trip(rng, shape, fmt)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(5, 48), (1, 16), (7, 4112)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("tensor_scale", [None, 0.01, 3e-38])
def test_nvfp4_odd_blocks_and_given_scales_gpu(shape, tensor_scale, rng, poisoned):
    """An odd number of 16-blocks (the last lane holds one); a given tensor scale, a tiny one (block scales
    saturate at 448, elements at 6)."""
    round_trip(rng, shape, "nvfp4", tensor_scale)


@pytest.mark.gpu
@pytest.mark.simulator_too
def test_nvfp4_elements_on_their_thresholds(rng, poisoned):
    """The kernel's thresholds (``_thermometer``), not just their arithmetic: blocks of 16 whose elements are, for
    each of the seven thresholds of the block's d, the bf16 value just above it and the one at or below it
    (one with a minus sign), next to the block's amax; tensor scales random, 0.01 and 3e-38 (d subnormal)."""
    from asyncpipe.formats.minifloat import E4M3

    for s_t in (np.float32(np.exp(rng.uniform(-20, 20))), np.float32(0.01), np.float32(3e-38)):
        codes = rng.integers(1, 0x7F, 12)                # the block scales aimed at: amax = 6 decode(code) s_t
        amax = bf16_bits(6 * E4M3.table[codes].astype(np.float32) * s_t)
        a = (amax.astype(np.uint32) << 16).view(np.float32)
        code = C.reference("quantize_nvfp4", np.repeat(amax[:, None], 16, axis=1), tensor_scale=s_t)[1][:, 0]
        d = (E4M3.table[code] * s_t).astype(np.float32)
        above = np.ascontiguousarray(e2m1_cuts(d).view(np.uint32).T)  # (blocks, 7): bits of each threshold
        first = np.minimum((above >> 16) + 1, 0x7F80)                  # the smallest bf16 above it
        elems = np.concatenate([first, first - 1], axis=1).astype(np.uint16)          # 14 per block
        elems = np.where((elems.astype(np.uint32) << 16).view(np.float32) <= a[:, None], elems, 0)  # amax stays
        elems[:, 1] |= 0x8000
        bits = np.concatenate([amax[:, None], elems, np.zeros((len(codes), 1), np.uint16)], axis=1)
        p, s, ts = C.quantize_nvfp4(cuda.to_device(bits), float(s_t))
        check_quantize("quantize_nvfp4", bits, (p.copy_to_host(), s.copy_to_host(), ts.copy_to_host()),
                       tensor_scale=s_t)


@pytest.mark.gpu
@pytest.mark.simulator_too
def test_nvfp4_elements_next_to_midpoints(rng, poisoned):
    """x / d next to a rounding midpoint, where each threshold's rounding down and its midpoint's side of T
    matter: for each of the seven, a row of ``near_midpoint_divisors`` that this threshold would get wrong
    rounded to nearest, rounded up, or from the midpoint on T's other side; one block each, d the tensor scale
    (block scale 1.0: amax = 6 d)."""
    d, x = near_midpoint_divisors()
    keep = np.flatnonzero((d > 1e-36) & (d < 1e36))      # 6 d a bf16 close enough for block scale 1.0
    keep = rng.choice(keep, 100_000, replace=False)      # thousands of rows for each of the 14 ways below
    d, x = d[keep], x[keep]
    want, cuts = e2m1_codes_by_division(x, d), e2m1_cuts(d)
    other_side = [2 * t - m for t, m in zip((0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0), K.E2M1_MIDPOINTS)]
    wrongs = (e2m1_cuts(d, f32_rn), (cuts.view(np.uint32) + 1).view(np.float32), e2m1_cuts(d, midpoints=other_side))
    rows = []
    for k in range(7):
        for wrong in wrongs:
            c = cuts.copy()
            c[k] = wrong[k]
            rows.append(rng.choice(np.flatnonzero((e2m1_codes_by_cuts(x, d, cuts=c) != want).any(axis=1))))
    for i in rows:
        block = np.zeros((1, 16), np.float32)
        block[0, 0], block[0, 1:7] = 6 * d[i], x[i]
        bits = bf16_bits(block)
        p, s, ts = C.quantize_nvfp4(cuda.to_device(bits), float(d[i]))
        want = check_quantize("quantize_nvfp4", bits, (p.copy_to_host(), s.copy_to_host(), ts.copy_to_host()),
                              tensor_scale=d[i])
        assert want[1][0, 0] == 0x38, f"d {d[i]!r}: block scale {want[1][0, 0]:#x}, not 1.0 (so d is not s_t)"


# ---------------------------------------------------------------------------------------------
# benchmark(): its timed launches outlive the calls that prepared them
# ---------------------------------------------------------------------------------------------
LAUNCH = importlib.import_module("asyncpipe.host.launch")     # the module (asyncpipe.host.launch is the function)


def _buffer(a):
    """What owns a device array's memory: numba's gpu_data (every view shares it), the simulator's root array."""
    ary = getattr(a, "_ary", None)
    if ary is None:
        return a.gpu_data
    while isinstance(ary.base, np.ndarray):
        ary = ary.base
    return ary


def raw_pointer_launches(monkeypatch):
    """``prepare_launch`` as the GPU's keeps its arguments: raw pointers only, plus ``keep``. Nothing runs; a
    launch whose buffers were freed raises. Returns the launches made."""
    from asyncpipe.spec.launch import PreparedLaunch

    made = []

    def prepare(kernel, grid, block, *args, keep=(), **options):
        buffers = [weakref.ref(_buffer(a)) for a in args if cuda.is_cuda_array(a)]

        def run():
            gc.collect()
            freed = sum(ref() is None for ref in buffers)
            assert not freed, f"{freed} of the {len(buffers)} buffers of a prepared launch were freed"

        made.append(PreparedLaunch(None, run, keep))
        return made[-1]

    monkeypatch.setattr(LAUNCH, "prepare_launch", prepare)
    return made


def test_launch_keeps_its_arrays(monkeypatch):
    """No GPU: ``_launch`` hands its arrays to the prepared launch as ``keep``; stand-ins for device arrays."""
    from types import SimpleNamespace

    from asyncpipe.spec.launch import PreparedLaunch

    class Array:                                        # weakref-able, unlike numpy scalars
        pass

    monkeypatch.setattr(LAUNCH, "prepare_launch",
                        lambda kernel, grid, block, *args, keep=(), **kw: PreparedLaunch(None, lambda: None, keep))
    monkeypatch.setattr(C, "_jit", lambda name, fmt=None: name)
    monkeypatch.setattr(C, "_captured", [])
    arrays = [Array(), Array(), Array()]
    refs = [weakref.ref(a) for a in arrays]
    C._launch("quantize_mxfp4", "mxfp4_quantize", None, 8, SimpleNamespace(sm_count=1), *arrays, np.int32(8))
    del arrays
    gc.collect()
    assert all(r() is not None for r in refs) and len(C._captured) == 1


@pytest.mark.gpu
@pytest.mark.simulator_too
def test_benchmark_launches_keep_their_buffers(monkeypatch):
    """benchmark() times the launches of a call whose outputs it has dropped (and quantize_nvfp4's amax word):
    each must still own them. Launches as the GPU keeps them (raw pointers), timing that collects garbage and
    runs the call once, rows of 4096 elements."""
    import asyncpipe.timing

    def time_once(fn, **kw):
        fn()                                             # the launches check their buffers (gc first)
        return 1.0

    made = raw_pointer_launches(monkeypatch)
    monkeypatch.setattr(asyncpipe.timing, "time_ms", time_once)
    records = C.benchmark(2 * 4096, reps=1)
    assert len(records) == 8 and len(made) == 4 + 9     # the reference outputs' 4 launches, the 8 codecs' 9


@pytest.mark.gpu
def test_all_nan_and_all_zero_gpu(poisoned):
    x = np.zeros((2, 64), np.float32)
    x[1] = np.nan
    bits = bf16_bits(x)
    for fmt in ("e4m3", "e5m2"):
        q, s = C.quantize_mxfp8(cuda.to_device(bits), fmt)
        check_quantize("quantize_mxfp8", bits, (q.copy_to_host(), s.copy_to_host()), fmt=fmt)
    p, s = C.quantize_mxfp4(cuda.to_device(bits))
    check_quantize("quantize_mxfp4", bits, (p.copy_to_host(), s.copy_to_host()))
    p, s, ts = C.quantize_nvfp4(cuda.to_device(bits))
    assert ts.copy_to_host()[0] == 1.0                   # no finite non-zero value: s_t = 1
    check_quantize("quantize_nvfp4", bits, (p.copy_to_host(), s.copy_to_host(), ts.copy_to_host()))


@pytest.mark.gpu
def test_torch_in_torch_out_gpu():
    torch = pytest.importorskip("torch")
    x = torch.randn(64, 256, dtype=torch.bfloat16, device="cuda")
    bits = x.view(torch.int16).cpu().numpy().view(np.uint16)
    for fmt, dtype in (("e4m3", torch.float8_e4m3fn), ("e5m2", torch.float8_e5m2)):
        q, s = C.quantize_mxfp8(x, fmt)
        assert q.dtype == dtype and s.dtype == torch.uint8 and tuple(s.shape) == (64, 8)
        codes, scales = check_quantize("quantize_mxfp8", bits, (q.view(torch.uint8).cpu().numpy(), s.cpu().numpy()),
                                       fmt=fmt)
        y = C.dequantize_mxfp8(q, s)                     # fmt from the float8 dtype
        assert y.dtype == torch.bfloat16
        np.testing.assert_array_equal(y.view(torch.int16).cpu().numpy().view(np.uint16),
                                      C.reference("dequantize_mxfp8", codes, scales, fmt=fmt))
    p, s, ts = C.quantize_nvfp4(x)
    assert p.dtype == torch.uint8 and tuple(p.shape) == (64, 128) and ts.dtype == torch.float32
    packed, scales, s_t = check_quantize("quantize_nvfp4", bits, (p.cpu().numpy(), s.cpu().numpy(), ts.cpu().numpy()))
    y = C.dequantize_nvfp4(p, s, ts)
    np.testing.assert_array_equal(y.view(torch.int16).cpu().numpy().view(np.uint16),
                                  C.reference("dequantize_nvfp4", packed, scales, s_t))


@pytest.mark.gpu
def test_benchmark_records_gpu():
    records = C.benchmark(1 << 24, reps=3)
    assert {r["kernel"] for r in records} >= {"mxfp8_e4m3_quantize", "mxfp4_quantize", "nvfp4_quantize",
                                              "mxfp8_e4m3_dequantize", "mxfp4_dequantize", "nvfp4_dequantize"}
    for r in records:
        assert r["gbps"] > 0 and r["vs"]["copy"] > 0 and r["format"] in r["kernel"]
        print(r)
