"""Per-SM limits that decide how many CTAs fit on an SM: one table, or the live device.

The table holds the GPUs asyncpipe targets, from the CUDA programming guide's "Technical
Specifications per Compute Capability" (shared memory, registers, threads, blocks per SM) and the
vendors' data sheets (SM counts). ``device_limits()`` reads the same fields from the current GPU's
driver (``CU_DEVICE_ATTRIBUTE_*``) through ``asyncpipe.host.device_info`` and numba's device; on a
machine with no GPU it raises ``UnsupportedDeviceError``, as ``device_info`` does.

The two allocation units are the occupancy calculator's (``cuda_occupancy.h``) for compute
capability 8.0 to 9.0: registers are given to a warp in blocks of 256 out of one of the SM's four
sub-partitions (a warp's registers live in the register file of the scheduler that runs it), and
shared memory is given to a CTA in 128-byte units. The driver adds its reserved 1 KB to every
CTA's shared memory (``CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

from ..constants import STATIC_SMEM_DEFAULT_MAX
from ..errors import AsyncpipeError, check

KB = 1024


@dataclass(frozen=True)
class DeviceLimits:
    """What bounds the CTAs per SM on one GPU. Each field names the driver attribute it mirrors."""

    name: str
    compute_capability: tuple[int, int]
    sm_count: int                                   # MULTIPROCESSOR_COUNT
    shared_per_sm: int                              # MAX_SHARED_MEMORY_PER_MULTIPROCESSOR (largest carveout)
    shared_per_block_optin: int                     # MAX_SHARED_MEMORY_PER_BLOCK_OPTIN (static + dynamic)
    shared_per_block: int = STATIC_SMEM_DEFAULT_MAX  # MAX_SHARED_MEMORY_PER_BLOCK: without the opt-in
    reserved_shared_per_block: int = 1 * KB         # RESERVED_SHARED_MEMORY_PER_BLOCK (cc 8.0+)
    registers_per_sm: int = 64 * KB                 # MAX_REGISTERS_PER_MULTIPROCESSOR (32-bit registers)
    registers_per_block: int = 64 * KB              # MAX_REGISTERS_PER_BLOCK
    registers_per_thread: int = 255                 # programming guide: max 32-bit registers per thread
    threads_per_sm: int = 2048                      # MAX_THREADS_PER_MULTIPROCESSOR
    threads_per_block: int = 1024                   # MAX_THREADS_PER_BLOCK
    blocks_per_sm: int = 32                         # MAX_BLOCKS_PER_MULTIPROCESSOR
    warp_size: int = 32                             # WARP_SIZE
    register_alloc_unit: int = 256                  # occupancy calculator: registers per warp, in units of 256
    register_sub_partitions: int = 4                # occupancy calculator: a warp's registers come from 1 of 4
    shared_alloc_unit: int = 128                    # occupancy calculator: shared memory per CTA, in 128-byte units
    source: str = "table"

    @property
    def warps_per_sm(self) -> int:
        return self.threads_per_sm // self.warp_size


# Hopper (sm_90): 228 KB of shared memory per SM, 227 KB per block opted in; H200 and H100 SXM
# have 132 SMs. Ampere A100 (sm_80): 164 KB per SM, 163 KB per block. The rest is the same.
TABLE: dict[str, DeviceLimits] = {
    "H200": DeviceLimits("NVIDIA H200", (9, 0), sm_count=132, shared_per_sm=228 * KB, shared_per_block_optin=227 * KB),
    "H100": DeviceLimits("NVIDIA H100 80GB HBM3", (9, 0), sm_count=132, shared_per_sm=228 * KB,
                         shared_per_block_optin=227 * KB),
    "A100": DeviceLimits("NVIDIA A100-SXM4-80GB", (8, 0), sm_count=108, shared_per_sm=164 * KB,
                         shared_per_block_optin=163 * KB),
}


def table_limits(name: str = "H200") -> DeviceLimits:
    """The table's limits for ``name`` (``"H200"``, ``"H100"``, ``"A100"``; a full device name
    such as ``"NVIDIA H200"`` is matched by the key it contains)."""
    key = next((k for k in TABLE if k.lower() == name.lower()), None) or next(
        (k for k in TABLE if k.lower() in name.lower()), None)
    check(key is not None, "table_limits", f"name must be one of {sorted(TABLE)} or contain one", repr(name))
    return TABLE[key]


# numba Device attribute (CU_DEVICE_ATTRIBUTE_<NAME>) -> DeviceLimits field
EXTRA_ATTRIBUTES = {
    "MAX_REGISTERS_PER_MULTIPROCESSOR": "registers_per_sm",
    "MAX_REGISTERS_PER_BLOCK": "registers_per_block",
    "MAX_THREADS_PER_MULTIPROCESSOR": "threads_per_sm",
    "MAX_BLOCKS_PER_MULTIPROCESSOR": "blocks_per_sm",
    "RESERVED_SHARED_MEMORY_PER_BLOCK": "reserved_shared_per_block",
    "WARP_SIZE": "warp_size",
}


def limits_from_device(info, extra: Mapping[str, int]) -> DeviceLimits:
    """Limits from a ``DeviceInfo`` (``asyncpipe.host.device``) and the driver attributes in
    ``extra`` (keys of ``EXTRA_ATTRIBUTES``). The allocation units, which the driver does not
    report, come from the table row of the same compute capability (or the nearest older one)."""
    rows = sorted((r for r in TABLE.values() if r.compute_capability <= tuple(info.compute_capability)),
                  key=lambda r: r.compute_capability)
    base = rows[-1] if rows else TABLE["A100"]
    fields = {EXTRA_ATTRIBUTES[k]: int(v) for k, v in extra.items() if k in EXTRA_ATTRIBUTES}
    return replace(base, name=info.name, compute_capability=tuple(info.compute_capability), sm_count=info.sm_count,
                   shared_per_sm=info.max_shared_per_sm, shared_per_block_optin=info.max_shared_per_block_optin,
                   shared_per_block=info.max_shared_per_block, threads_per_block=info.max_threads_per_block,
                   source=f"device {info.device_id}", **fields)


def device_limits(api: str = "device_limits") -> DeviceLimits:
    """The current GPU's limits, read from its driver. ``UnsupportedDeviceError`` with no GPU."""
    from ..host.device import device_info

    info = device_info(api)
    from numba import cuda

    dev = cuda.get_current_device()
    return limits_from_device(info, {attr: getattr(dev, attr) for attr in EXTRA_ATTRIBUTES})


def limits(name: str | None = None) -> DeviceLimits:
    """``table_limits(name)`` when a name is given; otherwise the live device, or the H200 row of
    the table when there is no GPU (the machine asyncpipe is tuned for)."""
    if name:
        return table_limits(name)
    try:
        return device_limits()
    except AsyncpipeError:
        return table_limits("H200")
