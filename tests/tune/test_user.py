"""The generic model and loop for a user's kernel (asyncpipe.tune.user), on the host: what the compiled
candidates hold (stand-in ``Compiled`` records here; tests/tune/test_rowsum_example.py reads real cubins)
decides occupancy and pruning, the cp.async timeline ranks, a spilling candidate is marked, the refit
recovers known constants, and the measured path caches the pick. GPU name "synthetic": no measurement."""

from dataclasses import replace

import numpy as np
import pytest

from asyncpipe.model.limits import table_limits
from asyncpipe.tune import Config, CpAsyncPipeline, KernelSpec, Launch, MbarrierRingPipeline, TunedKernel
from asyncpipe.tune import compile as compile_mod
from asyncpipe.tune import gpu as gpu_mod
from asyncpipe.tune.compile import Compiled
from asyncpipe.tune.gpu import Measurement
from asyncpipe.tune.search import PRUNED_NO_COMPILE, PRUNED_NO_FIT, Check
from asyncpipe.tune.user import DEFAULT_CALIBRATION, calibrate, compute_ns, predict, tune_kernel

H200 = table_limits("H200")
KB = 1024


def toy(pipeline=CpAsyncPipeline(tiles=lambda p, c: p["cols"] // 256, stage_bytes=lambda p, c: 8 * KB), **changes):
    fields = dict(
        space={"stages": (2, 3, 4, 6, 8), "threads": (128, 256)}, default={"stages": 3, "threads": 128},
        problem=("rows", "cols"), key=lambda x, out: {"rows": x.shape[0], "cols": x.shape[1]},
        inputs=lambda p, rng: (np.zeros((p["rows"], p["cols"]), np.float32), np.zeros(p["rows"], np.float32)),
        reference=lambda x, out: x.sum(axis=1), output=1,
        launch=lambda cfg, x, out: Launch(x.shape[0] // 8, cfg["threads"], (x, out), shared=cfg["stages"] * 8 * KB),
        pipeline=pipeline)
    return TunedKernel(KernelSpec("toy", lambda cfg: None, **(fields | changes)))


def compiled(stages, registers=32, loop=100, **kw):
    """A stand-in cubin of a kernel whose ring is in dynamic shared memory (the launch's 8 KB a stage): cuobjdump
    reports the driver's 1 KB reserve only."""
    return Compiled(registers, KB, 0, 0, False, loop, 4 * loop, **kw)


P = {"rows": 132 * 8 * 4, "cols": 256 * 32}                 # 4 CTAs per SM in one wave; 32 tiles a CTA


def launch_of(spec, c):
    x, out = spec.inputs(P, None)
    return spec.launch(spec.full(c), x, out)


def test_occupancy_comes_from_the_compiled_resources():
    spec = toy().spec
    c = Config.of(3)
    few = predict(spec, P, c, compiled(3, registers=32), launch_of(spec, c), H200, DEFAULT_CALIBRATION)
    many = predict(spec, P, c, compiled(3, registers=255), launch_of(spec, c), H200, DEFAULT_CALIBRATION)
    assert (few.shared_per_cta, few.ctas_per_sm, few.limited_by) == (25 * KB, 9, "shared memory")   # 228 KB / 25
    assert (many.ctas_per_sm, many.limited_by, many.registers) == (2, "registers", 255)    # 64 K / (256 x 128)
    assert many.time_ns > few.time_ns                      # fewer CTAs: longer waves


def test_more_stages_hide_the_latency_until_bandwidth_binds():
    spec = toy().spec
    t = {s: predict(spec, P, Config.of(s), compiled(s), launch_of(spec, Config.of(s)), H200,
                    DEFAULT_CALIBRATION).time_ns for s in (2, 3, 4, 6, 8)}
    assert t[2] > t[3] > t[4] >= t[6]
    # past Little's law (bandwidth x latency bytes in flight per SM) more stages buy nothing: 6 stages run at the
    # floor, an SM's bytes (4 CTAs x 32 tiles x 8 KB) over its bandwidth ...
    floor = 4 * 32 * 8 * KB / DEFAULT_CALIBRATION.sm_bytes_per_ns
    assert floor <= t[6] < 1.1 * floor
    # ... and 8 stages (65 KB a CTA) leave room for 3 CTAs an SM, not 4: a second, partial wave
    eight = predict(spec, P, Config.of(8), compiled(8), launch_of(spec, Config.of(8)), H200, DEFAULT_CALIBRATION)
    assert (eight.ctas_per_sm, eight.waves) == (3, 2) and t[8] > t[6]


def test_compute_is_read_from_the_main_loop():
    one = compute_ns(compiled(3, loop=100), 128, 1, DEFAULT_CALIBRATION)     # 1 warp a scheduler: latency-bound
    assert one == pytest.approx(100 * 4 / 1.98)
    assert compute_ns(compiled(3, loop=100), 128, 16, DEFAULT_CALIBRATION) == pytest.approx(100 * 16 / 1.98)
    assert compute_ns(compiled(3, loop=200), 128, 1, replace(DEFAULT_CALIBRATION, compute_scale=2)) == 4 * one


def test_mbarrier_ring_pipelines_use_the_ring_model():
    spec = toy(pipeline=MbarrierRingPipeline(tiles=lambda p, c: 32, stage_bytes=lambda p, c: 8 * KB, consumers=2),
               space={"stages": (1, 2, 4), "threads": (128,)}, default={"stages": 2, "threads": 128}).spec
    t = [predict(spec, P, Config.of(s), compiled(s), launch_of(spec, Config.of(s)), H200, DEFAULT_CALIBRATION).time_ns
         for s in (1, 2, 4)]
    assert t[0] > t[1] > t[2]


def fake_compile(table):
    def compile_candidates(factory, jobs, cc, processes=None, progress=True, desc=""):
        assert cc == (9, 0, "a")                          # compiled for the device's cc, Hopper's features on
        return {k: table(cfg) for k, (cfg, argtypes) in jobs.items()}
    return compile_candidates


def test_the_table_prunes_what_cannot_run_and_marks_spills(monkeypatch, no_gpu):
    def table(cfg):
        if cfg["stages"] == 8 and cfg["threads"] == 256:
            return Compiled(error="LinkerError: ptxas: uses too much shared data (0x20000 bytes, 0xc000 max)")
        if cfg["stages"] == 6 and cfg["threads"] == 256:
            return Compiled(32, 240 * KB, 0, 0, False, 100, 400)          # more than a CTA may have
        if cfg["stages"] == 4 and cfg["threads"] == 256:
            return replace(compiled(4), local=24, spills=True)
        return compiled(cfg["stages"])

    monkeypatch.setattr(compile_mod, "compile_candidates", fake_compile(table))
    res = tune_kernel(toy(), P, limits=H200, progress=False)
    assert not res.measured and res.gpu == "NVIDIA H200"
    assert res.row(Config.of(8, threads=256)).pruned == PRUNED_NO_COMPILE
    assert res.row(Config.of(6, threads=256)).pruned == PRUNED_NO_FIT
    spill = res.row(Config.of(4, threads=256))
    assert spill.spills is True and spill.local_bytes == 24
    text = res.table()
    assert "pruned: does not compile (tune toy: a candidate must compile" in text and "0xc000 max" in text
    assert "static shared memory (cuda.shared.array) must be <= 49152 bytes" in res.row(Config.of(6, threads=256)).limited_by
    assert "SPILLS (24 B local a thread)" in text and "4 threads=256 spills: 24 bytes" in text
    said = [n for n in res.notes if n.startswith("not measured")]
    assert len(said) == 1 and said[0].startswith("not measured (tune toy: needs a CUDA GPU")
    assert said[0].endswith("): the pick is the model's")
    regs = {r.config: r.registers for r in res.rows}
    assert regs[Config.of(3)] == 32                         # read from the "cubin", shown in the table
    assert res.best == res.model_ranking()[0]


def test_without_a_pipeline_only_occupancy_prunes_and_the_default_is_the_models_pick(monkeypatch):
    monkeypatch.setattr(compile_mod, "compile_candidates", fake_compile(lambda cfg: compiled(cfg["stages"])))
    res = tune_kernel(toy(pipeline=None), P, measure=False, limits=H200, progress=False)
    assert all(r.predicted_ms is None and r.pruned is None for r in res.rows)
    assert res.best == Config.of(2) and res.model_tied_best() == []     # the first candidate: nothing ranks them
    assert "not measured (measure=False)" in res.table()


def test_the_refit_recovers_known_constants():
    spec = toy().spec
    truth = replace(DEFAULT_CALIBRATION, load_latency_ns=3000.0, compute_scale=2.0)
    configs = [Config.of(s) for s in (2, 3, 4, 6)]
    comp = {c: compiled(c.stages, loop=400) for c in configs}     # compute-bound at many stages: scale is seen
    launches = {c: launch_of(spec, c) for c in configs}
    ms = {c: predict(spec, P, c, comp[c], launches[c], H200, truth).time_ns * 1e-6 for c in configs}
    fit = calibrate(spec, P, comp, launches, ms, H200, DEFAULT_CALIBRATION)
    assert fit.load_latency_ns == pytest.approx(3000, rel=0.1) and fit.compute_scale == pytest.approx(2, rel=0.1)
    assert fit.source == "fit to this tuning run"


def test_on_a_gpu_every_candidate_is_checked_timed_and_the_pick_cached(monkeypatch, tmp_path):
    """The measured path with a stand-in GPU: check and time are plain functions (the real ones,
    tune.gpu.spec_measurement, run in tests/tune/test_rowsum_example.py on a GPU)."""
    monkeypatch.setattr(compile_mod, "compile_candidates", fake_compile(lambda cfg: compiled(cfg["stages"])))
    calls = []

    def check(c):
        calls.append(("check", c))
        return Check(c.stages != 4, 0.0 if c.stages != 4 else 0.5)

    def time(c):
        calls.append(("time", c))
        return {2: 3.0, 3: 2.0, 4: 0.1, 6: 2.1, 8: 2.2}[c.stages] + (0.05 if c.options else 0.0)

    monkeypatch.setattr(gpu_mod, "spec_measurement", lambda tuned, problem, reps=20: Measurement(
        check, time, "synthetic", H200, DEFAULT_CALIBRATION))
    path = tmp_path / "t.json"
    res = tune_kernel(toy(), P, cache_file=path, rounds=2, progress=False, margin=10.0)
    assert res.measured and res.best == Config.of(3)          # 4 stages is fast but wrong: never picked
    assert res.row(Config.of(4)).correct is False and not [c for k, c in calls if k == "time" and c.stages == 4]
    assert res.fitted_calibration is not None and res.gpu == "synthetic"
    again = tune_kernel(toy(), P, cache_file=path, progress=False, margin=10.0)
    assert again.from_cache and again.best == Config.of(3)


@pytest.mark.sass
def test_a_factory_written_in_the_main_script_compiles_in_a_spawned_worker():
    """As in a notebook: the factory lives in ``__main__`` (here a script read from stdin, whose ``__file__`` a
    spawned child cannot run), so it travels by value; the worker compiles it offline and reads the cubin."""
    import subprocess
    import sys

    script = '''
import numpy as np
from numba import cuda, types
from asyncpipe.tune.compile import compile_candidates

def factory(cfg):
    N = cfg["n"]
    @cuda.jit
    def k(x):
        s = cuda.shared.array(N, np.float32)
        s[cuda.threadIdx.x] = x[cuda.threadIdx.x]
        cuda.syncthreads()
        x[cuda.threadIdx.x] = s[N - 1 - cuda.threadIdx.x]
    return k

out = compile_candidates(factory, {n: ({"n": n}, (types.float32[::1],)) for n in (256, 512)}, (9, 0, "a"),
                         processes=1, progress=False)
print({n: (c.error, c.shared) for n, c in out.items()})
'''
    run = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    # static shared memory as the cubin reports it: the array plus the driver's 1 KB reserve
    assert run.stdout.strip().splitlines()[-1] == "{256: (None, 2048), 512: (None, 3072)}"
