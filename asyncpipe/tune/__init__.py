"""Tuning a kernel's stage count and its other compile-time constants, for your own kernels and the built-in
SGEMM: every candidate is compiled (in parallel processes), its registers, shared memory and spills are read
from the cubin, the occupancy rules and the pipeline's timeline model prune, the GPU checks and times the
rest, and a cache per (GPU, kernel source, problem, search space, asyncpipe version) remembers the pick,
which the kernel's wrapper then uses.

Your kernel, in a file or a notebook cell::

    import math
    import numpy as np
    from numba import cuda
    from asyncpipe import ptx
    from asyncpipe.tune import CpAsyncPipeline, Launch, autotune

    @autotune(
        space={"stages": (2, 3, 4, 6), "threads": (128, 256)},     # "stages" is required
        default={"stages": 3, "threads": 128},                      # what row_sum(...) uses before tuning
        problem=("rows", "cols"),                                   # the cache's problem key ...
        key=lambda x, out: {"rows": x.shape[0], "cols": x.shape[1]},   # ... read off a call's arguments
        inputs=lambda p, rng: (rng.standard_normal((p["rows"], p["cols"])).astype(np.float32),
                               np.zeros(p["rows"], np.float32)),   # host arguments to tune on
        reference=lambda x, out: x.astype(np.float64).sum(axis=1),  # the written argument, in float64
        output=1,                                                   # which argument the kernel writes
        launch=lambda cfg, x, out: Launch(grid=math.ceil(x.shape[0] / 8), block=cfg["threads"],
                                          args=(x, out, np.int32(x.shape[0]), np.int32(x.shape[1]))),
        pipeline=CpAsyncPipeline(tiles=lambda p, cfg: math.ceil(p["cols"] / (cfg["threads"] // 2)),
                                 stage_bytes=lambda p, cfg: 16 * cfg["threads"]),
    )
    def row_sum(cfg):                       # config -> cuda.jit kernel; constants reach it as closure variables
        STAGES, THREADS = cfg["stages"], cfg["threads"]

        @cuda.jit
        def kernel(x, out, rows, cols):
            buf = cuda.shared.array((STAGES, 8, THREADS // 2), np.float32)
            ...                             # the chapter's loop: see examples/rowsum_tune.py, whole
        return kernel

    row_sum(x_dev, out_dev)                 # the cached pick for (rows, cols) on this GPU, else the default
    res = row_sum.tune({"rows": 8192, "cols": 8192})    # on a GPU: compile, prune, check, time, cache
    print(res.table())                      # predicted beside measured, registers, spills, spread
    row_sum.predict((8192, 8192))           # no GPU: the model's table from the compiled candidates

or ``python -m asyncpipe tune path/to/file.py:row_sum --problem rows=8192,cols=8192``. ``KernelSpec`` is the
same description as an object (``TunedKernel(spec)`` wraps it). The built-in SGEMM is one client of the same
loop: ``python -m asyncpipe tune sgemm --m 4096 --n 4096 --k 4096``; ``sgemm()`` takes the tuned configuration
for the options it is not given (this package registers its cache in ``asyncpipe.kernels.options``).

    from asyncpipe.tune import cached_config, cached_stages
    config = cached_config("sgemm", (M, N, K))      # the fastest (stages, tile, bk, schedule) measured, or None

Host code only; importing this package imports nothing heavy (no numba) until it is used.
"""

from .cache import cache_dir, cache_path, cached_config, cached_stages
from .kernels import Config
from .spec import CpAsyncPipeline, KernelSpec, Launch, MbarrierRingPipeline, TunedKernel, autotune

__all__ = ["cache_dir", "cache_path", "cached_config", "cached_stages", "Config", "tune", "TuneResult", "Check",
           "autotune", "KernelSpec", "TunedKernel", "Launch", "CpAsyncPipeline", "MbarrierRingPipeline",
           "Calibration", "tune_kernel"]


def _sgemm_options(problem, given):
    """``asyncpipe.kernels.options`` source for the SGEMM: the cached pick agreeing with ``given``."""
    c = cached_config("sgemm", problem, **given)
    return {**c.kw, "stages": c.stages} if c else None


def _attention_options(problem, given):
    """``asyncpipe.kernels.options`` source for ``attention``: its cached stage count (``tune.attention``)."""
    from .attention import attention_options

    return attention_options(problem, given)


def _register() -> None:
    from ..kernels import options

    options.register("sgemm", _sgemm_options)
    options.register("attention", _attention_options)


_register()


def __getattr__(name):
    if name in ("tune", "TuneResult", "Check", "predict_rows"):
        from . import search

        return getattr(search, name)
    if name in ("Calibration", "tune_kernel"):
        from . import user

        return getattr(user, name)
    raise AttributeError(name)
