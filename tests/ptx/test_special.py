"""ex2.approx.ftz.f32: SASS offline (one MUFU.EX2, none of the non-ftz form's fix-up), then on the GPU (and, in
the simulator run, on the simulator) against float64's 2**x on random and special values."""

import numpy as np
import pytest
from numba import cuda
from numba.cuda import types

from asyncpipe import ptx
from tests.sass import assert_sass

f32 = types.float32[::1]
RTOL = 2.0**-21             # about 4 float32 ulp: the bound this test holds the hardware to
POISON = np.float32(-12345.0)
# subnormal inputs count as 0 (2**0 = 1); 2**-127 and 2**-149.5 are subnormal results (flushed to +0)
SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 0.5, 1e-40, -1e-40, -126.0, -127.0, -149.5, -200.0, 127.0, 127.99, 128.0,
                    1000.0, np.inf, -np.inf, np.nan], np.float32)


def ex2_kernel(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = ptx.ex2_approx_ftz_f32(x[i])


@pytest.mark.sass
def test_ex2_sass():
    cubin = assert_sass(ex2_kernel, (f32, f32), has=ptx.REGISTRY["ex2_approx_ftz_f32"].sass)
    assert cubin.count("MUFU.EX2") == 1, cubin.sass
    # math.exp2's ex2.approx.f32 (no .ftz) gets a range test and two multiplies around the MUFU
    assert cubin.count("FMUL") == 0 and cubin.count("FSETP") == 0, cubin.sass


def expected(x: np.ndarray) -> np.ndarray:
    x = np.where(np.abs(x) < np.float32(2.0**-126), np.float32(0), x)     # .ftz on the input
    with np.errstate(over="ignore"):
        want = np.exp2(x.astype(np.float64))
    want = np.where(want >= 2.0**128, np.inf, want)                        # beyond float32: infinity
    return np.where(want < 2.0**-126, 0.0, want)                           # .ftz on the result


@pytest.mark.gpu
def test_ex2_against_float64_gpu(rng):
    x = np.concatenate([SPECIAL, rng.uniform(-125, 127, 4000).astype(np.float32),
                        rng.standard_normal(1000).astype(np.float32)])
    out = cuda.to_device(np.full(x.size, POISON, np.float32))
    cuda.jit(ex2_kernel)[(x.size + 127) // 128, 128](cuda.to_device(x), out)
    got = out.copy_to_host().astype(np.float64)
    want = expected(x)
    assert np.isnan(got[np.isnan(x)]).all()
    ok = ~np.isnan(x)
    np.testing.assert_array_equal(np.isinf(got[ok]), np.isinf(want[ok]))
    np.testing.assert_array_equal(got[ok] == 0, want[ok] == 0)              # flushed exactly where float64 says
    finite = ok & np.isfinite(want) & (want > 0)
    rel = np.abs(got[finite] - want[finite]) / want[finite]
    assert rel.max() <= RTOL, f"max relative error {rel.max():.3g} (2**{np.log2(rel.max()):.2f}) > 2**-21"
    assert got[x == 0].tolist() == [1.0, 1.0] and not np.signbit(got[x == -np.inf]).any()
