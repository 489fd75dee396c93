"""What one CTA of a kernel holds (threads, registers, shared memory) and how many fit on an SM.

The chapter's first exercise is here: a stage of its SGEMM holds a 128 x 8 tile of A and an
8 x 128 tile of B in float32, ``stage_bytes((128, 8), (8, 128))`` = 8 KB, so 2, 3, 4 stages take
16, 24, 32 KB. Whether more stages pay depends on what they cost in CTAs per SM:
:func:`occupancy` answers that from a :class:`Footprint` and the device's limits, naming the
resource that binds.

Registers and static shared memory can be read from the compiled kernel
(:func:`compiled_footprint`, offline through ``asyncpipe.codegen``, no GPU needed). A note on
what the cubin reports, measured here: ``cuobjdump --dump-resource-usage`` shows ``SHARED:0``
for a kernel without shared memory, but 1024 more than the kernel declares as soon as it uses
any (1024 for a kernel with only a dynamic array, 2048 for 1 KB of static shared memory): that is
the driver's 1 KB reserve, which user shared memory follows in the window. :func:`footprint_from_resources`
takes it off so that :func:`occupancy`, which adds the reserve to every CTA, counts it once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import check
from .inputs import count
from .limits import DeviceLimits

API = "occupancy"


def stage_bytes(*tiles: tuple[int, int], element_bytes: int = 4) -> int:
    """Bytes of shared memory one pipeline stage holds: the sum of its tiles (rows x cols each)."""
    check(len(tiles) > 0, "stage_bytes", "at least one (rows, cols) tile", tiles)
    for rows, cols in tiles:
        count("stage_bytes", "tile rows", rows, 1)
        count("stage_bytes", "tile cols", cols, 1)
    count("stage_bytes", "element_bytes", element_bytes, 1)
    return sum(r * c for r, c in tiles) * element_bytes


def pipeline_bytes(stages: int, per_stage: int, per_stage_extra: int = 0) -> int:
    """Shared memory of an S-stage ring: ``stages * (per_stage + per_stage_extra)`` (the extra is,
    say, a full and an empty mbarrier per slot, 8 bytes each)."""
    count("pipeline_bytes", "stages", stages, 1)
    count("pipeline_bytes", "per_stage", per_stage, 0)
    count("pipeline_bytes", "per_stage_extra", per_stage_extra, 0)
    return stages * (per_stage + per_stage_extra)


@dataclass(frozen=True)
class Footprint:
    """What one CTA holds. ``static_shared`` is what the kernel declares (without the driver's
    reserve); ``dynamic_shared`` is the launch's dynamic shared memory."""

    threads: int
    registers: int
    static_shared: int = 0
    dynamic_shared: int = 0

    @property
    def shared(self) -> int:
        """Shared memory the kernel asks for (static + dynamic), without the driver's reserve."""
        return self.static_shared + self.dynamic_shared


@dataclass(frozen=True)
class Occupancy:
    """CTAs per SM and which limit binds. ``by`` maps each limit to the CTAs it alone allows."""

    ctas_per_sm: int
    limited_by: str
    by: dict
    warps_per_cta: int
    warps_per_sm: int              # the SM's maximum
    shared_per_cta: int            # as allocated: with the reserve, rounded up to the unit

    @property
    def active_warps(self) -> int:
        return self.ctas_per_sm * self.warps_per_cta

    @property
    def occupancy(self) -> float:
        """Active warps over the SM's maximum warps (0 to 1)."""
        return self.active_warps / self.warps_per_sm


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy(fp: Footprint, lim: DeviceLimits) -> Occupancy:
    """How many CTAs of footprint ``fp`` fit on one SM of ``lim``, by the occupancy calculator's
    rules: threads (whole warps), the CTA slots, registers (per warp, in allocation units, from
    one of the sub-partitions' register files), and shared memory (with the reserve, in units,
    against the largest carveout). A footprint that cannot launch at all is an error."""
    count(API, "threads", fp.threads, 1)
    count(API, "registers", fp.registers, 0)
    count(API, "static_shared", fp.static_shared, 0)
    count(API, "dynamic_shared", fp.dynamic_shared, 0)
    check(fp.threads <= lim.threads_per_block, API, f"threads per CTA must be <= {lim.threads_per_block}",
          fp.threads, "MAX_THREADS_PER_BLOCK")
    check(fp.registers <= lim.registers_per_thread, API, f"registers per thread must be <= {lim.registers_per_thread}",
          fp.registers, "CUDA programming guide, compute capabilities")
    check(fp.shared <= lim.shared_per_block_optin, API,
          f"static + dynamic shared memory must be <= {lim.shared_per_block_optin} bytes on {lim.name}",
          f"{fp.static_shared} + {fp.dynamic_shared} = {fp.shared}", "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")

    warps = -(-fp.threads // lim.warp_size)
    by = {"threads": lim.threads_per_sm // (warps * lim.warp_size), "blocks": lim.blocks_per_sm}
    if fp.registers:
        per_warp = _round_up(fp.registers * lim.warp_size, lim.register_alloc_unit)
        check(per_warp * warps <= lim.registers_per_block, API,
              f"registers per CTA must be <= {lim.registers_per_block}",
              f"{fp.registers} x {fp.threads} threads = {per_warp * warps} allocated", "MAX_REGISTERS_PER_BLOCK")
        warps_per_part = (lim.registers_per_sm // lim.register_sub_partitions) // per_warp
        by["registers"] = warps_per_part * lim.register_sub_partitions // warps
    shared = _round_up(fp.shared + lim.reserved_shared_per_block, lim.shared_alloc_unit)
    by["shared memory"] = lim.shared_per_sm // shared
    ctas = min(by.values())
    binding = min(by, key=by.get)                 # the first limit to reach the minimum names it
    return Occupancy(ctas, binding, by, warps, lim.warps_per_sm, shared)


def footprint_from_resources(resources, threads: int, dynamic_shared: int = 0,
                             reserved: int = 1024) -> Footprint:
    """A :class:`Footprint` from ``asyncpipe.codegen.Resources`` (what ``cuobjdump`` reports):
    registers as they are; shared memory less the driver's reserve, which the cubin includes
    once the kernel uses shared memory at all (see the module note)."""
    static = resources.shared - reserved if resources.shared >= reserved else resources.shared
    return Footprint(threads, resources.registers, static, dynamic_shared)


def compiled_footprint(pyfunc, argtypes, threads: int, dynamic_shared: int = 0, reserved: int = 1024,
                       **options) -> Footprint:
    """Compile ``pyfunc`` offline for sm_90a (``asyncpipe.codegen.compile_kernel``, no GPU) and
    read its footprint. ``options`` go to the compiler (``launch_bounds=...``)."""
    from ..codegen import compile_kernel

    return footprint_from_resources(compile_kernel(pyfunc, argtypes, **options).resources, threads, dynamic_shared,
                                    reserved)


def ctas_per_sm(fp: Footprint, lim: DeviceLimits) -> int:
    return occupancy(fp, lim).ctas_per_sm


def waves(ctas: int, per_sm: int, sm_count: int) -> int:
    """How many rounds of CTAs a grid of ``ctas`` takes with ``per_sm`` resident on each SM."""
    return math.ceil(ctas / (per_sm * sm_count))
