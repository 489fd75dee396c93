"""``python -m asyncpipe tune KERNEL [problem]``: the tuning loop from the command line.

``KERNEL`` is ``sgemm`` (the built-in SGEMM, problem ``--m M --n N --k K``) or ``path/to/file.py:NAME``, a
``TunedKernel`` (``@autotune``) or ``KernelSpec`` in a file of yours, whose problem is given by its names as
``--problem rows=8192,cols=8192`` (``--problem`` works for the SGEMM too: ``--problem m=4096,n=4096,k=4096``).

On a GPU: compile, predict, prune, check and time the rest, print the table, store the pick in the cache
(``$ASYNCPIPE_CACHE_DIR/tune.json``) and, with ``--json PATH``, write the whole run there (the format of
``bench/tune_h200.json``). Without a GPU (or with ``--predict-only``) it prints the model's table (for a
user's kernel with the resources read from its candidates compiled offline for sm_90a), says in one line
that nothing was measured, and exits 0. Bad input exits 2.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

from ..provenance import commit

API = "tune"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("kernel", help="sgemm, or path/to/file.py:NAME (an @autotune kernel or a KernelSpec)")
    p.add_argument("--problem", help="the problem by the kernel's names: rows=8192,cols=8192")
    p.add_argument("--m", type=int, help="sgemm: M")
    p.add_argument("--n", type=int, help="sgemm: N")
    p.add_argument("--k", type=int, help="sgemm: K")
    p.add_argument("--stages", type=int, nargs="+", help="candidate stage counts (default: all the kernel accepts)")
    p.add_argument("--tile", nargs="+", help="sgemm: candidate thread tiles (default: all, 8x8 and 8x16)")
    p.add_argument("--bk", type=int, nargs="+", help="sgemm: candidate stage depths (default: all, 8 and 16)")
    p.add_argument("--schedule", nargs="+", help="sgemm: candidate main loops (default: all: plain, dbuf and kmajor)")
    p.add_argument("--space", nargs="+", metavar="NAME=V1,V2",
                   help="user kernels: narrow an option of the search space, e.g. threads=128 chunks=1,4")
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
    p.add_argument("--compute-ns", type=float, help="sgemm model: one tile's compute, one CTA alone (default: calibrated)")
    p.add_argument("--processes", type=int, help="user kernels: compile worker processes (default: the CPU count)")
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


def parse_problem(text: str, dims: tuple) -> dict:
    """``"rows=8192,cols=8192"`` -> ``{"rows": 8192, "cols": 8192}``, every name of ``dims`` given once."""
    from ..errors import check

    out = {}
    for part in (p for p in text.split(",") if p.strip()):
        name, eq, value = part.partition("=")
        check(bool(eq) and value.strip().lstrip("-").isdigit(), API, "--problem is name=integer,...", repr(part))
        out[name.strip()] = int(value)
    check(set(out) == set(dims), API, f"--problem must name each of {dims}", repr(text))
    return out


def narrowed_space(spec, entries) -> list[dict] | None:
    """The option sets of a ``KernelSpec`` whose values ``--space name=v1,v2 ...`` allow (None: all)."""
    if not entries:
        return None
    from ..errors import check

    allowed = {}
    for e in entries:
        name, eq, values = e.partition("=")
        check(bool(eq) and name in spec.space and name != "stages", API,
              f"--space is name=v1,v2 with a name among {sorted(k for k in spec.space if k != 'stages')}", repr(e))
        vals = [int(v) if v.strip().lstrip("-").isdigit() else v.strip() for v in values.split(",")]
        for v in vals:
            check(v in spec.space[name], API, f"--space {name} values must be among {spec.space[name]}", repr(v))
        allowed[name] = vals
    return [o for o in spec.option_sets()
            if all((spec.default | o).get(k) in v for k, v in allowed.items())]


def load_kernel(ref: str):
    """The ``TunedKernel`` at ``path/to/file.py:NAME`` (a ``KernelSpec`` there is wrapped)."""
    import importlib.util

    from ..errors import check
    from .spec import KernelSpec, TunedKernel

    path, colon, name = ref.rpartition(":")
    check(bool(colon) and path.endswith(".py") and name.isidentifier(), API,
          "kernel must be sgemm or path/to/file.py:NAME", repr(ref))
    check(Path(path).is_file(), API, "the kernel's file must exist", repr(path))
    spec = importlib.util.spec_from_file_location(f"asyncpipe_tune_user_{Path(path).stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    obj = getattr(module, name, None)
    check(isinstance(obj, (TunedKernel, KernelSpec)), API,
          f"{name} in {path} must be an @autotune kernel (TunedKernel) or a KernelSpec", type(obj).__name__)
    return obj if isinstance(obj, TunedKernel) else TunedKernel(obj)


def _not_measured(res, why: str) -> None:
    """The one line that says nothing was measured, and why (replaces the model's note)."""
    res.notes = [n for n in res.notes if not n.startswith("not measured")]
    res.notes.append(f"not measured ({why}): the pick is the model's")


def run_user(args):
    from dataclasses import replace

    from ..model.limits import limits as pick_limits
    from .user import DEFAULT_CALIBRATION, tune_kernel

    tuned = load_kernel(args.kernel)
    from ..errors import check

    check(args.problem is not None, API, f"--problem must give {tuned.spec.problem} for {tuned.spec.name}", None)
    problem = parse_problem(args.problem, tuned.spec.problem)
    cal = None
    if args.load_latency_ns is not None:
        cal = replace(DEFAULT_CALIBRATION, load_latency_ns=args.load_latency_ns, source="command line")
    res = tune_kernel(tuned, problem, measure=not args.predict_only, limits=pick_limits(args.gpu) if args.gpu else None,
                      calibration=cal, candidates=args.stages, options=narrowed_space(tuned.spec, args.space),
                      margin=args.margin, rounds=args.rounds, reps=args.reps,
                      measure_pruned=args.measure_pruned, use_cache=not args.no_cache, force=args.force,
                      processes=args.processes)
    if args.predict_only:
        _not_measured(res, "--predict-only")
    return res


def run_sgemm(args):
    from dataclasses import replace

    from ..errors import AsyncpipeError
    from ..model.limits import limits as pick_limits
    from .kernels import tunable
    from .search import tune

    spec = tunable("sgemm")
    if args.problem is not None:
        p = parse_problem(args.problem, spec.dims)
        problem = tuple(p[d] for d in spec.dims)
    else:
        from ..errors import check

        check(None not in (args.m, args.n, args.k), API, "sgemm needs --m, --n and --k (or --problem m=..,n=..,k=..)",
              (args.m, args.n, args.k))
        problem = (args.m, args.n, args.k)
    cal = spec.default_calibration
    if args.load_latency_ns is not None:
        cal = replace(cal, load_latency_ns=args.load_latency_ns, source="command line")
    if args.compute_ns is not None:
        cal = replace(cal, compute_ns=args.compute_ns, source="command line")
    common = dict(calibration=cal, candidates=args.stages, margin=args.margin, options=narrowed_option_sets(spec, args))
    if args.predict_only:
        lim = pick_limits(args.gpu)
        res = tune("sgemm", problem, gpu=lim.name, limits=lim, **common)
        _not_measured(res, "--predict-only")
        return res
    from . import gpu as gpu_side

    try:
        meas = getattr(gpu_side, spec.gpu_builder)(spec.problem(problem), reps=args.reps)
    except AsyncpipeError as exc:
        lim = pick_limits(args.gpu or "H200")
        res = tune("sgemm", problem, gpu=lim.name, limits=lim, **common)
        _not_measured(res, str(exc))
        return res
    lim = pick_limits(args.gpu) if args.gpu else meas.limits
    return tune("sgemm", problem, gpu=meas.gpu, limits=lim, check=meas.check, time=meas.time, rounds=args.rounds,
                measure_pruned=args.measure_pruned, use_cache=not args.no_cache, force=args.force, **common)


def run(args) -> int:
    from ..errors import AsyncpipeError

    try:
        res = run_sgemm(args) if args.kernel == "sgemm" else run_user(args)
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
    return 0


def kernel_timeline_of(args):
    """``python -m asyncpipe timeline --kernel FILE.py:NAME --config stages=3 --problem rows=..,cols=..``: the
    spec's pipeline for that configuration (``asyncpipe.tune.user.kernel_timeline``); the CTA's resources and
    residency are printed first (to stderr when ``--json`` keeps stdout one object)."""
    from ..errors import check
    from .user import kernel_timeline

    tuned = load_kernel(args.kernel)
    spec = tuned.spec
    check(args.problem is not None, "timeline", f"--kernel needs --problem {','.join(d + '=..' for d in spec.problem)}",
          None)
    config = {}
    for part in (p for p in (args.config or "").split(",") if p.strip()):
        name, eq, value = part.partition("=")
        check(bool(eq), "timeline", "--config is name=value,...", repr(part))
        config[name.strip()] = int(value) if value.strip().lstrip("-").isdigit() else value.strip()
    tl, p = kernel_timeline(tuned, parse_problem(args.problem, spec.problem), config)
    print(f"{spec.name} {spec.full(spec.config(config))}: {p.registers} registers, {p.shared_per_cta} bytes of shared "
          f"memory a CTA, {p.ctas_per_sm} CTAs an SM ({p.limited_by}), {p.waves} wave(s), {p.tiles} tiles a CTA"
          + (", SPILLS" if p.spills else ""), file=sys.stderr if args.json else sys.stdout)
    return tl
