"""elect.sync in the simulator: a warp collective that elects the lowest lane of the mask."""

from __future__ import annotations

from .. import warps


def elect_sync(membermask, api="elect_sync"):
    return warps.collective("elect.sync", membermask, None, warps.elect, api)
