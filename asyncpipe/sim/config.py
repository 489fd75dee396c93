"""How a simulated launch runs: the seed of its interleaving, which checks are on, how often threads
switch. Read from the environment at each launch, or set for a block of code with ``settings()``.

- ``ASYNCPIPE_SIM_SEED``: an integer (default 0) or ``random`` (a fresh seed each launch, printed in
  any error). The same seed replays the same thread interleaving and the same copy completion order.
- ``ASYNCPIPE_SIM_CHECKS``: ``all`` (default), ``none``, a comma list of check names, or ``all`` minus
  some (``all,-race``). Names: see ``CHECKS``. Deadlock detection is always on (it replaces a hang).
- ``ASYNCPIPE_SIM_SWITCH``: the probability (default 0.1) that a thread hands over to another at a
  primitive; shared-memory accesses switch at a tenth of it.
- ``ASYNCPIPE_SIM_SMS``: the simulated GPU's SM count (default 4), which host code reads to size
  persistent grids: fewer SMs, fewer CTAs to simulate.
- ``ASYNCPIPE_SIM_TIMEOUT``: seconds one launch may run (default 600) before it is stopped.
"""

from __future__ import annotations

import contextlib
import os
import random
from dataclasses import dataclass, field, replace

from ..errors import AsyncpipeError

CHECKS = {
    "async": "reads and writes of shared memory whose asynchronous copy has not been waited for",
    "waitgroup": "cp.async wait_group counts that do not cover the group being read",
    "txcount": "mbarrier transaction counts that do not match the bytes delivered",
    "proxy": "generic and async-proxy accesses to shared memory without fence.proxy.async",
    "mbarrier": "mbarriers used before init (and its fence) or initialised while in use",
    "dsmem": "DSMEM accesses to a CTA that has exited, or not ordered before its exit",
    "race": "shared-memory data races (two threads, one writing, no barrier between)",
}


@dataclass(frozen=True)
class SimConfig:
    seed: int = 0
    checks: frozenset = field(default_factory=lambda: frozenset(CHECKS))
    switch: float = 0.1
    sms: int = 4
    timeout: float = 600.0

    def on(self, name: str) -> bool:
        return name in self.checks


def parse_checks(text: str) -> frozenset:
    """``all``, ``none``, ``race,async``, ``all,-race``: the set of check names it selects."""
    out: set[str] = set()
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        if item == "all":
            out |= set(CHECKS)
        elif item == "none":
            out.clear()
        elif item.startswith("-") and item[1:] in CHECKS:
            out.discard(item[1:])
        elif item in CHECKS:
            out.add(item)
        else:
            raise AsyncpipeError("ASYNCPIPE_SIM_CHECKS", f"each item must be all, none, or one of {', '.join(CHECKS)} "
                                 "(prefix - to remove)", repr(item))
    return frozenset(out)


_override: dict = {}


def current() -> SimConfig:
    """The configuration for the next launch: ``settings()`` overrides, then the environment."""
    env = os.environ
    seed_text = str(_override.get("seed", env.get("ASYNCPIPE_SIM_SEED", "0")))
    seed = random.randrange(1 << 31) if seed_text == "random" else int(seed_text)
    checks = _override.get("checks", env.get("ASYNCPIPE_SIM_CHECKS", "all"))
    checks = parse_checks(checks) if isinstance(checks, str) else frozenset(checks)
    return SimConfig(seed=seed, checks=checks,
                     switch=float(_override.get("switch", env.get("ASYNCPIPE_SIM_SWITCH", "0.1"))),
                     sms=int(_override.get("sms", env.get("ASYNCPIPE_SIM_SMS", "4"))),
                     timeout=float(_override.get("timeout", env.get("ASYNCPIPE_SIM_TIMEOUT", "600"))))


@contextlib.contextmanager
def settings(**kw):
    """Override ``seed``, ``checks`` (a string or a set), ``switch``, ``sms`` or ``timeout`` for the
    launches inside the ``with`` block."""
    unknown = set(kw) - {"seed", "checks", "switch", "sms", "timeout"}
    if unknown:
        raise TypeError(f"unknown simulator settings {sorted(unknown)}")
    saved = dict(_override)
    _override.update(kw)
    try:
        yield
    finally:
        _override.clear()
        _override.update(saved)


__all__ = ["CHECKS", "SimConfig", "current", "parse_checks", "settings", "replace"]
