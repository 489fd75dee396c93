"""``python -m asyncpipe bench --compile`` (asyncpipe.compile_time): the phases of a cold offline compile, no GPU."""

import json

import pytest

from asyncpipe import bench, ptx
from asyncpipe import compile_time as ct
from asyncpipe.__main__ import main
from asyncpipe.kernels.unroll import unroll, unrolled


def _tiny(out):
    ptx.fence_proxy_async()
    for i in unroll(4):
        out[i] = i + 0.5


def _build_tiny():
    from numba.cuda import types

    return unrolled(_tiny), (types.float32[::1],), {}


@pytest.mark.sass
def test_a_tiny_kernel_through_every_phase(tmp_path, monkeypatch):
    monkeypatch.setenv("ASYNCPIPE_CACHE_DIR", str(tmp_path))       # an empty cache: the source is generated
    res = ct.time_phases(_build_tiny)
    assert list(res["seconds"]) == list(ct.PHASES)
    assert all(s > 0 for s in res["seconds"].values()), res["seconds"]
    assert res["total_s"] == pytest.approx(sum(res["seconds"].values()))
    z = res["sizes"]
    assert z["generated"] and z["statements"] == 1 + 1 + 4 and z["source_lines"] == 6   # def, fence, 4 stores
    assert z["shim_files"] == 1 and z["shim_lines"] > 0                                   # fence.cu
    assert z["llvm_ir_lines"] > 20 and z["ltoir_bytes"] > 0 and z["cubin_bytes"] > 0
    assert z["registers"] > 0 and z["sass_instructions"] == len(res["cubin"].instructions) > 4
    # the phases are compile_kernel's compile taken apart: the same SASS
    from asyncpipe.codegen import compile_kernel

    fn, sig, _ = _build_tiny()
    assert res["cubin"].opcodes == compile_kernel(fn, sig).opcodes
    assert any(op.startswith("FENCE.VIEW.ASYNC") for op in res["cubin"].opcodes)


def test_numbas_passes_sorted_by_its_pipelines():
    phases = ct._pass_phases()
    assert phases["nopython_type_inference"] == "typing" and phases["cuda_native_lowering"] == "lowering"
    assert "inline_inlinables" not in phases                     # an untyped pass: the rest of the compile
    assert set(phases.values()) == {"typing", "lowering"}


@pytest.mark.sass
def test_the_command_on_one_kernel_in_a_fresh_process(tmp_path, monkeypatch, capsys):
    mine = tmp_path / "my-cache"
    monkeypatch.setenv("ASYNCPIPE_CACHE_DIR", str(mine))
    out = tmp_path / "compile.json"
    assert main(["bench", "--compile", "--only", "cluster_sum_finish", "--json", str(out)]) == 0
    assert not mine.exists()                     # the child compiled with its own empty cache, not this one
    doc = json.loads(out.read_text())
    m = doc["machine"]
    assert m["cores"] >= 1 and m["cpu"] and m["python"] and len(m["load_average"]) == 3
    assert all(m["versions"][p] for p in ("numba-cuda", "numba", "llvmlite", "nvidia-nvjitlink"))
    assert doc["commit"] and doc["date"].startswith("20") and doc["jobs"] == 1
    [r] = doc["results"]
    assert r["kernel"] == "cluster_sum_finish" and r["config"] == {"which": "finish"}
    assert all(r["seconds"][p] > 0 for p in ct.PHASES)
    assert r["sizes"]["shim_files"] == 0 and r["seconds"]["shims"] < 0.01          # it links no shim
    assert r["sizes"]["generated"] and r["sizes"]["statements"] > 10 and r["sizes"]["sass_instructions"] > 10
    assert r["startup_s"] > 0 and r["import_s"] > 0 and r["init_s"] > 0
    assert r["process_s"] > r["startup_s"] + r["import_s"] + r["init_s"] + r["total_s"]
    assert all(f.startswith(("asyncpipe/", "ptx_shims/")) for f in doc["changed_files"])
    table = capsys.readouterr().out.splitlines()
    assert "sm_90a" in table[0] and table[-1].split()[0] == "cluster_sum_finish"


def test_a_kernel_that_fails_is_reported_not_fatal():
    r = ct.run_child("broken", ("sgemm", dict(variant="cp_async", stages=3, bk=12, tile="8x8", schedule="plain",
                                               edges=False)))
    assert r["kernel"] == "broken" and "bk must be one of" in r["error"]


def test_shipped_holds_what_the_bench_times():
    targets = ct.shipped(bench.sgemm_configs(bench.SGEMM_STAGES))
    for cfg in bench.sgemm_configs(bench.SGEMM_STAGES):
        assert ct.sgemm_name(*cfg, False) in targets
    assert {"sgemm_cp_async_s3", "sgemm_cp_async_s3_edges", "sgemm_v4", "sgemm_v4_edges",
            "sgemm_cp_async_8x16_bk16_kmajor_s3", "transpose", "tma_add_one_chapter", "tma_add_one_pipelined_s4",
            "tma_add_one_pipelined_s5", "cluster_sum_pair_chapter", "cluster_sum", "cluster_sum_finish",
            "wgmma_gemm_bf16_bn256_s4_c2_direct", "wgmma_gemm_bf16_bn256_s4_c2_tma", "attention_bf16_hd64",
            "attention_bf16_hd256_causal", "fp8_gemm_bn128_s6_c1x1_tma1", "fp8_gemm_bn192_s5_c1x1_tma1", "fp8_quantize_1x128",
            "codec_mxfp8_quantize_e5m2", "codec_finite_amax", "codec_nvfp4_dequantize"} <= set(targets)
    from asyncpipe.kernels.fp8_gemm import bench_configs

    assert len(bench_configs()) == 6 and len(targets) == 30 + 6 + 1 + 8 and list(targets)[:2] == ["sgemm_cp_async_s3", "sgemm_cp_async_s3_edges"]
    # a name is itself, a pattern matches, anything else is a prefix; in the list's order
    assert list(ct.select(targets, ["cluster_sum"])) == ["cluster_sum"]
    assert list(ct.select(targets, ["tma"])) == ["tma_add_one_chapter", "tma_add_one_pipelined_s4",
                                                 "tma_add_one_pipelined_s5"]
    assert list(ct.select(targets, ["*_edges", "sgemm_v4"])) == ["sgemm_cp_async_s3_edges", "sgemm_v4",
                                                                 "sgemm_v4_edges"]
    assert ct.select(targets, None) == targets


def test_list(capsys):
    assert main(["bench", "--compile", "--list", "--only", "wgmma"]) == 0
    assert capsys.readouterr().out.split() == ["wgmma_gemm_bf16_bn256_s4_c2_direct", "wgmma_gemm_bf16_bn256_s4_c2_tma"]


@pytest.mark.parametrize("argv,msg", [
    (["--compile", "--only", "sgemm_v4,fft"], "bench: --only with --compile must name kernels of the compile list, by "
     "name, pattern or prefix (python -m asyncpipe bench --compile --list), got 'fft'"),
    (["--compile", "--only", "x*"], "bench: --only with --compile must name kernels of the compile list, by name, "
     "pattern or prefix (python -m asyncpipe bench --compile --list), got 'x*'"),
    (["--compile", "--jobs", "0"], "bench: --jobs must be an integer >= 1, got '0'"),
    (["--compile", "--jobs", "two"], "bench: --jobs must be an integer >= 1, got 'two'"),
    (["--compile", "--quick", "--sgemm-stages", "3"], "bench: --compile times compiles, not kernels: --quick, "
     "--reference and --sgemm-stages do not apply, got --quick --sgemm-stages"),
    (["--jobs", "2"], "bench: --jobs and --list apply to --compile only, got --jobs 2"),
    (["--list"], "bench: --jobs and --list apply to --compile only, got --list"),
])
def test_bad_arguments_exit_2(argv, msg, capsys, no_gpu):
    assert main(["bench"] + argv) == bench.EXIT_USAGE == 2
    cap = capsys.readouterr()
    assert cap.err.splitlines() == [f"error: {msg}"] and cap.out == ""
