"""A user's kernel as the tuner sees it: ``KernelSpec`` (or the ``autotune`` decorator), and the wrapper
(``TunedKernel``) that launches it with the cached pick for its problem.

A spec names: the search space (``stages`` and any other compile-time constant), the default
configuration (what the wrapper uses before tuning), a factory ``kernel(config) -> cuda.jit kernel``
(compile-time constants reach the kernel as closure variables, which numba freezes), ``launch(config,
*args) -> Launch`` (grid, block, the kernel's arguments, dynamic shared memory), the problem's names
and ``key(*args)`` that reads them off a call's arguments, ``inputs(problem, rng)`` (host arguments to
tune on), ``reference(*inputs)`` (the written argument's expected value, in float64) and which argument
is written (``output``; ``decode`` turns its host copy into numbers where its elements are not, such as bf16
bits). ``pipeline`` says what the timeline model may assume (``CpAsyncPipeline``,
``MbarrierRingPipeline``; None: occupancy only). Host code; nothing here imports numba until used.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import math
import numbers
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Mapping, Sequence

from ..errors import check
from .kernels import Config, Tunable, space_hash

API = "KernelSpec"


@dataclass(frozen=True)
class Launch:
    """One launch of the kernel: ``kernel[grid, block, stream, shared](*args)``."""

    grid: int | tuple
    block: int | tuple
    args: tuple
    shared: int = 0                          # dynamic shared memory, bytes

    @property
    def threads(self) -> int:
        return math.prod(self.block) if isinstance(self.block, tuple) else int(self.block)

    @property
    def ctas(self) -> int:
        return math.prod(self.grid) if isinstance(self.grid, tuple) else int(self.grid)


@dataclass(frozen=True)
class CpAsyncPipeline:
    """The chapter's multi-stage cp.async loop (prologue of S-1 groups, ``wait_group(S-2)``, a commit every
    tile): each CTA runs ``tiles(problem, config)`` tiles of ``stage_bytes(problem, config)`` bytes."""

    tiles: Callable[[Mapping, Mapping], int]
    stage_bytes: Callable[[Mapping, Mapping], int]
    kind: str = field(default="cp.async", init=False)
    min_stages: int = field(default=2, init=False)       # wait_group(S-2) needs S >= 2


@dataclass(frozen=True)
class MbarrierRingPipeline:
    """A TMA/bulk producer filling an S-slot full/empty mbarrier ring for ``consumers`` consumers."""

    tiles: Callable[[Mapping, Mapping], int]
    stage_bytes: Callable[[Mapping, Mapping], int]
    consumers: int = 1
    kind: str = field(default="mbarrier ring", init=False)
    min_stages: int = field(default=1, init=False)


def _callable(name, value):
    check(callable(value), API, f"{name} must be callable", repr(value))


@dataclass(eq=False)
class KernelSpec:
    """Everything the tuner needs about one kernel (module doc). ``space`` maps each compile-time constant
    to its candidates and must hold ``"stages"``; ``default`` gives a value (from the space) for each."""

    name: str
    kernel: Callable[[dict], object]
    launch: Callable[..., Launch]
    space: Mapping[str, Sequence]
    default: Mapping
    problem: tuple
    key: Callable[..., Mapping]
    inputs: Callable
    reference: Callable
    output: int = -1
    tolerance: float = 1e-5
    pipeline: CpAsyncPipeline | MbarrierRingPipeline | None = None
    nbytes: Callable[[Mapping], float] | None = None
    flop: Callable[[Mapping], float] | None = None
    decode: Callable | None = None           # the written argument (copied to the host) -> numbers, e.g. bf16 bits

    def __post_init__(self):
        check(isinstance(self.name, str) and self.name.isidentifier(), API, "name must be an identifier",
              repr(self.name))
        for n in ("kernel", "launch", "key", "inputs", "reference"):
            _callable(n, getattr(self, n))
        if self.decode is not None:
            _callable("decode", self.decode)
        check(isinstance(self.space, Mapping) and "stages" in self.space, API,
              'space must be a mapping with a "stages" entry', repr(self.space))
        self.space = {k: tuple(v) for k, v in self.space.items()}
        check(self.pipeline is None or isinstance(self.pipeline, (CpAsyncPipeline, MbarrierRingPipeline)), API,
              "pipeline must be a CpAsyncPipeline, an MbarrierRingPipeline or None", repr(self.pipeline))
        low = self.pipeline.min_stages if self.pipeline else 1
        for k, v in self.space.items():
            check(len(v) > 0 and len(set(v)) == len(v), API, f"space[{k!r}] must be a non-empty list without repeats",
                  repr(v))
        check(all(isinstance(s, numbers.Integral) and not isinstance(s, bool) and s >= low
                  for s in self.space["stages"]), API,
              f"space['stages'] must hold integers >= {low}" + (f" ({self.pipeline.kind})" if self.pipeline else ""),
              repr(self.space["stages"]))
        check(isinstance(self.default, Mapping) and set(self.default) == set(self.space), API,
              f"default must give a value for each of {sorted(self.space)}", repr(self.default))
        for k, v in self.default.items():
            check(v in self.space[k], API, f"default[{k!r}] must be one of space[{k!r}] = {self.space[k]}", repr(v))
        self.default = dict(self.default)
        self.problem = tuple(self.problem) if not isinstance(self.problem, str) else (self.problem,)
        check(len(self.problem) > 0 and all(isinstance(d, str) and d.isidentifier() for d in self.problem), API,
              "problem must be a non-empty tuple of names", repr(self.problem))
        check(isinstance(self.output, int) and not isinstance(self.output, bool), API,
              "output must be the index of the argument the kernel writes", repr(self.output))
        check(isinstance(self.tolerance, numbers.Real) and self.tolerance > 0, API, "tolerance must be > 0",
              repr(self.tolerance))

    # ---- configurations -----------------------------------------------------------------------
    @property
    def options(self) -> dict:
        """The default values of the options other than ``stages``."""
        return {k: v for k, v in self.default.items() if k != "stages"}

    def option_sets(self) -> tuple[dict, ...]:
        """Every combination of the options other than ``stages``, as what differs from the default: ``{}``
        (the default) first."""
        names = [k for k in self.space if k != "stages"]
        combos = [dict(zip(names, vals)) for vals in itertools.product(*(self.space[k] for k in names))]
        sets = [{k: v for k, v in c.items() if v != self.default[k]} for c in combos]
        return tuple(sorted(sets, key=lambda o: (len(o), [names.index(k) for k in o])))

    def config(self, value=None, **given) -> Config:
        """A ``Config`` from a full or partial dict (the rest from ``default``) or a ``Config``."""
        if isinstance(value, Config):
            return value
        full = self.default | dict(value or {}) | given
        check(set(full) == set(self.space), f"{self.name}", f"config names must be among {sorted(self.space)}",
              sorted(set(full) - set(self.space)))
        for k, v in full.items():
            check(v in self.space[k], f"{self.name}", f"{k} must be one of {self.space[k]}", repr(v))
        return Config.of(full["stages"], **{k: v for k, v in full.items() if k != "stages" and v != self.default[k]})

    def full(self, config: Config) -> dict:
        """Every name of the space with its value in ``config``: what ``kernel`` and ``launch`` get."""
        return {"stages": config.stages, **self.options, **config.kw}

    def problem_dict(self, problem) -> dict:
        return dict(zip(self.problem, self.tunable().problem(problem)))

    # ---- what the cache keys on ---------------------------------------------------------------
    @cached_property
    def source_hash(self) -> str:
        """sha1 of the source of the file that defines ``kernel`` (its cell's source in Jupyter), and of
        ``launch``'s: an edited kernel misses the cache."""
        h = hashlib.sha1()
        for fn in (self.kernel, self.launch):
            try:
                path = inspect.getsourcefile(fn)
                text = open(path, "rb").read() if path and not path.startswith("<") else inspect.getsource(fn).encode()
            except (OSError, TypeError):
                text = fn.__code__.co_code if hasattr(fn, "__code__") else repr(fn).encode()
            h.update(text)
        return h.hexdigest()[:12]

    @cached_property
    def space_hash(self) -> str:
        return space_hash({"space": {k: list(v) for k, v in self.space.items()}, "default": self.default})

    def tunable(self, predict=None, calibrate=None, calibration=None, gpu_builder=None) -> Tunable:
        """The tuner's view (``asyncpipe.tune.kernels.Tunable``); ``asyncpipe.tune.user`` fills the model."""
        from .user import DEFAULT_CALIBRATION

        def no_model(*a, **k):
            raise NotImplementedError("a KernelSpec's model needs its compiled candidates: asyncpipe.tune.user")

        dims = self.problem
        return Tunable(
            name=self.name, dims=dims, candidates=tuple(sorted(self.space["stages"])),
            option_sets=self.option_sets(), defaults=self.options, predict=predict or no_model,
            calibrate=calibrate or no_model, default_calibration=calibration or DEFAULT_CALIBRATION,
            flop=(lambda p: self.flop(dict(zip(dims, p)))) if self.flop else None,
            gpu_builder=gpu_builder or "spec_measurement", source=self.source_hash, space=self.space_hash,
            nbytes=(lambda p: self.nbytes(dict(zip(dims, p)))) if self.nbytes else None)


def _launch(kernel, launch: Launch, stream) -> None:
    """Through ``asyncpipe.host.launch``, the door of the shipped kernels: its checks, and the opt-in above
    48 KB of dynamic shared memory that numba's own ``kernel[grid, block, stream, shared]`` does not set."""
    from ..host.launch import launch as host_launch

    host_launch(kernel, launch.grid, launch.block, *launch.args, shared_mem=launch.shared, stream=stream)


class TunedKernel:
    """What the user calls: ``kern(*args)`` launches the kernel with the fastest configuration measured for
    this problem on this GPU (``asyncpipe.tune.cached_config``), or ``spec.default`` before tuning.
    ``kern(*args, config={...})`` forces one; options given by name (``kern(*args, stages=4)``) fix those and
    take the rest from the cache. ``kern.tune(problem)`` tunes; ``kern.predict(problem)`` is the model
    alone (no GPU)."""

    def __init__(self, spec: KernelSpec):
        self.spec = spec
        self._kernels: dict = {}
        self._tunable = None
        self.__doc__ = getattr(spec.kernel, "__doc__", None) or self.__doc__
        self.__name__ = spec.name

    def kernel(self, config=None):
        """The ``cuda.jit`` kernel of ``config`` (default: ``spec.default``), built once."""
        c = self.spec.config(config)
        if c not in self._kernels:
            self._kernels[c] = self.spec.kernel(self.spec.full(c))
        return self._kernels[c]

    def config_for(self, *args, **fixed) -> dict:
        """The configuration a call with ``args`` uses: the cached pick agreeing with ``fixed``, else the
        default with ``fixed``."""
        from .cache import cached_config

        if self._tunable is None:
            self._tunable = self.spec.tunable()
        problem = self.spec.key(*args)
        tuned = cached_config(self._tunable, problem, **fixed) if problem is not None else None
        return self.spec.full(tuned) if tuned else self.spec.full(self.spec.config(**fixed))

    def __call__(self, *args, config=None, stream=0, **fixed):
        cfg = self.spec.full(self.spec.config(config)) if config is not None else self.config_for(*args, **fixed)
        _launch(self.kernel(cfg), self.spec.launch(cfg, *args), stream)

    def prepare(self, *args, config=None, stream=0, **fixed):
        """``asyncpipe.host.prepare_launch`` of the call ``self(*args, ...)`` (every argument on the device):
        a callable that launches it again without the checks, what the tuner times."""
        from ..host.launch import prepare_launch

        cfg = self.spec.full(self.spec.config(config)) if config is not None else self.config_for(*args, **fixed)
        launch = self.spec.launch(cfg, *args)
        return prepare_launch(self.kernel(cfg), launch.grid, launch.block, *launch.args, shared_mem=launch.shared,
                              stream=stream)

    def tune(self, problem, **kw):
        """``asyncpipe.tune.user.tune_kernel(self, problem, **kw)``: on a GPU, measure and cache the pick."""
        from .user import tune_kernel

        return tune_kernel(self, problem, **kw)

    def predict(self, problem, **kw):
        """The model's table only (compiled offline, no GPU): ``tune(problem, measure=False)``."""
        from .user import tune_kernel

        return tune_kernel(self, problem, measure=False, **kw)

    def __repr__(self):
        return f"<TunedKernel {self.spec.name} space={self.spec.space} default={self.spec.default}>"


def autotune(*, space, default, problem, key, inputs, reference, launch, output=-1, tolerance=1e-5, pipeline=None,
             nbytes=None, flop=None, decode=None, name=None):
    """Decorator over a kernel factory ``config -> cuda.jit kernel``: returns its ``TunedKernel``. The keywords
    are ``KernelSpec``'s fields (``name`` defaults to the factory's)."""
    def wrap(factory):
        return TunedKernel(KernelSpec(name or factory.__name__, factory, launch, space, default, problem, key, inputs,
                                      reference, output, tolerance, pipeline, nbytes, flop, decode))
    return wrap
