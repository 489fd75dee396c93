"""Command line: ``python -m asyncpipe demo`` (the main job) and friends."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="asyncpipe", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the chapter's programs and check them against numpy")
    demo.add_argument("--quick", action="store_true", help="small sizes only")
    sub.add_parser("primitives", help="list every primitive with its PTX line, SM and SASS")
    bench = sub.add_parser("bench", help="time every kernel against its yardsticks (GPU only)")
    bench.add_argument("--json", help="write the results here as JSON")
    bench.add_argument("--reference", help="folder of the chapter's .cu programs, built with nvcc as yardsticks")
    bench.add_argument("--quick", action="store_true", help="small sizes, fewer configurations")
    bench.add_argument("--sgemm-stages", help="comma-separated cp.async stage counts to time (default 2,3,4,5)")
    bench.add_argument("--only", help="comma-separated parts to run: sgemm, tma, cluster_sum, wgmma (default: all)")
    from .model import cli as timeline_cli
    from .tune import cli as tune_cli

    timeline_cli.add_arguments(sub.add_parser("timeline", help="the pipeline timeline model (no GPU needed)"))
    tune_cli.add_arguments(sub.add_parser("tune", help="choose a kernel's stage count: model, then GPU timing"))
    args = parser.parse_args(argv)

    if args.command == "demo":
        from .demo import run_demo

        return run_demo(quick=args.quick)
    if args.command == "bench":
        from .bench import run_bench

        stages = tuple(int(s) for s in args.sgemm_stages.split(",")) if args.sgemm_stages else None
        only = tuple(args.only.split(",")) if args.only else None
        return run_bench(args.json, args.reference, args.quick, stages, only)
    if args.command == "timeline":
        return timeline_cli.run(args)
    if args.command == "tune":
        return tune_cli.run(args)
    if args.command == "primitives":
        from . import ptx

        for name, p in ptx.REGISTRY.items():
            print(f"{name:48s} sm_{p.sm:<3d} {p.ptx}")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
