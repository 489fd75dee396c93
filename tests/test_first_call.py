"""asyncpipe.first_call: a first-call row for every kernel configuration the bench times (the timing itself needs a
GPU: the bench's first-call rows in bench/h200.json)."""

from asyncpipe import bench, first_call


def test_every_configuration_the_bench_times_has_a_first_call():
    names = list(first_call.calls())
    assert len(names) == len(set(names))
    sgemm = [first_call.sgemm_name(*c) for c in bench.sgemm_configs()]
    assert len(set(sgemm)) == len(bench.sgemm_configs())             # one row per configuration
    assert set(sgemm) <= set(names)
    assert {"sgemm_cp_async_s3", "sgemm_v4", "sgemm_cp_async_s3_bk16_8x16_kmajor", "tma_add_one_chapter",
            "tma_add_one_pipelined_s4", "tma_add_one_pipelined_s5", "cluster_pair_sum_chapter", "cluster_sum",
            "wgmma_gemm_bf16_direct", "wgmma_gemm_bf16_tma"} <= set(names)


def test_unknown_names_are_refused(capsys):
    """Before anything touches a GPU: the name is checked first."""
    assert first_call.main(["no_such_kernel"]) == 2
    assert "unknown kernel(s) no_such_kernel" in capsys.readouterr().err
