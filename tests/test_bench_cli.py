"""``python -m asyncpipe bench`` where it cannot time: no GPU is one line and exit status 1, before
anything heavy is imported; bad arguments are exit status 2 with the rule they broke. (What it
measures on a GPU is bench/h200.md's business: scripts/gpu_check.sh runs it.)"""

import os
import subprocess
import sys

import pytest

from asyncpipe import bench
from asyncpipe.__main__ import main

NO_GPU = ("error: bench: needs a CUDA GPU (sm_80 or newer) to time kernels, got no CUDA driver or GPU is visible "
          "(numba.cuda.is_available() is False); nothing was timed (without a GPU: python -m asyncpipe demo runs the "
          "programs on the simulator; timeline and tune --predict-only model them)")


def test_without_a_gpu_one_line_and_exit_1(capsys, no_gpu):
    assert main(["bench", "--quick", "--only", "sgemm"]) == bench.EXIT_NO_GPU == 1
    cap = capsys.readouterr()
    assert cap.err.splitlines() == [NO_GPU] and cap.out == ""


def test_a_driver_error_of_many_lines_is_still_one_line(capsys, monkeypatch):
    from numba import cuda

    def broken():
        raise RuntimeError("Error at driver init:\n\nCUDA driver library cannot be found.\nEnsure ...\n")

    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    monkeypatch.setattr(cuda, "is_available", broken)
    assert main(["bench"]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("error: bench: needs a CUDA GPU (sm_80 or newer) to time kernels, got CUDA could not "
                           "start: Error at driver init: CUDA driver library cannot be found. Ensure ...; nothing")


def test_the_real_entry_point_imports_nothing_heavy():
    # a fresh process, as a user runs it; the simulator switch stands for "no GPU" on any machine
    heavy = ("torch", "cupy", "asyncpipe.kernels.sgemm", "asyncpipe.kernels.tma_add_one", "asyncpipe.kernels.cluster_sum",
             "asyncpipe.kernels.wgmma_gemm", "asyncpipe.timing", "asyncpipe.reference", "asyncpipe.first_call")
    code = ("import sys; from asyncpipe.__main__ import main; rc = main(['bench']); "
            f"print(sorted(m for m in sys.modules if m.startswith({heavy!r}))); sys.exit(rc)")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 1, out.stderr
    assert out.stdout.strip() == "[]"
    assert out.stderr.splitlines() == [
        "error: bench: needs a CUDA GPU (sm_80 or newer) to time kernels, got NUMBA_ENABLE_CUDASIM=1 selects numba's "
        "simulator; nothing was timed (without a GPU: python -m asyncpipe demo runs the programs on the simulator; "
        "timeline and tune --predict-only model them)"]


@pytest.mark.parametrize("argv,msg", [
    (["--only", "sgemm,fft"], "error: bench: --only parts must be among ('sgemm', 'tma', 'cluster_sum', 'wgmma', 'attention', 'fp8_gemm', 'codecs', 'first_call'), "
                              "got 'fft'"),
    (["--sgemm-stages", "3,x"], "error: bench: --sgemm-stages must be comma-separated integers >= 2, got '3,x'"),
    (["--sgemm-stages", "1,3"], "error: bench: --sgemm-stages must be comma-separated integers >= 2, got '1,3'"),
])
def test_bad_arguments_exit_2_before_the_gpu_check(argv, msg, capsys, no_gpu):
    assert main(["bench"] + argv) == bench.EXIT_USAGE == 2
    assert capsys.readouterr().err.splitlines() == [msg]


def test_arguments_parse_and_the_help_says_the_exit_status(capsys):
    assert bench.parse_stages("2, 3,8") == (2, 3, 8) and bench.parse_stages(None) is None
    bench.check_only(("sgemm", "wgmma"))
    with pytest.raises(SystemExit) as e:
        main(["bench", "--help"])
    assert e.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "exit status: 0 timed; 1 no usable GPU (one line on stderr, nothing timed); 2 bad arguments" in text
    assert "--only ONLY comma-separated parts to run: sgemm, tma, cluster_sum, wgmma, attention, fp8_gemm, codecs, first_call (default: all)" in text


@pytest.mark.gpu
def test_with_a_gpu_nothing_is_missing():
    # the check must not stand in the way where there is a GPU (this runs on the GPU machine only)
    assert bench.gpu_missing() is None


def test_the_table_takes_every_record_kind():
    """Records with a shape and TFLOPS, with GB/s, without a shape (bytes only), errors, and first-call rows."""
    doc = dict(gpu="G", date="d", commit="c", yardsticks={"cublas": 50.0},
               results=[dict(kernel="sgemm_cp_async", shape=[64, 64, 64], ms=1.0, tflops=2.0, vs={"cublas": 0.04},
                             stages=3),
                        dict(kernel="mxfp4_dequantize", shape=[4, 4096], bytes=32768, ms=0.5, gbps=3000.0,
                             vs={"copy": 0.7}),
                        dict(kernel="bytes_only", bytes=1 << 20, ms=0.1, gbps=10.0, vs={}),
                        dict(kernel="broken", error="boom", vs={})],
               first_call={"k": dict(cold_s=1.0, warm_s=0.05, numba_init_s=0.2)})
    text = bench.format_table(doc)
    assert "4x4096" in text and "3000 GB/s" in text and "1 MiB" in text and "ERROR boom" in text
    assert "k 1.0 cold / 0.05 warm" in text
