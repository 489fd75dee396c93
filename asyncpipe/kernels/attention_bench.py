"""``attention``'s benchmark records: TFLOPS beside every torch SDPA backend the GPU machine has (flash,
cuDNN, memory-efficient) and FlashAttention-3 when ``flash_attn_interface`` is installed, measured in the
same run on the same tensors. FLOPs are FlashAttention's count: 4 * batch * heads * seqlen_q * seqlen_k *
head_dim, halved when causal."""

from __future__ import annotations

import contextlib


def attention_flops(batch, heads, seqlen_q, seqlen_k, head_dim, causal) -> float:
    return 4.0 * batch * heads * seqlen_q * seqlen_k * head_dim / (2 if causal else 1)


def _yardsticks(q, k, v, causal):
    """{name: callable} for each torch SDPA backend (and FA3) that accepts these tensors."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))      # SDPA takes (batch, heads, seqlen, head_dim)
    group = q.shape[2] // k.shape[2]
    out = {}
    for name, backend in (("torch_flash", SDPBackend.FLASH_ATTENTION), ("torch_cudnn", SDPBackend.CUDNN_ATTENTION),
                          ("torch_efficient", SDPBackend.EFFICIENT_ATTENTION)):
        def run(backend=backend):
            with sdpa_kernel(backend):
                return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal,
                                                                        enable_gqa=group > 1)
        with contextlib.suppress(RuntimeError):
            run()
            out[name] = run
    with contextlib.suppress(ImportError, RuntimeError):
        from flash_attn_interface import flash_attn_func

        flash_attn_func(q, k, v, causal=causal)
        out["fa3"] = lambda: flash_attn_func(q, k, v, causal=causal)
    return out


def benchmark(seqlen: int, head_dim: int = 128, *, causal: bool = False, dtype: str = "bfloat16",
              tokens: int = 16384, heads: int = 16, reps: int = 20, ablations: bool = False,
              stages: int | None = None) -> dict:
    """One record for ``bench/h200.json``: batch x seqlen = ``tokens``, ``heads`` heads, q and k of one length.
    ``ablations``: also the kernel without ping-pong, without the intra-warpgroup overlap, and without both
    (``ablation_tflops``), as FlashAttention-3's paper measures what each overlap is worth."""
    import torch

    from ..timing import time_ms, tflops
    from .attention import attention
    from .attention_kernel import default_stages

    batch = max(1, tokens // seqlen)
    tdt = {"bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(batch, seqlen, heads, head_dim, device="cuda", dtype=tdt, generator=gen) for _ in range(3))
    out = torch.empty_like(q)
    lse = torch.empty(batch, heads, seqlen, device="cuda", dtype=torch.float32)
    run = lambda: attention(q, k, v, causal=causal, out=out, lse=lse, stages=stages)   # noqa: E731
    run()
    flops = attention_flops(batch, heads, seqlen, seqlen, head_dim, causal)
    ms = time_ms(run, reps=reps)
    record = {"kernel": f"attention_fwd_{dtype}_hd{head_dim}" + ("_causal" if causal else ""), "head_dim": head_dim,
              "seqlen": seqlen, "causal": causal, "dtype": dtype, "shape": [batch, seqlen, heads, head_dim],
              "stages": stages or default_stages(head_dim), "ms": ms, "tflops": tflops(flops, ms), "vs": {}}
    if ablations:
        record["ablation_tflops"] = {}
        for name, kw in (("no_pingpong", dict(pingpong=False)), ("no_overlap", dict(overlap=False)),
                         ("neither", dict(pingpong=False, overlap=False))):
            fn = lambda kw=kw: attention(q, k, v, causal=causal, out=out, lse=lse, stages=stages, **kw)   # noqa: E731
            fn()
            record["ablation_tflops"][name] = tflops(flops, time_ms(fn, reps=reps))
    for name, fn in _yardsticks(q, k, v, causal).items():
        yard = tflops(flops, time_ms(fn, reps=reps))
        record[f"{name}_tflops"] = yard
        record["vs"][name] = record["tflops"] / yard
    return record


SEQLENS = (512, 1024, 2048, 4096, 8192, 16384)
HEAD_DIMS = (64, 128, 256)


def sweep(records: list, log=print, seqlens=SEQLENS, head_dims=HEAD_DIMS, dtypes=("bfloat16", "float16")):
    """Every (dtype, head dim, causal, seqlen) record; a failing one is logged and the others stand."""
    for dtype in dtypes:
        for hd in head_dims:
            for causal in (False, True):
                for n in seqlens:
                    log(f"attention {dtype} hd{hd} seqlen {n}" + (" causal" if causal else ""))
                    try:
                        records.append(benchmark(n, hd, causal=causal, dtype=dtype,
                                                 ablations=hd == 128 and n == 4096 and dtype == "bfloat16"))
                    except Exception as exc:  # noqa: BLE001 - one failing configuration must not hide the rest
                        log(f"attention {dtype} hd{hd} seqlen {n} failed: {type(exc).__name__}: {exc}")
                        records.append(dict(kernel=f"attention_fwd_{dtype}_hd{hd}", seqlen=n, causal=causal,
                                            error=f"{type(exc).__name__}: {exc}", vs={}))
