"""attention through asyncpipe's tuner (``asyncpipe.tune.attention``). Offline: the spec (space = the stage
counts that fit, by the same rule ``attention`` enforces; problem key; inputs, decode and reference agreeing with
``attention.reference``; a poisoned output fails the check). On the GPU: tuned end to end (compiled, checked
against float64, timed, cached) and ``attention(stages=None)`` then launches the pick."""

import numpy as np
import pytest

from asyncpipe.errors import AsyncpipeError
from asyncpipe.kernels import attention_kernel as AK
from asyncpipe.kernels.attention import check_attention, reference
from asyncpipe.tune.attention import PROBLEM, attention_tuner, max_stages, tuned_stages
from asyncpipe.tune.gpu import _poison

SMEM = 232448
P = dict(batch=1, seqlen_q=130, seqlen_k=70, heads=2, heads_kv=1)


@pytest.mark.parametrize("head_dim", AK.HEAD_DIMS)
def test_space_is_every_stage_count_attention_accepts(head_dim):
    spec = attention_tuner(head_dim).spec
    assert spec.space["stages"] == tuple(range(1, max_stages(head_dim) + 1))
    assert spec.default == {"stages": AK.default_stages(head_dim)}
    shape = (1, 128, 2, head_dim)
    ok = dict(causal=False, smem_limit=SMEM)
    args = (shape, shape, shape, ("bfloat16",) * 3, [(1 << 20, head_dim * 2, head_dim, 1)] * 4)
    check_attention(*args, stages=max_stages(head_dim), **ok)               # the deepest in the space launches ...
    with pytest.raises(AsyncpipeError, match="must fit the shared memory per block"):
        check_attention(*args, stages=max_stages(head_dim) + 1, **ok)        # ... one more does not


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_inputs_reference_and_decode_agree(dtype):
    spec = attention_tuner(64, causal=True, dtype=dtype).spec
    q, k, v, out, lse = spec.inputs(P, np.random.default_rng(1))
    assert q.shape == (1, 130, 2, 64) and k.shape == v.shape == (1, 70, 1, 64) and lse.shape == (1, 2, 130)
    assert spec.key(q, k, v, out, lse) == P and spec.problem == PROBLEM
    assert np.std(spec.decode(q)) > 0.5                                    # fresh random values, not zeros
    want = reference(*(spec.decode(x) for x in (q, k, v)), causal=True)[0]
    np.testing.assert_array_equal(spec.reference(q, k, v, out, lse), want)
    assert np.isnan(spec.decode(_poison(out))).all()                       # the tuner's poison reads as NaN


def test_names_keep_configurations_apart():
    names = {attention_tuner(d, c, t).spec.name for d in AK.HEAD_DIMS for c in (False, True)
             for t in ("bfloat16", "float16")}
    assert len(names) == 12 and "attention_hd128_causal_bfloat16" in names


def test_source_hash_covers_the_kernel_file():
    import asyncpipe.kernels.attention as A
    import asyncpipe.tune.attention as T
    from asyncpipe.tune.kernels import source_hash

    spec = attention_tuner(128).spec
    assert spec.source_hash == source_hash(AK.__file__, A.__file__, T.__file__)


def test_bad_tuner_arguments_are_named():
    with pytest.raises(AsyncpipeError, match=r"head_dim must be one of \(64, 128, 256\).*96"):
        attention_tuner(96)
    with pytest.raises(AsyncpipeError, match="dtype must be 'bfloat16' or 'float16'.*float32"):
        attention_tuner(128, dtype="float32")


def test_untuned_problem_has_no_pick(no_gpu):
    assert tuned_stages(128, False, "bf16", (1, 128, 128, 2, 2)) is None


@pytest.mark.gpu
@pytest.mark.hopper
def test_tune_then_attention_launches_the_pick(tmp_path, monkeypatch):
    from numba import cuda

    from asyncpipe.kernels.attention import attention, launch_parts

    monkeypatch.setenv("ASYNCPIPE_CACHE_DIR", str(tmp_path))             # a tune cache of its own
    problem = dict(batch=2, seqlen_q=1000, seqlen_k=1500, heads=4, heads_kv=2)
    res = attention_tuner(64).tune(problem, progress=False)
    measured = [r for r in res.rows if r.measured_ms is not None]
    assert measured and all(r.correct for r in measured), res.table()
    pick = res.best.stages
    q, k, v, out, lse = (cuda.to_device(a) for a in attention_tuner(64).spec.inputs(problem, np.random.default_rng(2)))
    assert launch_parts(q, k, v, out, lse, dtype="bfloat16")["stages"] == pick
    attention(q, k, v, out=out, lse=lse)
    want = reference(*(attention_tuner(64).spec.decode(x.copy_to_host()) for x in (q, k, v)))[0]
    got = attention_tuner(64).spec.decode(out.copy_to_host())
    assert np.abs(got - want).max() < 2e-2


def test_attention_asks_the_tuner_through_kernel_options(no_gpu):
    """kernels never import the tuner: asyncpipe.tune registers attention's source in asyncpipe.kernels.options."""
    from asyncpipe.kernels import options

    assert "attention" in options._sources
    assert options.choose("attention", (1, 128, 128, 2, 2), dict(head_dim=128, causal=False, ab="bf16")) is None
