"""``python -m asyncpipe timeline``: the pipeline model from the command line.

    python -m asyncpipe timeline --tiles 8 --stages 3 --load-latency 20 --compute 4 --json
    python -m asyncpipe timeline --tiles 8 --stages 4 --load-latency 20 --compute 2 --no-empty-commit --plot p.png
    python -m asyncpipe timeline --pattern ring --consumers 2 --tiles 8 --stages 2 --load-latency 20 --compute 4

With ``--json`` stdout is one JSON object (``total_time``, ``stall_time``, ``events``, ``tiles``,
``hazards``, ``params``) and nothing else; otherwise a summary and the event list. Hazards are
part of the answer (exit status 0); bad input exits with 2 and the rule it broke.
"""

from __future__ import annotations

import argparse
import sys

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tiles", type=int, required=True, help="T: tiles (k-steps) one CTA runs through")
    p.add_argument("--stages", type=int, required=True, help="S: shared-memory stages (slots)")
    p.add_argument("--load-latency", type=float, required=True, help="L: time from issuing a load to its landing")
    p.add_argument("--compute", type=float, required=True, help="C: compute time per tile")
    p.add_argument("--issue-cost", type=float, default=0.0, help="I: time to issue one tile's loads (default 0)")
    p.add_argument("--bandwidth", type=float, help="bytes per unit of time for the whole SM (default unlimited)")
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
    p.add_argument("--plot", metavar="PNG", help="write a Gantt chart here (needs matplotlib)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def run(args) -> int:
    from ..errors import AsyncpipeError
    from .cp_async import cp_async_timeline
    from .mbarrier_ring import mbarrier_ring_timeline

    common = dict(issue_cost=args.issue_cost, bandwidth=args.bandwidth, tile_bytes=args.tile_bytes,
                  ctas_per_sm=args.ctas)
    try:
        if args.pattern == "ring":
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
    else:
        print(tl.summary())
        for e in tl.events:
            where = " ".join(f"{k} {v}" for k, v in (("tile", e.tile), ("slot", e.slot), ("group", e.group))
                             if v is not None)
            print(f"{e.time:>12g}  {e.actor:<11s} {e.kind:<14s} {where}{'  ' + e.detail if e.detail else ''}")
        if args.plot:
            print(f"plot: {args.plot}")
    return 0
