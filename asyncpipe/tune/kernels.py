"""The kernels the tuner knows: for each, its problem's shape, its candidate stage counts, how the
model predicts a configuration, how to fit the model to measurements, and where its GPU
measurement lives. Adding a kernel is adding an entry here and a builder in ``gpu.py``."""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Callable, Mapping

from ..errors import check


@dataclass(frozen=True)
class Tunable:
    name: str
    dims: tuple[str, ...]                 # the problem's names, in order
    candidates: tuple[int, ...]           # stage counts the kernel accepts
    predict: Callable                     # (problem, stages, limits, calibration, registers=None) -> Prediction
    calibrate: Callable                   # ({stages: ms}, problem, limits, {stages: registers}) -> calibration
    default_calibration: object
    flop: Callable[[tuple], float]        # for the TFLOPS column
    gpu_builder: str                      # function in asyncpipe.tune.gpu: (problem, timer, reps) -> callables

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
    from ..model import sgemm as model

    tile = model.CHAPTER_TILE
    return Tunable(
        name="sgemm",
        dims=("m", "n", "k"),
        candidates=tuple(range(tile.min_stages, tile.max_stages + 1)),
        predict=lambda problem, s, lim, cal, registers=None: model.predict(problem, s, lim, cal, tile, registers),
        calibrate=lambda ms, problem, lim, regs=None: model.calibrate(ms, problem, lim, tile, regs,
                                                                      source="fit to this tuning run"),
        default_calibration=model.DEFAULT_CALIBRATION,
        flop=lambda p: 2.0 * p[0] * p[1] * p[2],
        gpu_builder="sgemm_measurement",
    )


_BUILDERS = {"sgemm": _sgemm}


def tunable(name: str) -> Tunable:
    check(name in _BUILDERS, "tune", f"kernel must be one of {sorted(_BUILDERS)}", repr(name))
    return _BUILDERS[name]()


def names() -> list[str]:
    return sorted(_BUILDERS)
