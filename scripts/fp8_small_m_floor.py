"""Is issue 20's "2x torch._scaled_mm at M <= 128" reachable? One line per small-M shape, every figure timed in the
same round-robin rounds (``timing.time_rounds``) in one process:

- torch tensorwise and the FP8 GEMM (its defaults) at the shape, and half torch's time: the target;
- both at the same M and N with K = 128 (one k-block): what a GEMM of this M x N costs before K adds anything;
- the GEMM built without its tensor maps' acquire fences (``map_fences=False``, a diagnostic build: the host wrote
  the maps into global memory, and the CUDA guide asks for the fence), at the shape and at K = 128: what the fences
  (in SASS a descriptor-cache invalidation each, so the first copies fetch the descriptors again) cost a launch;
- an empty kernel of one block, the least any launch costs between its events, and an empty kernel launched as the
  GEMM is (its grid, 384 threads a block, its cluster and dynamic shared memory: the GEMM's plan's launch), what
  starting and ending that many CTAs costs;
- the fastest read of B's bytes we know (a GEMM reads all of B, and A, and writes D): torch's sum and amax over B
  seen as int32 words, and a read kernel of our own (16-byte loads, ``vector.load_x4``, grid-stride, at three grid
  sizes: the fastest counts); each read kernel, like the GEMMs, is called again and again on the same bytes, so B
  is as warm in L2 as the GEMMs' B is.

A target below the read floor asks for a GEMM that reads its weights faster than any kernel here reads them.

    python3 scripts/fp8_small_m_floor.py [--shapes 64x7168x2048,...] [--rounds 7] [--json out.json]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SHAPES = ",".join(f"{m}x{n}x{k}" for n, k in ((7168, 2048), (2112, 7168), (24576, 1536)) for m in (64, 128))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default=SHAPES)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--json")
    args = p.parse_args()

    import numpy as np
    import torch
    from numba import config, cuda

    from asyncpipe.host.launch import prepare_launch
    from asyncpipe.kernels import fp8_gemm as G
    from asyncpipe.spec.launch import LaunchSequence
    from asyncpipe.timing import time_rounds

    from asyncpipe.kernels.vector import load_x4

    @cuda.jit
    def empty():
        pass

    @cuda.jit
    def read_words(words, out):
        """Every word of ``words`` (int32, a multiple of 4 of them) read once, 16 bytes a load; their xor is
        written only if it equals a value it cannot be told apart from chance, so that the loads stay."""
        i = (cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x) * 4
        stride = cuda.gridDim.x * cuda.blockDim.x * 4
        x = 0
        while i < words.size:
            w0, w1, w2, w3 = load_x4(words, i)
            x ^= w0 ^ w1 ^ w2 ^ w3
            i += stride
        if x == 0x2545F491:
            out[0] = x

    sms = getattr(cuda.get_current_device(), "MULTIPROCESSOR_COUNT", 1)   # (the simulator: 1)
    read_grids = (sms * 4, sms * 8, sms * 16)       # blocks of 256 threads

    def gemms(m, n, k):
        """The shipped GEMM, torch's tensorwise call, B, and the GEMM without the maps' fences (its plan built with
        the swapped ``_jit``, on a D of its own: the plan cache tells the two apart by D's address; None in the
        simulator, which refuses a copy through a map no fence acquired)."""
        a, sa, b, sb = G.random_operands(np.random.default_rng(0), m, n, k)
        dev = G.to_device_operands(a, sa, b, sb)
        d, d_bare = cuda.device_array((m, n), np.uint16), cuda.device_array((m, n), np.uint16)
        ours = functools.partial(G.fp8_gemm, *dev, d)
        ours()
        theirs = G.working_scaled_mm_calls(a, b)["tensorwise"]
        if config.ENABLE_CUDASIM:
            return ours, theirs, b, None
        shipped = G._jit
        G._jit = functools.partial(shipped, map_fences=False)
        try:
            bare = functools.partial(G.fp8_gemm, *dev, d_bare)
            bare()
        finally:
            G._jit = shipped
        if not np.array_equal(d.copy_to_host(), d_bare.copy_to_host()):
            raise SystemExit(f"{m}x{n}x{k}: the GEMM without the maps' fences wrote another D")
        return ours, theirs, b, bare

    def launched_as_the_gemm():
        """An empty kernel with the launch configuration of the plan the last fp8_gemm call ran (its GEMM kernel:
        the launch with the most threads a block); (None, None) where no plan is kept (the simulator)."""
        plan = G._plans.latest()
        if plan is None:
            return None, None
        launches = plan.launches if isinstance(plan, LaunchSequence) else (plan,)
        c = max((p.config for p in launches), key=lambda c: c.threads_per_block)
        return prepare_launch(empty, c.grid, c.block, cluster=c.cluster, shared_mem=c.shared_mem), c

    records = []
    print(f"{'shape':>16} {'torch':>7} {'target':>7} {'ours':>7} {'unfenced':>8} | {'K=128:':>7} {'ours':>6} "
          f"{'unfenced':>8} {'torch':>6} | {'empty':>6} {'as GEMM':>7} {'read B':>7} (us)")
    for shape in args.shapes.split(","):
        m, n, k = (int(v) for v in shape.split("x"))
        ours, theirs, b, bare = gemms(m, n, k)
        ours1, theirs1, _, bare1 = gemms(m, n, 128)
        ours()                                       # its plan the latest
        empty_as_gemm, gemm_config = launched_as_the_gemm()
        words = torch.from_numpy(b).cuda().view(torch.int32).reshape(-1)
        words_nb, sink = cuda.as_cuda_array(words), cuda.device_array(1, np.int32)
        ours_reads = {f"read_b_{g}": functools.partial(read_words[g, 256], words_nb, sink) for g in read_grids}
        calls = dict(ours=ours, torch=theirs, ours_k128=ours1, torch_k128=theirs1, empty=lambda: empty[1, 32](),
                     **({"unfenced": bare, "unfenced_k128": bare1} if bare else {}),
                     **({"empty_as_gemm": empty_as_gemm} if empty_as_gemm else {}),
                     sum_b=functools.partial(torch.sum, words), amax_b=functools.partial(torch.amax, words),
                     **ours_reads)
        t = {name: statistics.median(v) * 1e3 for name, v in
             time_rounds(calls, rounds=args.rounds, reps=args.reps).items()}       # us
        read = min(t["sum_b"], t["amax_b"], *(t[name] for name in ours_reads))
        rec = dict(shape=[m, n, k], us=t, target_us=t["torch"] / 2, read_b_us=read, b_bytes=b.nbytes,
                   gemm_launch=gemm_config and dict(grid=list(gemm_config.grid), block=list(gemm_config.block),
                                                    shared_mem=gemm_config.shared_mem,
                                                    cluster=list(gemm_config.cluster) if gemm_config.cluster else None),
                   read_b_tb_s=b.nbytes / read / 1e6, target_below_read=t["torch"] / 2 < read)
        records.append(rec)
        as_gemm = f"{t['empty_as_gemm']:7.2f}" if "empty_as_gemm" in t else f"{'-':>7}"
        unfenced, unfenced1 = (f"{t[key]:8.2f}" if key in t else f"{'-':>8}" for key in ("unfenced", "unfenced_k128"))
        print(f"{shape:>16} {t['torch']:7.2f} {t['torch'] / 2:7.2f} {t['ours']:7.2f} {unfenced} | {'':>7} "
              f"{t['ours_k128']:6.2f} {unfenced1} {t['torch_k128']:6.2f} | {t['empty']:6.2f} {as_gemm} "
              f"{read:7.2f}  (B {b.nbytes / 1e6:.1f} MB read "
              f"at {rec['read_b_tb_s']:.2f} TB/s; target {'below' if rec['target_below_read'] else 'above'} the read)",
              flush=True)
        if args.json:                                # after every shape: a run cut short keeps what it measured
            from ab_record import write

            write(args.json, rounds=args.rounds, records=records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
