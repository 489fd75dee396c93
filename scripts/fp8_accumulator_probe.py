"""How the H200's FP8 wgmma accumulates, measured through fp8_gemm (one 128-deep k-block, unit scales).

Each experiment is a 128 x 128 x 128 GEMM whose B is all ones, so D[r, :] = the sum of A's row r as the
tensor core forms it (the bf16 output is exact for these sums). Row r cancels a large X = 448 at k = 0
against -X at k = j (j = r + 1, up to 127) among small values s; what survives of the s says which of
them were swallowed: those aligned against X (inside its group of products, or added to an accumulator
holding X) and those that were not. ``python3 scripts/fp8_accumulator_probe.py OUT.json`` writes
{experiment: {"a": codes, "d": D's first column}} for the offline fit (tests/kernels/test_fp8_accumulator.py).
"""
import json
import sys

import numpy as np
from numba import cuda

from asyncpipe.bf16 import bf16_to_float32
from asyncpipe.formats.minifloat import E4M3, encode
from asyncpipe.kernels import fp8_gemm as G

K = N = M = 128
X = 448.0


def experiment(small, *, second=None):
    """A's rows: X at 0, -X at j = r + 1 (row 127: no -X), ``small`` everywhere else; ``second`` = (k, v) puts
    one more value v at column k of every row instead (then the other columns hold 0)."""
    a = np.full((M, K), small, np.float32)
    a[:, 0] = X
    for r in range(M - 1):
        a[r, r + 1] = -X
    if second is not None:
        a[:, 1:] = 0.0
        a[:, K - 1] = -X
        for r in range(1, M - 1):
            a[r, r] = second
    return a


EXPERIMENTS = {
    "half_ulp": experiment(2.0 ** -6),            # X's 13-bit ulp is 2^-5: s = 1/2 ulp
    "ulp_and_half": experiment(3 * 2.0 ** -6),    # 1.5 ulp: a truncated term keeps 1 ulp, a rounded one 2
    "quarter_ulp": experiment(2.0 ** -7),
    "one_value_3_4_ulp": experiment(0.0, second=0.75 * 2.0 ** -5),   # one 0.75-ulp value at k = r, -X at 127
    "one_value_neg": experiment(0.0, second=-0.75 * 2.0 ** -5),
}


def main(path):
    ones = np.full((N, K), 0x38, np.uint8)                       # e4m3 1.0
    sa = np.ones((M, 1), np.float32)
    sb = np.ones((1, 1), np.float32)
    out = {}
    for name, a in EXPERIMENTS.items():
        codes = encode(a, E4M3)
        d = cuda.device_array((M, N), np.uint16)
        G.fp8_gemm(cuda.to_device(codes), G.to_device_scales(sa), cuda.to_device(ones), cuda.to_device(sb), d)
        got = bf16_to_float32(d.copy_to_host()).astype(np.float64)
        assert np.all(got == got[:, :1]), name                    # every column sums the same row
        out[name] = {"a": codes.tolist(), "d": got[:, 0].tolist()}
        print(name, got[:8, 0].tolist(), "...", got[-4:, 0].tolist())
    with open(path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main(sys.argv[1])
