"""Issue 18, section 1, step 1: random tiled tensor-map layouts, asyncpipe's verdict (``validate_tiled``) and
the driver's (``cuTensorMapEncodeTiled`` on the raw parameters) side by side, one JSON line per layout.

    python3 scripts/tensor_map_verdicts.py --n 40000 --seed 18 --out verdicts.jsonl.gz [--no-driver]

The draw is ``asyncpipe.spec.tensor_map_sample.draw`` (seeded; its docstring says what it covers). The
file's first line is ``{"meta": ...}`` (seed, counts, driver and device, how addresses were chosen, times);
each other line holds a layout's parameters in numpy order (``numpy``) and in the driver's (``driver``),
``asyncpipe`` ("ok" or the rule's message), ``asyncpipe_rule`` and ``driver_verdict`` (the CUresult name,
null without a driver). Without a GPU (or with ``--no-driver``) only asyncpipe's side is written.

With a driver, the addresses are first checked: the first layouts are encoded at a made-up address and
inside a real allocation; if any verdict differs, every layout is moved into the allocation (the offsets,
and so the alignments, stay). The summary at the end counts agreements and both kinds of disagreement
and prints the first few of each.
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import time
from pathlib import Path

from asyncpipe.errors import AsyncpipeError, check
from asyncpipe.spec import tensor_map_sample as tms

_API = "tensor_map_verdicts"
PROBE_LAYOUTS = 2000      # layouts encoded twice (made-up address and a real allocation) before the run
SHOW = 3                  # disagreements printed per class


def _args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=40_000, help="layouts to draw (default 40000)")
    p.add_argument("--seed", type=int, default=18, help="seed of the draw (default 18)")
    p.add_argument("--out", default="tensor_map_verdicts.jsonl.gz", help="the verdict file (.jsonl.gz)")
    p.add_argument("--no-driver", action="store_true", help="asyncpipe's verdicts only, even with a GPU")
    a = p.parse_args(argv)
    check(a.n >= 1, _API, "--n must be at least 1", a.n)
    check(a.out.endswith(".jsonl.gz"), _API, "--out must name a .jsonl.gz file", a.out)
    return a


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _open_driver(meta: dict, driver=None):
    """(driver, DriverEncoder) with device 0's context current, or None (the reason in meta); ``driver`` is
    cuda.bindings.driver unless given (a test's stand-in)."""
    try:
        if driver is None:
            import cuda.bindings
            from cuda.bindings import driver

            meta["cuda_bindings"] = cuda.bindings.__version__
        meta["driver"] = tms.open_driver(driver)
    except Exception as exc:   # no cuda-python, no driver library, no device: asyncpipe's side only
        meta["no_driver"] = f"{type(exc).__name__}: {exc}"
        return None
    encoder = tms.DriverEncoder(driver)
    meta["absent_from_cuda_bindings"] = encoder.absent
    known = {tms.DATA_TYPE_PREFIX + s for s, _ in tms.DATA_TYPES.values()}
    meta["not_sampled"] = sorted({m.name for m in driver.CUtensorMapDataType} - known
                                 | {m.name for m in driver.CUtensorMapSwizzle} - set(tms.SWIZZLES.values()))
    return driver, encoder


def _summary(records, meta) -> list[str]:
    lines = []
    classes = collections.Counter(tms.verdict_class(r["asyncpipe"], r["driver_verdict"]) for r in records)
    accepted = sum(r["asyncpipe"] == "ok" for r in records)
    kinds = collections.Counter(r["kind"].split(":")[0] for r in records)
    lines.append(f"{len(records)} layouts (seed {meta['seed']}): " + ", ".join(f"{k} {v}" for k, v in kinds.items())
                 + f"; asyncpipe accepts {accepted}")
    if None in classes:
        lines.append(f"no driver verdicts ({meta.get('no_driver', '--no-driver')})")
        return lines
    lines.append(f"driver accepts {sum(r['driver_verdict'] == tms.ACCEPTED for r in records)}; "
                 + "; ".join(f"{c}: {classes[c]}" for c in tms.CLASSES))
    for c in tms.CLASSES[1:]:
        bad = [r for r in records if tms.verdict_class(r["asyncpipe"], r["driver_verdict"]) == c]
        if not bad:
            continue
        by_kind = collections.Counter(r["kind"] for r in bad).most_common(6)
        lines.append(f"{c}, by kind: " + ", ".join(f"{k} {v}" for k, v in by_kind))
        lines.extend(f"  {tms.describe(r)}" for r in bad[:SHOW])
    return lines


def main(argv=None, driver=None) -> int:
    """The command line; ``driver`` stands in for cuda.bindings.driver (tests)."""
    try:
        a = _args(argv)
    except AsyncpipeError as exc:
        print(exc, file=sys.stderr)
        return 2
    meta = {"n": a.n, "seed": a.seed, "commit": _git_commit(), "made_up_base": tms.MADE_UP_BASE}
    t0 = time.perf_counter()
    layouts = tms.draw(a.n, a.seed)
    meta["draw_s"] = round(time.perf_counter() - t0, 3)

    opened = None if a.no_driver else _open_driver(meta, driver)
    verdicts = [None] * len(layouts)
    if opened is not None:
        driver, encoder = opened
        probe = layouts[:PROBE_LAYOUTS]
        try:
            base, differ = tms.address_probe(driver, encoder, probe)
        except AsyncpipeError as exc:    # no allocation: made-up addresses only, and say so
            meta["address_probe"] = {"error": str(exc)}
            base, differ = tms.MADE_UP_BASE, 0
        else:
            meta["address_probe"] = {"layouts": len(probe), "allocation": base, "verdicts_differ": differ}
        if differ:                       # the driver looks at the memory: every layout inside the allocation
            layouts = [lay.rebased(base) for lay in layouts]
        meta["address_base"] = base if differ else tms.MADE_UP_BASE
        t1 = time.perf_counter()
        verdicts = [encoder.verdict(lay) for lay in layouts]
        meta["driver_s"] = round(time.perf_counter() - t1, 3)
    t2 = time.perf_counter()
    records = [lay.record(v) for lay, v in zip(layouts, verdicts)]
    meta["asyncpipe_s"] = round(time.perf_counter() - t2, 3)
    meta["classes"] = dict(collections.Counter(tms.verdict_class(r["asyncpipe"], r["driver_verdict"]) or "no driver"
                                               for r in records))
    tms.write_records(a.out, meta, records)
    meta["total_s"] = round(time.perf_counter() - t0, 3)

    for line in _summary(records, meta):
        print(line)
    if "error" in meta.get("address_probe", {}):
        print(f"addresses: made-up only, the probe failed: {meta['address_probe']['error']}")
    elif "address_probe" in meta:
        p = meta["address_probe"]
        print(f"addresses: {p['verdicts_differ']} of {p['layouts']} verdicts differ between a made-up address and "
              f"a real allocation ({p['allocation']:#x}); used base {meta['address_base']:#x}")
    if meta.get("not_sampled") or meta.get("absent_from_cuda_bindings"):
        print(f"enum members not sampled: {meta.get('not_sampled')}; absent from cuda.bindings: "
              f"{meta.get('absent_from_cuda_bindings')}")
    print(f"wrote {a.out}: draw {meta['draw_s']} s, driver {meta.get('driver_s', '-')} s, asyncpipe "
          f"{meta['asyncpipe_s']} s, total {meta['total_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
