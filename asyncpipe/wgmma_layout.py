"""What the PTX ISA fixes about ``wgmma`` (PTX ISA 8.0, sm_90a): the shared-memory matrix descriptor's
bit fields, the swizzle codes, the shapes, and which accumulator or A element each warpgroup thread
holds. Pure data and functions, below both ``asyncpipe.ptx.wgmma`` (which re-exports them beside the
primitives) and the simulator's wgmma bodies (``asyncpipe.sim.prim.wgmma``).
"""

from __future__ import annotations

# ---- shared-memory matrix descriptor (PTX ISA 8.0, "Matrix Descriptor Format") ---------------------------
# bits 0-13 start address, 16-29 leading dimension byte offset, 32-45 stride dimension byte offset, each
# encoded as (x & 0x3FFFF) >> 4; bits 49-51 base offset; bits 62-63 swizzle mode.
DESC_ADDRESS_MASK = 0x3FFFF           # matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4
DESC_ADDRESS_SHIFT = 4                # addresses and offsets are multiples of 16 bytes
DESC_LBO_BIT = 16
DESC_SBO_BIT = 32
DESC_BASE_OFFSET_BIT = 49
DESC_BASE_OFFSET_MASK = 0x7
DESC_SWIZZLE_BIT = 62
# swizzle mode (bits 62-63) -> code; "Matrix Descriptor Format"
SWIZZLE_NONE, SWIZZLE_128B, SWIZZLE_64B, SWIZZLE_32B = 0, 1, 2, 3
SWIZZLE_CODES = {"none": SWIZZLE_NONE, "128B": SWIZZLE_128B, "64B": SWIZZLE_64B, "32B": SWIZZLE_32B}
# A swizzle pattern repeats every 8 rows of its span: a 128B-swizzled tile starts on a 1024-byte
# boundary (base offset 0); "Matrix Descriptor Format", table of pattern start addresses.
SWIZZLE_ATOM_BYTES = {"128B": 1024, "64B": 512, "32B": 256}
SWIZZLE_128B_ROW_BYTES = 128          # one row of the 128B swizzle: 64 bf16/fp16 or 128 e4m3/e5m2 elements
SWIZZLE_ATOM_ROWS = 8                 # rows per swizzle atom
# 128B swizzle, K-major: leading byte offset unused ("assumed 1"); stride byte offset = 8 rows x 128 B.
K_MAJOR_128B_LBO = 16
K_MAJOR_128B_SBO = SWIZZLE_ATOM_ROWS * SWIZZLE_128B_ROW_BYTES
# 128B swizzle, MN-major: stride byte offset = 8 K-rows x 128 B; the leading byte offset is the distance
# between two 64-element column blocks along M/N (the caller's box layout decides it).
MN_MAJOR_128B_SBO = SWIZZLE_ATOM_ROWS * SWIZZLE_128B_ROW_BYTES

# ---- shapes --------------------------------------------------------------------------------------------
WGMMA_M = 64
WGMMA_K = 16                          # k16 for .bf16 / .f16
WGMMA_K_8BIT = 32                     # k32 for .e4m3 / .e5m2: one instruction reads 32 bytes of each K-major row
WGMMA_N = (64, 128, 256)              # the shapes asyncpipe declares (the ISA has every multiple of 8)
WARPGROUP_THREADS = 128
SETMAXNREG_MIN, SETMAXNREG_MAX, SETMAXNREG_STEP = 24, 256, 8   # setmaxnreg: 24..256, multiple of 8


def accumulators(n: int) -> int:
    """fp32 accumulator registers per thread of ``m64nNk16``: N / 2."""
    return WGMMA_M * n // WARPGROUP_THREADS


def d_row_col(thread: int, i: int) -> tuple[int, int]:
    """Row and column of D (m64nNk16, .f32) that accumulator ``i`` of warpgroup thread ``thread`` holds."""
    w, lane = divmod(thread, 32)
    g, q = divmod(lane, 4)
    return 16 * w + g + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * q + (i & 1)


def a_row_col(thread: int, e: int) -> tuple[int, int]:
    """Row and column of A (64 x 16) that 16-bit element ``e`` (0..7; register ``e // 2``, low half
    first) of warpgroup thread ``thread`` holds, for the ``_rs`` forms."""
    w, lane = divmod(thread, 32)
    g, q = divmod(lane, 4)
    return 16 * w + g + 8 * ((e >> 1) & 1), 2 * q + (e & 1) + 8 * (e >> 2)


def a_row_col_8bit(thread: int, e: int) -> tuple[int, int]:
    """Row and column of A (64 x 32, m64nNk32 with .e4m3/.e5m2) that 8-bit element ``e`` (0..15; register
    ``e // 4``, lowest byte first) of warpgroup thread ``thread`` holds, for the FP8 ``_rs`` forms:
    a0 = A[r, 4q .. 4q+3], a1 = A[r + 8, 4q ..], a2 = A[r, 16 + 4q ..], a3 = A[r + 8, 16 + 4q ..] with
    r = 16*w + g (PTX ISA, "Matrix Fragments for wgmma.mma_async.m64nNk32"; CUTLASS's
    ``GMMA::ALayout_64x32``, the register-source layout for 8-bit types, spells the same map)."""
    w, lane = divmod(thread, 32)
    g, q = divmod(lane, 4)
    return 16 * w + g + 8 * ((e >> 2) & 1), 4 * q + (e & 3) + 16 * (e >> 3)
