"""examples/rowsum_tune.py, a kernel that is not in the project, through the tuner's public API:

- correct against float64 numpy for every stage count of its space (and its other options) at odd, tiny
  shapes, output poisoned first: in the simulator run (``simulator_too``) and on a GPU;
- offline, no GPU: ``python -m asyncpipe tune examples/rowsum_tune.py:row_sum`` compiles the candidates
  and prints the model's table with the resources read from the cubins, says once that nothing was
  measured, and exits 0;
- on a GPU: tuned end to end (checked, timed, cached), and the wrapper then launches the pick.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from asyncpipe.errors import AsyncpipeError
from asyncpipe.tune import Config
from asyncpipe.tune.cli import load_kernel

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "rowsum_tune.py"


@pytest.fixture(scope="module")
def row_sum():
    return load_kernel(f"{EXAMPLE}:row_sum")


def run(row_sum, rng, rows, cols, config):
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    out = np.full(rows, np.nan, np.float32)                       # poisoned: every row must be written
    row_sum(x, out, config=config)
    np.testing.assert_allclose(out, x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)


SHAPES = [(13, 100), (8, 20), (1, 4)]          # 2 CTAs (one partial), tiles with a ragged edge; 1 tile; 1 row


@pytest.mark.gpu
@pytest.mark.simulator_too
@pytest.mark.parametrize("stages", [2, 3, 4, 6, 8])
def test_every_stage_count_sums_right(row_sum, rng, stages):
    assert stages in row_sum.spec.space["stages"]
    for rows, cols in SHAPES:
        run(row_sum, rng, rows, cols, {"stages": stages, "threads": 128, "chunks": 1})


@pytest.mark.gpu
@pytest.mark.simulator_too
@pytest.mark.parametrize("threads,chunks", [(256, 1), (128, 4), (256, 4)])
def test_the_other_options_sum_right(row_sum, rng, threads, chunks):
    for stages in (2,) if (threads, chunks) == (256, 4) else (2, 4):   # 4 x 16 KB stages: over 48 KB static
        run(row_sum, rng, 13, 300, {"stages": stages, "threads": threads, "chunks": chunks})


def test_the_space_is_what_the_tests_cover(row_sum):
    assert row_sum.spec.space == {"stages": (2, 3, 4, 6, 8), "threads": (128, 256), "chunks": (1, 4)}


def test_bad_input_is_refused_before_launch(row_sum):
    with pytest.raises(AsyncpipeError) as e:
        row_sum(np.zeros((8, 30), np.float32), np.zeros(8, np.float32))
    assert str(e.value) == ("row_sum: cols must be a multiple of 4 (each row is copied in 16-byte cp.async chunks) "
                            "[cp.async.cg.shared.global 16 bytes], got 30")
    with pytest.raises(AsyncpipeError, match=r"row_sum: out must have one element per row of x, got \(7,\)"):
        row_sum(np.zeros((8, 32), np.float32), np.zeros(7, np.float32))


@pytest.mark.sass
def test_the_cli_prints_the_models_table_from_the_compiled_kernels(tmp_path, capsys, monkeypatch, no_gpu):
    """Two candidates compiled offline for sm_90a in two processes: 2 stages fits; 8 stages of 8 x 256 floats
    is 64 KB of static shared memory, more than a kernel may declare without dynamic shared memory (48 KB):
    ptxas for sm_90a takes it, the launch would not, and the tuner prunes it from the compiled figure."""
    from asyncpipe.__main__ import main

    monkeypatch.setenv("ASYNCPIPE_CACHE_DIR", str(tmp_path))
    js = tmp_path / "t.json"
    assert main(["tune", f"{EXAMPLE}:row_sum", "--problem", "rows=4096,cols=8192", "--stages", "2", "8",
                 "--space", "threads=128", "chunks=4", "--json", str(js)]) == 0
    out = capsys.readouterr().out
    said = [line for line in out.splitlines() if "not measured" in line]
    assert len(said) == 1 and "needs a CUDA GPU" in said[0], out
    d = json.loads(js.read_text())
    assert d["measured"] is False and not (tmp_path / "tune.json").exists()
    two, eight = d["rows"]
    assert (two["stages"], two["options"], eight["stages"]) == (2, {"chunks": 4}, 8)
    # the 2-stage kernel's static shared memory, read from its cubin: buf 2 x 8 x 256 floats + part 128 floats,
    # plus the driver's 1 KB reserve, in 128-byte units
    assert two["shared_per_cta"] == 2 * 8 * 256 * 4 + 128 * 4 + 1024
    assert 16 <= two["registers"] <= 255 and two["spills"] is False and two["predicted_ms"] > 0
    assert eight["pruned"] == "does not fit on the GPU" and eight["registers"] is None
    assert "static shared memory (cuda.shared.array) must be <= 49152 bytes" in eight["limited_by"]
    assert "got 66048" in eight["limited_by"]                  # 8 x 8 x 256 floats + 128 floats, from the cubin
    assert "<- model's pick" in next(line for line in out.splitlines() if line.startswith("2 chunks=4"))


@pytest.mark.gpu
def test_tuned_end_to_end_on_the_gpu(row_sum, tmp_path, monkeypatch):
    """Not run without a GPU. scripts/gpu_check.sh (STEPS=tune) runs the CLI at the full size and writes
    bench/tune_h200_row_sum.json."""
    from numba import cuda

    monkeypatch.setenv("ASYNCPIPE_CACHE_DIR", str(tmp_path))
    res = row_sum.tune({"rows": 2048, "cols": 4096}, candidates=[2, 4], rounds=2, reps=5, progress=False)
    assert res.measured and not res.from_cache
    ran = [r for r in res.rows if r.pruned is None]
    assert ran and all(r.correct and r.measured_ms > 0 and len(r.times_ms) == 2 for r in ran)
    x = cuda.to_device(np.ones((2048, 4096), np.float32))
    out = cuda.device_array(2048, np.float32)
    assert row_sum.config_for(x, out) == row_sum.spec.full(res.best)
    row_sum(x, out)
    np.testing.assert_array_equal(out.copy_to_host(), np.full(2048, 4096.0, np.float32))
    assert row_sum.tune({"rows": 2048, "cols": 4096}, candidates=[2, 4], progress=False).from_cache
    assert isinstance(res.best, Config)


@pytest.mark.sass
def test_the_timeline_draws_the_specs_pipeline_from_the_compiled_kernel(capsys, tmp_path):
    """``timeline --kernel``: one candidate compiled offline; its registers, shared memory and CTAs per SM come
    from the cubin, the tiles and bytes from the spec's pipeline, the timeline from the cp.async model."""
    from asyncpipe.__main__ import main
    from asyncpipe.model.cp_async import cp_async_timeline
    from asyncpipe.tune.user import DEFAULT_CALIBRATION as CAL

    png = tmp_path / "t.png"
    assert main(["timeline", "--kernel", f"{EXAMPLE}:row_sum", "--config", "stages=3,chunks=4",
                 "--problem", "rows=8192,cols=2048", "--json", "--plot", str(png)]) == 0
    cap = capsys.readouterr()
    d = json.loads(cap.out)                                  # --json: stdout stays one object
    assert "26112 bytes of shared memory a CTA" in cap.err and "8 tiles a CTA" in cap.err   # 3 x 8 x 256 + 128 floats + 1 KB
    assert d["params"]["tiles"] == 8 and d["params"]["stages"] == 3 and d["params"]["tile_bytes"] == 8 * 256 * 4
    assert d["params"]["load_latency"] == CAL.load_latency_ns and d["params"]["ctas_per_sm"] == 8
    again = cp_async_timeline(8, 3, CAL.load_latency_ns, d["params"]["compute"], bandwidth=CAL.sm_bytes_per_ns,
                              tile_bytes=8192, ctas_per_sm=8)
    assert d["total_time"] == pytest.approx(again.total_time) and d["params"]["compute"] > 0
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_timeline_bad_input(capsys):
    from asyncpipe.__main__ import main

    assert main(["timeline", "--kernel", f"{EXAMPLE}:row_sum", "--config", "stages=3"]) == 2
    assert "error: timeline: --kernel needs --problem rows=..,cols=.., got None" in capsys.readouterr().err
    assert main(["timeline", "--kernel", f"{EXAMPLE}:row_sum", "--config", "stages=5", "--problem",
                 "rows=8,cols=8"]) == 2
    assert "error: row_sum: stages must be one of (2, 3, 4, 6, 8), got 5" in capsys.readouterr().err
    assert main(["timeline", "--tiles", "4"]) == 2
    assert ("error: timeline: --tiles, --stages, --load-latency and --compute are needed (or --kernel), got --tiles 4 "
            "--stages None") in capsys.readouterr().err
    assert main(["tune", "examples/nothing.py:row_sum", "--problem", "rows=8,cols=8"]) == 2
    assert "error: tune: the kernel's file must exist, got 'examples/nothing.py'" in capsys.readouterr().err
    assert main(["tune", "sgemm.py", "--problem", "rows=8"]) == 2
    assert "error: tune: kernel must be sgemm or path/to/file.py:NAME, got 'sgemm.py'" in capsys.readouterr().err
    assert main(["tune", f"{EXAMPLE}:ROWS", "--problem", "rows=8"]) == 2
    assert "must be an @autotune kernel (TunedKernel) or a KernelSpec, got int" in capsys.readouterr().err
    assert main(["tune", f"{EXAMPLE}:row_sum", "--problem", "rows=8,cols=x"]) == 2
    assert "error: tune: --problem is name=integer,..., got 'cols=x'" in capsys.readouterr().err
    assert main(["tune", f"{EXAMPLE}:row_sum", "--problem", "rows=8,cols=8", "--space", "warps=4"]) == 2
    assert "error: tune: --space is name=v1,v2 with a name among ['chunks', 'threads'], got 'warps=4'" in \
        capsys.readouterr().err
    assert main(["tune", f"{EXAMPLE}:row_sum", "--problem", "rows=8,cols=8", "--space", "threads=64"]) == 2
    assert "error: tune: --space threads values must be among (128, 256), got 64" in capsys.readouterr().err
    assert main(["tune", f"{EXAMPLE}:row_sum"]) == 2
    assert "error: tune: --problem must give ('rows', 'cols') for row_sum, got None" in capsys.readouterr().err
