"""``python -m asyncpipe warm``: compile kernels into numba's disk cache ahead of their first call, in parallel.

What it compiles (``targets``): every shipped kernel's default configuration, the kernel a plain call compiles
(``default_targets``: ``sgemm()`` untuned, the chapter's 3 stages, its interior kernel and its edge kernel;
``sgemm(variant="v4")``, both; ``wgmma_gemm()`` on bf16; ``add_one()`` pipelined at its default stage count and
the chapter's ``add_one(pipelined=False)``, on int32 and float32; ``cluster_sum()`` and the chapter's
``pair_sums``; the transpose), and every configuration the tuner picked on this GPU (``tuned_targets``: for each
SGEMM problem in the tuner's cache, ``$ASYNCPIPE_CACHE_DIR/tune.json``, for this asyncpipe version and kernel
source, the configuration ``sgemm()`` then takes, and the kernel that problem's shape needs). A user's
``@autotune`` kernel is not warmed: its factory lives in the user's file, and its wrapper compiles it.

How: each kernel is one job for a worker process of the tuner's pool (``asyncpipe.tune.compile.run_in_workers``:
``spawn`` processes, the simulator switch taken out of their environment, a tqdm bar). A worker builds the
dispatcher the kernel function itself builds (``sgemm.kernel(...)``, ``tma_add_one._jit(...)``, ...) and calls
``dispatcher.compile(argtypes)`` with the argument types a call passes, which is what the call does: numba loads
the kernel from its disk cache or compiles it and saves it there (``asyncpipe.jit_cache``). The cache keeps one
cubin per GPU, so this needs the GPU the later calls run on; the workers share its cache folder through their
environment (``ASYNCPIPE_CACHE_DIR``, ``NUMBA_CACHE_DIR``). Kernels compiling for minutes (the 8 x 16 SGEMMs) go
first.

``warm(targets, jobs)`` is the one entry point: the command line, ``scripts/gpu_check.sh`` (the bench's SGEMM
configurations, ``sgemm_targets(bench.sgemm_configs())``, and the tuner's candidates, ``tuner_sgemm_configs``)
and the bench can call it. Exit status: 0 every kernel is in the cache; 1 no usable GPU (one line on stderr,
nothing compiled); 2 bad arguments; 3 a kernel failed (named on stderr). This module's top imports only the
standard library (``python -m asyncpipe`` builds its parser without numba).
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import sys
import time
from dataclasses import dataclass

API = "warm"
EXIT_NO_GPU = 1
EXIT_USAGE = 2
EXIT_FAILED = 3
EXIT_STATUS = ("exit status: 0 every kernel is in numba's disk cache; 1 no usable GPU (one line on stderr, nothing "
               "compiled); 2 bad arguments; 3 a kernel failed to compile")


@dataclass(frozen=True)
class Target:
    """One kernel to compile: ``kernel`` (``sgemm``, ``transpose``, ``tma_add_one``, ``cluster_sum``,
    ``wgmma_gemm``) with its compile-time options ``config`` (sorted ``(name, value)`` pairs) and ``why`` it is
    compiled (the call that takes it). Plain data: it travels to a worker process by pickle."""

    name: str
    kernel: str
    config: tuple = ()
    why: str = ""

    @classmethod
    def of(cls, name: str, kernel: str, why: str, **config) -> "Target":
        return cls(name, kernel, tuple(sorted(config.items())), why)


@dataclass(frozen=True)
class Warmed:
    """What a worker did with one target: ``cached`` when numba found it in the disk cache already (nothing
    compiled), ``error`` when it failed (the compiler's complaint, or the cache's refusal to keep it)."""

    name: str
    seconds: float
    cached: bool = False
    error: str | None = None


# ------------------------------------------------------------------------------------------------
# What to compile
# ------------------------------------------------------------------------------------------------
def _sgemm_kernel(problem, bk: int, schedule: str) -> dict:
    """The kernel ``sgemm._plan`` takes for ``problem`` (M, N, K) on freshly allocated (16-byte aligned) arrays:
    16-byte copies of A (B) when K (N) is a multiple of 4 (kmajor always copies A's padded transpose so), and the
    interior kernel when M, N are multiples of the CTA tile and K of the stage depth, with 16-byte copies."""
    from .kernels import sgemm as S

    m, n, k = problem
    vec_a = 4 if schedule == "kmajor" or k % 4 == 0 else 1
    vec_b = 4 if n % 4 == 0 else 1
    return dict(vec_a=vec_a, vec_b=vec_b,
                edges=not (m % S.BM == 0 and n % S.BN == 0 and k % bk == 0 and vec_a == vec_b == 4))


def sgemm_targets(configs, why: str, edges=(False,), problem=None) -> dict[str, Target]:
    """The SGEMM kernels of ``configs``, ``(variant, stages, bk, tile, schedule)`` tuples (``bench.sgemm_configs()``'s
    form): for each, the interior kernel, also the edge kernel with ``edges=(False, True)``, or, with ``problem``
    (M, N, K), the one kernel a call on that shape takes (``_sgemm_kernel``); a kmajor configuration adds the
    transpose it runs first. Names are ``bench --compile``'s (``compile_time.sgemm_name``), with ``_vec1x4`` (the
    copy widths of A and B, in floats) where a copy is narrower than 16 bytes."""
    from .compile_time import sgemm_name

    out: dict[str, Target] = {}
    for variant, stages, bk, tile, schedule in configs:
        kinds = ([_sgemm_kernel(problem, bk, schedule)] if problem is not None else
                 [dict(vec_a=4, vec_b=4, edges=e) for e in edges])
        for kind in kinds:
            name = sgemm_name(variant, stages, bk, tile, schedule, kind["edges"])
            if (kind["vec_a"], kind["vec_b"]) != (4, 4) and variant != "v4":
                name += f"_vec{kind['vec_a']}x{kind['vec_b']}"
            out.setdefault(name, Target.of(name, "sgemm", f"{why}: {'edge' if kind['edges'] else 'interior'} kernel",
                                           variant=variant, stages=stages, bk=bk, tile=tile, schedule=schedule, **kind))
        if schedule == "kmajor":
            out.setdefault("transpose", Target.of("transpose", "transpose", f"{why} (its schedule='kmajor')"))
    return out


def _defaults(fn) -> dict:
    """The keyword defaults of the kernel function ``fn``: what a plain call compiles."""
    import inspect

    return {k: p.default for k, p in inspect.signature(fn).parameters.items() if p.default is not p.empty}


def default_targets() -> dict[str, Target]:
    """Every shipped kernel's default configuration (the module doc), read from the kernel functions."""
    from .kernels import sgemm as S
    from .kernels import tma_add_one as TA
    from .kernels import wgmma_gemm as G

    ch = S.CHAPTER_CONFIGURATION                 # sgemm() untuned
    out = sgemm_targets([("cp_async", ch["stages"], ch["bk"], ch["tile"], ch["schedule"])], "sgemm()", (False, True))
    out.update(sgemm_targets([("v4", 1, S.BK, S.TILE, S.SCHEDULE)], 'sgemm(variant="v4")', (False, True)))
    out["transpose"] = Target.of("transpose", "transpose", 'sgemm(schedule="kmajor")')
    add = _defaults(TA.add_one)
    for dtype in ("int32", "float32"):
        suffix = "" if dtype == "int32" else f"_{dtype}"
        name = f"tma_add_one_pipelined_s{add['stages']}{suffix}"
        out[name] = Target.of(name, "tma_add_one", f"add_one() on {dtype}", which="pipelined", dtype=dtype,
                              stages=add["stages"])
        name = f"tma_add_one_chapter{suffix}"
        out[name] = Target.of(name, "tma_add_one", f"add_one(pipelined=False) on {dtype}", which="chapter",
                              dtype=dtype)
    # cluster_sum's cluster size and CTAs per SM are launch parameters: one kernel serves them all
    for name, which, call in (("cluster_sum", "sum", "cluster_sum()"), ("cluster_sum_finish", "finish", "cluster_sum()"),
                              ("cluster_sum_pair_chapter", "pair", "pair_sums()")):
        out[name] = Target.of(name, "cluster_sum", call, which=which)
    g = _defaults(G.wgmma_gemm)
    cfg = dict(block_n=g["block_n"], stages=g["stages"], cluster=g["cluster"], ab="bf16",
               b_kmajor=g["b_transposed"], c_bf16=g["out_dtype"] == "bfloat16", epilogue=g["epilogue"])
    name = f"wgmma_gemm_bf16_bn{cfg['block_n']}_s{cfg['stages']}_c{cfg['cluster']}_{cfg['epilogue']}"
    out[name] = Target.of(name, "wgmma_gemm", "wgmma_gemm() on bf16", **cfg)
    from .compile_time import attention_configs

    for name, config in attention_configs().items():    # attention()'s kernel is chosen by head dim and causal
        out[name] = Target.of(name, "attention", f"attention() on bf16, head_dim {config['head_dim']}"
                              + (", causal" if config["causal"] else ""), **config)
    return out


def tuned_targets(gpu: str | None) -> dict[str, Target]:
    """The SGEMM kernels ``sgemm()`` takes from the tuner's cache on ``gpu`` (None: on every GPU the cache names):
    per tuned problem, the fastest measured configuration (``tune.cached_config``), for this asyncpipe version,
    kernel source and search space (an entry for other code is never used, so it is not warmed)."""
    from .tune import cache
    from .tune.kernels import tunable

    spec = tunable("sgemm")
    out: dict[str, Target] = {}
    for key, entry in sorted(cache.read_entries().items()):
        if not isinstance(entry, dict) or entry.get("kernel") != spec.name or (gpu is not None and entry.get("gpu") != gpu):
            continue
        try:
            problem = spec.problem(entry["problem"])
            current = key == cache.cache_key(entry["gpu"], spec.name, problem, source=spec.source, space=spec.space)
        except (KeyError, TypeError, ValueError):    # not an entry of this format: nothing a call would use
            continue
        best = cache.cached_config(spec.name, problem, gpu=entry["gpu"]) if current else None
        if best is None:
            continue
        kw = spec.kernel_kw(best)
        why = f"tuned: sgemm {cache.problem_key(problem)} on {entry['gpu']}"
        for name, t in sgemm_targets([("cp_async", kw["stages"], kw["bk"], kw["tile"], kw["schedule"])], why,
                                     problem=problem).items():
            out.setdefault(name, t)
    return out


def targets(gpu: str | None) -> dict[str, Target]:
    """``default_targets`` and ``tuned_targets(gpu)``, a kernel in both once (with both reasons)."""
    out = default_targets()
    for name, t in tuned_targets(gpu).items():
        out[name] = Target(name, t.kernel, t.config, f"{out[name].why}; {t.why}") if name in out else t
    return out


def tuner_sgemm_configs(tune_args: str = "") -> list[tuple]:
    """``(variant, stages, bk, tile, schedule)`` of every candidate ``python -m asyncpipe tune sgemm ... TUNE_ARGS``
    compiles (``--tile``, ``--bk``, ``--schedule`` and ``--stages`` narrow them), for ``sgemm_targets``."""
    import shlex

    from .tune.cli import add_arguments, narrowed_option_sets
    from .tune.kernels import tunable

    p = argparse.ArgumentParser(prog="python -m asyncpipe tune")
    add_arguments(p)
    args = p.parse_args(["sgemm", "--m", "1", "--n", "1", "--k", "1", *shlex.split(tune_args)])
    spec = tunable("sgemm")
    return [("cp_async", kw["stages"], kw["bk"], kw["tile"], kw["schedule"])
            for kw in map(spec.kernel_kw, spec.configs(args.stages, narrowed_option_sets(spec, args)))]


def select(found: dict[str, Target], only) -> dict[str, Target]:
    """The targets ``only`` names (None or empty: all): each item a name, a ``*?[`` pattern or a prefix."""
    from .errors import check

    if not only:
        return dict(found)
    chosen = set()
    for item in only:
        hits = fnmatch.filter(found, item if any(c in item for c in "*?[") else item + "*")
        check(bool(hits), API, "--only must name kernels of the list, by name, pattern or prefix (python -m "
              "asyncpipe warm --list)", repr(item))
        chosen.update(hits)
    return {n: t for n, t in found.items() if n in chosen}


# ------------------------------------------------------------------------------------------------
# Compiling: one target in a worker
# ------------------------------------------------------------------------------------------------
def resolve(target: Target):
    """``(dispatcher, argtypes)``: the dispatcher the kernel function builds for ``target``'s configuration (its
    module's own, so the options and the cached source file are the call's) and the argument types its launch
    passes (numba's ``typeof`` of the device arrays and numpy scalars)."""
    from numba import types

    from .ptx.tensor_map_type import tensormap

    f32, i32, u64 = types.float32[::1], types.int32, tensormap
    c = dict(target.config)
    if target.kernel == "sgemm":
        from .kernels import sgemm as S

        disp = (S.kernel("v4", edges=c["edges"]) if c["variant"] == "v4" else
                S.kernel("cp_async", c["stages"], c["vec_a"], c["vec_b"], c["edges"], c["bk"], c["tile"],
                         schedule=c["schedule"]))
        return disp, (i32, i32, i32, types.float32, f32, f32, types.float32, f32)
    if target.kernel == "transpose":
        from .jit_cache import jit
        from .kernels import transpose as T

        return jit(T._transpose), (f32, f32, i32, i32, i32, i32)     # transpose.prepare's, built on first use
    if target.kernel == "tma_add_one":
        from .kernels import tma_add_one as TA

        if c["which"] == "chapter":                              # add_one(pipelined=False): no stage count
            return TA._jit("chapter", c["dtype"]), (u64,)
        return TA._jit("pipelined", c["dtype"], c["stages"]), (u64, i32, i32)
    if target.kernel == "cluster_sum":
        from .kernels import cluster_sum as CS

        return CS._jit(c["which"]), {"pair": (f32, f32, i32), "sum": (f32, types.int64, f32),
                                     "finish": (f32, i32, types.float64[::1])}[c["which"]]
    if target.kernel == "wgmma_gemm":
        from .kernels import wgmma_gemm as G

        disp = G._jit(c["block_n"], c["stages"], c["cluster"], c["ab"], c["b_kmajor"], c["c_bf16"], c["epilogue"])
        return disp, G.kernel_argtypes(c["c_bf16"])
    if target.kernel == "attention":
        from .kernels import attention as A
        from .kernels import attention_kernel as AK

        return A._jit(c["head_dim"], c["causal"], c["ab"], AK.default_stages(c["head_dim"])), AK.kernel_argtypes()
    raise ValueError(f"{API}: target kernel must be sgemm, transpose, tma_add_one, cluster_sum, wgmma_gemm or attention, "
                     f"got {target.kernel!r}")


def _complaint(exc: BaseException) -> str:
    """An exception in one line: its type and its message's last line (numba's end with the cause)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[-1] if text else ''}"[:400]


def into_disk_cache(disp, argtypes) -> bool:
    """``disp.compile(argtypes)``, what the first call does: numba loads the kernel from its disk cache (True) or
    compiles it and saves it there (False). A kernel the cache does not keep raises: its first call would compile."""
    import warnings

    from .jit_cache import CacheWarning

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", CacheWarning)
        disp.compile(argtypes)
    for w in seen:                                        # the others are shown as they would be
        if not issubclass(w.category, CacheWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    refused = [str(w.message) for w in seen if issubclass(w.category, CacheWarning)]
    if refused:
        raise RuntimeError(refused[0])
    if not disp.stats.cache_path:
        raise RuntimeError("the kernel's dispatcher has no disk cache (ASYNCPIPE_JIT_CACHE=0 or the simulator)")
    return sum(disp.stats.cache_hits.values()) > 0


def compile_target(target: Target, compile=into_disk_cache) -> Warmed:
    """Worker: ``compile(*resolve(target))`` (default ``into_disk_cache``, which returns whether the kernel was
    cached already), timed; an exception is the target's ``error``."""
    t0 = time.perf_counter()
    try:
        cached = compile(*resolve(target))
    except Exception as exc:  # noqa: BLE001 - the compiler's complaint is the answer
        return Warmed(target.name, time.perf_counter() - t0, error=_complaint(exc))
    return Warmed(target.name, time.perf_counter() - t0, cached=bool(cached))


# ------------------------------------------------------------------------------------------------
# Many targets
# ------------------------------------------------------------------------------------------------
def _cost(t: Target) -> int:
    """A rank of how long ``t`` compiles cold (bench/compile.json: the 8 x 16 SGEMMs minutes, the edge kernels and
    the wgmma GEMM 15-25 s, the other SGEMMs 3-13 s, the rest about a second), so the longest start first."""
    c = dict(t.config)
    if t.kernel == "sgemm":
        return 5 if c["tile"] != "8x8" else 4 if c["edges"] else 2
    return 3 if t.kernel in ("wgmma_gemm", "attention") else 0


def compile_all(found: dict[str, Target], jobs: int | None = None, progress: bool = True,
                worker=compile_target) -> tuple[list[Warmed], float]:
    """Every target through ``worker`` in ``jobs`` worker processes (default: the CPU count, at most one per
    target; 0: in this process), the longest first; ``(results in found's order, seconds)``."""
    from .tune.compile import run_in_workers

    order = sorted(found.values(), key=_cost, reverse=True)
    t0 = time.perf_counter()
    done = run_in_workers(worker, {t.name: t for t in order}, jobs, progress, f"[{API}] compile",
                          on_error=lambda name, exc: Warmed(name, 0.0, error=f"worker process: {_complaint(exc)}"))
    return [done[n] for n in found], time.perf_counter() - t0


def summary(results: list[Warmed], seconds: float, jobs: int) -> str:
    """The one-line summary: kernels in the cache (compiled, already there), seconds, processes, failures."""
    ok = [r for r in results if r.error is None]
    cached = sum(r.cached for r in ok)
    failed = [r.name for r in results if r.error is not None]
    return (f"{API}: {len(ok)} of {len(results)} kernels in numba's disk cache ({len(ok) - cached} compiled, "
            f"{cached} already cached) in {seconds:.1f} s with {jobs} process{'es' if jobs != 1 else ''}; "
            f"{len(failed)} failed" + (f": {', '.join(failed)}" if failed else ""))


def warm(found: dict[str, Target], jobs: int | None = None, progress: bool = True, worker=compile_target) -> int:
    """``compile_all``, then a line on stderr per failure and the summary on stdout; ``EXIT_FAILED`` if a kernel
    failed, else 0."""
    n = min(len(found), jobs if jobs is not None else (os.cpu_count() or 1))
    results, seconds = compile_all(found, n, progress, worker)
    for r in results:
        if r.error is not None:
            print(f"{API}: {r.name} failed: {r.error}", file=sys.stderr)
    print(summary(results, seconds, n), flush=True)
    return EXIT_FAILED if any(r.error is not None for r in results) else 0


# ------------------------------------------------------------------------------------------------
# Command line: python -m asyncpipe warm
# ------------------------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = EXIT_STATUS
    p.add_argument("--jobs", help="worker processes compiling at once (default: the CPU count, at most one per kernel)")
    p.add_argument("--list", action="store_true",
                   help="print each kernel it would compile and why, and stop (no GPU needed; without one, the "
                        "tuner's picks of every GPU in its cache)")
    p.add_argument("--only", nargs="+", metavar="NAME",
                   help="only these kernels of --list: names, *-patterns or prefixes (sgemm, tma), space- or "
                        "comma-separated")


def _gpu_name(why: str | None) -> str | None:
    if why is not None:
        return None
    from .host.device import device_info

    return device_info(API).name


def run(args) -> int:
    """The arguments checked (``EXIT_USAGE`` with the rule), ``--list``, then the GPU (one line and ``EXIT_NO_GPU``
    without one), then ``warm``."""
    from . import jit_cache
    from .bench import gpu_missing
    from .errors import AsyncpipeError, check

    try:
        jobs = args.jobs
        check(jobs is None or (jobs.isdigit() and int(jobs) >= 1), API, "--jobs must be an integer >= 1", repr(jobs))
        only = [p.strip() for item in args.only or () for p in item.split(",") if p.strip()]
        why = gpu_missing()
        chosen = select(targets(_gpu_name(why)), only)
        if args.list:
            width = max(map(len, chosen), default=0)
            print("\n".join(f"{n:{width}s}  {t.why}" for n, t in chosen.items()))
            return 0
        check(jit_cache.enabled(), API, f"the kernel cache must be on to be warmed ({jit_cache.ENV}=0 turns it off)",
              f"{jit_cache.ENV}={os.environ.get(jit_cache.ENV)!r}")
    except AsyncpipeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if why is not None:
        print(f"error: {API}: needs a CUDA GPU (sm_80 or newer): numba's disk cache keeps each kernel's cubin for "
              f"the GPU it was compiled on, got {why}; nothing was compiled (--list prints what it would compile; "
              "bench --compile times the compiles offline)", file=sys.stderr)
        return EXIT_NO_GPU
    return warm(chosen, None if jobs is None else int(jobs))
