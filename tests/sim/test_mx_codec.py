"""The block-scaled format codecs on the simulator, through their unchanged host functions at tiny shapes: for
each format the quantizer and the dequantizer (of its own codes and of random codes, every byte value) bit for bit
against ``asyncpipe.formats`` (``mx_codec.reference``), into poisoned outputs; the data has zero blocks, bf16
subnormals, heavy tails, NaN and infinities (tests/kernels/test_mx_codec.py's ``values``)."""

import numpy as np
import pytest

import asyncpipe.host
from asyncpipe.sim.device import sim_device_info
from tests.kernels.test_mx_codec import poisoned, round_trip  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.sim,
              pytest.mark.filterwarnings("ignore::RuntimeWarning")]   # numpy scalars: inf products, x / 0


@pytest.fixture(autouse=True)
def simulated_device(monkeypatch):
    monkeypatch.setattr(asyncpipe.host, "device_info", lambda api="device_info": sim_device_info())


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "mxfp4", "nvfp4"])
def test_codec_bit_exact(fmt, rng, poisoned):  # noqa: F811
    """3 x 96: three rows of three 32-blocks (NaN and inf in them), 9 MXFP8 lanes of 16 (a partial warp: the
    shuffle's lanes past the end take part and store nothing), 18 NVFP4 blocks."""
    round_trip(rng, (3, 96), fmt)


@pytest.mark.parametrize("tensor_scale", [None, 3e-38])
def test_nvfp4_odd_block_count(tensor_scale, rng, poisoned):  # noqa: F811
    """5 x 48: 15 blocks of 16, the last lane holds one; a tiny given tensor scale saturates the block scales."""
    round_trip(rng, (5, 48), "nvfp4", tensor_scale)


def test_multi_dimensional_and_grid_stride(rng, poisoned, monkeypatch):  # noqa: F811
    """A 3-D input, and a grid capped at one block so every thread takes several grid-stride steps."""
    from asyncpipe.kernels import mx_codec as C

    monkeypatch.setattr(C, "_grid", lambda lanes, info: 1)
    for fmt in ("e4m3", "mxfp4", "nvfp4"):
        round_trip(rng, (2, 9, 256), fmt, specials=False)
