"""The kernels the tuner knows: for each, its problem's shape, its candidate configurations (stage
counts, and the kernel's other compile-time options such as the SGEMM's thread tile and stage
depth), how the model predicts a configuration, how to fit the model to measurements, and where its
GPU measurement lives. This is the built-in SGEMM's entry; a user's kernel comes as an
``asyncpipe.tune.KernelSpec`` (``spec.py``), which builds the same ``Tunable`` from its search space."""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Callable, Mapping

from ..errors import check


@dataclass(frozen=True, order=True)
class Config:
    """One candidate: a stage count and the kernel's other compile-time options, as sorted
    ``(name, value)`` pairs (empty: the kernel's defaults, for the SGEMM the chapter's tile)."""

    options: tuple = ()
    stages: int = 3

    @classmethod
    def of(cls, stages: int, **options) -> "Config":
        return cls(tuple(sorted(options.items())), int(stages))

    @property
    def kw(self) -> dict:
        """The options as keywords for the kernel's Python function."""
        return dict(self.options)

    def label(self) -> str:
        """``"3"``, or ``"3 bk=16 tile=8x16"``."""
        return " ".join([str(self.stages), *(f"{k}={v}" for k, v in self.options)])

    def to_dict(self) -> dict:
        return {"stages": self.stages, "options": self.kw}

    @classmethod
    def from_dict(cls, d: dict) -> "Config":
        return cls.of(d["stages"], **d.get("options", {}))


@dataclass(frozen=True)
class Tunable:
    name: str
    dims: tuple[str, ...]                 # the problem's names, in order
    candidates: tuple[int, ...]           # stage counts the kernel accepts
    option_sets: tuple[dict, ...]         # its other configurations; the first, {}, is its default
    defaults: dict                        # the option values an option set leaves out
    predict: Callable                     # (problem, Config, limits, calibration, registers=None) -> Prediction
    calibrate: Callable                   # ({Config: ms}, problem, limits, {Config: registers}) -> calibration
    default_calibration: object
    flop: Callable[[tuple], float] | None  # for the TFLOPS column (None: no column)
    gpu_builder: str | Callable           # function in asyncpipe.tune.gpu (or a callable): (problem, timer, reps) -> callables
    source: str = ""                      # hash of the kernel's source: part of the cache key (a changed kernel misses)
    space: str = ""                       # hash of the search space: part of the cache key
    nbytes: Callable[[tuple], float] | None = None   # bytes the kernel moves, for the GB/s column

    def kernel_kw(self, config: Config) -> dict:
        """Every option of ``config`` named, stages included: the keywords of the kernel's function."""
        return {"stages": config.stages, **self.defaults, **config.kw}

    def configs(self, stages=None, option_sets=None) -> tuple[Config, ...]:
        """Every (option set, stage count) pair: all the kernel accepts, or the given subsets."""
        return tuple(Config.of(s, **o) for o in (option_sets if option_sets is not None else self.option_sets)
                     for s in (stages if stages is not None else self.candidates))

    def problem(self, value) -> tuple[int, ...]:
        """``value`` as a tuple in ``dims`` order: a sequence, or a mapping by dim name."""
        api = f"tune {self.name}"
        if isinstance(value, Mapping):
            check(set(value) == set(self.dims), api, f"problem keys must be {self.dims}", sorted(value))
            value = tuple(value[d] for d in self.dims)
        value = tuple(value)
        check(len(value) == len(self.dims), api, f"problem is ({', '.join(self.dims)})", repr(value))
        for d, v in zip(self.dims, value):
            check(isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 1, api,
                  f"{d} must be an integer >= 1", repr(v))
        return tuple(int(v) for v in value)


def _sgemm() -> Tunable:
    from ..kernels import sgemm as kernels
    from ..model import sgemm as model

    chapter = model.CHAPTER_TILE

    def tile_of(c: Config):
        return model.kernel_tile(**c.kw) if c.options else chapter

    # the chapter's tile first (the default: no options), then every other (tile, bk, schedule) sgemm()
    # takes, named by what differs from the defaults. The "dbuf" and "kmajor" schedules only with the 8 x 16
    # tile: with the chapter's, dbuf measured 39.8 against the plain loop's 42.5 TFLOPS (H200,
    # bench/h200_sgemm_sweep_dbuf.json); with 8 x 16 both are faster than the plain loop
    defaults = {k: v for k, v in kernels.CHAPTER_CONFIGURATION.items() if k != "stages"}
    option_sets = tuple({k: v for k, v in (("tile", tile), ("bk", bk), ("schedule", schedule)) if v != defaults[k]}
                        for schedule in kernels.SCHEDULES for tile in kernels.TILES for bk in kernels.BKS
                        if schedule == defaults["schedule"] or tile != defaults["tile"])
    return Tunable(
        name="sgemm",
        dims=("m", "n", "k"),
        candidates=tuple(range(chapter.min_stages, chapter.max_stages + 1)),
        option_sets=option_sets,
        defaults=defaults,
        predict=lambda problem, c, lim, cal, registers=None: model.predict(problem, c.stages, lim, cal, tile_of(c),
                                                                           registers),
        calibrate=lambda ms, problem, lim, regs=None: model.calibrate(
            {(c.stages, tile_of(c)): v for c, v in ms.items()}, problem, lim,
            registers={(c.stages, tile_of(c)): v for c, v in (regs or {}).items()},
            source="fit to this tuning run"),
        default_calibration=model.DEFAULT_CALIBRATION,
        flop=lambda p: 2.0 * p[0] * p[1] * p[2],
        gpu_builder="sgemm_measurement",
        source=source_hash(kernels.__file__, model.__file__),
        space=space_hash({"stages": list(range(chapter.min_stages, chapter.max_stages + 1)),
                          "options": list(option_sets)}),
    )


def source_hash(*files) -> str:
    """12 hex digits of sha1 over the files' text: a cache entry names the kernel code it measured."""
    import hashlib
    from pathlib import Path

    h = hashlib.sha1()
    for f in files:
        h.update(Path(f).read_bytes())
    return h.hexdigest()[:12]


def space_hash(space) -> str:
    """12 hex digits of sha1 over the search space as sorted JSON."""
    import hashlib
    import json

    return hashlib.sha1(json.dumps(space, sort_keys=True, default=repr).encode()).hexdigest()[:12]


_BUILDERS = {"sgemm": _sgemm}
_built: dict[str, Tunable] = {}


def tunable(name) -> Tunable:
    """The built-in kernel ``name`` (``"sgemm"``), or ``name`` itself when it is a ``Tunable`` (a user's spec,
    ``asyncpipe.tune.KernelSpec.tunable``)."""
    if isinstance(name, Tunable):
        return name
    check(name in _BUILDERS, "tune", f"kernel must be one of {sorted(_BUILDERS)}", repr(name))
    if name not in _built:
        _built[name] = _BUILDERS[name]()
    return _built[name]


def names() -> list[str]:
    return sorted(_BUILDERS)
