"""Launch plans (asyncpipe.host.plans), without a GPU: keys, the LRU cache and when plans are built."""

from types import SimpleNamespace

import numpy as np

from asyncpipe.backend.gpu import GpuBackend
from asyncpipe.host import plans
from asyncpipe.sim.host import SimBackend


class FakeArray:
    def __init__(self, ptr, shape, strides=None, typestr="<f4"):
        self.__cuda_array_interface__ = dict(data=(ptr, False), shape=shape, strides=strides, typestr=typestr,
                                             version=3)


def test_array_key_is_what_the_gpu_sees():
    assert plans.array_key(FakeArray(4096, (2, 3))) == (4096, (2, 3), (), "<f4")
    assert plans.array_key(FakeArray(4096, (2, 3))) == plans.array_key(FakeArray(4096, (2, 3)))
    assert plans.array_key(FakeArray(4096, (3, 2))) != plans.array_key(FakeArray(4096, (2, 3)))
    assert plans.array_key(FakeArray(4096, (2, 3), typestr="<u2")) != plans.array_key(FakeArray(4096, (2, 3)))
    assert plans.array_key(np.zeros(3)) is None            # host memory: no key, never cached


def test_option_key_tells_types_apart():
    assert plans.option_key(4) != plans.option_key(4.0)
    assert plans.option_key(1) != plans.option_key(True)
    assert plans.option_key(4, "tma") == plans.option_key(4, "tma")
    # a list (cluster=[2, 1]) is a key by its items, told apart from the tuple and from [2.0, 1]; what cannot be
    # hashed becomes None, which run_plan never caches (the build then reports the option)
    assert plans.option_key([2, 1]) == plans.option_key([2, 1]) != plans.option_key((2, 1))
    assert plans.option_key([2, 1]) != plans.option_key([2.0, 1])
    assert plans.option_key([2, {}]) == (None,) and plans.option_key({"a": 1}) == (None,)
    hash(plans.option_key([2, 1], (1, [2]), None))


def test_latest_is_the_plan_last_built_or_used():
    cache = plans.PlanCache()
    assert cache.latest() is None
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.latest() == 2
    cache.get("a")
    assert cache.latest() == 1


def test_cache_is_lru():
    cache = plans.PlanCache(size=2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1          # a is now the most recent
    cache.put("c", 3)                    # b goes
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3 and len(cache) == 2


def test_run_plan_builds_once_per_key(monkeypatch):
    monkeypatch.setattr(plans, "current", lambda: GpuBackend())
    cache, built, ran = plans.PlanCache(), [], []

    def build():
        built.append(1)
        return lambda: ran.append(1)

    key = (plans.array_key(FakeArray(64, (8,))), *plans.option_key(3))
    for _ in range(3):
        plans.run_plan(cache, key, build)
    assert (len(built), len(ran)) == (1, 3)
    plans.run_plan(cache, (None, *plans.option_key(3)), build)   # an array without a key: built every time
    plans.run_plan(cache, (None, *plans.option_key(3)), build)
    assert (len(built), len(ran)) == (3, 5)
    # a list option (fp8_gemm(..., cluster=[2, 1]) raised TypeError: unhashable type: 'list', on the GPU only): cached
    listed = (plans.array_key(FakeArray(64, (8,))), *plans.option_key([2, 1]))
    for _ in range(2):
        plans.run_plan(cache, listed, build)
    assert (len(built), len(ran)) == (4, 7)


def test_the_simulator_builds_every_time(monkeypatch):
    monkeypatch.setattr(plans, "current", lambda: SimpleNamespace(caches_plans=SimBackend.caches_plans))
    cache, built = plans.PlanCache(), []
    for _ in range(2):
        plans.run_plan(cache, ("k",), lambda: built.append(1) or (lambda: None))
    assert len(built) == 2 and len(cache) == 0
