"""TensorMap: every validation rule offline (made-up shapes, strides and pointers), then real maps on a GPU."""

import numpy as np
import pytest

from asyncpipe.constants import GLOBAL_STRIDE_MAX, TMA_BOX_BYTES_MAX
from asyncpipe.errors import AsyncpipeError, UnsupportedDeviceError
from asyncpipe.host.tensor_map import TensorMap, _encode, describe_array, validate_tiled
from tests.conftest import gpu_cc

ADDR = 0x7F00_0000_0000          # a made-up, 256-byte aligned device address


class FakeDeviceArray:
    """Exposes only a ``__cuda_array_interface__``: nothing is ever dereferenced offline."""

    def __init__(self, shape, typestr="<i4", address=ADDR, strides=None, mask=None):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape), "typestr": typestr, "data": (address, False), "strides": strides,
            "version": 3, "stream": None, "mask": mask,
        }


def layout(**over):
    """A valid 2-D int32 map (64 x 128, box 16 x 32) with some fields replaced."""
    args = dict(address=ADDR, shape=(64, 128), strides=(512, 4), dtype="int32", box=(16, 32))
    args.update(over)
    return validate_tiled(**args)


def refused(match_rule, match_value, fn, *args, **kwargs):
    """Call ``fn``, expect an AsyncpipeError whose message names the rule and the value."""
    with pytest.raises(AsyncpipeError) as info:
        fn(*args, **kwargs)
    msg = str(info.value)
    assert msg.startswith("TensorMap.tiled: "), msg
    assert match_rule in msg, f"rule {match_rule!r} not in: {msg}"
    assert f"got {match_value}" in msg or (", got " in msg and match_value in msg.split(", got ", 1)[1]), \
        f"value {match_value!r} not in: {msg}"
    return info.value


# ---------------------------------------------------------------------------------------------
# Valid maps: order and sizes
# ---------------------------------------------------------------------------------------------
def test_layout_is_reversed_into_cuda_order():
    lay = layout(shape=(8, 64, 128), strides=(64 * 512, 512, 4), box=(2, 16, 32))
    assert lay.rank == 3
    assert lay.cuda_dims == [128, 64, 8]
    assert lay.cuda_strides == [512, 64 * 512]      # rank - 1 strides, innermost-but-one first
    assert lay.cuda_box == [32, 16, 2]
    assert lay.cuda_element_strides == [1, 1, 1]
    assert lay.box_bytes == 2 * 16 * 32 * 4


@pytest.mark.parametrize("swizzle, box, smem", [
    ("none", (16, 8), 512), ("32B", (16, 4), 496), ("64B", (16, 8), 992), ("128B", (16, 8), 1952),
    ("128B", (16, 16), 1984), ("128B", (16, 32), 2048), ("128B", (2, 3, 8), 5 * 128 + 32)])
def test_smem_bytes_pads_rows_narrower_than_the_swizzle_span(swizzle, box, smem):
    """Measured on the H200 (scripts/experiments/tma_swizzle_rows.py, 2026-12-02): a swizzled box whose rows are
    narrower than the span puts each row at the start of a span of its own (the 'shared bytes touched' figures
    above), while the mbarrier counts the dense bytes (box_bytes); without a swizzle, or with rows of the span's
    width, the box is dense."""
    shape, strides = ((64, 64), (256, 4)) if len(box) == 2 else ((4, 64, 64), (64 * 256, 256, 4))
    lay = layout(shape=shape, strides=strides, box=box, swizzle=swizzle)
    assert lay.smem_bytes == smem
    assert lay.box_bytes == np.prod(box) * 4


def test_box_bytes_with_element_strides():
    # ceil(16 / 3) = 6 rows; the innermost element stride is ignored without interleave
    lay = layout(box=(16, 32), element_strides=(3, 2))
    assert lay.box_elements == (6, 32)
    assert lay.box_bytes == 6 * 32 * 4


def test_describe_array_c_contiguous():
    desc = describe_array(FakeDeviceArray((4, 6, 8), "<f4"))
    assert desc.address == ADDR and desc.shape == (4, 6, 8) and desc.dtype == "float32"
    assert desc.strides == (6 * 8 * 4, 8 * 4, 4)


def test_describe_array_strided_view():
    desc = describe_array(FakeDeviceArray((40, 52), "<f4", address=ADDR + 2624, strides=(320, 4)))
    assert desc.strides == (320, 4) and desc.address == ADDR + 2624
    lay = validate_tiled(desc.address, desc.shape, desc.strides, desc.dtype, (16, 32))
    assert lay.cuda_strides == [320]


@pytest.mark.parametrize("shape, strides", [((1, 6), None), ((1, 6), (24, 4)), ((1, 6), (4096, 4)),
                                            ((1, 1, 6), None)])
def test_describe_array_extent_one_dimensions_take_a_legal_stride(shape, strides):
    """A dimension of extent 1 is never stepped along: whatever stride the interface reports (a one-row view of a
    pitched array counts as contiguous: cols x 4 = 24 bytes), it gets the next dimension's bytes rounded up to 32,
    and the layout is accepted."""
    desc = describe_array(FakeDeviceArray(shape, "<f4", strides=strides))
    assert desc.strides[-2] == 32 and desc.strides[-1] == 4
    validate_tiled(desc.address, desc.shape, desc.strides, desc.dtype, (1,) * (len(shape) - 1) + (4,))


def test_bfloat16_by_explicit_dtype():
    assert describe_array(FakeDeviceArray((16, 64), "<u2"), dtype="bfloat16").dtype == "bfloat16"
    assert describe_array(FakeDeviceArray((16, 64), "<u2"), dtype=np.float16).dtype == "float16"


def test_valid_options_accepted():
    lay = layout(shape=(64, 128), strides=(256, 2), dtype="bfloat16", box=(8, 64), swizzle="128B",
                 l2_promotion="256B", oob_fill="nan")
    assert lay.box_bytes == 8 * 64 * 2


# ---------------------------------------------------------------------------------------------
# One test per rule
# ---------------------------------------------------------------------------------------------
def test_not_a_device_array():
    refused("must live in device memory", "ndarray", describe_array, np.zeros((16, 32), np.int32))


def test_masked_array():
    refused("masked arrays", "a mask", describe_array, FakeDeviceArray((16, 32), mask=object()))


def test_unsupported_dtype_from_typestr():
    refused("dtype must be one of", "int8", describe_array, FakeDeviceArray((16, 32), "|i1"))


def test_unsupported_dtype_name():
    refused("dtype must be one of", "'complex64'", layout, dtype="complex64")


@pytest.mark.parametrize("name", ["16u4_align8b", "16u4_align16b", "16u6_align16b"])
def test_packed_dtypes_not_supported(name):
    rule = "asyncpipe does not support the packed 4/6-bit dtypes"
    refused(rule, repr(name), layout, dtype=name, shape=(64, 256), strides=(128, 1), box=(16, 128))
    refused(rule, repr(name), describe_array, FakeDeviceArray((16, 32), "|u1"), dtype=name)


@pytest.mark.parametrize("name", ["float32_ftz", "tfloat32", "tfloat32_ftz"])
def test_four_byte_float_modes(name):
    """float32's memory under another CUtensorMapDataType: float32's rules, NaN fill included."""
    assert describe_array(FakeDeviceArray((16, 32), "<f4"), dtype=name).dtype == name
    lay = layout(dtype=name, oob_fill="nan", swizzle="128B")
    assert lay.itemsize == 4 and lay.box_bytes == 16 * 32 * 4
    refused(f"dtype {name!r} must have the array's element size, 2 bytes", f"{name} of 4 bytes",
            describe_array, FakeDeviceArray((16, 32), "<u2"), dtype=name)


def test_big_endian():
    refused("native (little-endian) byte order", ">i4", describe_array, FakeDeviceArray((16, 32), ">i4"))


def test_explicit_dtype_of_another_size():
    refused("must have the array's element size, 2 bytes", "float32 of 4 bytes",
            describe_array, FakeDeviceArray((16, 32), "<u2"), dtype="float32")


@pytest.mark.parametrize("option,value", [("swizzle", "256B"), ("interleave", "8B"), ("l2_promotion", "512B"),
                                          ("oob_fill", "inf")])
def test_unknown_option(option, value):
    refused(f"{option} must be one of", repr(value), layout, **{option: value})


@pytest.mark.parametrize("swizzle", ["128B_atom_32B", "128B_atom_32B_flip_8B", "128B_atom_64B"])
def test_128b_atom_swizzles_refused_on_sm90(swizzle):
    refused("the 128B_ATOM swizzles are refused on sm_90 (by the H200's driver): swizzle must be one of 'none', "
            "'32B', '64B', '128B'", repr(swizzle), layout, swizzle=swizzle, box=(16, 32), dtype="int32")
    assert layout(swizzle="128B").swizzle == "128B"


def test_nan_fill_needs_float():
    refused("oob_fill='nan' needs a floating-point dtype", "int32", layout, oob_fill="nan")


def test_rank_zero():
    refused("the tensor must have 1..5 dimensions", "rank 0", layout, shape=(), strides=(), box=())


def test_rank_six():
    refused("the tensor must have 1..5 dimensions", "rank 6",
            layout, shape=(2,) * 5 + (32,), strides=(128,) * 5 + (4,), box=(1,) * 5 + (4,))


def test_interleave_needs_rank_three():
    refused("an interleaved tensor must have at least 3 dimensions", "rank 2", layout, interleave="16B")


def test_empty_dimension():
    refused("every dimension must have 1..2**32 elements", "shape[0] = 0", layout, shape=(0, 128))


def test_global_address_alignment():
    refused("the global address must be 16-byte aligned", hex(ADDR + 8), layout, address=ADDR + 8)


def test_global_address_alignment_interleave_32b():
    refused("the global address must be 32-byte aligned", hex(ADDR + 16),
            layout, address=ADDR + 16, shape=(4, 64, 128), strides=(64 * 512, 512, 4), box=(1, 16, 8),
            interleave="32B", swizzle="32B")


def test_innermost_not_contiguous():
    # every other int32 of a wider array: the innermost byte stride is 8, not 4
    arr = FakeDeviceArray((64, 64), "<i4", strides=(512, 8))
    desc = describe_array(arr)
    refused("the innermost dimension must be contiguous", "innermost stride 8 bytes",
            validate_tiled, desc.address, desc.shape, desc.strides, desc.dtype, (16, 32))


def test_outer_stride_not_multiple_of_16():
    # 100 x 7 int32, C-contiguous: the row stride is 28 bytes
    desc = describe_array(FakeDeviceArray((100, 7), "<i4"))
    refused("every byte stride but the innermost must be a non-negative multiple of 16 bytes", "strides[0] = 28 bytes",
            validate_tiled, desc.address, desc.shape, desc.strides, desc.dtype, (16, 4))
    assert layout(shape=(100, 8), strides=(32, 4), box=(16, 4)).strides == (32, 4)     # 8 int32: 32 bytes


def test_stride_zero_accepted_negative_refused():
    # the driver takes a zero stride in any outer dimension (every index along it reads the same rows)
    assert layout(shape=(4, 64, 128), strides=(0, 512, 4), box=(2, 16, 32)).cuda_strides == [512, 0]
    assert layout(shape=(4, 64, 128), strides=(32768, 0, 4), box=(2, 16, 32)).cuda_strides == [0, 32768]
    refused("every byte stride but the innermost must be a non-negative multiple of 16 bytes",
            "strides[0] = -512 bytes", layout, strides=(-512, 4))


def test_stride_too_large():
    refused("every byte stride must be below 2**40", f"strides[0] = {GLOBAL_STRIDE_MAX} bytes",
            layout, shape=(2, 128), strides=(GLOBAL_STRIDE_MAX, 4), box=(1, 32))


def test_box_rank_mismatch():
    refused("box must have one entry per dimension (rank 2)", "(16, 32, 1)", layout, box=(16, 32, 1))


@pytest.mark.parametrize("bad", [0, 257])
def test_box_size_range(bad):
    refused("every box size must be 1..256 elements", f"box[0] = {bad}",
            layout, shape=(512, 128), box=(bad, 32))


def test_box_larger_than_tensor_is_allowed():
    # a box may hang over the tensor on every side: TMA fills what is outside (small tensors, edges)
    assert layout(shape=(8, 4)).box == (16, 32)


def interleaved(**over):
    """A valid interleaved 3-D int32 map (4 x 64 x 128, box 1 x 16 x 8) with some fields replaced."""
    args = dict(shape=(4, 64, 128), strides=(64 * 512, 512, 4), box=(1, 16, 8), interleave="16B")
    args.update(over)
    return layout(**args)


def test_inner_box_bytes_multiple_of_16():
    refused("the box's innermost row must be a multiple of 16 bytes", "6 * 4 = 24 bytes", layout, box=(16, 6))
    assert layout(box=(16, 4)).box == (16, 4)


@pytest.mark.parametrize("il", ["16B", "32B"])
def test_inner_box_bytes_multiple_of_16_with_interleave(il):
    # documented for interleave "none" only; the H200's driver refuses it with interleave too
    refused("the box's innermost row must be a multiple of 16 bytes", "6 * 4 = 24 bytes",
            interleaved, box=(1, 16, 6), interleave=il)
    assert interleaved(box=(1, 16, 8), interleave=il).box == (1, 16, 8)


@pytest.mark.parametrize("swizzle,span", [("32B", 32), ("64B", 64), ("128B", 128)])
def test_inner_box_bytes_within_swizzle_span(swizzle, span):
    cols = span // 4 * 2
    refused(f"with swizzle {swizzle!r} and no interleave the box's innermost row must be at most {span} bytes",
            f"{cols} * 4 = {cols * 4} bytes", layout, box=(8, cols), swizzle=swizzle)
    assert layout(box=(8, span // 4), swizzle=swizzle).box == (8, span // 4)
    # with interleave the span does not bound the innermost row
    assert interleaved(box=(1, 16, cols), swizzle=swizzle).box == (1, 16, cols)


@pytest.mark.parametrize("swizzle", ["none", "32B", "64B", "128B"])
def test_interleave_32b_takes_every_swizzle(swizzle):
    # the documentation asks for swizzle "32B"; the H200's driver accepted all four (469 layouts with another one)
    assert interleaved(interleave="32B", swizzle=swizzle).swizzle == swizzle


def test_box_bytes_limit():
    """The box's bytes as the driver counts them: 228 KB at most (233,472 bytes accepted, 235,520 refused)."""
    big = dict(shape=(256, 256, 256), strides=(65536, 256, 1), dtype="uint8")
    assert TMA_BOX_BYTES_MAX == 233_472
    assert layout(box=(228, 4, 256), **big).box == (228, 4, 256)                   # 228 * 4 * 256 = 233,472 bytes
    refused("the box must fit in 228 KB, counted as the driver does: the product of box[i] // element_strides[i] "
            "times the element size at most 233472 bytes", "(230 // 1) * (4 // 1) * (256 // 1) * 1 = 235520 bytes",
            layout, box=(230, 4, 256), **big)
    # int32: 4 bytes an element
    refused("the box must fit in 228 KB", "(2 // 1) * (256 // 1) * (116 // 1) * 4 = 237568 bytes",
            layout, shape=(4, 512, 512), strides=(512 * 2048, 2048, 4), dtype="int32", box=(2, 256, 116))
    assert layout(shape=(4, 512, 512), strides=(512 * 2048, 2048, 4), dtype="int32", box=(2, 256, 112)).box_bytes \
        == 2 * 256 * 112 * 4 == 229_376


def test_box_bytes_counted_with_floor_quotients():
    """Element strides shrink the count by floor(box / stride), the innermost one too (which the TMA ignores
    without interleave); a box dimension below its element stride counts 0, and the driver takes any box then."""
    big = dict(shape=(256, 256, 256), strides=(65536, 256, 1), dtype="uint8")
    lay = layout(box=(230, 4, 256), element_strides=(2, 1, 1), **big)             # 115 * 4 * 256 = 117,760
    assert lay.box_elements == (115, 4, 256)
    assert layout(box=(230, 4, 256), element_strides=(1, 1, 2), **big).box_elements == (230, 4, 256)  # ignored
    refused("the box must fit in 228 KB", "(230 // 2) * (8 // 1) * (256 // 1) * 1 = 235520 bytes",
            layout, box=(230, 8, 256), element_strides=(2, 1, 1), **big)
    lay = layout(box=(229, 8, 256), element_strides=(2, 1, 1), **big)              # counted 114 * 8 * 256 = 233,472
    assert lay.box_bytes == 115 * 8 * 256 > TMA_BOX_BYTES_MAX                      # the TMA delivers ceil: 115 rows
    assert layout(box=(1, 230, 4, 256), element_strides=(2, 1, 1, 1), shape=(2,) + big["shape"],
                  strides=(1 << 24,) + big["strides"], dtype="uint8").box_bytes == 230 * 4 * 256


@pytest.mark.parametrize("bad", [0, 9])
def test_element_stride_range(bad):
    refused("every element stride must be 1..8", f"element_strides[0] = {bad}", layout, element_strides=(bad, 1))


def test_element_strides_rank_mismatch():
    refused("element_strides must have one entry per dimension (rank 2)", "(1,)", layout, element_strides=(1,))


def test_simulator_does_not_move_four_byte_float_modes():
    """The host accepts them (the driver does); the simulator refuses to move their bits (asyncpipe.sim.tensor_map)."""
    from asyncpipe.sim.tensor_map import numpy_dtype, simulated_words

    rule = ("the simulator does not move float32_ftz, tfloat32, tfloat32_ftz tensor maps (whether the TMA flushes "
            "or rounds their bits is not measured): use dtype='float32' here")
    for name in ("float32_ftz", "tfloat32", "tfloat32_ftz"):
        for fn, arg in ((numpy_dtype, name), (simulated_words, layout(dtype=name))):
            with pytest.raises(AsyncpipeError) as info:
                fn(arg)
            assert str(info.value) == f"TensorMap: {rule} [asyncpipe.sim], got {name!r}"
    assert numpy_dtype("float32") == np.float32 and numpy_dtype("bfloat16") == np.uint16


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.simulator_too
def test_four_byte_float_modes_encode_on_gpu_not_in_simulator():
    from numba import cuda

    from asyncpipe.backend import simulating

    a = cuda.to_device(np.zeros((64, 128), np.float32))
    for name in ("float32_ftz", "tfloat32", "tfloat32_ftz"):
        if simulating():
            with pytest.raises(AsyncpipeError, match="the simulator does not move float32_ftz"):
                TensorMap.tiled(a, (16, 32), dtype=name)
        else:
            tmap = TensorMap.tiled(a, (16, 32), dtype=name, oob_fill="nan")
            assert tmap.dtype == name and tmap.words().any()


def test_message_format():
    err = refused("every box size", "box[1] = 300", layout, box=(16, 300))
    assert err.api == "TensorMap.tiled" and err.source == "cuTensorMapEncodeTiled"
    assert str(err) == (f"TensorMap.tiled: {err.rule} [cuTensorMapEncodeTiled], got {err.got}")


@pytest.mark.parametrize("rank", range(1, 6))
def test_encode_arguments_marshal(rank):
    """cuda.bindings takes the arrays as cuuint64_t / cuuint32_t lists: a plain int list is a TypeError
    raised before the driver is reached, so this catches it even with no driver."""
    shape = (3,) * (rank - 1) + (64,)
    strides = tuple(256 * 3 ** (rank - 2 - i) for i in range(rank - 1)) + (4,)
    lay = layout(shape=shape, strides=strides, box=(2,) * (rank - 1) + (32,), swizzle="128B",
                 l2_promotion="256B", element_strides=(1,) * rank)
    try:
        _encode(lay)
    except TypeError as exc:
        pytest.fail(f"the driver call's arguments did not convert: {exc}")
    except Exception:   # no driver here, or the driver's answer: either way the arguments went through
        pass


# ---------------------------------------------------------------------------------------------
# No GPU: validation first, then a clear refusal
# ---------------------------------------------------------------------------------------------
@pytest.mark.skipif(gpu_cc() is not None, reason="a GPU is visible: TensorMap.tiled would succeed")
def test_no_gpu_refused_after_validation():
    with pytest.raises(AsyncpipeError, match="multiple of 16 bytes"):      # validation runs first
        TensorMap.tiled(FakeDeviceArray((64, 128)), (16, 6))
    with pytest.raises(UnsupportedDeviceError) as info:
        TensorMap.tiled(FakeDeviceArray((64, 128)), (16, 32))
    assert "TensorMap.tiled" in str(info.value) and "got none" in str(info.value)


# ---------------------------------------------------------------------------------------------
# GPU: real maps
# ---------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.hopper
def test_tiled_on_gpu():
    from numba import cuda

    a = cuda.to_device(np.zeros((64, 128), np.float32))
    tmap = TensorMap.tiled(a, (16, 32), swizzle="128B", oob_fill="nan")
    assert tmap.shape == (64, 128) and tmap.box == (16, 32) and tmap.dtype == "float32"
    assert tmap.rank == 2 and tmap.box_bytes == 16 * 32 * 4 and tmap.array is a
    words = tmap.words()
    assert words.dtype == np.uint64 and words.shape == (16,) and words.any()
    cai = tmap.__cuda_array_interface__
    assert cai["shape"] == (16,) and np.dtype(cai["typestr"]) == np.uint64
    assert cai["data"][0] % 64 == 0                                  # a CUtensorMap is 64-byte aligned
    assert "box=(16, 32)" in repr(tmap) and "swizzle='128B'" in repr(tmap)

    @cuda.jit
    def read_words(tm, out):                                          # the map arrives as uint64[16]
        i = cuda.threadIdx.x
        out[i] = tm[i]

    out = cuda.to_device(np.zeros(16, np.uint64))
    read_words[1, 16](tmap, out)
    np.testing.assert_array_equal(out.copy_to_host(), words)


@pytest.mark.gpu
@pytest.mark.hopper
def test_tiled_from_cupy_and_torch():
    seen = 0
    try:
        import cupy

        tmap = TensorMap.tiled(cupy.zeros((32, 64), cupy.int32), (16, 32))
        assert tmap.dtype == "int32" and tmap.words().any()
        seen += 1
    except ImportError:
        pass
    try:
        import torch

        if torch.cuda.is_available():
            t = torch.zeros((32, 64), dtype=torch.float16, device="cuda")
            tmap = TensorMap.tiled(t, (16, 32))
            assert tmap.dtype == "float16" and tmap.box_bytes == 16 * 32 * 2 and tmap.words().any()
            seen += 1
    except ImportError:
        pass
    if not seen:
        pytest.skip("neither CuPy nor PyTorch is installed")
