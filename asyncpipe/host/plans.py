"""Per-problem launch plans: what a kernel function works out from its arguments (checks, tensor
maps, grid, the marshalled launch), kept for the next call with the same arguments.

A plan is keyed on what the arrays *are* to the GPU (address, shape, strides, element type: their
``__cuda_array_interface__``) and on the call's options, never on the Python objects: a new array
object viewing the same memory the same way finds the same plan, and a plan holds no array (its
marshalled arguments are raw pointers), so caching never keeps an array's memory alive. Two arrays
that are the same to the GPU get the same launch, and that launch is right for both.
"""

from __future__ import annotations

from collections import OrderedDict

from ..backend import current

PLAN_CACHE_SIZE = 32


def array_key(x) -> tuple | None:
    """``x`` as the GPU sees it: (address, shape, strides, typestr); None for what has no
    ``__cuda_array_interface__`` (the kernel function's own checks then report it). A torch tensor is
    keyed on the same facts read from the tensor (strides in elements, torch's dtype name)."""
    if type(x).__module__.startswith("torch") and hasattr(x, "data_ptr"):
        # a torch tensor directly: its interface refuses bfloat16 and float8, and building it costs more
        return x.data_ptr(), tuple(x.shape), tuple(x.stride()), str(x.dtype)
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is None:
        return None
    return cai["data"][0], tuple(cai["shape"]), tuple(cai.get("strides") or ()), cai["typestr"]


class PlanCache:
    """A small LRU map from a call's key to its plan (any object, typically a ``PreparedLaunch``)."""

    def __init__(self, size: int = PLAN_CACHE_SIZE):
        self.size = size
        self._plans: OrderedDict = OrderedDict()

    def get(self, key):
        plan = self._plans.get(key)
        if plan is not None:
            self._plans.move_to_end(key)
        return plan

    def put(self, key, plan):
        self._plans[key] = plan
        self._plans.move_to_end(key)
        while len(self._plans) > self.size:
            self._plans.popitem(last=False)
        return plan

    def latest(self):
        """The plan last built or used (None when empty): for a diagnostic that wants the launch a call made."""
        return next(reversed(self._plans.values()), None)

    def clear(self) -> None:
        self._plans.clear()

    def __len__(self) -> int:
        return len(self._plans)


def option_key(*options) -> tuple:
    """Options as a key that tells 4 from 4.0 and True from 1 (the checks refuse some of them), a list as its items
    (``cluster=[2, 1]``, which the checks take as (2, 1)). An option that cannot be hashed becomes None: a key
    holding it is never cached, and the build says what is wrong with the option."""
    return tuple(_option(v) for v in options)


def _option(v):
    if isinstance(v, (list, tuple)):
        items = tuple(_option(x) for x in v)
        return None if any(x is None for x in items) else (type(v), items)
    try:
        hash(v)
    except TypeError:
        return None
    return (type(v), v)


def run_plan(cache: PlanCache, key: tuple, build) -> None:
    """Launch the plan for ``key``, building it with ``build()`` (which checks everything and returns a
    ``PreparedLaunch``) the first time. Keys with an array that has no ``__cuda_array_interface__``
    (None) are never cached: ``build`` reports them. The simulator builds every time (its launches
    run the checks and the CPU engine anyway: its backend's ``caches_plans`` is False)."""
    if None in key or not current().caches_plans:
        build()()
        return
    plan = cache.get(key)
    if plan is None:
        plan = cache.put(key, build())
    plan()


_tensor_maps = PlanCache()


def cached_tensor_map(array, box, *, dtype: str, swizzle: str = "none"):
    """The tiled ``TensorMap`` of ``array`` with ``box``, built once per (address, shape, strides, box,
    dtype, swizzle). Encoding a map is a driver call plus a synchronous 128-byte copy to the device:
    done on every call it would stall the stream each time. A map encodes nothing but those values,
    so a cached one is right for any array that has them (memory freed and allocated again
    included); the cache keeps maps only, never arrays."""
    from .tensor_map import TensorMap

    key = (array_key(array), tuple(box), dtype, swizzle)
    tmap = _tensor_maps.get(key)
    if tmap is None:
        built = TensorMap.tiled(array, box, swizzle=swizzle, dtype=dtype)
        tmap = _tensor_maps.put(key, TensorMap(built.layout, built._words, None))
    return tmap
