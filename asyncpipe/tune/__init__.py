"""Tuning the stage count (and the kernel's other options: the SGEMM's thread tile and stage depth):
the timeline model predicts and prunes, the GPU measures and decides, a cache per (GPU, kernel,
problem, asyncpipe version) remembers.

    from asyncpipe.tune import cached_config, cached_stages, tune
    stages = cached_stages("sgemm", (M, N, K))      # None until tuned on this GPU and version
    config = cached_config("sgemm", (M, N, K))      # the fastest (stages, tile, bk) measured

Run it with ``python -m asyncpipe tune sgemm --m 4096 --n 4096 --k 4096``. Host code only; this
package imports nothing heavy until it is used, so kernels' host functions may ask the cache on
every call.
"""

from .cache import cache_dir, cache_path, cached_config, cached_stages
from .kernels import Config

__all__ = ["cache_dir", "cache_path", "cached_config", "cached_stages", "Config", "tune", "TuneResult", "Check"]


def __getattr__(name):
    if name in ("tune", "TuneResult", "Check", "predict_rows"):
        from . import search

        return getattr(search, name)
    raise AttributeError(name)
