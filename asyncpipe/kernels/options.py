"""Where a kernel function gets the options it was not given (a stage count, a tile): one slot per kernel,
filled from above.

Kernels never import the tuner: ``asyncpipe.tune`` wraps kernels, and registers its cache here as the
source of the SGEMM's options when it is imported (``import asyncpipe`` imports it; it is light, no
numba). A kernel function asks ``choose`` and falls back to its own documented defaults when nothing
is registered or the source has no answer. Host code only.
"""

from __future__ import annotations

from typing import Callable

_sources: dict[str, Callable] = {}


def register(kernel: str, source: Callable[[tuple, dict], dict | None]) -> None:
    """Make ``source(problem, given)`` the answer for ``kernel``: the options (``stages`` included) to use
    on ``problem`` that agree with the ``given`` ones, or None."""
    _sources[kernel] = source


def choose(kernel: str, problem: tuple, given: dict) -> dict | None:
    """The registered source's options for ``kernel`` on ``problem`` agreeing with ``given``, or None."""
    source = _sources.get(kernel)
    return source(problem, given) if source is not None else None
