"""KernelSpec / @autotune and the TunedKernel wrapper, on the host: the spec's checks (each message), its
configurations, the cache key (source and search-space hashes) and the wrapper's choice of configuration
before and after tuning. The "kernel" here is a stand-in that records its launches; the GPU name is
"synthetic": nothing in this file claims a measurement."""

import math

import numpy as np
import pytest

from asyncpipe.errors import AsyncpipeError
from asyncpipe.model.limits import table_limits
from asyncpipe.tune import Config, CpAsyncPipeline, KernelSpec, Launch, TunedKernel, autotune, cached_config
from asyncpipe.tune import spec as spec_module
from asyncpipe.tune.search import Check, tune
from asyncpipe.tune.user import Prediction

GPU = "synthetic"
ORIGINAL_LAUNCH = spec_module._launch       # before the autouse fixture below replaces it
H200 = table_limits("H200")


class Recorder:
    """What ``spec.kernel(config)`` returns here: ``kernel[grid, block, stream, shared](*args)`` is logged."""

    log = []

    def __init__(self, config):
        self.config = config

    def __getitem__(self, launch):
        return lambda *args: Recorder.log.append((self.config, launch, args))


@pytest.fixture(autouse=True)
def recorded_launches(monkeypatch):
    """The wrapper launches through asyncpipe.host.launch (spec._launch); here the stand-in records it."""
    monkeypatch.setattr(spec_module, "_launch", lambda kernel, l, stream: kernel[l.grid, l.block, stream, l.shared](
        *l.args))


def launch(cfg, x, out):
    return Launch(grid=math.ceil(x.shape[0] / 8), block=cfg["threads"], args=(x, out, np.int32(x.shape[0])),
                  shared=16 * cfg["threads"] * cfg["stages"])


FIELDS = dict(
    space={"stages": (2, 3, 4), "threads": (128, 256)},
    default={"stages": 3, "threads": 128},
    problem=("rows", "cols"),
    key=lambda x, out: dict(zip(("rows", "cols"), x.shape)),
    inputs=lambda p, rng: (np.ones((p["rows"], p["cols"]), np.float32), np.empty(p["rows"], np.float32)),
    reference=lambda x, out: np.full(x.shape[0], float(x.shape[1])),        # a row of ones sums to cols
    output=1,
    launch=launch,
)


def make(**changes):
    return TunedKernel(KernelSpec("toy", Recorder, **(FIELDS | changes)))


def test_the_decorator_and_the_spec_object_describe_the_same_kernel():
    deco = autotune(**FIELDS)(Recorder)
    spec = make().spec
    assert isinstance(deco, TunedKernel) and deco.spec.name == "Recorder"
    assert deco.spec.space == spec.space and deco.spec.space_hash == spec.space_hash


def test_configurations_default_first_and_full_dicts():
    spec = make().spec
    assert spec.option_sets() == ({}, {"threads": 256})
    assert spec.tunable().configs() == tuple(Config.of(s, **o) for o in ({}, {"threads": 256}) for s in (2, 3, 4))
    assert spec.config() == Config.of(3) and spec.config(threads=256) == Config.of(3, threads=256)
    assert spec.full(Config.of(4, threads=256)) == {"stages": 4, "threads": 256}
    assert spec.full(spec.config({"stages": 2, "threads": 128})) == {"stages": 2, "threads": 128}


def test_before_tuning_the_wrapper_launches_the_default(no_gpu):
    kern, x, out = make(), np.zeros((20, 64), np.float32), np.zeros(20, np.float32)
    Recorder.log.clear()
    kern(x, out)
    cfg, (grid, block, stream, shared), args = Recorder.log[-1]
    assert cfg == {"stages": 3, "threads": 128} and (grid, block, stream, shared) == (3, 128, 0, 16 * 128 * 3)
    assert args[0] is x and args[2] == 20
    kern(x, out, stages=4)                                   # a named option fixes that one
    assert Recorder.log[-1][0] == {"stages": 4, "threads": 128}
    kern(x, out, config={"stages": 2, "threads": 256})
    assert Recorder.log[-1][0] == {"stages": 2, "threads": 256} and Recorder.log[-1][1][1] == 256
    assert kern.kernel({"stages": 2, "threads": 256}) is kern.kernel(Config.of(2, threads=256))   # built once


def fake_model(spec, ms):
    """The spec's tunable with a stand-in model (2 CTAs an SM, a flat prediction) and fixed times ``ms``."""
    def predict(problem, c, lim, cal, registers=None):
        return Prediction(c.stages, 4096, 2, "threads", 1e6)
    tunable = spec.tunable(predict=predict, calibrate=lambda *a, **k: spec.tunable().default_calibration)
    return tunable, (lambda c: Check(True, 0.0)), (lambda c: ms[c])


def run_tuner(spec, ms, path):
    tunable, check, time = fake_model(spec, ms)
    return tune(tunable, (20, 64), gpu=GPU, limits=H200, check=check, time=time, cache_file=path, progress=False)


MS = {Config.of(s, **o): 1.0 + 0.1 * s + (0.5 if o else 0.0) for o in ({}, {"threads": 256}) for s in (2, 3, 4)}


@pytest.fixture
def synthetic_gpu(monkeypatch, tmp_path):
    """The wrapper's cache lookup sees a GPU called "synthetic" and a cache in tmp_path."""
    import asyncpipe.host.device as device

    monkeypatch.setenv("ASYNCPIPE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(device, "device_info", lambda api="": type("Info", (), {"name": GPU})())
    return tmp_path / "tune.json"


def test_after_tuning_the_wrapper_launches_the_pick(synthetic_gpu):
    kern, x, out = make(), np.zeros((20, 64), np.float32), np.zeros(20, np.float32)
    res = run_tuner(kern.spec, MS | {Config.of(4, threads=256): 0.5}, synthetic_gpu)
    assert res.best == Config.of(4, threads=256) and res.source == kern.spec.source_hash
    assert cached_config(kern.spec.tunable(), {"rows": 20, "cols": 64}) == res.best
    Recorder.log.clear()
    kern(x, out)
    assert Recorder.log[-1][0] == {"stages": 4, "threads": 256}
    assert kern.config_for(x, out, threads=128) == {"stages": 2, "threads": 128}    # the best with 128 threads
    assert kern.config_for(np.zeros((21, 64)), out) == {"stages": 3, "threads": 128}   # another problem: default


def test_a_changed_kernel_source_or_search_space_misses_the_cache(synthetic_gpu):
    kern = make()
    run_tuner(kern.spec, MS | {Config.of(4, threads=256): 0.5}, synthetic_gpu)
    x, out = np.zeros((20, 64), np.float32), np.zeros(20, np.float32)
    assert kern.config_for(x, out) == {"stages": 4, "threads": 256}
    wider = make(space={"stages": (2, 3, 4, 5), "threads": (128, 256)})
    assert wider.spec.space_hash != kern.spec.space_hash and wider.spec.source_hash == kern.spec.source_hash
    assert wider.config_for(x, out) == {"stages": 3, "threads": 128}
    edited = make()
    edited.spec.__dict__["source_hash"] = "0" * 12          # what an edit of the kernel's file gives
    assert edited.config_for(x, out) == {"stages": 3, "threads": 128}


PIPE = CpAsyncPipeline(tiles=lambda p, c: 4, stage_bytes=lambda p, c: 1024)


@pytest.mark.parametrize("changes,msg", [
    (dict(space={"threads": (128,)}, default={"threads": 128}), 'KernelSpec: space must be a mapping with a "stages" entry'),
    (dict(space={"stages": (), "threads": (128,)}), "KernelSpec: space['stages'] must be a non-empty list without repeats"),
    (dict(space={"stages": (2, 2), "threads": (128,)}), "space['stages'] must be a non-empty list without repeats, got (2, 2)"),
    (dict(space={"stages": (1, 2), "threads": (128,)}, default={"stages": 2, "threads": 128}, pipeline=PIPE),
     "KernelSpec: space['stages'] must hold integers >= 2 (cp.async), got (1, 2)"),
    (dict(default={"stages": 3}), "KernelSpec: default must give a value for each of ['stages', 'threads'], got {'stages': 3}"),
    (dict(default={"stages": 5, "threads": 128}), "KernelSpec: default['stages'] must be one of space['stages'] = (2, 3, 4), got 5"),
    (dict(problem=()), "KernelSpec: problem must be a non-empty tuple of names, got ()"),
    (dict(output="out"), "KernelSpec: output must be the index of the argument the kernel writes, got 'out'"),
    (dict(tolerance=0), "KernelSpec: tolerance must be > 0, got 0"),
    (dict(pipeline="cp.async"), "KernelSpec: pipeline must be a CpAsyncPipeline, an MbarrierRingPipeline or None"),
    (dict(launch=None), "KernelSpec: launch must be callable, got None"),
])
def test_bad_specs(changes, msg):
    with pytest.raises(AsyncpipeError) as e:
        make(**changes)
    assert msg in str(e.value)


def test_bad_names_and_configs():
    with pytest.raises(AsyncpipeError, match="KernelSpec: name must be an identifier, got 'row sum'"):
        KernelSpec("row sum", Recorder, **FIELDS)
    spec = make().spec
    with pytest.raises(AsyncpipeError, match=r"toy: threads must be one of \(128, 256\), got 64"):
        spec.config(threads=64)
    with pytest.raises(AsyncpipeError, match=r"toy: config names must be among \['stages', 'threads'\], got \['warps'\]"):
        spec.config(warps=4)
    with pytest.raises(AsyncpipeError, match=r"tune toy: problem keys must be \('rows', 'cols'\)"):
        spec.problem_dict({"rows": 3})



def test_the_wrapper_launches_through_asyncpipe_host_launch(monkeypatch):
    """Not numba's kernel[grid, block, stream, shared]: that sets no opt-in above 48 KB of dynamic shared memory."""
    import importlib

    host_launch = importlib.import_module("asyncpipe.host.launch")    # the module (asyncpipe.host.launch is also
    seen = []                                                          # the function's name in asyncpipe.host)
    monkeypatch.setattr(host_launch, "launch", lambda kernel, grid, block, *args, **kw: seen.append((kernel, grid,
                                                                                                     block, args, kw)))
    ORIGINAL_LAUNCH("K", Launch(grid=3, block=128, args=(1, 2), shared=100_000), 7)
    assert seen == [("K", 3, 128, (1, 2), dict(shared_mem=100_000, stream=7))]
