"""The FP8 GEMM's kernel against an earlier one, on the GPU, in one run: every configuration the bench's shapes
(``fp8_gemm.BENCH_SHAPES``) choose by default, plus ``--widths`` (every tile width at the default cluster), the two
kernels alternated ROUNDS times on the same operands, torch._scaled_mm tensorwise timed once per shape beside them.

    git show <sha>:asyncpipe/kernels/fp8_gemm_kernel.py > /tmp/before.py
    python3 scripts/fp8_ab.py --before /tmp/before.py [--rounds 3] [--widths] [--slices] [--json out.json]

Prints one line per (shape, configuration): both kernels' TFLOPS (median of the rounds' medians), the ratio
now / before, and each against torch.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
FORMS = ("now", "before")          # plus "now_s1" with --slices


def _load(path: str):
    spec = importlib.util.spec_from_file_location("asyncpipe.kernels._fp8_gemm_kernel_before", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    if not hasattr(mod, "KSPLITS"):          # a kernel from before split_k: what today's host asks of it, split_k 1
        _without_split_k(mod)
    if not hasattr(mod, "MAX_KSLICES"):      # ... and from before k_slices: k_slices 1, launched without ws, counters
        _without_k_slices(mod)
    if not hasattr(mod, "a_rows"):           # ... and from before split_k 2's 64-row stages: A's box is the tile's
        bytes_of = mod.stage_bytes
        mod.a_rows = lambda ksplit=1: mod.BM
        mod.stage_bytes = lambda block_n, ksplit=1: bytes_of(block_n)
    return mod


def _without_k_slices(mod) -> None:
    """Gives a kernel module older than k_slices the names ``fp8_gemm`` uses, for k_slices 1 only; its launches
    leave out the workspace and the counters (``_launch_args``)."""
    make = mod.make_kernel

    def make_kernel(*args, k_slices=1, **kwargs):
        assert k_slices == 1, "a kernel from before k_slices runs k_slices 1 only"
        return make(*args, **kwargs)

    mod.make_kernel, mod.MAX_KSLICES, mod.SLICES_IN_BYTES = make_kernel, 1, 0
    mod.workspace_words = lambda *args, **kwargs: 1
    mod.LEGACY_ARGS = True


def _launch_args(G) -> None:
    """``prepare_launch`` for ``fp8_gemm`` that drops ws and counters (arguments 5 and 6) where the kernel module
    in use predates them."""
    import importlib

    L = importlib.import_module("asyncpipe.host.launch")   # (asyncpipe.host.launch the attribute is a function)
    original = L.prepare_launch

    def prepare_launch(kernel, grid, threads, *args, **kwargs):
        if getattr(G.FK, "LEGACY_ARGS", False):
            args = args[:5] + args[7:]
        return original(kernel, grid, threads, *args, **kwargs)

    L.prepare_launch = prepare_launch


def _without_split_k(mod) -> None:
    """Gives a kernel module older than split_k the names ``fp8_gemm`` uses, for split_k 1 only."""
    def one(fn):
        def call(*args, ksplit=1, **kwargs):
            assert ksplit == 1, "a kernel from before split_k runs split_k 1 only"
            return fn(*args, **kwargs)
        return call

    def strip(fn):
        def call(*args, **kwargs):
            if len(args) == 3:
                assert args[2] == 1, "a kernel from before split_k runs split_k 1 only"
                args = args[:2]
            return fn(*args, **kwargs)
        return call

    mod.KSPLITS, mod.WGMMA_ROWS, mod.KSPLIT_MAX_BLOCK_N = (1,), mod.BM // 2, 128
    mod.reduce_bytes = lambda block_n, ksplit=1: 0
    mod.make_kernel = one(mod.make_kernel)
    for name in ("max_stages", "shared_bytes", "block_shared_bytes"):
        setattr(mod, name, strip(getattr(mod, name)))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--before", required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--widths", action="store_true", help="every tile width at each shape, not only the default")
    p.add_argument("--shapes", help="MxNxK,... instead of the bench's shapes")
    p.add_argument("--slices", action="store_true",
                   help="where k_slices' default is above 1, also today's kernel at k_slices 1 ('now_s1')")
    p.add_argument("--json")
    args = p.parse_args()

    import numpy as np
    from numba import cuda

    from asyncpipe.host import device_info
    from asyncpipe.kernels import fp8_gemm as G
    from asyncpipe.kernels import fp8_gemm_kernel as now
    from asyncpipe.timing import time_ms, tflops

    modules = {"now": now, "before": _load(args.before), "now_s1": now}
    _launch_args(G)

    def use(form):
        G.FK = modules[form]
        G._jit.cache_clear()
        G._plans.clear()

    shapes = ([tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")] if args.shapes
              else list(G.BENCH_SHAPES))
    sms = device_info(G.API).sm_count
    records = []
    for shape in shapes:
        m, n, k = shape
        a, sa, b, sb = G.random_operands(np.random.default_rng(0), m, n, k)
        dev = (cuda.to_device(a), G.to_device_scales(sa), cuda.to_device(b), cuda.to_device(sb))
        d = cuda.device_array((m, n), np.uint16)
        torch_tf = G._scaled_mm_tflops(a, b, 20).get("tensorwise")
        default_bn = G.choose_block_n(m, n, sms)
        widths = now.BLOCK_NS if args.widths else (default_bn,)
        for bn in widths:
            cluster = G.choose_cluster(m, n, bn, sms)
            use("now")                                   # (choose_k_slices reads the module's MAX_KSLICES)
            slices = G.choose_k_slices(m, n, k, bn, cluster, sms)
            forms = FORMS + (("now_s1",) if args.slices and slices > 1 else ())
            ms = {f: [] for f in forms}
            outs = {}
            for _ in range(args.rounds):
                for form in forms:
                    use(form)
                    split = 1 if form == "before" and modules["before"].KSPLITS == (1,) else None
                    ks = 1 if form == "now_s1" else None     # before: its own default (1 if it predates k_slices)
                    run = lambda: G.fp8_gemm(*dev, d, block_n=bn, cluster=cluster, split_k=split, k_slices=ks)  # noqa: E731
                    ms[form].append(time_ms(run, reps=20))
                    outs[form] = d.copy_to_host()
            rec = dict(shape=list(shape), block_n=bn, cluster=list(cluster), default=bn == default_bn, k_slices=slices,
                       scaled_mm_tensorwise_tflops=torch_tf, same_output=bool(np.array_equal(outs["now"], outs["before"])))
            for form in forms:
                rec[form] = dict(ms=ms[form], tflops=tflops(2.0 * m * n * k, statistics.median(ms[form])))
            rec["now_over_before"] = rec["now"]["tflops"] / rec["before"]["tflops"]
            records.append(rec)
            vs = (lambda f: rec[f]["tflops"] / torch_tf) if torch_tf else (lambda f: float("nan"))
            print(f"{'x'.join(map(str, shape)):>18} bn{bn:<3} c{cluster[0]}x{cluster[1]}{'*' if bn == default_bn else ' '} "
                  f"now {rec['now']['tflops']:7.1f} TF ({vs('now'):.2f}x torch)  before {rec['before']['tflops']:7.1f} "
                  f"({vs('before'):.2f}x)  ratio {rec['now_over_before']:.3f}  same D {rec['same_output']}"
                  + (f"  k_slices {slices}: {rec['now']['tflops'] / rec['now_s1']['tflops']:.3f}x s1" if "now_s1" in rec
                     else ""), flush=True)
    from ab_record import write

    write(args.json, before=os.path.basename(args.before), rounds=args.rounds, records=records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
