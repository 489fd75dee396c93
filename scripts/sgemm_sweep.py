"""Times SGEMM configurations at 4096^3 beside cuBLAS (torch) on the GPU: a tuning aid, with knobs the
public ``sgemm`` does not take (``issue_after``; ``schedule`` it does). Configurations compile in parallel processes first
(numba's disk cache keeps them), then each is timed alone (CUDA events, median).

    python3 scripts/sgemm_sweep.py [--n 4096] [--reps 30] [--once NAME]

``--once NAME`` runs one configuration once at n (for ``ncu -k regex:sgemm``); ``--once cublas`` runs torch.mm."""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ProcessPoolExecutor

# name -> kernel() keywords (interior kernel: n a multiple of 128)
CONFIGS = {
    "v4": dict(variant="v4"),
    "s2": dict(stages=2),
    "s3": dict(stages=3),
    "s4": dict(stages=4),
    "s5": dict(stages=5),
    "s6": dict(stages=6),
    "s7": dict(stages=7),
    "s8": dict(stages=8),
    "s3_ia0": dict(stages=3, issue_after=0),
    "s3_ia3": dict(stages=3, issue_after=3),
    "s3_ia7": dict(stages=3, issue_after=7),
    "s4_bk16": dict(stages=4, bk=16),
    "s3_bk16": dict(stages=3, bk=16),
    "8x16_s3": dict(stages=3, tile="8x16"),
    "8x16_s4": dict(stages=4, tile="8x16"),
    "8x16_s3_bk16": dict(stages=3, tile="8x16", bk=16),
    "8x16_s3_ia-1": dict(stages=3, tile="8x16", issue_after=-1),
    # around the best so far (8x16, bk 16, 3 stages: 43.2 TFLOPS at d479fb2)
    "8x16_s2_bk16": dict(stages=2, tile="8x16", bk=16),
    "8x16_s4_bk16": dict(stages=4, tile="8x16", bk=16),
    "8x16_s3_bk16_ia-1": dict(stages=3, tile="8x16", bk=16, issue_after=-1),
    "8x16_s3_bk16_ia7": dict(stages=3, tile="8x16", bk=16, issue_after=7),
    "8x16_s3_bk16_ia11": dict(stages=3, tile="8x16", bk=16, issue_after=11),
    # schedule="dbuf" (fragments double-buffered, the barrier before each tile's last FFMAs; not yet measured).
    # For dbuf, issue_after is the k-step slot of the copies: bk-1 by default (after the barrier, into the
    # tile's own stage, STAGES tiles ahead), below it the plain ring (STAGES-1 ahead; 2: after k-step 3's reads;
    # offline its loop has 2253 instructions, 16 of them scalar LDS, against the default's 2202 and the plain 2203)
    "8x16_s3_bk16_dbuf": dict(stages=3, tile="8x16", bk=16, schedule="dbuf"),
    "8x16_s4_bk16_dbuf": dict(stages=4, tile="8x16", bk=16, schedule="dbuf"),
    "8x16_s2_bk16_dbuf": dict(stages=2, tile="8x16", bk=16, schedule="dbuf"),
    "8x16_s3_bk16_dbuf_ia2": dict(stages=3, tile="8x16", bk=16, schedule="dbuf", issue_after=2),
    "8x16_s3_dbuf": dict(stages=3, tile="8x16", schedule="dbuf"),
    "s3_dbuf": dict(stages=3, schedule="dbuf"),
    "s4_dbuf": dict(stages=4, schedule="dbuf"),
}


def operands(n: int, seed: int = 0):
    """Fresh random n x n float32 A and B, and C, on the device."""
    import numpy as np
    from numba import cuda

    rng = np.random.default_rng(seed)
    a = cuda.to_device(rng.standard_normal((n, n)).astype(np.float32))
    b = cuda.to_device(rng.standard_normal((n, n)).astype(np.float32))
    return a, b, cuda.device_array((n, n), np.float32)


def launcher(name: str, n: int, shared_mem: int | None = None, arrays=None):
    """A PreparedLaunch of configuration ``name`` on ``arrays`` (A, B, C; default: fresh random n x n operands), and
    the arrays. ``shared_mem`` (for experiments): dynamic shared memory to launch with, if not the configuration's
    own."""
    import numpy as np

    from asyncpipe.host.launch import prepare_launch
    from asyncpipe.kernels import sgemm as S

    cfg = dict(CONFIGS[name])
    variant = cfg.pop("variant", "cp_async")
    a, b, c = operands(n) if arrays is None else arrays
    grid = (n // S.BN, n // S.BM)
    args = (np.int32(n), np.int32(n), np.int32(n), np.float32(1), a.reshape(n * n), b.reshape(n * n), np.float32(0),
            c.reshape(n * n))
    if variant == "v4":
        return prepare_launch(S.kernel("v4", edges=False), grid, S.THREADS, *args), (a, b, c)
    k = S.kernel("cp_async", cfg.get("stages", 3), 4, 4, False, cfg.get("bk", 8), cfg.get("tile", "8x8"),
                 cfg.get("issue_after"), cfg.get("schedule", S.SCHEDULE))
    own = S.shared_bytes(cfg.get("stages", 3), cfg.get("bk", 8), cfg.get("schedule", S.SCHEDULE))
    return prepare_launch(k, grid, S.threads(cfg.get("tile", "8x8")), *args,
                          shared_mem=own if shared_mem is None else shared_mem), (a, b, c)


def _warm(name):
    run, _ = launcher(name, 256)
    run()
    return name


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--once")
    p.add_argument("--only", help="comma-separated names")
    args = p.parse_args()
    if args.once == "cublas":                        # the yardstick, for ncu -k regex:gemm
        import torch

        ta, tb = (torch.randn(args.n, args.n, device="cuda") for _ in range(2))
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.mm(ta, tb)
        torch.cuda.synchronize()
        return
    if args.once:
        from numba import cuda

        run, _ = launcher(args.once, args.n)
        run()
        cuda.synchronize()
        return
    names = args.only.split(",") if args.only else list(CONFIGS)
    with ProcessPoolExecutor(8) as pool:
        list(pool.map(_warm, names))
    import numpy as np
    from numba import cuda

    from asyncpipe.kernels import sgemm as S
    from asyncpipe.timing import time_ms, tflops

    n, flop = args.n, 2.0 * args.n**3
    rows = {}
    try:
        import torch

        ta = torch.randn(n, n, device="cuda")
        tb = torch.randn(n, n, device="cuda")
        torch.backends.cuda.matmul.allow_tf32 = False
        rows["cublas"] = tflops(flop, time_ms(lambda: torch.mm(ta, tb), reps=args.reps))
        print(f"cublas {rows['cublas']:.1f} TF", flush=True)
    except ImportError:
        pass
    for name in names:
        run, (a, b, c) = launcher(name, n)
        run()
        ref = a.copy_to_host()[:64].astype(np.float64) @ b.copy_to_host().astype(np.float64)
        err = np.abs(c.copy_to_host()[:64] - ref).max() / np.abs(ref).max()
        rows[name] = tflops(flop, time_ms(run, reps=args.reps))
        print(f"{name:16s} {rows[name]:6.1f} TF  ratio={rows[name] / rows.get('cublas', float('nan')):.3f}"
              f"  err={err:.1e}", flush=True)
    for name in names:                                   # once more, to see the spread
        run, _ = launcher(name, n)
        t = tflops(flop, time_ms(run, reps=args.reps))
        print(f"again {name:16s} {t:6.1f} TF", flush=True)
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
