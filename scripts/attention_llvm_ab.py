"""FlashAttention's kernel with its elementwise loops in LLVM loops (shipped since issue 17) against the expanded form
(``attention_kernel.make_kernel(..., llvm_loops=False)``), on the GPU, in one run: bf16, every head dim, causal and
not, 16k tokens of 16 heads at seqlen 4096 (the bench's shape), the two forms alternated ROUNDS times.

    python3 scripts/attention_llvm_ab.py [--rounds 3] [--json out.json] [--before PATH]

``--before PATH``: instead of the expanded form, the kernel of PATH, a copy of ``attention_kernel.py`` from an
earlier commit (``git show <sha>:asyncpipe/kernels/attention_kernel.py > PATH``): a change's same-run A/B.

Both forms are compiled first in child processes at once, into numba's disk cache; prints one line per kernel.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
FORMS = ["llvm", "expanded"]
BEFORE = os.environ.get("ATTENTION_BEFORE")              # --before, seen by the child processes too


def _before_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("asyncpipe.kernels._attention_kernel_before", BEFORE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod
SEQLEN, TOKENS, HEADS = 4096, 16384, 16


def use(form: str) -> None:
    """attention() building ``form``'s kernels from now on (its jit and plan caches emptied)."""
    from asyncpipe.kernels import attention as A
    from asyncpipe.kernels import attention_kernel as AK

    if not hasattr(AK, "_shipped_make_kernel"):
        AK._shipped_make_kernel = AK.make_kernel
    if form == "before":
        AK.make_kernel = _before_module().make_kernel
    else:
        AK.make_kernel = functools.partial(AK._shipped_make_kernel, llvm_loops=form == "llvm")
    A._jit.cache_clear()
    A._plans.clear()


def tensors(hd, seqlen=SEQLEN):
    import torch

    gen = torch.Generator(device="cuda").manual_seed(0)
    batch = max(1, TOKENS // seqlen)
    return [torch.randn(batch, seqlen, HEADS, hd, device="cuda", dtype=torch.bfloat16, generator=gen)
            for _ in range(3)]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json")
    p.add_argument("--before")
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args()
    global BEFORE
    if args.before:
        BEFORE = os.environ["ATTENTION_BEFORE"] = os.path.abspath(args.before)
    if BEFORE:
        FORMS[1] = "before"
    from asyncpipe.kernels.attention_kernel import HEAD_DIMS

    if args.child:
        from asyncpipe.kernels.attention import attention

        hd, causal, form = int(args.child[0]), args.child[1] == "1", args.child[2]
        use(form)
        t0 = time.perf_counter()
        q, k, v = tensors(hd, 256)
        attention(q, k, v, causal=causal)
        import torch

        torch.cuda.synchronize()
        print(json.dumps({"seconds": time.perf_counter() - t0}))
        return 0

    cases = [(hd, causal) for hd in HEAD_DIMS for causal in (False, True)]
    jobs = [(hd, c, f) for hd, c in cases for f in FORMS]

    def child(job):
        hd, causal, form = job
        out = subprocess.run([sys.executable, __file__, "--child", str(hd), "1" if causal else "0", form],
                             capture_output=True, text=True)
        if out.returncode:
            return job, {"error": out.stderr[-600:]}
        return job, json.loads(out.stdout.strip().splitlines()[-1])

    t0 = time.perf_counter()
    with ThreadPoolExecutor(len(jobs)) as pool:
        compiled = dict(pool.map(child, jobs))
    print(f"compiled {len(jobs)} kernels in {time.perf_counter() - t0:.0f} s", flush=True)

    from asyncpipe.kernels.attention import attention
    from asyncpipe.kernels.attention_bench import attention_flops
    from asyncpipe.timing import time_ms, tflops

    records = []
    for hd, causal in cases:
        q, k, v = tensors(hd)
        flops = attention_flops(q.shape[0], HEADS, SEQLEN, SEQLEN, hd, causal)
        ms = {f: [] for f in FORMS}
        for _ in range(args.rounds):
            for form in FORMS:
                use(form)
                ms[form].append(time_ms(lambda: attention(q, k, v, causal=causal), reps=20))
        rec = dict(head_dim=hd, causal=causal, shape=list(q.shape))
        for form in FORMS:
            rec[form] = dict(ms=ms[form], tflops=tflops(flops, statistics.median(ms[form])),
                             compile_s=compiled[(hd, causal, form)].get("seconds"),
                             error=compiled[(hd, causal, form)].get("error"))
        a, b = FORMS
        rec[f"{a}_over_{b}"] = rec[a]["tflops"] / rec[b]["tflops"]
        records.append(rec)
        print(f"attention hd{hd}{' causal' if causal else ''}: {a} {rec[a]['tflops']:.0f} TF, {b} "
              f"{rec[b]['tflops']:.0f} TF, ratio {rec[f'{a}_over_{b}']:.3f}; compile "
              f"{rec[a]['compile_s'] or 0:.1f} / {rec[b]['compile_s'] or 0:.1f} s", flush=True)
    from ab_record import write

    write(args.json, rounds=args.rounds, forms=FORMS, before=BEFORE and os.path.basename(BEFORE), records=records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
