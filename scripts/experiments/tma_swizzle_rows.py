"""Experiment (H200): where does a swizzled TMA load put box rows narrower than the swizzle span, and how many
bytes does it complete on the mbarrier?

A float32 64 x 64 tensor of distinct values; a box of 16 rows x W floats (W * 4 bytes narrower than or equal to
the span) loaded into a poisoned 1024-aligned shared buffer, with expect_tx of the dense box bytes (16 * W * 4) or
of the rows padded to the span (16 * span). A bounded wait says whether the phase completed; the shared buffer
is copied out as it lies. Prints, per case, whether it completed, and whether the data sits dense (row r at
r * W * 4) or padded (row r at r * span), swizzle undone per the PTX ISA pattern."""
import sys

import numpy as np
from numba import cuda, uint32, uint64

sys.path.insert(0, ".")
from asyncpipe import ptx  # noqa: E402
from asyncpipe.host import TensorMap  # noqa: E402

WORDS = 4096          # 16 KB of shared memory


@cuda.jit
def load(tmap, expect, out, done):
    buf = cuda.shared.array(WORDS, uint32, alignment=1024)
    bar = cuda.shared.array(1, uint64)
    t = cuda.threadIdx.x
    i = t
    while i < WORDS:
        buf[i] = 0xDEADBEEF
        i += cuda.blockDim.x
    if t == 0:
        ptx.mbarrier_init(ptx.addr(bar, 0), 1)
        ptx.fence_mbarrier_init_release_cluster()
    ptx.fence_proxy_async_shared_cta()
    cuda.syncthreads()
    if t == 0:
        ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(tmap, 0))
        ptx.mbarrier_arrive_expect_tx(ptx.addr(bar, 0), expect)
        ptx.cp_async_bulk_tensor_2d_shared_global(ptx.addr(buf, 0), ptx.addr(tmap, 0), 0, 0, ptx.addr(bar, 0))
    ok = False
    for _ in range(20000):
        if ptx.mbarrier_test_wait_parity(ptx.addr(bar, 0), 0) != 0:
            ok = True
            break
        cuda.nanosleep(1000)
    if t == 0:
        done[0] = 1 if ok else 0
    cuda.syncthreads()
    i = t
    while i < WORDS:
        out[i] = buf[i]
        i += cuda.blockDim.x


def unswizzle(raw: np.ndarray, span: int) -> np.ndarray:
    """Bytes of shared memory with the swizzle undone: byte A holds what belongs at A ^ (((A >> 7) & m) << 4)."""
    m = {32: 1, 64: 3, 128: 7}.get(span, 0)
    a = np.arange(raw.size)
    out = np.empty_like(raw)
    out[a ^ (((a >> 7) & m) << 4)] = raw
    return out


a = np.arange(64 * 64, dtype=np.float32).reshape(64, 64) + 1
d = cuda.to_device(a)
for swizzle, span, w in (("none", 0, 8), ("32B", 32, 4), ("64B", 64, 8), ("128B", 128, 8), ("128B", 128, 16),
                         ("128B", 128, 32)):
    tmap = TensorMap.tiled(d, (16, w), swizzle=swizzle)
    dense, padded = 16 * w * 4, 16 * max(span, w * 4)
    for name, expect in (("dense", dense), ("padded", padded)):
        out = cuda.to_device(np.zeros(WORDS, np.uint32))
        done = cuda.to_device(np.zeros(1, np.int32))
        try:
            load[1, 128](tmap, np.uint32(expect), out, done)
        except Exception as exc:  # noqa: BLE001 - the simulator refuses a count its model does not deliver
            print(f"swizzle {swizzle:>4} box 16 x {w:2d}: expect_tx {name} {expect} B -> {type(exc).__name__}")
            continue
        raw = unswizzle(out.copy_to_host().view(np.uint8), span if span else 0)
        vals = raw.view(np.float32)
        want = a[:16, :w]
        pitch = max(span, w * 4) // 4
        is_dense = np.array_equal(vals[:16 * w].reshape(16, w), want)
        is_padded = np.array_equal(vals[:16 * pitch].reshape(16, pitch)[:, :w], want)
        used = int(np.nonzero(raw.view(np.uint32) != 0xDEADBEEF)[0].max() + 1) * 4
        print(f"swizzle {swizzle:>4} box 16 x {w:2d} ({w * 4:3d} B rows): expect_tx {name:6s} {expect:5d} B -> "
              f"completed {bool(done.copy_to_host()[0])}; data dense {is_dense}, padded to {pitch * 4} B {is_padded}; "
              f"shared bytes touched {used}", flush=True)
