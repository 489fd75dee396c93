"""One FP8 GEMM call at M x N x K (default 4096^3), asyncpipe's fp8_gemm or torch._scaled_mm tensorwise, for a
profiler: python3 scripts/fp8_gemm_once.py asyncpipe|scaled_mm [M N K]. FP8_OPTIONS: fp8_gemm's keyword options as JSON
(e.g. '{"k_slices": 4, "split_k": 1}')."""
import json
import os
import sys

import numpy as np
from numba import cuda

from asyncpipe.kernels import fp8_gemm as G

who = sys.argv[1]
m, n, k = (int(v) for v in sys.argv[2:5]) if len(sys.argv) > 2 else (4096, 4096, 4096)
a, sa, b, sb = G.random_operands(np.random.default_rng(0), m, n, k)
if who == "asyncpipe":
    G.fp8_gemm(cuda.to_device(a), G.to_device_scales(sa), cuda.to_device(b), cuda.to_device(sb),
               **json.loads(os.environ.get("FP8_OPTIONS", "{}")))
    cuda.synchronize()
else:
    import torch

    x = torch.from_numpy(a).cuda().view(torch.float8_e4m3fn)
    y = torch.from_numpy(b).cuda().view(torch.float8_e4m3fn).t()
    one = torch.ones((), device="cuda")
    torch._scaled_mm(x, y, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    torch.cuda.synchronize()
