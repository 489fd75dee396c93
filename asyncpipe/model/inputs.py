"""The models' inputs, checked, and the load path they share (latency plus shared bandwidth).

Every bad input fails here, before a model runs, with ``<api>: <rule>, got <value>`` from
``asyncpipe.errors``.
"""

from __future__ import annotations

import math
import numbers

from ..errors import check

SOURCE = "asyncpipe.model"


def count(api: str, name: str, value, minimum: int, why: str = "") -> int:
    """``value`` as an int >= ``minimum`` (bools and floats refused: a count is a count)."""
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= minimum
    rule = f"{name} must be an integer >= {minimum}" + (f" ({why})" if why else "")
    check(ok, api, rule, repr(value), SOURCE)
    return int(value)


def duration(api: str, name: str, value, positive: bool = False) -> float:
    """``value`` as a finite float >= 0 (> 0 when ``positive``)."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) and (
        value > 0 if positive else value >= 0)
    rule = f"{name} must be a finite number {'> 0' if positive else '>= 0'}"
    check(ok, api, rule, repr(value), SOURCE)
    return float(value)


class LoadPath:
    """Where loads travel: a fixed latency, then a transfer through the SM's share of bandwidth.

    A load that departs at ``t`` (its last copy issued) comes back after ``latency``; its bytes
    then take ``transfer`` to stream in, and transfers of one CTA do not overlap (first in, first
    out). So ``land = max(t + latency, previous land) + transfer``. With unlimited bandwidth
    (``transfer = 0``) and departures in order this is exactly ``t + latency``.

    ``transfer = tile_bytes / (bandwidth / ctas_per_sm)``: the CTAs resident on one SM run the same
    loop at the same pace, so each gets an equal share of the SM's bandwidth.
    """

    def __init__(self, latency: float, transfer: float = 0.0):
        self.latency, self.transfer = latency, transfer
        self._last = -math.inf

    def land(self, depart: float) -> float:
        t = max(depart + self.latency, self._last) + self.transfer
        self._last = t
        return t


def load_path(api: str, load_latency, bandwidth=None, tile_bytes=None, ctas_per_sm=1) -> LoadPath:
    """Check the memory inputs and build the :class:`LoadPath` (``bandwidth`` None: unlimited)."""
    latency = duration(api, "load_latency", load_latency)
    ctas = count(api, "ctas_per_sm", ctas_per_sm, 1)
    if bandwidth is None:
        return LoadPath(latency)
    bw = duration(api, "bandwidth", bandwidth, positive=True)
    check(tile_bytes is not None, api, "tile_bytes is needed with bandwidth (bytes per load)", None, SOURCE)
    nbytes = count(api, "tile_bytes", tile_bytes, 1)
    return LoadPath(latency, nbytes * ctas / bw)


def common_params(api: str, tiles, stages, load_latency, compute, issue_cost, min_stages: int, why: str) -> dict:
    """The inputs every model takes, checked, as the ``params`` dict a Timeline carries."""
    return {
        "tiles": count(api, "tiles", tiles, 1),
        "stages": count(api, "stages", stages, min_stages, why),
        "load_latency": duration(api, "load_latency", load_latency),
        "compute": duration(api, "compute", compute),
        "issue_cost": duration(api, "issue_cost", issue_cost),
    }


def time_unit(api: str, unit) -> str:
    """``unit``, the name of the time unit the durations are in (``"ns"``), as a non-empty string."""
    check(isinstance(unit, str) and unit.strip() != "", api, "unit must be a non-empty string naming the time unit",
          repr(unit), SOURCE)
    return unit.strip()
