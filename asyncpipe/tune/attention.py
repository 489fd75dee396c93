"""``attention`` through asyncpipe's tuner: one ``KernelSpec`` per (head dim, causal, element type), searching the
K/V ring's depth (``stages``) like any user's kernel::

    from asyncpipe.tune.attention import attention_tuner
    res = attention_tuner(128, causal=False).tune({"batch": 4, "seqlen_q": 4096, "seqlen_k": 4096,
                                                   "heads": 16, "heads_kv": 16})
    print(res.table())                  # predicted beside measured; the pick is cached for this GPU
    attention(q, k, v)                  # stages=None takes the cached pick for the call's problem

The spec compiles every stage count that fits the shared memory (``max_stages``), checks each against the
float64 reference on fresh random inputs (the output's bf16 bits decoded), times it and caches the fastest,
as ``python -m asyncpipe tune`` does for a user's kernel. The launch encodes TMA descriptors of device
memory, so tuning (and the model's table) needs the GPU.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..kernels import attention_kernel as AK

PROBLEM = ("batch", "seqlen_q", "seqlen_k", "heads", "heads_kv")
SMEM_OPTIN = 232448              # the H100/H200's opt-in shared memory per block (227 KB)
TOLERANCE = 1e-2                 # relative Frobenius error of O: bf16 rounds at 2^-9, fp16 at 2^-12
_AB = {"bfloat16": "bf16", "float16": "f16"}


def max_stages(head_dim: int, smem_limit: int = SMEM_OPTIN) -> int:
    """The deepest ring (up to attention's 8) whose Q, K/V stages and barriers fit ``smem_limit`` bytes."""
    fits = [s for s in range(1, 9) if AK.shared_bytes(head_dim, AK.block_n(head_dim), s) + (2 * s + 1) * 8
            <= smem_limit]
    return max(fits)


def _inputs(head_dim: int, dtype: str):
    """``spec.inputs``: q, k, v of fresh normal values (bf16 as int16 bits: -1, the tuner's poison, is a NaN),
    out and lse zeroed."""
    from ..bf16 import bf16_bits

    def rand(rng, *shape):
        x = rng.standard_normal(shape).astype(np.float32)
        return bf16_bits(x).view(np.int16) if dtype == "bfloat16" else x.astype(np.float16)

    def inputs(p, rng):
        q = rand(rng, p["batch"], p["seqlen_q"], p["heads"], head_dim)
        k, v = (rand(rng, p["batch"], p["seqlen_k"], p["heads_kv"], head_dim) for _ in range(2))
        return q, k, v, np.zeros_like(q), np.zeros((p["batch"], p["heads"], p["seqlen_q"]), np.float32)
    return inputs


def _decode(dtype: str):
    from ..bf16 import bf16_to_float32

    if dtype == "bfloat16":
        return lambda x: bf16_to_float32(np.asarray(x).view(np.uint16))
    return lambda x: np.asarray(x).astype(np.float32)


@functools.lru_cache(maxsize=None)
def attention_tuner(head_dim: int = 128, causal: bool = False, dtype: str = "bfloat16"):
    """The ``TunedKernel`` of attention's kernel for one head dim, masking and element type ("bfloat16" or
    "float16"); its problem is ``PROBLEM``, its space the stage counts that fit."""
    from ..errors import check
    from ..kernels import attention as attention_module
    from ..kernels.attention import API, _jit, launch_parts, reference
    from ..kernels.attention_bench import attention_flops
    from .kernels import source_hash
    from .spec import KernelSpec, Launch, MbarrierRingPipeline, TunedKernel

    check(head_dim in AK.HEAD_DIMS, API, f"head_dim must be one of {AK.HEAD_DIMS}", repr(head_dim))
    check(dtype in _AB, API, "dtype must be 'bfloat16' or 'float16'", repr(dtype))
    causal = bool(causal)
    ab = _AB[dtype]
    decode = _decode(dtype)

    def kernel(cfg):
        return _jit(head_dim, causal, ab, cfg["stages"])

    def launch(cfg, q, k, v, out, lse):
        p = launch_parts(q, k, v, out, lse, causal=causal, dtype=dtype, stages=cfg["stages"])
        return Launch(grid=p["grid"], block=p["block"], args=p["args"], shared=p["shared"])

    def ref(q, k, v, out, lse):
        return reference(decode(q), decode(k), decode(v), causal=causal)[0]

    def key(q, k, v, out, lse):
        B, Sq, H, _ = q.shape
        return dict(zip(PROBLEM, (B, Sq, k.shape[1], H, k.shape[2])))

    stages = tuple(range(1, max_stages(head_dim) + 1))
    spec = KernelSpec(
        f"attention_hd{head_dim}{'_causal' if causal else ''}_{dtype}", kernel, launch,
        space={"stages": stages}, default={"stages": AK.default_stages(head_dim)}, problem=PROBLEM, key=key,
        inputs=_inputs(head_dim, dtype), reference=ref, output=3, tolerance=TOLERANCE, decode=decode,
        pipeline=MbarrierRingPipeline(
            tiles=lambda p, cfg: math.ceil(p["seqlen_k"] / AK.block_n(head_dim)),
            stage_bytes=lambda p, cfg: AK.sizes(head_dim, AK.block_n(head_dim), cfg["stages"])["STAGE_BYTES"],
            consumers=AK.CONSUMERS),
        flop=lambda p: attention_flops(p["batch"], p["heads"], p["seqlen_q"], p["seqlen_k"], head_dim, causal))
    # the cache keys on the kernel's source: here attention's kernel and host files, not only this one
    spec.__dict__["source_hash"] = source_hash(AK.__file__, attention_module.__file__, __file__)
    return TunedKernel(spec)


def attention_options(problem, given) -> dict | None:
    """``asyncpipe.kernels.options`` source for ``attention`` (registered by ``asyncpipe.tune``): ``{"stages": n}``
    of the cached pick for ``problem`` (``PROBLEM`` order) and ``given`` (head_dim, causal, ab), or None."""
    n = tuned_stages(given["head_dim"], given["causal"], given["ab"], problem)
    return {"stages": n} if n else None


def tuned_stages(head_dim: int, causal: bool, ab: str, problem: tuple) -> int | None:
    """The cached pick's stage count for ``problem`` (``PROBLEM`` order) on this GPU, or None (never tuned)."""
    from .cache import cached_config

    dtype = {v: k for k, v in _AB.items()}[ab]
    c = cached_config(attention_tuner(head_dim, causal, dtype).spec.tunable(), problem)
    return c.stages if c else None


__all__ = ["PROBLEM", "attention_options", "attention_tuner", "max_stages", "tuned_stages"]
