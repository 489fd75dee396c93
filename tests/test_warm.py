"""``python -m asyncpipe warm``: what it would compile (``--list``, no GPU), the no-GPU line and the argument errors,
the worker pool on two small kernels compiled offline in spawned processes, gpu_check's warm step, and, on a
Hopper GPU, that a later process's first calls load every default kernel from the disk cache."""

import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from asyncpipe import __version__, warm
from asyncpipe.__main__ import main

ROOT = Path(__file__).resolve().parents[1]

DEFAULTS = {
    "sgemm_cp_async_s3": "sgemm(): interior kernel",
    "sgemm_cp_async_s3_edges": "sgemm(): edge kernel",
    "sgemm_v4": 'sgemm(variant="v4"): interior kernel',
    "sgemm_v4_edges": 'sgemm(variant="v4"): edge kernel',
    "transpose": 'sgemm(schedule="kmajor")',
    "tma_add_one_pipelined_s4": "add_one() on int32",
    "tma_add_one_chapter": "add_one(pipelined=False) on int32",
    "tma_add_one_pipelined_s4_float32": "add_one() on float32",
    "tma_add_one_chapter_float32": "add_one(pipelined=False) on float32",
    "cluster_sum": "cluster_sum()",
    "cluster_sum_finish": "cluster_sum()",
    "cluster_sum_pair_chapter": "pair_sums()",
    "wgmma_gemm_bf16_bn256_s4_c2_direct": "wgmma_gemm() on bf16",
    **{f"attention_bf16_hd{hd}" + ("_causal" if causal else ""): f"attention() on bf16, head_dim {hd}"
       + (", causal" if causal else "") for hd in (64, 128, 256) for causal in (False, True)},
}
NO_GPU = ("error: warm: needs a CUDA GPU (sm_80 or newer): numba's disk cache keeps each kernel's cubin for the GPU "
          "it was compiled on, got no CUDA driver or GPU is visible (numba.cuda.is_available() is False); nothing was "
          "compiled (--list prints what it would compile; bench --compile times the compiles offline)")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """An empty asyncpipe cache folder (no tuner picks), for this test and the processes it starts."""
    monkeypatch.setenv("ASYNCPIPE_CACHE_DIR", str(tmp_path))
    return tmp_path


def listed(capsys, *argv) -> dict:
    assert main(["warm", "--list", *argv]) == 0
    return dict(re.split(r"\s{2,}", line, maxsplit=1) for line in capsys.readouterr().out.splitlines())


def test_list_names_each_shipped_kernels_default_and_the_call_that_compiles_it(capsys, cache_dir, no_gpu):
    assert listed(capsys) == DEFAULTS


def test_the_defaults_are_the_kernel_functions_and_bench_compile_s_kernels(cache_dir):
    """Each default is read from its kernel function (a changed default changes what is warmed), and each kernel
    bench --compile also knows is the same function source, argument types and launch bounds there
    (``compile_time``'s builders describe the kernels apart from ``warm.resolve``)."""
    from asyncpipe import bench, compile_time as ct
    from asyncpipe.kernels import sgemm as S
    from asyncpipe.kernels import tma_add_one as TA

    found = warm.default_targets()
    sg = dict(found["sgemm_cp_async_s3"].config)
    assert {k: sg[k] for k in S.CHAPTER_CONFIGURATION} == S.CHAPTER_CONFIGURATION and not sg["edges"]
    assert dict(found["tma_add_one_pipelined_s4"].config)["stages"] == TA.PIPE_STAGES
    wg = dict(found["wgmma_gemm_bf16_bn256_s4_c2_direct"].config)
    assert (wg["stages"], wg["block_n"], wg["cluster"], wg["epilogue"]) == (4, 256, 2, "direct") and wg["c_bf16"]
    shipped = ct.shipped(bench.sgemm_configs())
    both = [n for n in found if n in shipped]
    assert sorted(set(found) - set(both)) == ["tma_add_one_chapter_float32", "tma_add_one_pipelined_s4_float32"]
    for name in both:
        builder, kwargs = shipped[name]
        fn, sig, opts = ct.BUILDERS[builder](**kwargs)
        disp, argtypes = warm.resolve(found[name])
        assert disp.py_func.__code__.co_filename == getattr(fn, "py_func", fn).__code__.co_filename, name
        assert tuple(argtypes) == tuple(sig), name
        assert disp.targetoptions.get("launch_bounds") == opts.get("launch_bounds"), name
    f32 = warm.resolve(found["tma_add_one_pipelined_s4_float32"])[0]
    assert f32 is TA._jit("pipelined", "float32", TA.PIPE_STAGES)


def _entry(gpu, problem, rows, source=None, space=None, version=__version__):
    from asyncpipe.tune.kernels import tunable

    spec = tunable("sgemm")
    return dict(gpu=gpu, kernel="sgemm", problem=list(problem), version=version,
                source=spec.source if source is None else source, space=spec.space if space is None else space,
                rows=[dict(stages=s, options=o, correct=ok, measured_ms=ms, pruned=pruned)
                      for s, o, ok, ms, pruned in rows])


K16 = {"tile": "8x16", "bk": 16, "schedule": "kmajor"}


@pytest.fixture
def tuned(cache_dir):
    """A tuner cache: picks on the H200 (4096^3: kmajor s3; an odd shape) and the H100 (the chapter's s3), and
    entries no call would use (another kernel source, another asyncpipe version)."""
    from asyncpipe.tune import cache

    for e in [
        _entry("NVIDIA H200", (4096, 4096, 4096), [
            (3, K16, True, 2.80, None),
            (4, K16, False, 2.50, None),                      # faster but wrong: never the pick
            (4, {"tile": "8x16", "bk": 16, "schedule": "dbuf"}, True, 2.95, None),
            (5, {}, True, 2.00, "predicted 12 % slower")]),    # pruned: not a pick either
        _entry("NVIDIA H200", (1000, 1000, 1001), [(4, {}, True, 1.0, None), (3, {}, True, 1.1, None)]),
        _entry("NVIDIA H100", (4096, 4096, 4096), [(3, {}, True, 3.0, None), (6, {}, True, 3.1, None)]),
        _entry("NVIDIA H200", (2048, 2048, 2048), [(7, {}, True, 1.0, None)], source="0" * 12),
        _entry("NVIDIA H200", (512, 512, 512), [(8, {}, True, 1.0, None)], version="0.0.0"),
    ]:
        cache.store(e)


def test_list_adds_the_configurations_sgemm_takes_from_the_tuners_cache(capsys, tuned, no_gpu):
    got = listed(capsys)
    h200 = "tuned: sgemm 4096x4096x4096 on NVIDIA H200"
    assert {k: v for k, v in got.items() if k not in DEFAULTS} == {
        "sgemm_cp_async_8x16_bk16_kmajor_s3": f"{h200}: interior kernel",
        # K = 1001: A's rows allow 4-byte copies only, and M, N are not multiples of 128: the edge kernel
        "sgemm_cp_async_s4_edges_vec1x4": "tuned: sgemm 1000x1000x1001 on NVIDIA H200: edge kernel"}
    assert got["transpose"] == f'sgemm(schedule="kmajor"); {h200} (its schedule=\'kmajor\')'
    assert got["sgemm_cp_async_s3"] == "sgemm(): interior kernel; tuned: sgemm 4096x4096x4096 on NVIDIA H100: " \
                                      "interior kernel"
    assert set(warm.tuned_targets("NVIDIA H100")) == {"sgemm_cp_async_s3"}
    t = warm.tuned_targets("NVIDIA H200")["sgemm_cp_async_s4_edges_vec1x4"]
    assert dict(t.config) == dict(variant="cp_async", stages=4, bk=8, tile="8x8", schedule="plain", vec_a=1, vec_b=4,
                                  edges=True)


def test_only_takes_names_patterns_and_prefixes(capsys, cache_dir, no_gpu):
    assert list(listed(capsys, "--only", "tma_add_one_chapter,cluster*", "sgemm_v4_edges")) == [
        "sgemm_v4_edges", "tma_add_one_chapter", "tma_add_one_chapter_float32", "cluster_sum", "cluster_sum_finish",
        "cluster_sum_pair_chapter"]
    assert list(listed(capsys, "--only", "wgmma")) == ["wgmma_gemm_bf16_bn256_s4_c2_direct"]


def test_without_a_gpu_one_line_and_exit_1(capsys, cache_dir, no_gpu):
    assert main(["warm"]) == warm.EXIT_NO_GPU == 1
    cap = capsys.readouterr()
    assert cap.err.splitlines() == [NO_GPU] and cap.out == ""


def test_under_the_simulator_the_real_entry_point_says_so_in_one_line(cache_dir):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    out = subprocess.run([sys.executable, "-m", "asyncpipe", "warm", "--only", "tma"], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.splitlines() == [NO_GPU.replace(
        "no CUDA driver or GPU is visible (numba.cuda.is_available() is False)", "NUMBA_ENABLE_CUDASIM=1 selects "
        "numba's simulator")]


@pytest.mark.parametrize("argv,env,msg", [
    (["--jobs", "0"], {}, "error: warm: --jobs must be an integer >= 1, got '0'"),
    (["--jobs", "two"], {}, "error: warm: --jobs must be an integer >= 1, got 'two'"),
    (["--only", "fft"], {}, "error: warm: --only must name kernels of the list, by name, pattern or prefix (python -m "
                            "asyncpipe warm --list), got 'fft'"),
    (["--list", "--only", "sgemm,cub*"], {}, "error: warm: --only must name kernels of the list, by name, pattern or "
                                             "prefix (python -m asyncpipe warm --list), got 'cub*'"),
    ([], {"ASYNCPIPE_JIT_CACHE": "0"}, "error: warm: the kernel cache must be on to be warmed (ASYNCPIPE_JIT_CACHE=0 "
                                       "turns it off), got ASYNCPIPE_JIT_CACHE='0'"),
])
def test_bad_arguments_exit_2_before_the_gpu_check(argv, env, msg, capsys, cache_dir, no_gpu, monkeypatch):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert main(["warm", *argv]) == warm.EXIT_USAGE == 2
    cap = capsys.readouterr()
    assert cap.err.splitlines() == [msg] and cap.out == ""


def test_the_help_says_the_exit_status(capsys):
    with pytest.raises(SystemExit) as e:
        main(["warm", "--help"])
    assert e.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert ("exit status: 0 every kernel is in numba's disk cache; 1 no usable GPU (one line on stderr, nothing "
            "compiled); 2 bad arguments; 3 a kernel failed to compile") in text


# ------------------------------------------------------------------------------------------------
# The pool, on what this machine can compile: two small kernels offline for sm_90a
# ------------------------------------------------------------------------------------------------
def compile_offline(disp, argtypes) -> bool:
    """Stands in for ``warm.into_disk_cache`` where there is no GPU: the same dispatcher and argument types,
    compiled and linked offline for sm_90a; the worker's pid and the cubin's size go to ``$WARM_TEST_DIR``."""
    from asyncpipe.codegen import compile_kernel

    cubin = compile_kernel(disp, argtypes)
    name = disp.py_func.__name__
    Path(os.environ["WARM_TEST_DIR"], f"{name}.json").write_text(json.dumps([os.getpid(), len(cubin.data)]))
    return False


def test_two_kernels_compile_in_two_worker_processes_and_a_bad_one_is_a_failure(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WARM_TEST_DIR", str(tmp_path))
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")        # the pool takes the simulator switch out: workers compile
    found = warm.select(warm.default_targets(), ["transpose", "cluster_sum_finish"])
    found["fft"] = warm.Target.of("fft", "fft", "a kernel asyncpipe does not ship")
    rc = warm.warm(found, jobs=2, progress=False, worker=functools.partial(warm.compile_target,
                                                                          compile=compile_offline))
    assert rc == warm.EXIT_FAILED == 3
    cap = capsys.readouterr()
    assert cap.err.splitlines() == ["warm: fft failed: ValueError: warm: target kernel must be sgemm, transpose, "
                                    "tma_add_one, cluster_sum, wgmma_gemm or attention, got 'fft'"]
    assert re.fullmatch(r"warm: 2 of 3 kernels in numba's disk cache \(2 compiled, 0 already cached\) in [0-9.]+ s "
                        r"with 2 processes; 1 failed: fft\n", cap.out), cap.out
    done = {p.stem: json.loads(p.read_text()) for p in tmp_path.glob("*.json")}
    assert set(done) == {"_transpose", "finish_kernel"}
    assert all(pid != os.getpid() and size > 1000 for pid, size in done.values())


def test_the_summary_counts_cached_and_failed():
    results = [warm.Warmed("a", 1.0), warm.Warmed("b", 0.1, cached=True), warm.Warmed("c", 2.0, error="x")]
    assert warm.summary(results, 12.34, 1) == ("warm: 2 of 3 kernels in numba's disk cache (1 compiled, 1 already "
                                               "cached) in 12.3 s with 1 process; 1 failed: c")


class FakeDispatcher:
    """What ``into_disk_cache`` reads of a numba dispatcher: ``compile`` (here it may warn as jit_cache's cache
    does when it cannot keep a kernel) and ``stats``."""

    def __init__(self, cache_path="/cache", hits=0, refuse=False):
        from types import SimpleNamespace

        self.stats = SimpleNamespace(cache_path=cache_path, cache_hits={"sig": hits})
        self.refuse = refuse

    def compile(self, argtypes):
        import warnings

        from asyncpipe.jit_cache import CacheWarning

        if self.refuse:
            warnings.warn("asyncpipe: not cached: k (float32,): PicklingError: no", CacheWarning)


def test_into_disk_cache_says_cached_and_refuses_what_the_cache_does_not_keep():
    assert warm.into_disk_cache(FakeDispatcher(hits=1), ()) is True
    assert warm.into_disk_cache(FakeDispatcher(hits=0), ()) is False
    with pytest.raises(RuntimeError, match=r"^asyncpipe: not cached: k \(float32,\): PicklingError: no$"):
        warm.into_disk_cache(FakeDispatcher(refuse=True), ())
    with pytest.raises(RuntimeError, match=r"^the kernel's dispatcher has no disk cache \(ASYNCPIPE_JIT_CACHE=0 or "
                                           r"the simulator\)$"):
        warm.into_disk_cache(FakeDispatcher(cache_path=""), ())


# ------------------------------------------------------------------------------------------------
# scripts/gpu_check.sh's warm step
# ------------------------------------------------------------------------------------------------
def gpu_check_warm_block() -> str:
    text = (ROOT / "scripts" / "gpu_check.sh").read_text()
    return re.search(r"python3 - > \"\$OUT/warm.log\" 2>&1 <<'PY' &\n(.*?)\nPY\n", text, re.S).group(1)


@pytest.mark.parametrize("steps,kernels,args,expect", [
    ("tests bench", "sgemm row_sum", "", "bench"),
    ("tests tune", "sgemm row_sum", "--tile 8x16 --schedule kmajor", "tune"),
    ("tune bench", "sgemm", "--tile 8x8 --bk 8", "both"),
    ("tune", "row_sum", "", "none"),                    # the tuner's candidates only when TUNE_KERNELS names sgemm
])
def test_gpu_checks_warm_step_compiles_the_benchs_and_the_tuners_sgemms(steps, kernels, args, expect, monkeypatch):
    from asyncpipe import bench

    calls = []
    monkeypatch.setattr(warm, "warm", lambda found, jobs=None, progress=True: calls.append((found, jobs)) or 0)
    for k, v in dict(STEPS=steps, TUNE_KERNELS=kernels, TUNE_ARGS=args).items():
        monkeypatch.setenv(k, v)
    with pytest.raises(SystemExit) as e:
        exec(compile(gpu_check_warm_block(), "gpu_check.sh", "exec"), {})
    assert e.value.code == 0
    [(found, jobs)] = calls
    from asyncpipe.compile_time import sgemm_name

    tuner = {"tune": [("cp_async", s, bk, "8x16", "kmajor") for bk in (8, 16) for s in range(2, 9)],
             "both": [("cp_async", s, 8, "8x8", "plain") for s in range(2, 9)]}.get(expect, [])
    if tuner:
        assert warm.tuner_sgemm_configs(args) == tuner
    wanted = (bench.sgemm_configs() if expect in ("bench", "both") else []) + tuner
    kmajor = any(c[4] == "kmajor" for c in wanted)
    assert set(found) == {sgemm_name(*c, False) for c in wanted} | ({"transpose"} if kmajor else set())
    assert jobs == 12 and (expect != "none" or found == {})
    assert all(not dict(t.config).get("edges") for t in found.values())     # 256 x 256 calls: interior kernels


# ------------------------------------------------------------------------------------------------
# On a Hopper GPU (scripts/gpu_check.sh): warm, then a new process's first calls hit the disk cache
# ------------------------------------------------------------------------------------------------
FIRST_CALLS = r'''
import json
import numpy as np
from numba import cuda
from asyncpipe.kernels import cluster_sum as CS, sgemm as S, tma_add_one as TA, transpose as T, wgmma_gemm as G

rng = np.random.default_rng(0)
f = lambda *shape: cuda.to_device(rng.standard_normal(shape).astype(np.float32))
a, odd_a, odd_b = f(256, 256), f(200, 136), f(136, 72)     # interior; edge kernel (M, N odd, 16-byte rows)
for variant in ("cp_async", "v4"):
    S.sgemm(a, a, variant=variant)
    S.sgemm(odd_a, odd_b, variant=variant)
T.prepare(a.reshape(256 * 256), cuda.device_array(256 * 256, np.float32), 256, 256, 256, 256)()
for dtype in (np.int32, np.float32):
    t = cuda.to_device(np.zeros((256, 256), dtype))
    TA.add_one(t)
    TA.add_one(t, pipelined=False)
x = f(1 << 16)
CS.cluster_sum(x)
CS.pair_sums(x, 1024, 2)
bits = cuda.to_device(np.zeros((256, 256), np.uint16))
G.wgmma_gemm(bits, bits)
from asyncpipe.kernels import attention as A, attention_kernel as AK
att = {}
for hd in AK.HEAD_DIMS:
    x = cuda.to_device(np.zeros((1, 128, 1, hd), np.uint16))
    for causal in (False, True):
        A.attention(x, x, x, causal=causal)
        out, lse = cuda.device_array_like(x), cuda.device_array((1, 1, 128), np.float32)
        att[f"attention{hd}{causal}"] = A.launch_parts(x, x, x, out, lse, causal=causal)["kernel"]   # the one it ran
cuda.synchronize()
disps = {**{str(k): d for k, d in S._kernels.items()}, **{str(k): d for k, d in TA._kernels.items()},
         **{str(k): d for k, d in CS._kernels.items()}, "transpose": T._kernel,
         "wgmma": G._jit(256, 4, 2, "bf16", False, True, "direct"),
         **att}
print(json.dumps({k: [sum(d.stats.cache_hits.values()), sum(d.stats.cache_misses.values())] for k, d in disps.items()}))
'''


@pytest.mark.hopper
def test_after_warm_a_new_process_loads_every_default_kernel_from_the_disk_cache(tmp_path):
    env = dict(os.environ, ASYNCPIPE_CACHE_DIR=str(tmp_path), NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    first = subprocess.run([sys.executable, "-m", "asyncpipe", "warm"], capture_output=True, text=True, env=env,
                           timeout=900)
    assert first.returncode == 0, first.stderr[-3000:]
    n = len(DEFAULTS)
    assert f"warm: {n} of {n} kernels in numba's disk cache ({n} compiled, 0 already cached)" in first.stdout
    calls = subprocess.run([sys.executable, "-c", FIRST_CALLS], capture_output=True, text=True, env=env, timeout=600)
    assert calls.returncode == 0, calls.stderr[-3000:]
    counts = json.loads(calls.stdout.strip().splitlines()[-1])
    assert len(counts) == n, counts
    assert all(hits >= 1 and misses == 0 for hits, misses in counts.values()), {
        k: v for k, v in counts.items() if v[0] < 1 or v[1]}
    again = subprocess.run([sys.executable, "-m", "asyncpipe", "warm"], capture_output=True, text=True, env=env,
                           timeout=600)
    assert again.returncode == 0 and f"({0} compiled, {n} already cached)" in again.stdout, again.stdout
