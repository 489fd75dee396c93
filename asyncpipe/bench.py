"""``python -m asyncpipe bench``: every kernel against its yardsticks, measured in the same run.

Yardsticks: cuBLAS SGEMM (through CuPy or PyTorch, TF32 off), the device-to-device copy (bytes read
plus written), a read-only pass (``sum`` of the same floats), and the chapter's nvcc programs when
``--reference DIR`` names their folder. One table on stdout, one JSON file with ``gpu``, ``date``,
``commit`` and ``results``.

Exit status: 0 when it timed; 1 when there is no usable GPU (said in one line on stderr, before
anything heavy is imported: nothing is timed on the simulator, whose times mean nothing); 2 for
bad arguments. This module's top imports only the standard library, so that ``python -m asyncpipe``
builds its parser without numba; numba, numpy and the kernels are imported by the parts that run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path

from .bench_configs import SGEMM_8X16, SGEMM_BK16_STAGES, SGEMM_STAGES, TMA_CONFIGS, sgemm_configs  # noqa: F401
from .provenance import commit

EXIT_NO_GPU = 1
EXIT_USAGE = 2
EXIT_COMPILE_FAILED = 3
EXIT_STATUS = ("exit status: 0 timed; 1 no usable GPU (one line on stderr, nothing timed); 2 bad arguments; "
               "3 (--compile) a kernel did not compile")


def _progress(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------
# Yardsticks
# ------------------------------------------------------------------------------------------------
def cublas_sgemm_tflops(n: int) -> float | None:
    from .timing import time_ms, tflops

    try:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        a, b = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
        return tflops(2.0 * n**3, time_ms(lambda: torch.mm(a, b), reps=30))
    except ImportError:
        pass
    try:
        import cupy

        a = cupy.random.standard_normal((n, n), dtype=cupy.float32)
        b = cupy.random.standard_normal((n, n), dtype=cupy.float32)
        return tflops(2.0 * n**3, time_ms(lambda: cupy.matmul(a, b), reps=30))
    except ImportError:
        return None


def d2d_copy_gbps(nbytes: int = 1 << 30) -> float:
    """The faster of numba's cuMemcpyDtoD and PyTorch's ``copy_`` (a copy kernel), bytes read + written."""
    import numpy as np
    from numba import cuda

    from .timing import gbps, time_ms

    src = cuda.to_device(np.random.default_rng(0).integers(0, 1000, nbytes // 4, dtype=np.int32))
    dst = cuda.device_array_like(src)
    best = gbps(2.0 * nbytes, time_ms(lambda: dst.copy_to_device(src), reps=30))
    try:
        import torch

        t_src = torch.randint(0, 1000, (nbytes // 4,), dtype=torch.int32, device="cuda")
        t_dst = torch.empty_like(t_src)
        best = max(best, gbps(2.0 * nbytes, time_ms(lambda: t_dst.copy_(t_src), reps=30)))
    except ImportError:
        pass
    return best


def d2d_read_gbps(n_floats: int) -> float | None:
    from .timing import gbps, time_ms

    try:
        import torch

        x = torch.randn(n_floats, device="cuda")
        return gbps(4.0 * n_floats, time_ms(lambda: torch.sum(x), reps=30))
    except ImportError:
        try:
            import cupy

            x = cupy.random.standard_normal(n_floats, dtype=cupy.float32)
            return gbps(4.0 * n_floats, time_ms(lambda: cupy.sum(x), reps=30))
        except ImportError:
            return None


# ------------------------------------------------------------------------------------------------
# Kernels
# ------------------------------------------------------------------------------------------------
def bench_sgemm(n: int, yard: dict, ref: dict, records: list, stages_list=(2, 3, 4, 5, 6, 7, 8)):
    import numpy as np
    from numba import cuda

    from .kernels import sgemm as S
    from .timing import time_ms, tflops

    rng = np.random.default_rng(1)
    a = cuda.to_device(rng.standard_normal((n, n)).astype(np.float32))
    b = cuda.to_device(rng.standard_normal((n, n)).astype(np.float32))
    c = cuda.device_array((n, n), np.float32)
    flop = 2.0 * n**3
    for variant, stages, bk, tile, schedule in sgemm_configs(stages_list):
        _progress(f"sgemm {variant} stages={stages} bk={bk} tile={tile} schedule={schedule} n={n}")
        kw = dict(variant=variant) if variant == "v4" else dict(stages=stages, bk=bk, tile=tile, schedule=schedule)
        ms = time_ms(lambda: S.sgemm(a, b, c, **kw), reps=20)
        tf = tflops(flop, ms)
        vs = {}
        if yard.get("cublas"):
            vs["cublas"] = tf / yard["cublas"]
        twin = "sgemm_v4" if variant == "v4" else f"sgemm_cp_async_s{stages}"
        if twin in ref:
            vs["nvcc_seed"] = tf / ref[twin]
        if bk != 8 or tile != "8x8" or schedule != "plain":     # the nvcc twin has the chapter's loop only
            vs.pop("nvcc_seed", None)
        name = (f"sgemm_{variant}" + (f"_{tile}" if tile != "8x8" else "") + (f"_bk{bk}" if bk != 8 else "")
                + (f"_{schedule}" if schedule != "plain" else ""))
        rec = dict(kernel=name, shape=[n, n, n], ms=ms, tflops=tf, vs=vs)
        if variant == "cp_async":
            rec["stages"] = stages
            rec["bk"] = bk
            rec["tile"] = tile
            rec["schedule"] = schedule
        records.append(rec)


def bench_tma(n: int, yard: dict, ref: dict, records: list):
    import numpy as np
    from numba import cuda

    from .kernels.tma_add_one import add_one
    from .timing import gbps, time_ms

    a = cuda.to_device(np.random.default_rng(2).integers(0, 1000, (n, n), dtype=np.int32))
    nbytes = 2.0 * a.nbytes
    for name, kw in TMA_CONFIGS:
        _progress(f"{name} {n}x{n} {kw}")
        ms = time_ms(lambda: add_one(a, **kw), reps=20)
        g = gbps(nbytes, ms)
        vs = {"d2d_copy": g / yard["d2d_copy"]}
        if "tma_add_one" in ref:
            vs["nvcc_seed"] = g / ref["tma_add_one"]
        rec = dict(kernel=name, shape=[n, n], ms=ms, gbps=g, vs=vs)
        if kw.get("pipelined"):
            rec.update(stages=kw["stages"], ctas_per_sm=kw["ctas_per_sm"])
        records.append(rec)


def bench_cluster_sum(n: int, yard: dict, ref: dict, records: list):
    import numpy as np
    from numba import cuda

    from .kernels.cluster_sum import cluster_sum, pair_sums
    from .timing import gbps, time_ms

    x = cuda.to_device(np.random.default_rng(3).uniform(-1, 1, n).astype(np.float32))
    out = cuda.device_array(1, np.float64)
    per_block = 32768
    clusters = n // (2 * per_block)
    _progress(f"cluster pair_sum (chapter) n={n}")
    ms = time_ms(lambda: pair_sums(x, per_block, clusters), reps=20)
    g = gbps(4.0 * clusters * 2 * per_block, ms)
    vs = {"d2d_read": g / yard["d2d_read"]} if yard.get("d2d_read") else {}
    if "cluster_sum" in ref:
        vs["nvcc_seed"] = g / ref["cluster_sum"]
    records.append(dict(kernel="cluster_pair_sum_chapter", shape=[n], cluster=2, ms=ms, gbps=g, vs=vs))
    for cs, per_sm in ((1, 8), (2, 4), (2, 8), (4, 8), (8, 8)):
        _progress(f"cluster_sum cluster={cs} ctas_per_sm={per_sm} n={n}")
        ms = time_ms(lambda: cluster_sum(x, cluster_size=cs, ctas_per_sm=per_sm, out=out), reps=20)
        g = gbps(4.0 * n, ms)
        vs = {"d2d_read": g / yard["d2d_read"]} if yard.get("d2d_read") else {}
        if "cluster_sum" in ref:
            vs["nvcc_seed"] = g / ref["cluster_sum"]
        records.append(dict(kernel="cluster_sum", shape=[n], cluster=cs, ctas_per_sm=per_sm, ms=ms, gbps=g, vs=vs))


def bench_wgmma(sizes, records: list):
    """The warp-specialised Hopper GEMM (bf16) beside cuBLAS bf16, each size and epilogue ("direct":
    stores from registers; "tma": staged in shared memory, TMA stores) in its own record."""
    from .kernels.wgmma_gemm import EPILOGUES, benchmark

    for n in sizes:
        for epilogue in EPILOGUES:
            _progress(f"wgmma GEMM bf16 n={n} epilogue={epilogue}")
            try:
                records.append(benchmark(n, epilogue=epilogue))
            except Exception as exc:  # noqa: BLE001 - one failing epilogue must not hide the other's figures
                _progress(f"wgmma GEMM bf16 n={n} epilogue={epilogue} failed: {type(exc).__name__}: {exc}")


def bench_attention(quick: bool, records: list):
    """FlashAttention-3-style attention forward beside torch's SDPA backends (and FA3 when installed)."""
    from .kernels.attention_bench import sweep

    if quick:
        sweep(records, _progress, seqlens=(1024,), head_dims=(128,), dtypes=("bfloat16",))
    else:
        sweep(records, _progress)


def bench_fp8_gemm(quick: bool, records: list):
    """The block-scaled FP8 GEMM (DeepGEMM's scaling) beside torch._scaled_mm tensorwise and rowwise, same run."""
    from .kernels.fp8_gemm import BENCH_SHAPES, benchmark

    for shape in ((128, 7168, 2048), (4096, 4096, 4096)) if quick else BENCH_SHAPES:
        _progress(f"fp8 GEMM {'x'.join(map(str, shape))}")
        try:
            records.append(benchmark(*shape))
        except Exception as exc:  # noqa: BLE001 - one failing shape must not hide the others' figures
            _progress(f"fp8 GEMM {shape} failed: {type(exc).__name__}: {exc}")
            records.append(dict(kernel="fp8_gemm_e4m3_blockscaled", shape=list(shape),
                                error=f"{type(exc).__name__}: {exc}", vs={}))


def bench_codecs(quick: bool, records: list):
    """The MX/NVFP4 codecs (quantize and dequantize) at 1 GiB of bf16 (64 MiB quick) beside the device-to-device
    copy of the same bytes, same run."""
    from .kernels.mx_codec import benchmark

    _progress("MX/NVFP4 codecs")
    records.extend(benchmark(1 << (26 if quick else 30)))


PARTS = ("sgemm", "tma", "cluster_sum", "wgmma", "attention", "fp8_gemm", "codecs", "first_call")   # first_call: every kernel's first call


# kernels compiled at once for the first-call rows: a quarter of the cores (4 of the H200 machine's 16), so that each
# row is close to what a user's lone first call costs: at 12 at once on those 16 cores the SGEMMs came out 0-2 s slower
# than at 6 (bench/h200.md, eighteenth session: the compiles share cores and memory)
FIRST_CALL_JOBS = max(1, (os.cpu_count() or 4) // 4)


def run_bench(json_path: str | None = None, reference: str | None = None, quick: bool = False,
              sgemm_stages: tuple[int, ...] | None = None, only: tuple[str, ...] | None = None) -> int:
    """Times the parts named in ``only`` (``PARTS``; all when None), prints the table, writes the JSON."""
    from numba import cuda

    check_only(only)
    dev = cuda.get_current_device()
    gpu = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
    n = 1024 if quick else 4096
    ref = {}
    if reference and (only is None or {"sgemm", "tma", "cluster_sum"} & set(only)):
        from .reference import run_reference

        _progress(f"building and running the chapter's nvcc programs from {reference}")
        ref = run_reference(reference, log=_progress)
    _progress("yardsticks: cuBLAS SGEMM, device-to-device copy, read-only sum")
    yard = {"cublas": cublas_sgemm_tflops(n), "d2d_copy": d2d_copy_gbps(), "d2d_read": d2d_read_gbps(1 << 29)}
    records: list = []
    for part, args in ((bench_sgemm, (n, yard, ref, records, sgemm_stages or ((3,) if quick else SGEMM_STAGES))),
                       (bench_tma, (4096 if quick else 16384, yard, ref, records)),
                       (bench_cluster_sum, (1 << (24 if quick else 29), yard, ref, records)),
                       (bench_wgmma, ((1024,) if quick else (4096, 8192), records)),
                       (bench_attention, (quick, records)),
                       (bench_fp8_gemm, (quick, records)),
                       (bench_codecs, (quick, records))):
        if only is not None and part.__name__.removeprefix("bench_") not in only:
            continue
        try:
            part(*args)
        except Exception as exc:  # noqa: BLE001 - one broken kernel must not hide the others' figures
            _progress(f"{part.__name__} failed: {type(exc).__name__}: {exc}")
            records.append(dict(kernel=part.__name__, error=f"{type(exc).__name__}: {exc}", vs={}))

    first_call = {}
    if (not quick and only is None) or (only is not None and "first_call" in only):
        _progress("first calls in new processes: cold (compiling), then warm (numba's disk cache)")
        try:
            from .first_call import measure

            first_call = measure(jobs=FIRST_CALL_JOBS, log=_progress)
        except Exception as exc:  # noqa: BLE001 - the kernels' figures stand without it
            _progress(f"first-call timing failed: {type(exc).__name__}: {exc}")
    doc = dict(gpu=gpu, date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               commit=commit(), yardsticks={**yard, **{f"nvcc_{k}": v for k, v in ref.items()}}, results=records,
               first_call=first_call, first_call_jobs=FIRST_CALL_JOBS if first_call else None)
    if json_path:                                     # first: a table that fails to print loses no figures
        Path(json_path).write_text(json.dumps(doc, indent=1))
    print(format_table(doc))
    return 0


def format_table(doc: dict) -> str:
    lines = [f"{doc['gpu']}  {doc['date']}  commit {doc['commit']}",
             "yardsticks: " + ", ".join(f"{k}={v:.1f}" for k, v in doc["yardsticks"].items() if v),
             f"{'kernel':24s} {'shape':18s} {'config':>6s} {'ms':>8s} {'TFLOPS|GB/s':>12s}  ratios",
             "(config: stages, or cluster size; /n: CTAs per SM)"]
    for r in doc["results"]:
        if "error" in r:
            lines.append(f"{r['kernel']:24s} ERROR {r['error'][:120]}")
            continue
        fig = f"{r['tflops']:.1f} TF" if "tflops" in r else f"{r['gbps']:.0f} GB/s"
        vs = " ".join(f"{k}={v:.2f}x" for k, v in r["vs"].items())
        cfg = str(r.get("stages", r.get("cluster", "")))
        if "ctas_per_sm" in r:
            cfg += f"/{r['ctas_per_sm']}"
        shape = "x".join(map(str, r["shape"])) if "shape" in r else f"{r.get('bytes', 0) / 2**20:.0f} MiB"
        lines.append(f"{r['kernel']:24s} {shape:18s} {cfg:>6} "
                     f"{r['ms']:8.3f} {fig:>12s}  {vs}")
    if doc.get("first_call"):
        inits = [v["numba_init_s"] for v in doc["first_call"].values() if "numba_init_s" in v]
        lines.append("first call in a new process (s" + (f", {doc['first_call_jobs']} at once" if doc.get("first_call_jobs")
                                                           else "") + ")" + (f", after numba's own init ({min(inits):.2f}-"
                                                           f"{max(inits):.2f} s once per process)" if inits else "")
                     + ": " + ", ".join(
            f"{k} ERROR {v['error'][:80]}" if "error" in v else f"{k} {v['cold_s']:.1f} cold / {v['warm_s']:.2f} warm"
            for k, v in doc["first_call"].items()))
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------
# Command line: python -m asyncpipe bench
# ------------------------------------------------------------------------------------------------
API = "bench"
_CPU_ALTERNATIVES = ("nothing was timed (without a GPU: python -m asyncpipe demo runs the programs on the "
                     "simulator; timeline and tune --predict-only model them)")


def check_only(only) -> None:
    """``--only``'s parts, each one of ``PARTS``."""
    from .errors import check

    for part in only or ():
        check(part in PARTS, API, f"--only parts must be among {PARTS}", repr(part))


def parse_stages(text: str | None) -> tuple[int, ...] | None:
    """``--sgemm-stages 2,3,4``: stage counts, integers >= 2."""
    from .errors import check

    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    check(all(p.isdigit() and int(p) >= 2 for p in parts), API,
          "--sgemm-stages must be comma-separated integers >= 2", repr(text))
    return tuple(int(p) for p in parts)


def gpu_missing() -> str | None:
    """None when a usable GPU is here, else why not, in one line (numba's driver errors span several)."""
    from .demo import gpu_status

    why = gpu_status()
    return None if why is None else " ".join(why.split())


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = EXIT_STATUS
    p.add_argument("--json", help="write the results here as JSON")
    p.add_argument("--reference", help="folder of the chapter's .cu programs, built with nvcc as yardsticks")
    p.add_argument("--quick", action="store_true", help="small sizes, fewer configurations")
    p.add_argument("--sgemm-stages", help="comma-separated cp.async stage counts to time (default 2,3,4,5)")
    p.add_argument("--only", help=f"comma-separated parts to run: {', '.join(PARTS)} (default: all)")
    p.add_argument("--compile", action="store_true",
                   help="no GPU: time each shipped kernel's cold offline compile for sm_90a, phase by phase, each in a "
                        "fresh process with empty caches (asyncpipe.compile_time); --only then names kernels of "
                        "--list, by name, pattern or prefix")
    p.add_argument("--jobs", help="--compile: kernels compiled at the same time (default 1: clean timings)")
    p.add_argument("--list", action="store_true", help="--compile: print the kernels' names and stop")


def run_compile(args) -> int:
    """``--compile``: the arguments checked (``EXIT_USAGE`` with the rule), then every chosen kernel compiled cold
    (``asyncpipe.compile_time``): the table on stdout, ``--json``; ``EXIT_COMPILE_FAILED`` if one did not compile."""
    from . import compile_time as ct
    from .errors import AsyncpipeError, check

    try:
        given = [f for f, v in (("--quick", args.quick), ("--reference", args.reference),
                                ("--sgemm-stages", args.sgemm_stages)) if v]
        check(not given, API, "--compile times compiles, not kernels: --quick, --reference and --sgemm-stages do not "
              "apply", " ".join(given))
        jobs = 1 if args.jobs is None else args.jobs
        check(str(jobs).isdigit() and int(jobs) >= 1, API, "--jobs must be an integer >= 1", repr(jobs))
        only = [p.strip() for p in args.only.split(",")] if args.only else None
        targets = ct.select(ct.shipped(sgemm_configs(SGEMM_STAGES)), only)
    except AsyncpipeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.list:
        print("\n".join(targets))
        return 0
    doc = ct.measure(targets, int(jobs))
    print(ct.format_table(doc))
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    return EXIT_COMPILE_FAILED if any("error" in r for r in doc["results"]) else 0


def run(args) -> int:
    """Check the arguments, then that there is a GPU (one line and ``EXIT_NO_GPU`` when not), then time."""
    from .errors import AsyncpipeError, check

    if getattr(args, "compile", False):
        return run_compile(args)
    try:
        jobs, listing = getattr(args, "jobs", None), getattr(args, "list", False)
        check(jobs is None and not listing, API, "--jobs and --list apply to --compile only",
              f"--jobs {jobs}" if jobs is not None else "--list")
        only = tuple(p.strip() for p in args.only.split(",")) if args.only else None
        check_only(only)
        stages = parse_stages(args.sgemm_stages)
    except AsyncpipeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    why = gpu_missing()
    if why is not None:
        print(f"error: {API}: needs a CUDA GPU (sm_80 or newer) to time kernels, got {why}; {_CPU_ALTERNATIVES}",
              file=sys.stderr)
        return EXIT_NO_GPU
    return run_bench(args.json, args.reference, args.quick, stages, only)
