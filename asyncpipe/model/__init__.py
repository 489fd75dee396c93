"""Pipeline timeline models and the resources that bound a stage count. Host code only, never
imported inside kernels; nothing here needs a GPU (``limits.device_limits`` reads one if present).

    from asyncpipe.model import cp_async_timeline, mbarrier_ring_timeline
    tl = cp_async_timeline(tiles=16, stages=3, load_latency=1700, compute=1600)
    tl.total_time, tl.stall_time, tl.stalls, tl.events, tl.hazards     # times in ns (tl.unit)

| module | what |
| --- | --- |
| ``cp_async`` | the chapter's cp.async pipeline (groups, ``wait_group(S-2)``, the empty-commit pitfall), closed form |
| ``mbarrier_ring`` | TMA producer + consumers over full/empty mbarriers, PTX parity waits, closed form |
| ``timeline`` | what both return: events, per-tile times, stalls, hazards, JSON |
| ``inputs`` | checked inputs; the load path (latency, bandwidth shared by an SM's CTAs) |
| ``limits`` | per-GPU limits (table: H200, H100, A100) or the live device |
| ``resources`` | shared memory per stage, footprints (also read from compiled kernels), occupancy |
| ``sgemm`` | the chapter's SGEMM as the model sees it: prediction over waves, calibration |
| ``plot`` | Gantt chart (matplotlib) |
| ``cli`` | ``python -m asyncpipe timeline`` |
"""

from .cp_async import cp_async_closed_form, cp_async_start, cp_async_timeline
from .limits import DeviceLimits, device_limits, limits, table_limits
from .mbarrier_ring import mbarrier_ring_closed_form, mbarrier_ring_timeline
from .resources import Footprint, Occupancy, occupancy, pipeline_bytes, stage_bytes
from .timeline import Event, Hazard, Stall, Timeline, TileTimes

__all__ = [
    "DeviceLimits", "Event", "Footprint", "Hazard", "Occupancy", "Stall", "Timeline", "TileTimes",
    "cp_async_closed_form", "cp_async_start", "cp_async_timeline", "device_limits", "limits",
    "mbarrier_ring_closed_form", "mbarrier_ring_timeline", "occupancy", "pipeline_bytes", "stage_bytes",
    "table_limits",
]
