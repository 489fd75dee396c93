"""The FP8 GEMM's options against each other on the GPU: at each shape (and tile width), every form of --forms,
alternated ROUNDS times on the same operands, torch._scaled_mm tensorwise timed once per shape beside them. A form
is a name and the ``fp8_gemm`` options it sets over the shape's defaults; the first form is the base. One line per
(shape, width, form): TFLOPS (median of the rounds' medians), the ratio to the base and to torch, and whether D
equals the base's bit for bit; --json writes the records (COMMIT from the environment).

    python3 scripts/fp8_sweep.py --forms "plain:;pingpong:pingpong=True" [--shapes 4096x4096x4096,...]
        [--widths 128,192] [--rounds 3] [--json out.json]

Forms are ``name:key=value,key=value`` separated by ``;``, values Python literals (``epilogue='direct'``,
``cluster=(2,1)``, ``tail_slices=3``). Without --widths each shape runs at its default width. A form that a shape
refuses is said and left out; the base is then the first form that ran. The sweeps it replaced (2026-12-06), as
forms: ``direct:epilogue='direct';tma1:epilogue_buffers=1;tma3:epilogue_buffers=3`` (fp8_epilogue_sweep.py),
``t1:;t3:tail_slices=3`` (fp8_tail_sweep.py), ``s1:k_slices=1;s4:k_slices=4`` (fp8_slices_sweep.py).
"""

from __future__ import annotations

import argparse
import ast
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHAPES = ("4096x4096x4096,8192x8192x8192,4096x7168x2048,4096x2112x7168,4096x24576x1536,512x7168x2048,"
          "128x7168x2048,64x7168x2048")


def parse_forms(text: str) -> list[tuple[str, dict]]:
    """``"a:x=1,y='s';b:"`` -> [("a", {"x": 1, "y": "s"}), ("b", {})] (a tuple value keeps its commas)."""
    forms = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        name, _, body = part.partition(":")
        forms.append((name.strip(), _options(body)))
    return forms


def _options(body: str) -> dict:
    """``"x=1,c=(2,1)"`` -> {"x": 1, "c": (2, 1)}: keyword arguments, each value a Python literal."""
    call = ast.parse(f"f({body})", mode="eval").body
    return {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--forms", required=True)
    p.add_argument("--shapes", default=SHAPES)
    p.add_argument("--widths", default="")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--json")
    args = p.parse_args()
    forms = parse_forms(args.forms)

    import numpy as np
    from numba import cuda

    from asyncpipe.errors import AsyncpipeError
    from asyncpipe.host import device_info
    from asyncpipe.kernels import fp8_gemm as G
    from asyncpipe.timing import time_rounds, tflops

    sms = device_info(G.API).sm_count
    records = []
    for shape in args.shapes.split(","):
        m, n, k = (int(v) for v in shape.split("x"))
        a, sa, b, sb = G.random_operands(np.random.default_rng(0), m, n, k)
        dev = G.to_device_operands(a, sa, b, sb)
        d = cuda.device_array((m, n), np.uint16)
        torch_tf = G._scaled_mm_tflops(a, b, 50).get("tensorwise")
        widths = [int(w) for w in args.widths.split(",") if w] or [G.choose_block_n(m, n, sms)]
        for bn in widths:
            defaults = dict(block_n=bn, cluster=G.choose_cluster(m, n, bn, sms))
            runs, outs, times = {}, {}, {}
            for form, opts in forms:
                run = (lambda o={**defaults, **opts}: G.fp8_gemm(*dev, d, **o))
                try:
                    run()                            # compile and check outside the timing
                except (AsyncpipeError, TypeError) as e:   # a form this shape refuses, or an option this version
                    # of fp8_gemm does not know (scripts/fp8_swap_ab.sh's older kernels): said, then left out
                    print(f"{shape:>16} bn{bn:<3} {form:>10} refused: {e}", flush=True)
                    continue
                runs[form], outs[form] = run, d.copy_to_host()
            times = time_rounds(runs, rounds=args.rounds, reps=args.reps) if runs else {}
            base = None
            for form, opts in forms:
                if form not in runs:
                    continue
                ms = statistics.median(times[form])
                tf = tflops(2.0 * m * n * k, ms)
                base = base or tf
                same = bool(np.array_equal(outs[form], outs[next(iter(outs))]))
                rec = dict(shape=[m, n, k], form=form, options={**defaults, **opts}, us=ms * 1e3, tflops=tf,
                           vs_base=tf / base, scaled_mm_tensorwise_tflops=torch_tf, same_d_as_base=same,
                           round_us=[t * 1e3 for t in times[form]])   # each round's median: the spread in time
                records.append(rec)
                spread = (max(times[form]) - min(times[form])) / ms
                print(f"{shape:>16} bn{bn:<3} {form:>10} {ms * 1e3:9.2f} us (rounds' spread {spread * 100:4.1f} %) "
                      f"{tf:7.1f} TF  {tf / base:.3f}x base  "
                      f"{tf / torch_tf if torch_tf else float('nan'):.3f}x torch  same D {same}", flush=True)
    if args.json:
        from ab_record import write

        write(args.json, forms=args.forms, records=records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
