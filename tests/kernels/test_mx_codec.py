"""The block-scaled format codecs (MXFP8 E4M3/E5M2, MXFP4, NVFP4): every input rule's message (no GPU), the
kernels' SASS offline, and on the GPU bit for bit against ``asyncpipe.formats`` (through
``mx_codec.reference``) on fresh random data, into poisoned outputs. The simulator run: tests/sim/test_mx_codec.py."""

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
# Offline SASS
# ---------------------------------------------------------------------------------------------
KERNELS = [("mxfp8_quantize", "e4m3"), ("mxfp8_quantize", "e5m2"), ("mxfp4_quantize", None),
           ("nvfp4_quantize", None), ("finite_amax", None), ("mxfp8_dequantize", "e4m3"),
           ("mxfp8_dequantize", "e5m2"), ("mxfp4_dequantize", None), ("nvfp4_dequantize", None)]
# per lane and step: (16-byte loads, 16-byte stores, F2FP conversions: FP8 pairs or bf16 pairs)
WIDTHS = {"mxfp8_quantize": (2, 1, 8), "mxfp4_quantize": (4, 1, 0), "nvfp4_quantize": (4, 1, 2),
          "mxfp8_dequantize": (2, 4, 16), "mxfp4_dequantize": (1, 4, 16), "nvfp4_dequantize": (1, 4, 16)}
# NVFP4's quantizer divides per element (div.rn.f32 keeps its FCHK slow path, a CALL.REL each); the amax pass's
# grid-stride loop gets a trip-count division from LLVM's unroller (once, before the loop)
CALLS_OK = ("nvfp4_quantize", "finite_amax")


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
    assert ops.count("LDG.E.128") == loads and ops.count("STG.E.128") == stores, ops
    if name == "mxfp8_quantize":
        f2fp = f"F2FP.SATFINITE.{fmt.upper()}.F32"
        assert sum(o.startswith(f2fp) for o in ops) == cvts and ops.count("SHFL.BFLY") == 1
    elif name == "nvfp4_quantize":
        assert sum(o.startswith("F2FP.SATFINITE.E4M3.F32") for o in ops) == cvts     # the two block scales
    elif name.endswith("dequantize"):
        assert ops.count("F2FP.BF16.F32.PACK_AB") == cvts
    if name == "mxfp4_quantize":
        assert not any(o.startswith(("F2FP", "SHFL", "CALL")) for o in ops)      # E2M1 in software, amax in-lane


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
