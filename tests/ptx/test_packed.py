"""fma.rn.bf16x2, min.u16x2 and max.u16x2: SASS offline (one instruction for two lanes), the simulator's exact bf16
fma on hand-worked values (ties, subnormals, overflow, zeros' signs, infinities), then on the GPU (and, in the
simulator run, on the simulator) bit for bit against those bodies on random and special lanes."""

import numpy as np
import pytest
from numba import cuda
from numba.cuda import types

from asyncpipe import ptx
from asyncpipe.bf16 import bf16_bits
from asyncpipe.sim.prim import packed as P
from tests.sass import assert_sass

u32 = types.uint32[::1]
POISON = 0xDEADBEEF


def bits(*values) -> list[int]:
    return [int(b) for b in bf16_bits(np.array(values, np.float32))]


def fma_kernel(a, b, c, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = ptx.fma_rn_bf16x2(a[i], b[i], c[i])


def min_kernel(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = ptx.min_u16x2(a[i], b[i])


def max_kernel(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = ptx.max_u16x2(a[i], b[i])


KERNELS = [(fma_kernel, "fma_rn_bf16x2", 3), (min_kernel, "min_u16x2", 2), (max_kernel, "max_u16x2", 2)]


@pytest.mark.sass
@pytest.mark.parametrize("kernel, name, n", KERNELS, ids=[k[1] for k in KERNELS])
def test_packed_sass(kernel, name, n):
    """One instruction of the registry's form for both lanes (ptxas may put the fma on either of its pipes:
    HFMA2 or HFMA2.MMA)."""
    cubin = assert_sass(kernel, (u32,) * (n + 1), has=ptx.REGISTRY[name].sass)
    assert sum(op.startswith(ptx.REGISTRY[name].sass[0]) for op in cubin.opcodes) == 1, cubin.sass


# ---------------------------------------------------------------------------------------------
# The simulator's fma, by hand
# ---------------------------------------------------------------------------------------------
INF, NAN, NEG_ZERO = 0x7F80, 0x7FFF, 0x8000


@pytest.mark.parametrize("a, b, c, want", [
    (*bits(1.5, 2.0, 128.0), bits(131.0)[0]),               # exact
    (*bits(0.25, 2.0, 128.0), bits(128.0)[0]),              # 128.5: a tie, to the even 128
    (*bits(0.75, 2.0, 128.0), bits(130.0)[0]),              # 129.5: a tie, to the even 130
    (*bits(1.0 + 2**-7, 1.0 + 2**-7, 0.0), bits(1.0 + 2**-6)[0]),   # 1 + 2^-6 + 2^-14: rounded once
    (1, *bits(2.0**127, -0.0), bits(2.0**-6)[0]),          # a subnormal operand, kept: 2^-133 2^127
    (1, *bits(0.5, 0.0), 0),                                # 2^-134: a tie between 0 and 2^-133, to 0
    (3, *bits(0.5, 0.0), 2),                                # 3 2^-134: a tie, to the even 2 2^-133
    (*bits(3e38, 2.0, 0.0), INF),                           # overflow
    (*bits(-0.0, 1.0, -0.0), NEG_ZERO),                     # -0 + -0
    (*bits(-0.0, 1.0, 0.0), 0),                             # -0 + +0
    (*bits(1.0, 1.0, -1.0), 0),                             # exact cancellation: +0
    (INF, *bits(0.0, 1.0), NAN),                            # inf * 0
    (INF, *bits(1.0), INF | NEG_ZERO, NAN),                 # inf - inf
    (INF, *bits(-2.0, 5.0), INF | NEG_ZERO),
    (*bits(2.0, 3.0), INF, INF),
    (NAN, *bits(1.0, 1.0), NAN),
])
def test_simulator_fma_by_hand(a, b, c, want):
    got = P.fma_rn_bf16x2(a | (b << 16), b | (a << 16), c | (c << 16))     # both lanes, operands swapped in one
    assert (int(got) & 0xFFFF, int(got) >> 16) == (want, want)


def test_simulator_min_max_by_hand():
    assert P.min_u16x2(0x8001_0002, 0x0003_FFFF) == 0x0003_0002
    assert P.max_u16x2(0x8001_0002, 0x0003_FFFF) == 0x8001_FFFF


# ---------------------------------------------------------------------------------------------
# GPU (and the simulator run): bit for bit against the bodies above
# ---------------------------------------------------------------------------------------------
SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 0.5, 128.0, 130.0, 2.0**-133, -(2.0**-133), 2.0**-126, 3e38, -3e38,
                    2.0**127, np.inf, -np.inf, 1 + 2**-7, 0.75, 6.0], np.float32)


def words(rng, n):
    """``n`` words of random bf16 lanes: normal values across a wide range, bf16 subnormals, specials."""
    x = rng.standard_normal(2 * n).astype(np.float32) * np.exp2(rng.integers(-20, 20, 2 * n)).astype(np.float32)
    x[::7] *= np.float32(2.0**-120)
    x[rng.choice(2 * n, SPECIAL.size, replace=False)] = SPECIAL
    return bf16_bits(x).view(np.uint32)


def run(kernel, *args):
    out = cuda.to_device(np.full(args[0].size, POISON, np.uint32))
    cuda.jit(kernel)[(out.size + 127) // 128, 128](*[cuda.to_device(a) for a in args], out)
    return out.copy_to_host()


def expected(body, *args):
    return np.array([body(*w) for w in zip(*args)], np.uint32)


def is_nan(w):
    lanes = np.stack([w & 0xFFFF, w >> 16])
    return ((lanes & 0x7F80) == 0x7F80) & ((lanes & 0x7F) != 0)


@pytest.mark.gpu
def test_fma_matches_exact_rounding_gpu(rng):
    """Every lane bit-exact, but a NaN, whose bits need only be a NaN (the canonical one is the simulator's)."""
    n = 4096
    a, b, c = words(rng, n), words(rng, n), words(rng, n)
    c[: n // 2] = bf16_bits(rng.standard_normal(n).astype(np.float32) * np.float32(100)).view(np.uint32)  # near ab
    got, want = run(fma_kernel, a, b, c), expected(P.fma_rn_bf16x2, a, b, c)
    nan = is_nan(want)
    assert (is_nan(got) == nan).all()
    lanes = lambda w: np.stack([w & 0xFFFF, w >> 16])  # noqa: E731
    np.testing.assert_array_equal(lanes(got)[~nan], lanes(want)[~nan])


@pytest.mark.gpu
@pytest.mark.parametrize("kernel, body", [(min_kernel, P.min_u16x2), (max_kernel, P.max_u16x2)],
                         ids=["min", "max"])
def test_min_max_gpu(kernel, body, rng):
    a, b = (rng.integers(0, 2**32, 2048, dtype=np.uint64).astype(np.uint32) for _ in range(2))
    np.testing.assert_array_equal(run(kernel, a, b), expected(body, a, b))
