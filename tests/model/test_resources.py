"""Shared memory per stage, the device-limits table, occupancy, and footprints read from kernels
compiled offline."""

import numpy as np
import pytest
from numba import cuda
from numba.cuda import types

from asyncpipe.errors import AsyncpipeError, UnsupportedDeviceError
from asyncpipe.host.device import DeviceInfo
from asyncpipe.model.limits import TABLE, device_limits, limits, limits_from_device, table_limits
from asyncpipe.model.resources import (Footprint, compiled_footprint, footprint_from_resources, occupancy,
                                       pipeline_bytes, stage_bytes, waves)

H200 = table_limits("H200")
KB = 1024


def test_the_chapters_shared_memory_answer():
    per_stage = stage_bytes((128, 8), (8, 128))                  # A 128x8 and B 8x128 in float32
    assert per_stage == 8 * KB
    assert [pipeline_bytes(s, per_stage) // KB for s in (2, 3, 4)] == [16, 24, 32]
    assert pipeline_bytes(4, 16 * KB, per_stage_extra=16) == 4 * (16 * KB + 16)   # + full/empty mbarriers


def test_h200_row_of_the_table():
    assert (H200.shared_per_sm, H200.shared_per_block_optin) == (228 * KB, 227 * KB)
    assert (H200.registers_per_sm, H200.threads_per_sm, H200.blocks_per_sm) == (65536, 2048, 32)
    assert H200.compute_capability == (9, 0) and H200.sm_count == 132 and H200.warps_per_sm == 64
    assert table_limits("NVIDIA H200") is H200 and table_limits("h100").sm_count == 132
    assert table_limits("A100").shared_per_sm == 164 * KB


def test_sgemm_occupancy_two_ctas_bound_by_registers():
    # 256 threads x 128 registers: 4096 per warp, 4 warps per sub-partition, 16 warps: 2 CTAs
    for stages in range(2, 9):
        occ = occupancy(Footprint(256, 128, 0, stages * 8 * KB), H200)
        assert occ.ctas_per_sm == 2 and occ.limited_by == "registers" and occ.occupancy == 0.25
        assert occ.shared_per_cta == stages * 8 * KB + KB               # the driver's 1 KB reserve
    # one register more and the warp's allocation rounds up to 4352: 3 warps per sub-partition
    assert occupancy(Footprint(256, 129), H200).ctas_per_sm == 1


def test_shared_memory_binds_when_stages_grow():
    fp = Footprint(128, 32, 0, 60 * KB)                   # (60 + 1) KB: 3 fit in 228 KB
    occ = occupancy(fp, H200)
    assert occ.by["shared memory"] == 3 and occ.ctas_per_sm == 3 and occ.limited_by == "shared memory"
    assert occupancy(Footprint(128, 32, 0, 113 * KB), H200).ctas_per_sm == 2       # 2 x 114 = 228 KB exactly
    assert occupancy(Footprint(128, 32, 0, 114 * KB), H200).ctas_per_sm == 1       # 2 x 115 > 228 KB


def test_threads_and_block_slots_bind():
    assert occupancy(Footprint(1024, 16), H200).limited_by == "threads"
    occ = occupancy(Footprint(32, 16), H200)
    assert occ.ctas_per_sm == 32 and occ.limited_by == "blocks"
    assert occupancy(Footprint(33, 0), H200).by["threads"] == 2048 // 64          # whole warps


def test_waves():
    assert waves(1024, 2, 132) == 4 and waves(264, 2, 132) == 1 and waves(265, 2, 132) == 2


@pytest.mark.parametrize("fp,msg", [
    (Footprint(0, 32), "occupancy: threads must be an integer >= 1 [asyncpipe.model], got 0"),
    (Footprint(2048, 32), "occupancy: threads per CTA must be <= 1024 [MAX_THREADS_PER_BLOCK], got 2048"),
    (Footprint(256, 256), "occupancy: registers per thread must be <= 255 [CUDA programming guide, compute "
                          "capabilities], got 256"),
    (Footprint(1024, 72), "occupancy: registers per CTA must be <= 65536 [MAX_REGISTERS_PER_BLOCK], got 72 x 1024 "
                          "threads = 73728 allocated"),
    (Footprint(256, 64, 1024, 227 * KB), "occupancy: static + dynamic shared memory must be <= 232448 bytes on NVIDIA "
                                         "H200 [MAX_SHARED_MEMORY_PER_BLOCK_OPTIN], got 1024 + 232448 = 233472"),
    (Footprint(256, 32, -4), "occupancy: static_shared must be an integer >= 0 [asyncpipe.model], got -4"),
])
def test_footprints_that_cannot_launch(fp, msg):
    with pytest.raises(AsyncpipeError) as e:
        occupancy(fp, H200)
    assert str(e.value) == msg


@pytest.mark.parametrize("call,msg", [
    (lambda: stage_bytes(), "stage_bytes: at least one (rows, cols) tile, got ()"),
    (lambda: stage_bytes((0, 8)), "stage_bytes: tile rows must be an integer >= 1 [asyncpipe.model], got 0"),
    (lambda: pipeline_bytes(0, 8), "pipeline_bytes: stages must be an integer >= 1 [asyncpipe.model], got 0"),
    (lambda: table_limits("V100"), "table_limits: name must be one of ['A100', 'H100', 'H200'] or contain one, "
                                   "got 'V100'"),
])
def test_bad_input(call, msg):
    with pytest.raises(AsyncpipeError) as e:
        call()
    assert str(e.value) == msg


def test_limits_from_a_device_info_and_driver_attributes():
    info = DeviceInfo(name="NVIDIA H200", compute_capability=(9, 0), sm_count=132, max_threads_per_block=1024,
                      max_block_dim=(1024, 1024, 64), max_grid_dim=(2**31 - 1, 65535, 65535),
                      max_shared_per_block=48 * KB, max_shared_per_block_optin=227 * KB,
                      max_shared_per_sm=228 * KB, cluster_launch=True, device_id=1)
    lim = limits_from_device(info, {"MAX_REGISTERS_PER_MULTIPROCESSOR": 65536, "MAX_THREADS_PER_MULTIPROCESSOR": 2048,
                                    "MAX_BLOCKS_PER_MULTIPROCESSOR": 32, "RESERVED_SHARED_MEMORY_PER_BLOCK": 1024,
                                    "MAX_REGISTERS_PER_BLOCK": 65536, "WARP_SIZE": 32})
    assert lim.source == "device 1"
    same = {f: getattr(H200, f) for f in H200.__dataclass_fields__ if f != "source"}
    assert {f: getattr(lim, f) for f in same} == same
    older = limits_from_device(DeviceInfo("some sm_86", (8, 6), 84, 1024, (1024, 1024, 64), (1, 1, 1), 48 * KB,
                                          99 * KB, 100 * KB, False), {"MAX_THREADS_PER_MULTIPROCESSOR": 1536})
    assert older.threads_per_sm == 1536 and older.shared_per_sm == 100 * KB and older.register_alloc_unit == 256


def test_without_a_gpu_the_live_limits_say_so_and_limits_falls_back_to_the_table(no_gpu):
    with pytest.raises(UnsupportedDeviceError, match="device_limits: needs a CUDA GPU"):
        device_limits()
    assert limits() is TABLE["H200"] and limits("A100") is TABLE["A100"]


# ---- read from the compiled kernel (offline, sm_90a) ------------------------------------------------------
def _no_shared(a):
    a[cuda.threadIdx.x] += 1.0


def _static_shared(a):
    s = cuda.shared.array(256, np.float32)                     # 1 KB
    s[cuda.threadIdx.x] = a[cuda.threadIdx.x]
    cuda.syncthreads()
    a[cuda.threadIdx.x] = s[255 - cuda.threadIdx.x]


def _dynamic_shared(a):
    s = cuda.shared.array(0, np.float32)
    s[cuda.threadIdx.x] = a[cuda.threadIdx.x]
    cuda.syncthreads()
    a[cuda.threadIdx.x] = s[255 - cuda.threadIdx.x]


@pytest.mark.sass
@pytest.mark.parametrize("fn,static", [(_no_shared, 0), (_static_shared, 1024), (_dynamic_shared, 0)])
def test_compiled_footprint_counts_the_reserve_once(fn, static):
    fp = compiled_footprint(fn, (types.float32[::1],), threads=256, dynamic_shared=4 * KB if static == 0 else 0)
    assert fp.static_shared == static and 0 < fp.registers <= 32
    assert occupancy(fp, H200).shared_per_cta == fp.shared + KB


def test_footprint_from_resources_takes_the_reserve_off():
    class R:                                                   # what codegen.Resources reports
        registers, shared, local, stack = 90, 1024 + 8 * KB, 0, 0
    assert footprint_from_resources(R, 256, 24 * KB) == Footprint(256, 90, 8 * KB, 24 * KB)
