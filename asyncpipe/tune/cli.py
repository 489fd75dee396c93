"""``python -m asyncpipe tune sgemm --m M --n N --k K``: the tuning loop from the command line.

On a GPU: predict, prune, check and time the rest, print the table, store the pick in the cache
(``$ASYNCPIPE_CACHE_DIR/tune.json``) and, with ``--json PATH``, write the whole run there (the
format of ``bench/tune_h200.json``). Without a GPU it prints the model's table, says why nothing
was measured, and exits with 1 (``--predict-only`` asks for just the model, exit 0).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

from ..provenance import commit


def add_arguments(p: argparse.ArgumentParser) -> None:
    from .kernels import names

    p.add_argument("kernel", choices=names(), help="the kernel to tune")
    p.add_argument("--m", type=int, required=True)
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--k", type=int, required=True)
    p.add_argument("--stages", type=int, nargs="+", help="candidate stage counts (default: all the kernel accepts)")
    p.add_argument("--tile", nargs="+", help="sgemm: candidate thread tiles (default: all, 8x8 and 8x16)")
    p.add_argument("--bk", type=int, nargs="+", help="sgemm: candidate stage depths (default: all, 8 and 16)")
    p.add_argument("--schedule", nargs="+", help="sgemm: candidate main loops (default: all: plain, dbuf and kmajor)")
    p.add_argument("--margin", type=float, default=0.10,
                   help="prune candidates predicted more than this fraction slower than the best (default 0.10)")
    p.add_argument("--rounds", type=int, default=3, help="timing rounds, round-robin over candidates (default 3)")
    p.add_argument("--reps", type=int, default=20, help="timed calls per round; the round's time is their median")
    p.add_argument("--measure-pruned", action="store_true",
                   help="time the pruned candidates too (to verify the pruning; the pick ignores them)")
    p.add_argument("--predict-only", action="store_true", help="the model's table only; no GPU needed")
    p.add_argument("--gpu", default=None, help="limits from the table for this GPU (H200, H100, A100) "
                                                "instead of the live device")
    p.add_argument("--load-latency-ns", type=float, help="model: effective load latency (default: calibrated)")
    p.add_argument("--compute-ns", type=float, help="model: one tile's compute, one CTA alone (default: calibrated)")
    p.add_argument("--force", action="store_true", help="measure again even if the cache has this problem")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    p.add_argument("--json", metavar="PATH", help="write the whole run here as JSON")


def narrowed_option_sets(spec, args) -> list[dict] | None:
    """The kernel's option sets that ``--tile``, ``--bk`` and ``--schedule`` leave in (None: all of them)."""
    wanted = {"tile": args.tile, "bk": args.bk, "schedule": args.schedule}
    if not any(wanted.values()):
        return None
    from ..errors import check

    for k, values in wanted.items():
        known = tuple(dict.fromkeys({**spec.defaults, **o}[k] for o in spec.option_sets))
        for v in values or ():
            check(v in known, f"tune {spec.name}", f"--{k} values must be among {known}", repr(v))
    return [o for o in spec.option_sets
            if all(v is None or {**spec.defaults, **o}.get(k) in v for k, v in wanted.items())]


def run(args) -> int:
    from dataclasses import replace

    from ..errors import AsyncpipeError
    from ..model.limits import limits as pick_limits
    from .kernels import tunable
    from .search import tune

    spec = tunable(args.kernel)
    problem = (args.m, args.n, args.k)
    cal = spec.default_calibration
    if args.load_latency_ns is not None:
        cal = replace(cal, load_latency_ns=args.load_latency_ns, source="command line")
    if args.compute_ns is not None:
        cal = replace(cal, compute_ns=args.compute_ns, source="command line")
    why_not = None
    try:
        common = dict(calibration=cal, candidates=args.stages, margin=args.margin,
                      options=narrowed_option_sets(spec, args))
        if args.predict_only:
            lim = pick_limits(args.gpu)
            res = tune(args.kernel, problem, gpu=lim.name, limits=lim, **common)
        else:
            from . import gpu as gpu_side

            try:
                meas = getattr(gpu_side, spec.gpu_builder)(spec.problem(problem), reps=args.reps)
            except AsyncpipeError as exc:
                why_not = str(exc)
                lim = pick_limits(args.gpu or "H200")
                res = tune(args.kernel, problem, gpu=lim.name, limits=lim, **common)
            else:
                lim = pick_limits(args.gpu) if args.gpu else meas.limits
                res = tune(args.kernel, problem, gpu=meas.gpu, limits=lim, check=meas.check, time=meas.time,
                           rounds=args.rounds, measure_pruned=args.measure_pruned, use_cache=not args.no_cache,
                           force=args.force, **common)
    except AsyncpipeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(res.table())
    if args.json:
        doc = res.to_dict() | {"commit": commit(), "written": datetime.datetime.now().isoformat(timespec="seconds"),
                               "command": "python -m asyncpipe tune " + " ".join(sys.argv[2:])}
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
        print(f"written: {args.json}")
    if why_not:
        print(f"not measured: {why_not}", file=sys.stderr)
        return 1
    return 0
