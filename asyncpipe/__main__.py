"""Command line: ``python -m asyncpipe demo`` (the main job) and friends."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="asyncpipe", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the chapter's programs and check them against numpy")
    demo.add_argument("--quick", action="store_true", help="small sizes only")
    from . import primitives as primitives_cli

    primitives_cli.add_arguments(sub.add_parser(
        "primitives", help="every primitive's Python call, PTX line, SM and the SASS its test checks"))
    from . import bench as bench_cli

    bench_cli.add_arguments(sub.add_parser("bench", help="time every kernel against its yardsticks (GPU only)"))
    from .model import cli as timeline_cli
    from .tune import cli as tune_cli

    timeline_cli.add_arguments(sub.add_parser("timeline", help="the pipeline timeline model (no GPU needed)"))
    tune_cli.add_arguments(sub.add_parser("tune", help="choose a kernel's stage count: model, then GPU timing"))
    from . import warm as warm_cli

    warm_cli.add_arguments(sub.add_parser(
        "warm", help="compile the shipped kernels' defaults and the tuner's picks into numba's disk cache (GPU only)"))
    args = parser.parse_args(argv)

    if args.command == "demo":
        from .demo import run_demo

        return run_demo(quick=args.quick)
    if args.command == "bench":
        return bench_cli.run(args)
    if args.command == "timeline":
        return timeline_cli.run(args, kernel_timeline=tune_cli.kernel_timeline_of)
    if args.command == "tune":
        return tune_cli.run(args)
    if args.command == "primitives":
        return primitives_cli.run(args)
    if args.command == "warm":
        return warm_cli.run(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
