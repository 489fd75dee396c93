"""The chapter's cluster program: CTAs of a thread block cluster combine their partial sums by reading
each other's shared memory (distributed shared memory, DSMEM).

``pair_sum`` is the chapter's kernel: 2-CTA clusters; each CTA sums its ``per_block`` floats into
``partial[0]``; a cluster barrier makes both ready and visible; CTA 0 reads its peer's
``partial[0]`` through ``mapa`` + ``ld.shared::cluster``; a second cluster barrier keeps CTA 1 (and
its shared memory) alive until CTA 0 has read it.

``cluster_sum_kernel`` goes past it: any cluster size 1..8, a grid that fills the GPU, each thread
keeping ``UNROLL`` independent loads in flight; every cluster's rank 0 gathers the CTAs' partials
over DSMEM and writes one partial per cluster, and ``finish_kernel`` adds those up. ``cluster_sum``
is the host function.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32

from .. import ptx
from ..host.plans import PlanCache
from ..jit_cache import jit
from .unroll import registers, unroll, unrolled

THREADS = 256
WARPS = THREADS // 32
UNROLL = 8
FULL_MASK = 0xFFFFFFFF


def pair_sum(inp, out, per_block):
    partial = cuda.shared.array(THREADS, float32)
    rank = ptx.cluster_ctarank()                     # this CTA's number in its cluster: 0 or 1
    tid = cuda.threadIdx.x

    # every CTA first sums its own segment
    base = cuda.blockIdx.x * per_block
    v = float32(0)
    i = tid
    while i < per_block:
        v += inp[base + i]
        i += cuda.blockDim.x
    partial[tid] = v
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            partial[tid] += partial[tid + s]
        cuda.syncthreads()
        s //= 2

    ptx.barrier_cluster_arrive()                     # both partial[0] ready, visible to the cluster
    ptx.barrier_cluster_wait()
    if rank == 0 and tid == 0:
        remote = ptx.mapa_shared_cluster(ptx.addr(partial, 0), 1)   # partial[0] in CTA 1
        out[cuda.blockIdx.x // 2] = partial[0] + ptx.ld_shared_cluster_f32(remote)
    ptx.barrier_cluster_arrive()                     # CTA 1 may not exit (freeing its shared memory)
    ptx.barrier_cluster_wait()                       # before CTA 0 has read it


def cluster_sum_kernel(x, n, partials):
    warp_sums = cuda.shared.array(WARPS, float32)
    tid = cuda.threadIdx.x
    stride = cuda.gridDim.x * THREADS

    # ---- this thread's share: UNROLL independent loads in flight per step ----------------------
    acc = registers(UNROLL, dtype=float32)
    i = cuda.blockIdx.x * THREADS + tid
    while i + (UNROLL - 1) * stride < n:
        for u in unroll(UNROLL):
            acc[u] += x[i + u * stride]
        i += UNROLL * stride
    for u in unroll(UNROLL - 1):                     # fewer than UNROLL are left (no loop: LLVM
        if i < n:                                    # would divide 64-bit for its trip count)
            acc[u] += x[i]
        i += stride
    v = float32(0)
    for u in unroll(UNROLL):
        v += acc[u]

    # ---- this CTA's sum: warp shuffles, then the warps' sums ------------------------------------
    for k in unroll(5):
        v += cuda.shfl_down_sync(FULL_MASK, v, 16 >> k)
    if tid % 32 == 0:
        warp_sums[tid // 32] = v
    cuda.syncthreads()
    if tid == 0:
        for w in unroll(WARPS - 1):
            v += warp_sums[w + 1]
        warp_sums[0] = v

    # ---- this cluster's sum, over DSMEM -----------------------------------------------------------
    ptx.barrier_cluster_arrive()                     # every CTA's warp_sums[0] visible cluster-wide
    ptx.barrier_cluster_wait()
    if ptx.cluster_ctarank() == 0 and tid == 0:
        total = warp_sums[0]
        for r in range(1, ptx.cluster_nctarank()):
            total += ptx.ld_shared_cluster_f32(ptx.mapa_shared_cluster(ptx.addr(warp_sums, 0), r))
        partials[ptx.clusterid_x()] = total
    ptx.barrier_cluster_arrive()                     # no CTA leaves while rank 0 may still read it
    ptx.barrier_cluster_wait()


def finish_kernel(partials, count, out):
    """One block adds the clusters' partials (in float64) into out[0]."""
    sums = cuda.shared.array(THREADS, np.float64)
    tid = cuda.threadIdx.x
    v = 0.0
    i = tid
    while i < count:
        v += partials[i]
        i += THREADS
    sums[tid] = v
    cuda.syncthreads()
    s = THREADS // 2
    while s > 0:
        if tid < s:
            sums[tid] += sums[tid + s]
        cuda.syncthreads()
        s //= 2
    if tid == 0:
        out[0] = sums[0]


# ------------------------------------------------------------------------------------------------
# Host side
# ------------------------------------------------------------------------------------------------
_kernels: dict = {}


def _jit(name):
    if name not in _kernels:
        fn = {"pair": pair_sum, "sum": cluster_sum_kernel, "finish": finish_kernel}[name]
        _kernels[name] = jit(unrolled(fn))           # unrolled: a source file keyed for the disk cache
    return _kernels[name]


def pair_sums(inp, per_block: int, clusters: int, stream=0):
    """The chapter's program: ``out[c]`` = sum of the ``2 * per_block`` floats of cluster ``c``."""
    from ..host.launch import launch
    from .checks import as_device_array

    x = as_device_array("pair_sums", "inp", inp)
    out = cuda.device_array(clusters, np.float32, stream=stream)
    launch(_jit("pair"), 2 * clusters, THREADS, x.reshape(x.size), out, np.int32(per_block), cluster=2,
           stream=stream)
    return out


def cluster_sum(x, cluster_size: int = 2, ctas_per_sm: int = 4, stream=0, out=None):
    """Sum of all elements of the float32 device array ``x`` (any shape, contiguous), as a one-element
    float64 device array (``out`` when given): clusters of ``cluster_size`` CTAs combine over DSMEM, one block
    finishes. A repeated call with the same arrays and options reuses its launch plan (``asyncpipe.host.plans``:
    the two launches prepared, the clusters' partials kept), so it costs two launches and no checks; with ``out``
    not given, each call allocates its result and so builds a plan."""
    from ..host.plans import array_key, option_key, run_plan

    if out is None:
        out = cuda.device_array(1, np.float64, stream=stream)
    key = (array_key(x), array_key(out), *option_key(cluster_size, ctas_per_sm), id(stream) if stream else 0)
    run_plan(_plans, key, lambda: _plan(x, cluster_size, ctas_per_sm, stream, out))
    return out


_plans = PlanCache()


def _plan(x, cluster_size, ctas_per_sm, stream, out):
    """The checks, the clusters' partials and the two prepared launches of one problem (``_plans``)."""
    from ..errors import AsyncpipeError, check
    from ..host.launch import LaunchSequence, prepare_launch
    from .checks import as_device_array

    d = as_device_array("cluster_sum", "x", x)
    check(d.dtype == np.float32, "cluster_sum", "x must be float32", d.dtype)
    check(d.is_c_contiguous(), "cluster_sum", "x must be contiguous", f"strides {d.strides}")
    check(d.size > 0, "cluster_sum", "x must not be empty", d.shape)
    if not isinstance(cluster_size, (int, np.integer)) or not 1 <= cluster_size <= 8:
        raise AsyncpipeError("cluster_sum", "cluster_size must be 1..8 (portable cluster size)", repr(cluster_size))
    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    blocks = min(sms * ctas_per_sm, -(-d.size // THREADS))
    blocks = -(-blocks // cluster_size) * cluster_size              # whole clusters
    clusters = blocks // cluster_size
    partials = cuda.device_array(clusters, np.float32, stream=stream)
    total = prepare_launch(_jit("sum"), blocks, THREADS, d.reshape(d.size), np.int64(d.size), partials,
                           cluster=cluster_size, stream=stream)
    finish = prepare_launch(_jit("finish"), 1, THREADS, partials, np.int32(clusters), out, stream=stream)
    return LaunchSequence(total, finish, keep=(partials,))
