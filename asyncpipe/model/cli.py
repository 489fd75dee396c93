"""``python -m asyncpipe timeline``: the pipeline model from the command line.

    python -m asyncpipe timeline --tiles 8 --stages 3 --load-latency 20 --compute 4 --json
    python -m asyncpipe timeline --tiles 8 --stages 4 --load-latency 20 --compute 2 --no-empty-commit --plot p.png
    python -m asyncpipe timeline --pattern ring --consumers 2 --tiles 8 --stages 2 --load-latency 20 --compute 4

Times are nanoseconds: ``--load-latency``, ``--compute`` and ``--issue-cost`` are ns, ``--bandwidth``
is bytes per ns (= GB/s), and so is every time printed. With ``--json`` stdout is one JSON object
(``unit``: ``"ns"``, ``total_time``, ``stall_time``, ``stalls``, ``events``, ``tiles``, ``hazards``,
``params``) and nothing else; otherwise the inputs, the event list (``--no-events`` leaves it out),
the total and stall, then one line starting ``HAZARD`` per hazard the model found (an uncovered
``wait_group``, a read before the load landed, a wait on the wrong mbarrier phase, a deadlock: which
tile, which wait, what it covered, what it needed and the pitfall behind it), or ``no hazard``.
Hazards are part of the answer (exit status 0); bad input exits with 2 and the rule it broke.
"""

from __future__ import annotations

import argparse
import sys

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tiles", type=int, help="T: tiles (k-steps) one CTA runs through")
    p.add_argument("--stages", type=int, help="S: shared-memory stages (slots)")
    p.add_argument("--load-latency", type=float, metavar="NS",
                   help="L: ns from issuing a load to its landing")
    p.add_argument("--compute", type=float, metavar="NS", help="C: compute ns per tile")
    p.add_argument("--kernel", metavar="FILE.py:NAME",
                   help="instead of T, S, L and C: a tuner spec's pipeline (asyncpipe.tune), compiled offline for its "
                        "resources, with --config stages=3[,name=value] and --problem name=value,...")
    p.add_argument("--config", help="--kernel: the configuration to draw (the rest from the spec's default)")
    p.add_argument("--problem", help="--kernel: the problem by the spec's names, e.g. rows=8192,cols=8192")
    p.add_argument("--issue-cost", type=float, default=0.0, metavar="NS",
                   help="I: ns to issue one tile's loads (default 0)")
    p.add_argument("--bandwidth", type=float, metavar="GBPS",
                   help="bytes per ns (GB/s) for the whole SM (default unlimited)")
    p.add_argument("--tile-bytes", type=int, help="bytes per load (needed with --bandwidth)")
    p.add_argument("--ctas", type=int, default=1, help="CTAs per SM sharing the bandwidth (default 1)")
    p.add_argument("--pattern", choices=("cp.async", "ring"), default="cp.async",
                   help="the chapter's cp.async pipeline (default) or the TMA + mbarrier full/empty ring")
    p.add_argument("--no-empty-commit", action="store_true",
                   help="cp.async: the chapter's pitfall, no commit_group when nothing was issued")
    p.add_argument("--consumers", type=int, default=1, help="ring: consumers (default 1)")
    p.add_argument("--schedule", choices=("split", "alternate"), default="split",
                   help="ring: every consumer takes every tile (split) or they take turns (alternate)")
    p.add_argument("--flipped-parity", action="store_true", help="ring: consumers wait full[s] with the wrong parity")
    p.add_argument("--plot", metavar="PNG", help="write a Gantt chart here (needs matplotlib): loads, computes, "
                   "stalls and where each wait returns, time in ns")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--no-events", action="store_true", help="text: leave out the event list")


def run(args, kernel_timeline=None) -> int:
    """``kernel_timeline(args) -> Timeline`` draws ``--kernel``'s spec (``asyncpipe.tune.cli.kernel_timeline_of``,
    passed in by the command line above both packages: the model does not import the tuner)."""
    from ..errors import AsyncpipeError
    from .cp_async import cp_async_timeline
    from .mbarrier_ring import mbarrier_ring_timeline

    common = dict(issue_cost=args.issue_cost, bandwidth=args.bandwidth, tile_bytes=args.tile_bytes,
                  ctas_per_sm=args.ctas)
    try:
        if args.kernel:                                  # the spec's pipeline, resources from its compiled kernel
            tl = kernel_timeline(args)
        elif None in (args.tiles, args.stages, args.load_latency, args.compute):
            from ..errors import check

            check(False, "timeline", "--tiles, --stages, --load-latency and --compute are needed (or --kernel)",
                  f"--tiles {args.tiles} --stages {args.stages} --load-latency {args.load_latency} "
                  f"--compute {args.compute}")
        elif args.pattern == "ring":
            tl = mbarrier_ring_timeline(args.tiles, args.stages, args.load_latency, args.compute,
                                        consumers=args.consumers, schedule=args.schedule,
                                        consumer_parity="flipped" if args.flipped_parity else "correct", **common)
        else:
            tl = cp_async_timeline(args.tiles, args.stages, args.load_latency, args.compute,
                                   empty_commit=not args.no_empty_commit, **common)
        if args.plot:
            from .plot import save_timeline

            save_timeline(tl, args.plot)
    except AsyncpipeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(tl.to_json())
        return 0
    print(tl.headline())
    if not args.no_events:
        print(f"{'time (' + tl.unit + ')':>12s}  {'actor':<11s} {'event':<14s} where")
        for e in tl.events:
            where = " ".join(f"{k} {v}" for k, v in (("tile", e.tile), ("slot", e.slot), ("group", e.group))
                             if v is not None)
            print(f"{e.time:>12g}  {e.actor:<11s} {e.kind:<14s} {where}{'  ' + e.detail if e.detail else ''}")
    print(tl.verdict())                                  # the HAZARD lines come last, where a terminal ends
    if args.plot:
        print(f"plot: {args.plot}")
    return 0
