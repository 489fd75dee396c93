"""How long a new process waits for each kernel's first call: compile (cold) or disk cache (warm).

Every kernel configuration ``python -m asyncpipe bench`` times has a first call here (``calls()``: the same
configurations, at a small size). ``python -m asyncpipe.first_call [NAME ...]`` times, in this process, the first
call of each named one (all by default): the call compiles the kernel, or loads it from numba's disk cache, then
runs it; it prints one JSON object ``{name: seconds}``. ``measure()`` gives each kernel a fresh cache folder of
its own and runs it twice in fresh processes: the first run is cold, the second warm. Each process first pays
numba's own initialisation of its CUDA target (``numba_init_s``, once per process, whatever the kernel), so the
first call of a kernel in a fresh process takes ``numba_init_s + warm_s`` (or ``+ cold_s``). Kernels are
measured ``jobs`` at a time (each process compiles on one core). Needs a GPU.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor


def sgemm_name(variant: str, stages: int, bk: int, tile: str, schedule: str) -> str:
    """The first-call row of one SGEMM configuration of ``bench_configs.sgemm_configs``."""
    if variant == "v4":
        return "sgemm_v4"
    return f"sgemm_cp_async_s{stages}" + ("" if (bk, tile, schedule) == (8, "8x8", "plain") else
                                          f"_bk{bk}_{tile}" + ("" if schedule == "plain" else f"_{schedule}"))


def calls() -> dict:
    """{name: first call} for every kernel configuration the bench times (its SGEMM configurations, the TMA add-one's
    chapter kernel and its pipelined kernel at each stage count, the cluster kernels, the wgmma GEMM's epilogues,
    the attention kernels, the FP8 GEMM's default kernels and its quantizer, the MX/NVFP4 codecs), at a small size:
    the first call's cost is the compile or the cache load, not the run."""
    import numpy as np
    from numba import cuda

    from .bench_configs import TMA_CONFIGS, sgemm_configs
    from .kernels import cluster_sum as CS
    from .kernels import sgemm as S
    from .kernels.tma_add_one import add_one
    from .kernels.wgmma_gemm import EPILOGUES, bf16_bits, wgmma_gemm

    @functools.cache
    def dev(kind):                           # the operands, made at the first call that needs them
        if kind == "bf16":
            return cuda.to_device(bf16_bits(np.ones((256, 256), np.float32)))
        return cuda.to_device(np.ones(1 << 16, np.float32) if kind == "vector" else np.ones((256, 256), kind))

    out = {}
    for variant, stages, bk, tile, schedule in sgemm_configs():
        kw = dict(variant=variant) if variant == "v4" else dict(stages=stages, bk=bk, tile=tile, schedule=schedule)
        out[sgemm_name(variant, stages, bk, tile, schedule)] = lambda kw=kw: S.sgemm(dev(np.float32), dev(np.float32),
                                                                                     **kw)
    for name, kw in TMA_CONFIGS:
        key = name + (f"_s{kw['stages']}" if kw.get("pipelined") else "")
        out.setdefault(key, lambda kw=kw: add_one(dev(np.int32), **kw))   # ctas_per_sm: a launch option
    out["cluster_pair_sum_chapter"] = lambda: CS.pair_sums(dev("vector"), 1024, 2)
    out["cluster_sum"] = lambda: CS.cluster_sum(dev("vector"), cluster_size=2)
    for epilogue in EPILOGUES:
        out[f"wgmma_gemm_bf16_{epilogue}"] = lambda e=epilogue: wgmma_gemm(dev("bf16"), dev("bf16"), epilogue=e)
    from .compile_time import attention_configs
    from .kernels.attention import attention

    for name, cfg in attention_configs().items():          # the bench's bf16 attention records, at 1 x 256 x 2 heads
        def call(hd=cfg["head_dim"], causal=cfg["causal"]):
            x = cuda.to_device(bf16_bits(np.ones((1, 256, 2, hd), np.float32)))
            return attention(x, x, x, causal=causal)
        out[name] = call
    from .compile_time import fp8_gemm_configs

    for name, cfg in fp8_gemm_configs().items():   # the bench's FP8 GEMM kernels, at 256 (split_k 2: 64) x 384 x 256
        def gemm(cfg=cfg):                          # (k_slices S: K = 128 S, a k-block a slice)
            from .kernels import fp8_gemm as F

            m, k = (64 if cfg["split_k"] == 2 else 256), max(256, 128 * cfg["k_slices"])
            a, sa, b, sb = F.random_operands(np.random.default_rng(0), m, 384, k)
            return F.fp8_gemm(cuda.to_device(a), F.to_device_scales(sa), cuda.to_device(b), cuda.to_device(sb),
                              block_n=cfg["block_n"], stages=cfg["stages"], cluster=tuple(cfg["cluster"]),
                              split_k=cfg["split_k"], k_slices=cfg["k_slices"],
                              epilogue="tma" if cfg["epi_bufs"] else "direct", epilogue_buffers=cfg["epi_bufs"] or None)
        out[name] = gemm

    def quantize():
        from .kernels.fp8_quant import quantize_fp8_rowwise_blocks

        return quantize_fp8_rowwise_blocks(dev("bf16"))
    out["fp8_quantize_1x128"] = quantize
    for name in CODEC_CALLS:                                # the codecs the bench times, on 256 x 256 values
        out[name] = lambda name=name: _codec_call(name, dev("bf16"))
    return out


# the codec calls mx_codec.benchmark times; "..._amax": quantize_nvfp4 without a tensor scale, which runs (and
# compiles) the amax kernel before the quantizer; the dequantizers take random bytes made on the host
CODEC_CALLS = ("codec_quantize_mxfp8_e4m3", "codec_quantize_mxfp8_e5m2", "codec_quantize_mxfp4", "codec_quantize_nvfp4",
               "codec_quantize_nvfp4_amax", "codec_dequantize_mxfp8_e4m3", "codec_dequantize_mxfp4",
               "codec_dequantize_nvfp4")


def _codec_call(name: str, x):
    """The first call of one public codec function (``CODEC_CALLS``) on the 256 x 256 bf16 ``x``."""
    import numpy as np
    from numba import cuda

    from .kernels import mx_codec as C

    rng = np.random.default_rng(0)

    def u8(cols, high=256):
        return cuda.to_device(rng.integers(0, high, (256, cols), dtype=np.uint8))

    return {
        "codec_quantize_mxfp8_e4m3": lambda: C.quantize_mxfp8(x, "e4m3"),
        "codec_quantize_mxfp8_e5m2": lambda: C.quantize_mxfp8(x, "e5m2"),
        "codec_quantize_mxfp4": lambda: C.quantize_mxfp4(x),
        "codec_quantize_nvfp4": lambda: C.quantize_nvfp4(x, 1.0),
        "codec_quantize_nvfp4_amax": lambda: C.quantize_nvfp4(x),
        "codec_dequantize_mxfp8_e4m3": lambda: C.dequantize_mxfp8(u8(256), u8(8, 255), "e4m3"),
        "codec_dequantize_mxfp4": lambda: C.dequantize_mxfp4(u8(128), u8(8, 255)),
        "codec_dequantize_nvfp4": lambda: C.dequantize_nvfp4(u8(128), u8(16, 127), 1.0),
    }[name]()


NUMBA_INIT = "_numba_init"


def numba_init_seconds() -> float:
    """Seconds numba takes to initialise its CUDA target in this process (``BaseContext.refresh``: its
    implementation modules and registries; asyncpipe.backend.numba_init keeps scipy out). The first compile
    or cache load of any kernel pays it once per process; ``main`` pays it first so that each kernel's row
    is its own."""
    from numba.cuda.descriptor import cuda_target

    t0 = time.perf_counter()
    cuda_target.target_context.refresh()
    return time.perf_counter() - t0


def main(names=None) -> int:
    from numba import cuda

    table = calls()
    unknown = sorted(set(names or ()) - set(table))
    if unknown:
        print(f"first_call: unknown kernel(s) {', '.join(unknown)}; known: {', '.join(table)}", file=sys.stderr)
        return 2
    cuda.synchronize()                       # context creation is not the kernel's cost
    times = {NUMBA_INIT: numba_init_seconds()}
    for name in names or table:
        t0 = time.perf_counter()
        table[name]()
        cuda.synchronize()
        times[name] = time.perf_counter() - t0
    print(json.dumps(times))
    return 0


def _cold_then_warm(name: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="asyncpipe-first-call-") as d:
        env = dict(os.environ, ASYNCPIPE_CACHE_DIR=d, NUMBA_CACHE_DIR=os.path.join(d, "numba"))
        runs = []
        for _ in range(2):
            out = subprocess.run([sys.executable, "-m", "asyncpipe.first_call", name], env=env, capture_output=True,
                                 text=True)
            if out.returncode:
                raise RuntimeError(f"first call of {name} failed: {out.stderr.strip()[-400:]}")
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {"cold_s": runs[0][name], "warm_s": runs[1][name], "numba_init_s": runs[1][NUMBA_INIT]}


def measure(names=None, jobs: int = 8, log=None) -> dict[str, dict[str, float]]:
    """{kernel: {"cold_s": ..., "warm_s": ...}}: each kernel in two fresh processes sharing a fresh cache of its own,
    ``jobs`` kernels at a time; a kernel whose first call fails gets {"error": ...} and the others stand. ``log``
    (a callable taking a line) hears each kernel's row as soon as it is measured."""
    names = list(names) if names else sorted(calls(), key=lambda n: "8x16" not in n)   # the longest compiles first

    def one(name):
        try:
            row = _cold_then_warm(name)
        except Exception as exc:  # noqa: BLE001 - one kernel's failure must not hide the others' figures
            row = {"error": str(exc)}
        if log:
            log(f"first call {name}: " + (row["error"][:200] if "error" in row else
                                          f"{row['cold_s']:.2f} s cold, {row['warm_s']:.3f} s warm "
                                          f"(+ {row['numba_init_s']:.2f} s numba's init per process)"))
        return name, row

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        return dict(pool.map(one, names))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
