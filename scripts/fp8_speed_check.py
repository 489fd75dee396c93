"""The FP8 GEMM's default configurations at five of issue 20's shapes beside torch._scaled_mm tensorwise (same run),
against the ratios of the committed ``bench/h200_fp8_gemm.json``: a kernel change's speed check in one short call.

    python3 scripts/fp8_speed_check.py [--json out.json]
"""

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (64, 24576, 1536), (512, 7168, 2048), (128, 7168, 2048))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--json")
    args = p.parse_args()
    from asyncpipe.kernels.fp8_gemm import benchmark

    before = {tuple(r["shape"]): r for r in json.load(open(os.path.join(ROOT, "bench", "h200_fp8_gemm.json")))["results"]
              if "shape" in r and "tflops" in r}
    out = []
    for shape in SHAPES:
        rec = benchmark(*shape)
        old = before.get(shape, {})
        now_vs, old_vs = rec["vs"].get("scaled_mm_tensorwise"), old.get("vs", {}).get("scaled_mm_tensorwise")
        rec["before"] = dict(kernel=old.get("kernel"), tflops=old.get("tflops"), vs_tensorwise=old_vs)
        out.append(rec)
        print(f"{'x'.join(map(str, shape))} {rec['kernel']}: {rec['tflops']:.0f} TF, {now_vs:.3f}x torch tensorwise "
              f"(committed: {old.get('tflops', 0):.0f} TF, {old_vs or 0:.3f}x; ratio of ratios "
              f"{(now_vs / old_vs) if old_vs else float('nan'):.3f})", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(commit=os.environ.get("COMMIT", "unknown"), records=out), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
