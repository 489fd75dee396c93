"""wgmma: Hopper's warpgroup matrix multiply-accumulate (``wgmma.mma_async``), its fence, commit and
wait, the shared-memory matrix descriptor it reads operands through, and ``setmaxnreg`` (the register
hand-over of warp-specialized kernels). All need sm_90a (``arch_specific``).

**Who.** A *warpgroup* is four consecutive warps whose first warp index is a multiple of 4 (threads
128*g .. 128*g + 127). ``wgmma.*`` and ``setmaxnreg`` are ``.sync.aligned``: all 128 threads of the
warpgroup execute the same call, with the same operands where the PTX says "uniform", in convergence.

**The sequence** (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate")::

    wgmma_fence_sync_aligned()            # before the first mma, and whenever registers it reads changed
    wgmma_mma_async_..._ss(acc, a_desc, b_desc, scale_d, 0, 1)   # one or more, asynchronous
    wgmma_commit_group_sync_aligned()     # closes them into one wgmma-group
    wgmma_wait_group_sync_aligned(0)      # until at most N groups are pending: acc may be read now

Reading or writing the accumulators (or A's registers) of an mma that is still pending is undefined
behaviour; so is changing the shared memory it reads before its group is waited for.

**Accumulators: why a pointer, and why it stays in registers.** ``m64nNk16`` with ``.f32``
accumulators reads and writes N/2 fp32 registers per thread (32, 64 or 128). A C-ABI shim cannot take
or return 128 values by value from numba, so each mma primitive takes ``d = addr(acc, 0)`` of a
``cuda.local.array(N // 2, float32)`` and its shim names ``d[0] .. d[N/2-1]`` as in-out register
operands. After nvJitLink's LTO inlines the shim, every access to the local array has a constant
offset, and LLVM's SROA promotes the array to N/2 virtual registers: the SASS shows ``HGMMA`` with
no ``LDL``/``STL`` and 0 bytes of local memory (``tests/ptx/test_wgmma.py`` checks each form, up to
128 accumulators in a loop). The alternative, a numba ``@intrinsic`` that emits the inline asm with a
struct-of-floats result, was not needed: the pointer form keeps one shim per instruction like every
other primitive. The one rule it imposes: **index ``acc`` with compile-time constants only** (the
``unroll`` marker of ``asyncpipe.kernels.unroll``); a run-time index forces the array into local
memory.

Accumulator layout (PTX ISA, "Register Fragments", m64nNk16 ``.f32``): thread ``t`` of the
warpgroup (warp ``w = t // 32``, lane ``l``; ``g = l // 4``, ``q = l % 4``) holds ``acc[i]`` =
D[row, col] with ``row = 16*w + g + 8*((i >> 1) & 1)``, ``col = 8*(i >> 2) + 2*q + (i & 1)``
(``d_row_col`` below). A in registers (``_rs`` forms): four ``.b32`` registers ``a0..a3``, two
16-bit values each (low half first); element ``e`` (0..7) is A[16*w + g + 8*((e >> 1) & 1),
2*q + (e & 1) + 8*(e >> 2)] (``a_row_col``).

**Operands from shared memory** are described by 64-bit matrix descriptors
(``matrix_descriptor``). ``imm_trans_a``/``imm_trans_b`` (0 or 1, compile-time constants) choose
the major-ness: 0 = K-major (A as M x K row-major, B as N x K row-major, i.e. B transposed), 1 =
MN-major (A as K x M row-major; B as K x N row-major, numpy's ``C = A @ B`` layout). ``scale_d``: 0
computes D = A*B (the accumulators' old values are ignored), anything else D = A*B + D.
``imm-scale-a``/``imm-scale-b`` are fixed at 1 (no negation).

**FP8** (``..._m64nNk32_f32_e4m3_e4m3_ss/_rs``, ``..._e5m2_e5m2_...``): D[64 x N] (+)= A[64 x 32] *
B[32 x N] with OCP E4M3 or E5M2 inputs and the same fp32 accumulators (``d_row_col``), N = 64, 128, 192 (the
block-scaled FP8 GEMM's widest tile that fits its registers) or 256. The PTX ISA has
no imm-trans-a/imm-trans-b for 8-bit types: both operands are K-major (A as M x K, B as N x K
row-major), so these primitives take no trans arguments. With the 128-byte swizzle one row holds 128
elements of K and the k-th k32 step starts ``32 * k`` bytes further (as bf16's k16 step). A in
registers: four ``.b32``, four 8-bit codes each, lowest byte first; element ``e`` (0..15) is
A[16*w + g + 8*((e >> 2) & 1), 4*q + (e & 3) + 16*(e >> 3)] (``a_row_col_8bit``). SASS: ``QGMMA``.

**Register hand-over.** ``setmaxnreg_dec_sync_aligned_u32(40)`` in a producer warpgroup and
``setmaxnreg_inc_sync_aligned_u32(232)`` in the consumers move registers from one to the other.
The kernel must be compiled with a register count known at compile time (``launch_bounds``, e.g.
``(384, 1)`` gives 168), and the counts must fit: with 3 warpgroups, 128 * 40 + 256 * 232 = 64512
<= 65536. ptxas compiles the code after each ``setmaxnreg`` to its count.
"""

from __future__ import annotations

from numba import cuda, uint64
from numba.cuda import types
from numba.cuda.extending import intrinsic

from ..wgmma_layout import (  # noqa: F401  (the ISA's wgmma facts, re-exported beside the primitives)
    DESC_ADDRESS_MASK, DESC_ADDRESS_SHIFT, DESC_LBO_BIT, DESC_SBO_BIT, DESC_BASE_OFFSET_BIT,
    DESC_BASE_OFFSET_MASK, DESC_SWIZZLE_BIT, SWIZZLE_NONE, SWIZZLE_128B, SWIZZLE_64B, SWIZZLE_32B,
    SWIZZLE_CODES, SWIZZLE_ATOM_BYTES, SWIZZLE_128B_ROW_BYTES, SWIZZLE_ATOM_ROWS, K_MAJOR_128B_LBO,
    K_MAJOR_128B_SBO, MN_MAJOR_128B_SBO, WGMMA_M, WGMMA_K, WGMMA_N, WARPGROUP_THREADS, SETMAXNREG_MIN,
    SETMAXNREG_MAX, SETMAXNREG_STEP, WGMMA_K_8BIT, accumulators, a_row_col, a_row_col_8bit, d_row_col,
)
from ._registry import primitive, simulating


def _matrix_descriptor(start_address, leading_byte_offset, stride_byte_offset, swizzle_mode, base_offset):
    # each address field: matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4 (spelled out three times: this
    # body is inlined into kernels, where it may call only jitted functions)
    mask, shift = uint64(DESC_ADDRESS_MASK), uint64(DESC_ADDRESS_SHIFT)
    return (((uint64(start_address) & mask) >> shift)
            | (((uint64(leading_byte_offset) & mask) >> shift) << uint64(DESC_LBO_BIT))
            | (((uint64(stride_byte_offset) & mask) >> shift) << uint64(DESC_SBO_BIT))
            | ((uint64(base_offset) & uint64(DESC_BASE_OFFSET_MASK)) << uint64(DESC_BASE_OFFSET_BIT))
            | (uint64(swizzle_mode) << uint64(DESC_SWIZZLE_BIT)))


matrix_descriptor = cuda.jit(device=True, inline="always")(_matrix_descriptor)
matrix_descriptor.__doc__ = """The 64-bit shared-memory matrix descriptor of ``wgmma.mma_async`` (a pure function).

``matrix_descriptor(start_address, leading_byte_offset, stride_byte_offset, swizzle_mode, base_offset)``
with ``start_address`` the operand's ``.shared::cta`` address (``cvta_to_shared_u32(addr(smem, i))``),
the two byte offsets as the PTX ISA defines them for the operand's major-ness, ``swizzle_mode`` one of
``SWIZZLE_NONE``/``SWIZZLE_128B``/``SWIZZLE_64B``/``SWIZZLE_32B`` and ``base_offset`` 0 when the tile
starts on its swizzle pattern's boundary (1024 bytes for 128B). Addresses and offsets are multiples
of 16 bytes; each is encoded as ``(x & 0x3FFFF) >> 4``.

For the 128-byte swizzle that TMA writes (``TensorMap.tiled(..., swizzle="128B")``, boxes of 64
bf16/fp16 per row): K-major operand: ``leading_byte_offset = K_MAJOR_128B_LBO`` (unused),
``stride_byte_offset = 1024`` (8 rows of 128 B); the k-th k16 step starts ``32 * k`` bytes further.
MN-major operand: ``stride_byte_offset = 1024`` (8 K-rows), ``leading_byte_offset`` = the bytes
between consecutive 64-column boxes; the k-th k16 step starts ``16 * 128 * k`` bytes further.

In kernels it is inlined; on the host call ``matrix_descriptor.py_func`` (``check_matrix_descriptor``
validates the arguments first).
"""


def _advance_descriptor_sim(desc, byte_offset):
    from ..sim.errors import SimUsageError

    field = int(desc) & (DESC_ADDRESS_MASK >> DESC_ADDRESS_SHIFT)
    step = int(byte_offset) >> DESC_ADDRESS_SHIFT
    if byte_offset < 0 or byte_offset % (1 << DESC_ADDRESS_SHIFT) or field + step > (DESC_ADDRESS_MASK >>
                                                                                     DESC_ADDRESS_SHIFT):
        raise SimUsageError("advance_descriptor", ADVANCE_RULE,
                            f"start address {field << DESC_ADDRESS_SHIFT} + byte_offset {byte_offset}",
                            "PTX ISA, wgmma matrix descriptor format")
    return uint64(int(desc) + step)


ADVANCE_RULE = ("byte_offset must be a multiple of 16 and keep the start address within the 18-bit address field "
                "(start address + byte_offset <= 0x3FFF0)")


@intrinsic
def _advance_descriptor(typingctx, desc, byte_offset):
    if not (isinstance(desc, types.Integer) and isinstance(byte_offset, types.Integer)):
        return None
    sig = types.uint64(desc, byte_offset)

    def codegen(context, builder, sig, args):
        d = context.cast(builder, args[0], sig.args[0], types.uint64)
        off = context.cast(builder, args[1], sig.args[1], types.uint64)
        return builder.add(d, builder.lshr(off, off.type(DESC_ADDRESS_SHIFT)))

    return sig, codegen


advance_descriptor = _advance_descriptor_sim if simulating() else _advance_descriptor
advance_descriptor.__doc__ = """``advance_descriptor(desc, byte_offset) -> uint64``: the matrix descriptor of the
operand ``byte_offset`` bytes further on: ``matrix_descriptor(a + off, ...) == advance_descriptor(
matrix_descriptor(a, ...), off)``, as the start address field is ``(a & 0x3FFFF) >> 4`` and every shared
address is below 2**18 (228 KiB at most), so the sum never carries into the next field. One integer add (a
numba intrinsic, nothing to inline): k-step loops build their operands' descriptors once and advance them per
step, as CUTLASS's descriptor iterators do. The simulator checks the rule (``ADVANCE_RULE``)."""

def check_matrix_descriptor(start_address, leading_byte_offset, stride_byte_offset, swizzle, base_offset=0):
    """Host-side check of ``matrix_descriptor``'s arguments (``swizzle`` a name: ``"128B"`` ...);
    raises ``AsyncpipeError`` naming the rule broken, returns the swizzle code."""
    from ..errors import check

    api = "matrix_descriptor"
    src = "PTX ISA, wgmma matrix descriptor format"
    check(swizzle in SWIZZLE_CODES, api, f"swizzle must be one of {', '.join(map(repr, SWIZZLE_CODES))}",
          repr(swizzle), src)
    for name, v in (("start_address", start_address), ("leading_byte_offset", leading_byte_offset),
                    ("stride_byte_offset", stride_byte_offset)):
        check(0 <= v <= DESC_ADDRESS_MASK, api, f"{name} must be 0..{DESC_ADDRESS_MASK:#x} (18 bits)", v, src)
        check(v % (1 << DESC_ADDRESS_SHIFT) == 0, api, f"{name} must be a multiple of 16 bytes",
              f"{v} = 16 * {v // 16} + {v % 16}", src)
    check(0 <= base_offset <= DESC_BASE_OFFSET_MASK, api, "base_offset must be 0..7", base_offset, src)
    return SWIZZLE_CODES[swizzle]


_WG = "all 128 threads of the warpgroup, converged (.sync.aligned)"
_SS = "void(voidptr, uint64, uint64, int32, int32, int32)"
_RS = "void(voidptr, uint32, uint32, uint32, uint32, uint64, int32, int32)"
_SS_PTX = " d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b;"
_RS_PTX = " d, a, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-b;"


# ---- fence / commit / wait -----------------------------------------------------------------------------
@primitive("void()", ptx="wgmma.fence.sync.aligned;", isa=80, sm=90, who=_WG, sass=("WARPGROUP.ARRIVE",),
           arch_specific=True)
def wgmma_fence_sync_aligned():
    """Orders this warpgroup's earlier register and shared-memory accesses before the following
    ``wgmma.mma_async``: required before the first mma of a sequence and whenever the accumulators
    or A's registers were written by other instructions in between. (It does not order generic-proxy
    writes of shared memory: those need ``fence_proxy_async_shared_cta``.)"""
    _sim.fence()


@primitive("void()", ptx="wgmma.commit_group.sync.aligned;", isa=80, sm=90, who=_WG, sass=("HGMMA",),
           arch_specific=True)
def wgmma_commit_group_sync_aligned():
    """Closes every ``wgmma.mma_async`` this warpgroup issued since the last commit into one
    wgmma-group (an empty group if none). It has no SASS instruction of its own: the group's last
    ``HGMMA`` carries the ``gsb0`` scoreboard that ``WARPGROUP.DEPBAR`` later waits on."""
    _sim.commit()


@primitive("void(int32)", ptx="wgmma.wait_group.sync.aligned N;", isa=80, sm=90, who=_WG,
           sass=("WARPGROUP.DEPBAR.LE",), arch_specific=True)
def wgmma_wait_group_sync_aligned(n):
    """Waits until at most ``n`` of this warpgroup's most recent wgmma-groups are pending; then the
    accumulators of the completed ones may be read and the shared memory they read reused. ``n`` is a
    PTX immediate 0..7: pass a compile-time constant (a larger ``n`` waits as for 7, a negative one
    as for 0)."""
    _sim.wait_group(n)


# ---- mma_async: A and B from shared memory (_ss) and A from registers (_rs) ------------------------------
# _ss(d, a_desc, b_desc, scale_d, imm_trans_a, imm_trans_b): D (64 x N fp32 in ``d`` = addr(acc, 0) of a
#   cuda.local.array(N // 2, float32)) = A (64 x 16) * B (16 x N) [+ D], A and B read from shared memory through
#   the descriptors (matrix_descriptor). scale_d 0 ignores D's old values; imm_trans_a/b: 0 K-major, 1 M/N-major
#   (compile-time constants).
# _rs(d, a0, a1, a2, a3, b_desc, scale_d, imm_trans_b): the same with A from registers: a0..a3 hold two 16-bit
#   values each, low half first, as a_row_col says; A's registers and acc must not change until the group is waited.
def _op(n, ab):
    return f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ab}.{ab}"


def _hgmma(n, ab):
    """The SASS opcode: ``HGMMA.64xNx16.F32.BF16``; fp16 inputs are the default and get no suffix."""
    return (f"HGMMA.64x{n}x16.F32" + (".BF16" if ab == "bf16" else ""),)


@primitive(_SS, ptx=_op(64, "bf16") + _SS_PTX, isa=80, sm=90, who=_WG, sass=_hgmma(64, "bf16"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n64k16_f32_bf16_bf16_ss(d, a_desc, b_desc, scale_d, imm_trans_a, imm_trans_b):
    """D[64 x 64] (+)= A[64 x 16] * B[16 x 64], bf16 from shared memory; ``d``: 32 fp32 per thread."""
    _sim.mma(d, a_desc, b_desc, scale_d, imm_trans_a, imm_trans_b, n=64, ab="bf16", form="ss",
             api="wgmma_mma_async_sync_aligned_m64n64k16_f32_bf16_bf16_ss")


@primitive(_RS, ptx=_op(64, "bf16") + _RS_PTX, isa=80, sm=90, who=_WG, sass=_hgmma(64, "bf16"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n64k16_f32_bf16_bf16_rs(d, a0, a1, a2, a3, b_desc, scale_d, imm_trans_b):
    """D[64 x 64] (+)= A[64 x 16] (registers) * B[16 x 64] (shared memory), bf16; ``d``: 32 fp32 per thread."""
    _sim.mma(d, (a0, a1, a2, a3), b_desc, scale_d, 0, imm_trans_b, n=64, ab="bf16", form="rs",
             api="wgmma_mma_async_sync_aligned_m64n64k16_f32_bf16_bf16_rs")


@primitive(_SS, ptx=_op(128, "bf16") + _SS_PTX, isa=80, sm=90, who=_WG, sass=_hgmma(128, "bf16"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n128k16_f32_bf16_bf16_ss(d, a_desc, b_desc, scale_d, imm_trans_a, imm_trans_b):
    """D[64 x 128] (+)= A[64 x 16] * B[16 x 128], bf16 from shared memory; ``d``: 64 fp32 per thread."""
    _sim.mma(d, a_desc, b_desc, scale_d, imm_trans_a, imm_trans_b, n=128, ab="bf16", form="ss",
             api="wgmma_mma_async_sync_aligned_m64n128k16_f32_bf16_bf16_ss")


@primitive(_RS, ptx=_op(128, "bf16") + _RS_PTX, isa=80, sm=90, who=_WG, sass=_hgmma(128, "bf16"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n128k16_f32_bf16_bf16_rs(d, a0, a1, a2, a3, b_desc, scale_d, imm_trans_b):
    """D[64 x 128] (+)= A[64 x 16] (registers) * B[16 x 128] (shared memory), bf16; ``d``: 64 fp32 per thread."""
    _sim.mma(d, (a0, a1, a2, a3), b_desc, scale_d, 0, imm_trans_b, n=128, ab="bf16", form="rs",
             api="wgmma_mma_async_sync_aligned_m64n128k16_f32_bf16_bf16_rs")


@primitive(_SS, ptx=_op(256, "bf16") + _SS_PTX, isa=80, sm=90, who=_WG, sass=_hgmma(256, "bf16"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n256k16_f32_bf16_bf16_ss(d, a_desc, b_desc, scale_d, imm_trans_a, imm_trans_b):
    """D[64 x 256] (+)= A[64 x 16] * B[16 x 256], bf16 from shared memory; ``d``: 128 fp32 per thread."""
    _sim.mma(d, a_desc, b_desc, scale_d, imm_trans_a, imm_trans_b, n=256, ab="bf16", form="ss",
             api="wgmma_mma_async_sync_aligned_m64n256k16_f32_bf16_bf16_ss")


@primitive(_RS, ptx=_op(256, "bf16") + _RS_PTX, isa=80, sm=90, who=_WG, sass=_hgmma(256, "bf16"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n256k16_f32_bf16_bf16_rs(d, a0, a1, a2, a3, b_desc, scale_d, imm_trans_b):
    """D[64 x 256] (+)= A[64 x 16] (registers) * B[16 x 256] (shared memory), bf16; ``d``: 128 fp32 per thread."""
    _sim.mma(d, (a0, a1, a2, a3), b_desc, scale_d, 0, imm_trans_b, n=256, ab="bf16", form="rs",
             api="wgmma_mma_async_sync_aligned_m64n256k16_f32_bf16_bf16_rs")


@primitive(_SS, ptx=_op(64, "f16") + _SS_PTX, isa=80, sm=90, who=_WG, sass=_hgmma(64, "f16"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n64k16_f32_f16_f16_ss(d, a_desc, b_desc, scale_d, imm_trans_a, imm_trans_b):
    """D[64 x 64] (+)= A[64 x 16] * B[16 x 64], f16 from shared memory; ``d``: 32 fp32 per thread."""
    _sim.mma(d, a_desc, b_desc, scale_d, imm_trans_a, imm_trans_b, n=64, ab="f16", form="ss",
             api="wgmma_mma_async_sync_aligned_m64n64k16_f32_f16_f16_ss")


@primitive(_RS, ptx=_op(64, "f16") + _RS_PTX, isa=80, sm=90, who=_WG, sass=_hgmma(64, "f16"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n64k16_f32_f16_f16_rs(d, a0, a1, a2, a3, b_desc, scale_d, imm_trans_b):
    """D[64 x 64] (+)= A[64 x 16] (registers) * B[16 x 64] (shared memory), f16; ``d``: 32 fp32 per thread."""
    _sim.mma(d, (a0, a1, a2, a3), b_desc, scale_d, 0, imm_trans_b, n=64, ab="f16", form="rs",
             api="wgmma_mma_async_sync_aligned_m64n64k16_f32_f16_f16_rs")


@primitive(_SS, ptx=_op(128, "f16") + _SS_PTX, isa=80, sm=90, who=_WG, sass=_hgmma(128, "f16"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n128k16_f32_f16_f16_ss(d, a_desc, b_desc, scale_d, imm_trans_a, imm_trans_b):
    """D[64 x 128] (+)= A[64 x 16] * B[16 x 128], f16 from shared memory; ``d``: 64 fp32 per thread."""
    _sim.mma(d, a_desc, b_desc, scale_d, imm_trans_a, imm_trans_b, n=128, ab="f16", form="ss",
             api="wgmma_mma_async_sync_aligned_m64n128k16_f32_f16_f16_ss")


@primitive(_RS, ptx=_op(128, "f16") + _RS_PTX, isa=80, sm=90, who=_WG, sass=_hgmma(128, "f16"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n128k16_f32_f16_f16_rs(d, a0, a1, a2, a3, b_desc, scale_d, imm_trans_b):
    """D[64 x 128] (+)= A[64 x 16] (registers) * B[16 x 128] (shared memory), f16; ``d``: 64 fp32 per thread."""
    _sim.mma(d, (a0, a1, a2, a3), b_desc, scale_d, 0, imm_trans_b, n=128, ab="f16", form="rs",
             api="wgmma_mma_async_sync_aligned_m64n128k16_f32_f16_f16_rs")


@primitive(_SS, ptx=_op(256, "f16") + _SS_PTX, isa=80, sm=90, who=_WG, sass=_hgmma(256, "f16"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n256k16_f32_f16_f16_ss(d, a_desc, b_desc, scale_d, imm_trans_a, imm_trans_b):
    """D[64 x 256] (+)= A[64 x 16] * B[16 x 256], f16 from shared memory; ``d``: 128 fp32 per thread."""
    _sim.mma(d, a_desc, b_desc, scale_d, imm_trans_a, imm_trans_b, n=256, ab="f16", form="ss",
             api="wgmma_mma_async_sync_aligned_m64n256k16_f32_f16_f16_ss")


@primitive(_RS, ptx=_op(256, "f16") + _RS_PTX, isa=80, sm=90, who=_WG, sass=_hgmma(256, "f16"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n256k16_f32_f16_f16_rs(d, a0, a1, a2, a3, b_desc, scale_d, imm_trans_b):
    """D[64 x 256] (+)= A[64 x 16] (registers) * B[16 x 256] (shared memory), f16; ``d``: 128 fp32 per thread."""
    _sim.mma(d, (a0, a1, a2, a3), b_desc, scale_d, 0, imm_trans_b, n=256, ab="f16", form="rs",
             api="wgmma_mma_async_sync_aligned_m64n256k16_f32_f16_f16_rs")


# ---- mma_async, FP8 (.e4m3 / .e5m2, k32): no trans immediates, A and B K-major ------------------------------
# _ss(d, a_desc, b_desc, scale_d): D (64 x N fp32, d = addr(acc, 0) of a cuda.local.array(N // 2, float32)) =
#   A (64 x 32) * B (32 x N) [+ D], A (M x K) and B (N x K) K-major in shared memory through the descriptors.
# _rs(d, a0, a1, a2, a3, b_desc, scale_d): A from registers, four 8-bit codes per register, lowest byte first, as
#   a_row_col_8bit says.
_SS8 = "void(voidptr, uint64, uint64, int32)"
_RS8 = "void(voidptr, uint32, uint32, uint32, uint32, uint64, int32)"
_SS8_PTX = " d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b;"
_RS8_PTX = " d, a, b-desc, scale-d, imm-scale-a, imm-scale-b;"
FP8_TYPES = ("e4m3", "e5m2")


def _op8(n, ab):
    return f"wgmma.mma_async.sync.aligned.m64n{n}k32.f32.{ab}.{ab}"


def _qgmma(n, ab):
    """The SASS opcode of the FP8 forms: ``QGMMA.64xNx32.F32.E4M3.E4M3`` (read off ptxas's output)."""
    t = ab.upper()
    return (f"QGMMA.64x{n}x32.F32.{t}.{t}",)


@primitive(_SS8, ptx=_op8(64, "e4m3") + _SS8_PTX, isa=80, sm=90, who=_WG, sass=_qgmma(64, "e4m3"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n64k32_f32_e4m3_e4m3_ss(d, a_desc, b_desc, scale_d):
    """D[64 x 64] (+)= A[64 x 32] * B[32 x 64], e4m3 from shared memory, K-major; ``d``: 32 fp32 per thread."""
    _sim.mma(d, a_desc, b_desc, scale_d, 0, 0, n=64, ab="e4m3", form="ss",
             api="wgmma_mma_async_sync_aligned_m64n64k32_f32_e4m3_e4m3_ss")


@primitive(_RS8, ptx=_op8(64, "e4m3") + _RS8_PTX, isa=80, sm=90, who=_WG, sass=_qgmma(64, "e4m3"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n64k32_f32_e4m3_e4m3_rs(d, a0, a1, a2, a3, b_desc, scale_d):
    """D[64 x 64] (+)= A[64 x 32] (registers) * B[32 x 64] (shared memory), e4m3; ``d``: 32 fp32 per thread."""
    _sim.mma(d, (a0, a1, a2, a3), b_desc, scale_d, 0, 0, n=64, ab="e4m3", form="rs",
             api="wgmma_mma_async_sync_aligned_m64n64k32_f32_e4m3_e4m3_rs")


@primitive(_SS8, ptx=_op8(128, "e4m3") + _SS8_PTX, isa=80, sm=90, who=_WG, sass=_qgmma(128, "e4m3"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n128k32_f32_e4m3_e4m3_ss(d, a_desc, b_desc, scale_d):
    """D[64 x 128] (+)= A[64 x 32] * B[32 x 128], e4m3 from shared memory, K-major; ``d``: 64 fp32 per thread."""
    _sim.mma(d, a_desc, b_desc, scale_d, 0, 0, n=128, ab="e4m3", form="ss",
             api="wgmma_mma_async_sync_aligned_m64n128k32_f32_e4m3_e4m3_ss")


@primitive(_RS8, ptx=_op8(128, "e4m3") + _RS8_PTX, isa=80, sm=90, who=_WG, sass=_qgmma(128, "e4m3"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n128k32_f32_e4m3_e4m3_rs(d, a0, a1, a2, a3, b_desc, scale_d):
    """D[64 x 128] (+)= A[64 x 32] (registers) * B[32 x 128] (shared memory), e4m3; ``d``: 64 fp32 per thread."""
    _sim.mma(d, (a0, a1, a2, a3), b_desc, scale_d, 0, 0, n=128, ab="e4m3", form="rs",
             api="wgmma_mma_async_sync_aligned_m64n128k32_f32_e4m3_e4m3_rs")


@primitive(_SS8, ptx=_op8(192, "e4m3") + _SS8_PTX, isa=80, sm=90, who=_WG, sass=_qgmma(192, "e4m3"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n192k32_f32_e4m3_e4m3_ss(d, a_desc, b_desc, scale_d):
    """D[64 x 192] (+)= A[64 x 32] * B[32 x 192], e4m3 from shared memory, K-major; ``d``: 96 fp32 per thread."""
    _sim.mma(d, a_desc, b_desc, scale_d, 0, 0, n=192, ab="e4m3", form="ss",
             api="wgmma_mma_async_sync_aligned_m64n192k32_f32_e4m3_e4m3_ss")


@primitive(_RS8, ptx=_op8(192, "e4m3") + _RS8_PTX, isa=80, sm=90, who=_WG, sass=_qgmma(192, "e4m3"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n192k32_f32_e4m3_e4m3_rs(d, a0, a1, a2, a3, b_desc, scale_d):
    """D[64 x 192] (+)= A[64 x 32] (registers) * B[32 x 192] (shared memory), e4m3; ``d``: 96 fp32 per thread."""
    _sim.mma(d, (a0, a1, a2, a3), b_desc, scale_d, 0, 0, n=192, ab="e4m3", form="rs",
             api="wgmma_mma_async_sync_aligned_m64n192k32_f32_e4m3_e4m3_rs")


@primitive(_SS8, ptx=_op8(256, "e4m3") + _SS8_PTX, isa=80, sm=90, who=_WG, sass=_qgmma(256, "e4m3"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n256k32_f32_e4m3_e4m3_ss(d, a_desc, b_desc, scale_d):
    """D[64 x 256] (+)= A[64 x 32] * B[32 x 256], e4m3 from shared memory, K-major; ``d``: 128 fp32 per thread."""
    _sim.mma(d, a_desc, b_desc, scale_d, 0, 0, n=256, ab="e4m3", form="ss",
             api="wgmma_mma_async_sync_aligned_m64n256k32_f32_e4m3_e4m3_ss")


@primitive(_RS8, ptx=_op8(256, "e4m3") + _RS8_PTX, isa=80, sm=90, who=_WG, sass=_qgmma(256, "e4m3"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n256k32_f32_e4m3_e4m3_rs(d, a0, a1, a2, a3, b_desc, scale_d):
    """D[64 x 256] (+)= A[64 x 32] (registers) * B[32 x 256] (shared memory), e4m3; ``d``: 128 fp32 per thread."""
    _sim.mma(d, (a0, a1, a2, a3), b_desc, scale_d, 0, 0, n=256, ab="e4m3", form="rs",
             api="wgmma_mma_async_sync_aligned_m64n256k32_f32_e4m3_e4m3_rs")


@primitive(_SS8, ptx=_op8(64, "e5m2") + _SS8_PTX, isa=80, sm=90, who=_WG, sass=_qgmma(64, "e5m2"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n64k32_f32_e5m2_e5m2_ss(d, a_desc, b_desc, scale_d):
    """D[64 x 64] (+)= A[64 x 32] * B[32 x 64], e5m2 from shared memory, K-major; ``d``: 32 fp32 per thread."""
    _sim.mma(d, a_desc, b_desc, scale_d, 0, 0, n=64, ab="e5m2", form="ss",
             api="wgmma_mma_async_sync_aligned_m64n64k32_f32_e5m2_e5m2_ss")


@primitive(_RS8, ptx=_op8(64, "e5m2") + _RS8_PTX, isa=80, sm=90, who=_WG, sass=_qgmma(64, "e5m2"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n64k32_f32_e5m2_e5m2_rs(d, a0, a1, a2, a3, b_desc, scale_d):
    """D[64 x 64] (+)= A[64 x 32] (registers) * B[32 x 64] (shared memory), e5m2; ``d``: 32 fp32 per thread."""
    _sim.mma(d, (a0, a1, a2, a3), b_desc, scale_d, 0, 0, n=64, ab="e5m2", form="rs",
             api="wgmma_mma_async_sync_aligned_m64n64k32_f32_e5m2_e5m2_rs")


@primitive(_SS8, ptx=_op8(128, "e5m2") + _SS8_PTX, isa=80, sm=90, who=_WG, sass=_qgmma(128, "e5m2"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n128k32_f32_e5m2_e5m2_ss(d, a_desc, b_desc, scale_d):
    """D[64 x 128] (+)= A[64 x 32] * B[32 x 128], e5m2 from shared memory, K-major; ``d``: 64 fp32 per thread."""
    _sim.mma(d, a_desc, b_desc, scale_d, 0, 0, n=128, ab="e5m2", form="ss",
             api="wgmma_mma_async_sync_aligned_m64n128k32_f32_e5m2_e5m2_ss")


@primitive(_RS8, ptx=_op8(128, "e5m2") + _RS8_PTX, isa=80, sm=90, who=_WG, sass=_qgmma(128, "e5m2"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n128k32_f32_e5m2_e5m2_rs(d, a0, a1, a2, a3, b_desc, scale_d):
    """D[64 x 128] (+)= A[64 x 32] (registers) * B[32 x 128] (shared memory), e5m2; ``d``: 64 fp32 per thread."""
    _sim.mma(d, (a0, a1, a2, a3), b_desc, scale_d, 0, 0, n=128, ab="e5m2", form="rs",
             api="wgmma_mma_async_sync_aligned_m64n128k32_f32_e5m2_e5m2_rs")


@primitive(_SS8, ptx=_op8(192, "e5m2") + _SS8_PTX, isa=80, sm=90, who=_WG, sass=_qgmma(192, "e5m2"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n192k32_f32_e5m2_e5m2_ss(d, a_desc, b_desc, scale_d):
    """D[64 x 192] (+)= A[64 x 32] * B[32 x 192], e5m2 from shared memory, K-major; ``d``: 96 fp32 per thread."""
    _sim.mma(d, a_desc, b_desc, scale_d, 0, 0, n=192, ab="e5m2", form="ss",
             api="wgmma_mma_async_sync_aligned_m64n192k32_f32_e5m2_e5m2_ss")


@primitive(_RS8, ptx=_op8(192, "e5m2") + _RS8_PTX, isa=80, sm=90, who=_WG, sass=_qgmma(192, "e5m2"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n192k32_f32_e5m2_e5m2_rs(d, a0, a1, a2, a3, b_desc, scale_d):
    """D[64 x 192] (+)= A[64 x 32] (registers) * B[32 x 192] (shared memory), e5m2; ``d``: 96 fp32 per thread."""
    _sim.mma(d, (a0, a1, a2, a3), b_desc, scale_d, 0, 0, n=192, ab="e5m2", form="rs",
             api="wgmma_mma_async_sync_aligned_m64n192k32_f32_e5m2_e5m2_rs")


@primitive(_SS8, ptx=_op8(256, "e5m2") + _SS8_PTX, isa=80, sm=90, who=_WG, sass=_qgmma(256, "e5m2"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n256k32_f32_e5m2_e5m2_ss(d, a_desc, b_desc, scale_d):
    """D[64 x 256] (+)= A[64 x 32] * B[32 x 256], e5m2 from shared memory, K-major; ``d``: 128 fp32 per thread."""
    _sim.mma(d, a_desc, b_desc, scale_d, 0, 0, n=256, ab="e5m2", form="ss",
             api="wgmma_mma_async_sync_aligned_m64n256k32_f32_e5m2_e5m2_ss")


@primitive(_RS8, ptx=_op8(256, "e5m2") + _RS8_PTX, isa=80, sm=90, who=_WG, sass=_qgmma(256, "e5m2"), arch_specific=True)
def wgmma_mma_async_sync_aligned_m64n256k32_f32_e5m2_e5m2_rs(d, a0, a1, a2, a3, b_desc, scale_d):
    """D[64 x 256] (+)= A[64 x 32] (registers) * B[32 x 256] (shared memory), e5m2; ``d``: 128 fp32 per thread."""
    _sim.mma(d, (a0, a1, a2, a3), b_desc, scale_d, 0, 0, n=256, ab="e5m2", form="rs",
             api="wgmma_mma_async_sync_aligned_m64n256k32_f32_e5m2_e5m2_rs")


# ---- setmaxnreg -------------------------------------------------------------------------------------------
@primitive("void(uint32)", ptx="setmaxnreg.inc.sync.aligned.u32 imm-reg-count;", isa=80, sm=90, who=_WG,
           sass=("USETMAXREG.TRY_ALLOC.CTAPOOL",), arch_specific=True)
def setmaxnreg_inc_sync_aligned_u32(imm_reg_count):
    """Raises this warpgroup's per-thread register count to ``imm_reg_count`` (24..256, a multiple of
    8, a compile-time constant), taking the registers from the CTA's pool (what ``.dec`` released);
    blocks until the pool has them. The count must not be below the current one."""
    _sim.setmaxnreg(imm_reg_count, True)


@primitive("void(uint32)", ptx="setmaxnreg.dec.sync.aligned.u32 imm-reg-count;", isa=80, sm=90, who=_WG,
           sass=("USETMAXREG.DEALLOC.CTAPOOL",), arch_specific=True)
def setmaxnreg_dec_sync_aligned_u32(imm_reg_count):
    """Lowers this warpgroup's per-thread register count to ``imm_reg_count`` (24..256, a multiple of
    8, a compile-time constant) and releases the rest to the CTA's pool, for a ``.inc`` in another
    warpgroup. The count must not be above the current one."""
    _sim.setmaxnreg(imm_reg_count, False)


# ---- the start address a descriptor encodes ------------------------------------------------------------
@primitive("uint32(voidptr)", ptx="cvta.to.shared.u64 t, a; cvt.u32.u64 d, t;", isa=20, sm=20,
           who="any thread", sass=("S2R",))
def cvta_to_shared_u32(a):
    """The 32-bit ``.shared::cta`` address of ``a`` = ``addr(smem, i)`` (a generic pointer into this
    CTA's shared memory), as matrix descriptors encode it. On sm_90 the generic shared window is
    4 GiB-aligned, so the conversion is the pointer's low 32 bits: no instruction of its own (the SASS
    test sees the CTA's shared base formed from ``S2R SR_CgaCtaId``). Compute it once outside loops."""
    return _sim.cvta_to_shared(a)


# The simulator bodies' semantics (they read the layout facts from asyncpipe.wgmma_layout).
from ..sim.prim import wgmma as _sim  # noqa: E402
