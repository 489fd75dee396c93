"""Clusters: SASS offline for every primitive, then the cluster barrier and DSMEM on the GPU."""

import functools
import re

import numpy as np
import pytest
from numba import cuda
from numba.cuda import types

from asyncpipe import ptx
from asyncpipe.host import launch
from tests.sass import assert_sass

u32 = types.uint32[::1]
CLUSTER_PRIMITIVES = sorted(name for name, p in ptx.REGISTRY.items() if p.stem == "cluster")
# The special registers, in the column order sreg_kernel writes them.
SREGS = {
    "cluster_ctarank": ptx.cluster_ctarank,
    "cluster_nctarank": ptx.cluster_nctarank,
    "clusterid_x": ptx.clusterid_x,
    "clusterid_y": ptx.clusterid_y,
    "clusterid_z": ptx.clusterid_z,
    "nclusterid_x": ptx.nclusterid_x,
    "nclusterid_y": ptx.nclusterid_y,
    "nclusterid_z": ptx.nclusterid_z,
    "cluster_ctaid_x": ptx.cluster_ctaid_x,
    "cluster_ctaid_y": ptx.cluster_ctaid_y,
    "cluster_ctaid_z": ptx.cluster_ctaid_z,
    "cluster_nctaid_x": ptx.cluster_nctaid_x,
    "cluster_nctaid_y": ptx.cluster_nctaid_y,
    "cluster_nctaid_z": ptx.cluster_nctaid_z,
}
BARRIERS = {
    "barrier_cluster_arrive": ptx.barrier_cluster_arrive,
    "barrier_cluster_arrive_relaxed": ptx.barrier_cluster_arrive_relaxed,
    "barrier_cluster_wait": ptx.barrier_cluster_wait,
}

# One row per DSMEM element type: numpy dtype, numba array type, load, store, poison.
DSMEM = {
    "u32": (np.uint32, types.uint32, ptx.ld_shared_cluster_u32, ptx.st_shared_cluster_u32, np.uint32(0xFFFFFFFF)),
    "f32": (np.float32, types.float32, ptx.ld_shared_cluster_f32, ptx.st_shared_cluster_f32, np.float32(np.nan)),
    "u64": (np.uint64, types.uint64, ptx.ld_shared_cluster_u64, ptx.st_shared_cluster_u64,
            np.uint64(0xFFFFFFFFFFFFFFFF)),
    "f64": (np.float64, types.float64, ptx.ld_shared_cluster_f64, ptx.st_shared_cluster_f64, np.float64(np.nan)),
}
THREADS = 128
PHASES = 3


# ---------------------------------------------------------------------------------------------
# Kernels. Blocks are numbered x fastest (as ranks are within a cluster); every thread of every
# CTA passes every cluster barrier.
# ---------------------------------------------------------------------------------------------
def make_exchange(dtype, ld):
    """Each CTA fills its shared memory with its row of src, then reads its neighbour's
    ((rank + 1) % n) through mapa + ld.shared::cluster into its row of dst."""

    def kernel(src, dst):
        smem = cuda.shared.array(THREADS, dtype)
        t = cuda.threadIdx.x
        bid = cuda.blockIdx.x + cuda.gridDim.x * (cuda.blockIdx.y + cuda.gridDim.y * cuda.blockIdx.z)
        smem[t] = src[bid, t]
        ptx.barrier_cluster_arrive()     # release: our smem is written ...
        ptx.barrier_cluster_wait()       # acquire: ... and so is every peer's
        peer = ptx.cluster_ctarank() + 1
        if peer == ptx.cluster_nctarank():   # (rank + 1) % n without a 64-bit division
            peer = 0
        dst[bid, t] = ld(ptx.mapa_shared_cluster(ptx.addr(smem, t), peer))
        ptx.barrier_cluster_arrive()     # no CTA exits while a peer may still read its smem
        ptx.barrier_cluster_wait()

    return kernel


def make_store(dtype, st, poison):
    """Each CTA poisons its shared memory, then writes its row of src into its neighbour's
    ((rank + 1) % n) through mapa + st.shared::cluster; after the barrier each CTA copies its
    own shared memory (written by its lower neighbour) into its row of dst."""

    def kernel(src, dst):
        smem = cuda.shared.array(THREADS, dtype)
        t = cuda.threadIdx.x
        bid = cuda.blockIdx.x + cuda.gridDim.x * (cuda.blockIdx.y + cuda.gridDim.y * cuda.blockIdx.z)
        smem[t] = poison
        ptx.barrier_cluster_arrive()     # every peer has started, and our poison lands before its store
        ptx.barrier_cluster_wait()
        peer = ptx.cluster_ctarank() + 1
        if peer == ptx.cluster_nctarank():
            peer = 0
        st(ptx.mapa_shared_cluster(ptx.addr(smem, t), peer), src[bid, t])
        ptx.barrier_cluster_arrive()     # release our remote store ...
        ptx.barrier_cluster_wait()       # ... acquire the one our lower neighbour made here
        dst[bid, t] = smem[t]

    return kernel


def barrier_kernel(flags, seen):
    """PHASES rounds on a 1-D grid of 1-D clusters: thread 0 of each CTA raises its flag for the
    round, and after arrive (release) + wait (acquire) every thread counts its cluster's raised
    flags. Then one relaxed arrive + wait before exit."""
    t = cuda.threadIdx.x
    bid = cuda.blockIdx.x
    rank = ptx.cluster_ctarank()
    n = ptx.cluster_nctarank()
    first = bid - rank                   # the cluster's CTAs are blocks first .. first + n - 1
    for phase in range(PHASES):
        if t == 0:
            flags[phase, bid] = phase + 1
        ptx.barrier_cluster_arrive()
        ptx.barrier_cluster_wait()
        count = 0
        for k in range(n):
            if flags[phase, first + k] == phase + 1:
                count += 1
        seen[phase, bid, t] = count
    ptx.barrier_cluster_arrive_relaxed()
    ptx.barrier_cluster_wait()


def sreg_kernel(out):
    """Thread 0 of every CTA writes its special registers into its row of out (SREGS order)."""
    if cuda.threadIdx.x == 0:
        bid = cuda.blockIdx.x + cuda.gridDim.x * (cuda.blockIdx.y + cuda.gridDim.y * cuda.blockIdx.z)
        out[bid, 0] = ptx.cluster_ctarank()
        out[bid, 1] = ptx.cluster_nctarank()
        out[bid, 2] = ptx.clusterid_x()
        out[bid, 3] = ptx.clusterid_y()
        out[bid, 4] = ptx.clusterid_z()
        out[bid, 5] = ptx.nclusterid_x()
        out[bid, 6] = ptx.nclusterid_y()
        out[bid, 7] = ptx.nclusterid_z()
        out[bid, 8] = ptx.cluster_ctaid_x()
        out[bid, 9] = ptx.cluster_ctaid_y()
        out[bid, 10] = ptx.cluster_ctaid_z()
        out[bid, 11] = ptx.cluster_nctaid_x()
        out[bid, 12] = ptx.cluster_nctaid_y()
        out[bid, 13] = ptx.cluster_nctaid_z()


def expected_sregs(grid, cluster):
    """What sreg_kernel writes for every block (linear id, x fastest), from numpy."""
    (gx, gy, gz), (cx, cy, cz) = grid, cluster
    z, y, x = (a.ravel() for a in np.meshgrid(np.arange(gz), np.arange(gy), np.arange(gx), indexing="ij"))
    lx, ly, lz = x % cx, y % cy, z % cz
    ones = np.ones_like(x)
    cols = [lx + cx * (ly + cy * lz), ones * cx * cy * cz, x // cx, y // cy, z // cz,
            ones * (gx // cx), ones * (gy // cy), ones * (gz // cz), lx, ly, lz, ones * cx, ones * cy, ones * cz]
    return np.stack(cols, axis=1).astype(np.uint32)


def neighbours(grid, cluster, shift=1):
    """For each block (linear id, x fastest): the linear id of the block of the same cluster whose
    rank is (rank + shift) % n, ranks counting x fastest inside the cluster."""
    (gx, gy, gz), (cx, cy, cz) = grid, cluster
    z, y, x = (a.ravel() for a in np.meshgrid(np.arange(gz), np.arange(gy), np.arange(gx), indexing="ij"))
    n = cx * cy * cz
    rank = (x % cx) + cx * ((y % cy) + cy * (z % cz))
    r = (rank + shift) % n
    px, py, pz = x - x % cx + r % cx, y - y % cy + (r // cx) % cy, z - z % cz + r // (cx * cy)
    return px + gx * (py + gy * pz)


def dim3(c):
    c = (c,) if isinstance(c, int) else tuple(c)
    return c + (1,) * (3 - len(c))


# ---------------------------------------------------------------------------------------------
# Offline: registry and shim agree, and every primitive's SASS
# ---------------------------------------------------------------------------------------------
def _shim_bodies():
    text = (ptx.shim_dir() / "cluster.cu").read_text()
    starts = [(m.group(1), m.start()) for m in re.finditer(r'extern "C" __device__ [\w ]+?\bap_(\w+)\(', text)]
    ends = [s for _, s in starts[1:]] + [len(text)]
    return {name: text[s:e] for (name, s), e in zip(starts, ends)}


def test_registry_matches_shim():
    bodies = _shim_bodies()
    assert sorted(bodies) == CLUSTER_PRIMITIVES
    for name in CLUSTER_PRIMITIVES:
        p = ptx.REGISTRY[name]
        opcode = p.ptx.split()[0].rstrip(";")
        assert opcode in bodies[name], (name, opcode)
        if "%" in p.ptx:   # a special register: '%%reg' inside the asm string
            assert p.ptx.split()[-1].rstrip(";").replace("%", "%%") in bodies[name], name
        assert p.sass, f"{name} names no SASS opcode"


def make_sreg(read):
    def kernel(out):
        out[0] = read()

    return kernel



@functools.lru_cache(maxsize=None)
def jitted(which, kind):
    """One compiled kernel per (exchange or store, element kind), shared by every cluster shape."""
    dtype, _, ld, st, poison = DSMEM[kind]
    return cuda.jit(make_exchange(dtype, ld) if which == "exchange" else make_store(dtype, st, poison))

@pytest.mark.sass
@pytest.mark.parametrize("name", sorted(SREGS))
def test_sreg_sass(name):
    p = ptx.REGISTRY[name]
    cubin = assert_sass(make_sreg(SREGS[name]), (u32,), has=p.sass)
    if name == "cluster_ctarank":
        assert "SR_CgaCtaId" in cubin.sass, cubin.sass
    if p.sass == ("S2UR",):    # clusterid / cluster_ctaid: computed from the CTA id
        assert "SR_CTAID" in cubin.sass, cubin.sass
    if p.sass == ("LDC",):     # the n* registers: read from the launch's constant bank, no special register
        assert not any(op.startswith(("S2R", "S2UR")) for op in cubin.opcodes), cubin.sass


def make_barrier(bar):
    def kernel(out):
        bar()
        out[0] = 1

    return kernel


@pytest.mark.sass
@pytest.mark.parametrize("name", sorted(BARRIERS))
def test_barrier_sass(name):
    lacks = ("CALL", "MEMBAR") if name == "barrier_cluster_arrive_relaxed" else ("CALL",)
    assert_sass(make_barrier(BARRIERS[name]), (u32,), has=ptx.REGISTRY[name].sass, lacks=lacks)


@pytest.mark.sass
def test_mapa_sass():
    def kernel(out, rank):
        smem = cuda.shared.array(THREADS, np.uint32)
        t = cuda.threadIdx.x
        out[t] = ptx.mapa_shared_cluster(ptx.addr(smem, t), rank[0])

    assert_sass(kernel, (u32, u32), has=ptx.REGISTRY["mapa_shared_cluster"].sass)


def make_ld(ld):
    def kernel(out, a):
        out[0] = ld(a[0])

    return kernel


def make_st(st):
    def kernel(v, a):
        st(a[0], v[0])

    return kernel


@pytest.mark.sass
@pytest.mark.parametrize("kind", sorted(DSMEM))
def test_ld_sass(kind):
    _, nbty, ld, _, _ = DSMEM[kind]
    op = ptx.REGISTRY[f"ld_shared_cluster_{kind}"].sass[0]
    cubin = assert_sass(make_ld(ld), (nbty[::1], u32), has=(op,), lacks=("CALL", "LDS"))
    assert op in cubin.opcodes, cubin.sass          # exactly this width
    assert "SR_SWINHI" in cubin.sass, cubin.sass    # a generic access into the shared window


@pytest.mark.sass
@pytest.mark.parametrize("kind", sorted(DSMEM))
def test_st_sass(kind):
    _, nbty, _, st, _ = DSMEM[kind]
    op = ptx.REGISTRY[f"st_shared_cluster_{kind}"].sass[0]
    cubin = assert_sass(make_st(st), (nbty[::1], u32), has=(op,), lacks=("CALL", "STS"))
    assert op in cubin.opcodes, cubin.sass
    assert "SR_SWINHI" in cubin.sass, cubin.sass


@pytest.mark.sass
@pytest.mark.parametrize("kind", sorted(DSMEM))
def test_gpu_kernels_sass(kind):
    """The GPU tests' kernels compile clean: shims inlined, no local memory, no 64-bit division call."""
    dtype, nbty, ld, st, poison = DSMEM[kind]
    arr = nbty[:, ::1]
    barrier_ops = ("UCGABAR_ARV", "UCGABAR_WAIT")
    assert_sass(make_exchange(dtype, ld), (arr, arr), has=(*barrier_ops, "PRMT", ptx.REGISTRY[f"ld_shared_cluster_{kind}"].sass[0]))
    assert_sass(make_store(dtype, st, poison), (arr, arr), has=(*barrier_ops, "PRMT", ptx.REGISTRY[f"st_shared_cluster_{kind}"].sass[0]))


@pytest.mark.sass
def test_barrier_kernel_sass():
    assert_sass(barrier_kernel, (types.int32[:, ::1], types.int32[:, :, ::1]), has=("UCGABAR_ARV", "UCGABAR_WAIT"))


@pytest.mark.sass
def test_sreg_kernel_sass():
    assert_sass(sreg_kernel, (types.uint32[:, ::1],), has=("S2R", "LDC"))


# ---------------------------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------------------------
CLUSTER_SHAPES = [2, 3, 4, 6, 8, (2, 2), (4, 2), (2, 2, 2)]


def _grid_for(cluster):
    c = dim3(cluster)
    return (c[0] * 3, c[1] * 2, c[2])      # 6 clusters: 3 along x, 2 along y


def _random(rng, dtype, shape):
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, np.iinfo(dtype).max, size=shape, dtype=dtype, endpoint=True)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("cluster", CLUSTER_SHAPES, ids=str)
def test_special_registers_gpu(cluster):
    grid = _grid_for(cluster)
    blocks = int(np.prod(grid))
    out = cuda.to_device(np.full((blocks, len(SREGS)), 0xFFFFFFFF, np.uint32))
    launch(cuda.jit(sreg_kernel), grid, 32, out, cluster=cluster)
    cuda.synchronize()
    np.testing.assert_array_equal(out.copy_to_host(), expected_sregs(grid, dim3(cluster)))


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8])
def test_barrier_gpu(n):
    blocks = n * 4
    flags = cuda.to_device(np.zeros((PHASES, blocks), np.int32))
    seen = cuda.to_device(np.full((PHASES, blocks, THREADS), -1, np.int32))
    launch(cuda.jit(barrier_kernel), blocks, THREADS, flags, seen, cluster=n)
    cuda.synchronize()
    np.testing.assert_array_equal(seen.copy_to_host(), np.full((PHASES, blocks, THREADS), n, np.int32))
    np.testing.assert_array_equal(flags.copy_to_host(), np.arange(1, PHASES + 1, dtype=np.int32)[:, None].repeat(blocks, 1))


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("kind", sorted(DSMEM))
@pytest.mark.parametrize("cluster", CLUSTER_SHAPES, ids=str)
def test_dsmem_exchange_gpu(kind, cluster, rng):
    dtype, _, ld, _, poison = DSMEM[kind]
    grid = _grid_for(cluster)
    blocks = int(np.prod(grid))
    src = _random(rng, dtype, (blocks, THREADS))
    dst = cuda.to_device(np.full((blocks, THREADS), poison, dtype))
    launch(jitted("exchange", kind), grid, THREADS, cuda.to_device(src), dst, cluster=cluster)
    cuda.synchronize()
    np.testing.assert_array_equal(dst.copy_to_host(), src[neighbours(grid, dim3(cluster), +1)])


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("kind", sorted(DSMEM))
@pytest.mark.parametrize("cluster", CLUSTER_SHAPES, ids=str)
def test_dsmem_store_gpu(kind, cluster, rng):
    dtype, _, _, st, poison = DSMEM[kind]
    grid = _grid_for(cluster)
    blocks = int(np.prod(grid))
    src = _random(rng, dtype, (blocks, THREADS))
    dst = cuda.to_device(np.full((blocks, THREADS), poison, dtype))
    launch(jitted("store", kind), grid, THREADS, cuda.to_device(src), dst, cluster=cluster)
    cuda.synchronize()
    # the CTA of rank r received the row of rank r - 1
    np.testing.assert_array_equal(dst.copy_to_host(), src[neighbours(grid, dim3(cluster), -1)])


# ---------------------------------------------------------------------------------------------
# ld_shared_f32: this CTA's own shared memory through a .shared::cta address computed once
# ---------------------------------------------------------------------------------------------
def own_load_kernel(src, dst):
    s = cuda.shared.array(THREADS, types.float32)
    t = cuda.threadIdx.x
    s[t] = src[cuda.blockIdx.x, t]
    cuda.syncthreads()
    base = ptx.cvta_to_shared_u32(ptx.addr(s, 0))
    dst[cuda.blockIdx.x, t] = ptx.ld_shared_f32(base + types.uint32(((t + 1) % THREADS) * 4))


@pytest.mark.sass
def test_ld_shared_sass():
    """An LDS on the 32-bit address: no generic load into the shared window, no call."""
    cubin = assert_sass(own_load_kernel, (types.float32[:, ::1], types.float32[:, ::1]), has=("LDS",),
                        lacks=("CALL", "LD.E"))
    assert ptx.REGISTRY["ld_shared_f32"].sass[0] in cubin.opcodes, cubin.sass


@pytest.mark.gpu
def test_ld_shared_gpu(rng):
    """Each thread reads its neighbour's word, in every CTA of the grid (each its own shared memory)."""
    src = rng.standard_normal((3, THREADS)).astype(np.float32)
    dst = cuda.to_device(np.full((3, THREADS), np.nan, np.float32))
    cuda.jit(own_load_kernel)[3, THREADS](cuda.to_device(src), dst)
    cuda.synchronize()
    np.testing.assert_array_equal(dst.copy_to_host(), np.roll(src, -1, axis=1))
