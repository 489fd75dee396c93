"""Thread block clusters: up to 8 CTAs (16 non-portable) that the hardware runs at once on one GPC,
can synchronise with one barrier, and can read and write each other's shared memory (distributed
shared memory, DSMEM). Launch a kernel as clusters with ``asyncpipe.host.launch(..., cluster=n)``.

``barrier_cluster_arrive`` then ``barrier_cluster_wait`` is the chapter's ``cluster.sync()``. The
special registers say where a CTA sits: ``cluster_ctarank`` (0 .. ``cluster_nctarank`` - 1) names it
for ``mapa``, ``cluster_ctaid_*`` is its position in the cluster's shape, ``clusterid_*`` the
cluster's position in the grid.

DSMEM: ``mapa_shared_cluster(addr(smem, i), rank)`` turns a pointer into this CTA's shared memory
into the 32-bit ``.shared::cluster`` address of the same variable in CTA ``rank``;
``ld_shared_cluster_*``/``st_shared_cluster_*`` read and write through it. A peer's shared memory
exists only while the peer runs: pass a cluster barrier after the last remote access and before any
CTA of the cluster exits. Before the first access, a cluster barrier also proves that the peer has
started (the CUDA programming guide asks for it).

What ptxas makes of them on sm_90a (read from the SASS by ``tests/ptx/test_cluster.py``):
- ``barrier.cluster.arrive`` (release): ``MEMBAR.ALL.GPU``, ``ERRBAR``, ``CGAERRBAR``, ``UCGABAR_ARV``;
  ``.relaxed``: ``UCGABAR_ARV`` alone; ``wait`` (acquire): ``UCGABAR_WAIT`` then ``CCTL.IVALL``.
  Both sit behind a run-time branch on a word of the launch's constant bank whose other side is a
  ``BAR.SYNC 0`` (apparently the no-cluster case: a CTA barrier; not measured).
- ``%cluster_ctarank`` is ``S2R SR_CgaCtaId``; the ``n*`` registers (``%cluster_nctarank``,
  ``%cluster_nctaid``, ``%nclusterid``) are ``LDC`` from the constant bank; ``%clusterid`` and
  ``%cluster_ctaid`` are computed from ``SR_CTAID`` (a division by the cluster shape).
- ``mapa`` is one ``PRMT`` (the target rank goes into bits 24..31 of the shared window offset);
  ``ld/st.shared::cluster`` are generic ``LD.E``/``ST.E`` with the shared window's high half from
  ``SR_SWINHI``.
"""

import numpy as np

from ..sim.prim import cluster as _sim
from ._registry import primitive

_ALL = "every non-exited thread of every CTA in the cluster"
_ANY = "any thread"
_SREG = "uint32()"


# ---------------------------------------------------------------------------------------------
# barrier.cluster
# ---------------------------------------------------------------------------------------------
@primitive("void()", ptx="barrier.cluster.arrive;", isa=78, sm=90, who=_ALL,
           sass=("MEMBAR.ALL.GPU", "UCGABAR_ARV"), debug=True)
def barrier_cluster_arrive():
    """Marks this thread's arrival at the cluster barrier without waiting. No ``.sem`` means
    ``.release``: this thread's memory accesses before the arrive are visible to every thread of the
    cluster that has passed the matching ``barrier_cluster_wait``.

    Every non-exited thread of every CTA in the cluster must arrive before any waiting thread is
    released; each thread arrives once per phase, then waits, and ``barrier_cluster_arrive`` followed
    by ``barrier_cluster_wait`` is the chapter's ``cluster.sync()``."""
    _sim.arrive(True, "barrier_cluster_arrive")


@primitive("void()", ptx="barrier.cluster.arrive.relaxed;", isa=80, sm=90, who=_ALL, sass=("UCGABAR_ARV",), debug=True)
def barrier_cluster_arrive_relaxed():
    """Marks this thread's arrival at the cluster barrier without waiting and without ordering
    memory (``.relaxed``): only the arrival itself is seen. Use it when the barrier only says "this
    CTA has started" (e.g. before a peer may write into our shared memory), not "my data is ready".

    Every non-exited thread of every CTA in the cluster must arrive before any waiting thread is
    released; each thread arrives once per phase, then waits with ``barrier_cluster_wait``."""
    _sim.arrive(False, "barrier_cluster_arrive_relaxed")


@primitive("void()", ptx="barrier.cluster.wait;", isa=78, sm=90, who=_ALL, sass=("UCGABAR_WAIT", "CCTL.IVALL"),
           debug=True)
def barrier_cluster_wait():
    """Waits until every non-exited thread of every CTA in the cluster has arrived at the cluster
    barrier. No ``.sem`` means ``.acquire``: after it, this thread sees the memory accesses that the
    arriving threads made before a (release) ``barrier_cluster_arrive``, in any CTA's shared memory.

    ``barrier_cluster_arrive`` followed by ``barrier_cluster_wait`` is the chapter's
    ``cluster.sync()``; a thread must arrive before it waits."""
    _sim.wait("barrier_cluster_wait")


# ---------------------------------------------------------------------------------------------
# Special registers
# ---------------------------------------------------------------------------------------------
@primitive(_SREG, ptx="mov.u32 d, %cluster_ctarank;", isa=78, sm=90, who=_ANY, sass=("S2R",))
def cluster_ctarank():
    """This CTA's rank in its cluster, 0 .. ``cluster_nctarank() - 1`` (x fastest, then y, then z):
    the ``target_cta`` that ``mapa_shared_cluster`` takes."""
    return _sim.sreg("cluster_ctarank")


@primitive(_SREG, ptx="mov.u32 d, %cluster_nctarank;", isa=78, sm=90, who=_ANY, sass=("LDC",))
def cluster_nctarank():
    """The number of CTAs in this cluster (the product of ``cluster_nctaid_x/y/z``)."""
    return _sim.sreg("cluster_nctarank")


@primitive(_SREG, ptx="mov.u32 d, %clusterid.x;", isa=78, sm=90, who=_ANY, sass=("S2UR",))
def clusterid_x():
    """This cluster's x position in the grid of clusters, 0 .. ``nclusterid_x() - 1``."""
    return _sim.sreg("clusterid_x")


@primitive(_SREG, ptx="mov.u32 d, %clusterid.y;", isa=78, sm=90, who=_ANY, sass=("S2UR",))
def clusterid_y():
    """This cluster's y position in the grid of clusters, 0 .. ``nclusterid_y() - 1``."""
    return _sim.sreg("clusterid_y")


@primitive(_SREG, ptx="mov.u32 d, %clusterid.z;", isa=78, sm=90, who=_ANY, sass=("S2UR",))
def clusterid_z():
    """This cluster's z position in the grid of clusters, 0 .. ``nclusterid_z() - 1``."""
    return _sim.sreg("clusterid_z")


@primitive(_SREG, ptx="mov.u32 d, %nclusterid.x;", isa=78, sm=90, who=_ANY, sass=("LDC",))
def nclusterid_x():
    """The number of clusters along x in the grid (grid blocks along x / cluster CTAs along x)."""
    return _sim.sreg("nclusterid_x")


@primitive(_SREG, ptx="mov.u32 d, %nclusterid.y;", isa=78, sm=90, who=_ANY, sass=("LDC",))
def nclusterid_y():
    """The number of clusters along y in the grid."""
    return _sim.sreg("nclusterid_y")


@primitive(_SREG, ptx="mov.u32 d, %nclusterid.z;", isa=78, sm=90, who=_ANY, sass=("LDC",))
def nclusterid_z():
    """The number of clusters along z in the grid."""
    return _sim.sreg("nclusterid_z")


@primitive(_SREG, ptx="mov.u32 d, %cluster_ctaid.x;", isa=78, sm=90, who=_ANY, sass=("S2UR",))
def cluster_ctaid_x():
    """This CTA's x position in its cluster, 0 .. ``cluster_nctaid_x() - 1``."""
    return _sim.sreg("cluster_ctaid_x")


@primitive(_SREG, ptx="mov.u32 d, %cluster_ctaid.y;", isa=78, sm=90, who=_ANY, sass=("S2UR",))
def cluster_ctaid_y():
    """This CTA's y position in its cluster, 0 .. ``cluster_nctaid_y() - 1``."""
    return _sim.sreg("cluster_ctaid_y")


@primitive(_SREG, ptx="mov.u32 d, %cluster_ctaid.z;", isa=78, sm=90, who=_ANY, sass=("S2UR",))
def cluster_ctaid_z():
    """This CTA's z position in its cluster, 0 .. ``cluster_nctaid_z() - 1``."""
    return _sim.sreg("cluster_ctaid_z")


@primitive(_SREG, ptx="mov.u32 d, %cluster_nctaid.x;", isa=78, sm=90, who=_ANY, sass=("LDC",))
def cluster_nctaid_x():
    """The number of CTAs along x in a cluster (the launch's cluster shape)."""
    return _sim.sreg("cluster_nctaid_x")


@primitive(_SREG, ptx="mov.u32 d, %cluster_nctaid.y;", isa=78, sm=90, who=_ANY, sass=("LDC",))
def cluster_nctaid_y():
    """The number of CTAs along y in a cluster."""
    return _sim.sreg("cluster_nctaid_y")


@primitive(_SREG, ptx="mov.u32 d, %cluster_nctaid.z;", isa=78, sm=90, who=_ANY, sass=("LDC",))
def cluster_nctaid_z():
    """The number of CTAs along z in a cluster."""
    return _sim.sreg("cluster_nctaid_z")


# ---------------------------------------------------------------------------------------------
# Distributed shared memory
# ---------------------------------------------------------------------------------------------
@primitive("uint32(voidptr, uint32)", ptx="mapa.shared::cluster.u32 d, a, target_cta;", isa=78, sm=90,
           who=_ANY, sass=("PRMT",))
def mapa_shared_cluster(addr, target_cta):
    """The ``.shared::cluster`` address of the variable at ``addr`` (``addr(smem, i)``: a generic
    pointer into this CTA's shared memory) in the CTA of rank ``target_cta`` of this cluster. Pass it
    to ``ld_shared_cluster_*``/``st_shared_cluster_*``. ``target_cta`` must be below
    ``cluster_nctarank()``; it may be this CTA's own rank."""
    return _sim.mapa(addr, target_cta)


_LD = "each thread, for its own access"


@primitive("uint32(uint32)", ptx="ld.shared::cluster.u32 d, [a];", isa=78, sm=90, who=_LD,
           sass=("LD.E",))
def ld_shared_cluster_u32(a):
    """Loads 4 bytes from the ``.shared::cluster`` address ``a`` (from ``mapa_shared_cluster``),
    4-byte aligned. The owner CTA's writes are seen after a cluster barrier that orders them."""
    return _sim.load(a, np.uint32, "ld_shared_cluster_u32")


@primitive("float32(uint32)", ptx="ld.shared::cluster.f32 d, [a];", isa=78, sm=90, who=_LD,
           sass=("LD.E",))
def ld_shared_cluster_f32(a):
    """Loads a float32 from the ``.shared::cluster`` address ``a``, 4-byte aligned."""
    return _sim.load(a, np.float32, "ld_shared_cluster_f32")


@primitive("uint64(uint32)", ptx="ld.shared::cluster.u64 d, [a];", isa=78, sm=90, who=_LD,
           sass=("LD.E.64",))
def ld_shared_cluster_u64(a):
    """Loads 8 bytes from the ``.shared::cluster`` address ``a``, 8-byte aligned."""
    return _sim.load(a, np.uint64, "ld_shared_cluster_u64")


@primitive("float64(uint32)", ptx="ld.shared::cluster.f64 d, [a];", isa=78, sm=90, who=_LD,
           sass=("LD.E.64",))
def ld_shared_cluster_f64(a):
    """Loads a float64 from the ``.shared::cluster`` address ``a``, 8-byte aligned."""
    return _sim.load(a, np.float64, "ld_shared_cluster_f64")


@primitive("float32(uint32)", ptx="ld.shared.f32 d, [a];", isa=20, sm=20, who=_LD, sass=("LDS",))
def ld_shared_f32(a):
    """Loads a float32 from this CTA's shared memory at the 32-bit ``.shared::cta`` address ``a`` (from
    ``cvta_to_shared_u32``, computed once), 4-byte aligned: an ``LDS`` whose address needs no generic window. The
    simulator refuses a misaligned address or one outside the CTA's shared memory; on the GPU, as with any
    ``ld.shared``, such an address faults or reads another word."""
    return _sim.load_own(a, np.float32, "ld_shared_f32")


@primitive("void(uint32, uint32)", ptx="st.shared::cluster.u32 [a], v;", isa=78, sm=90, who=_LD,
           sass=("ST.E",))
def st_shared_cluster_u32(a, v):
    """Stores 4 bytes to the ``.shared::cluster`` address ``a``, 4-byte aligned. The owner CTA sees
    it after a cluster barrier (release arrive here, acquire wait there)."""
    _sim.store(a, v, np.uint32, "st_shared_cluster_u32")


@primitive("void(uint32, float32)", ptx="st.shared::cluster.f32 [a], v;", isa=78, sm=90, who=_LD,
           sass=("ST.E",))
def st_shared_cluster_f32(a, v):
    """Stores a float32 to the ``.shared::cluster`` address ``a``, 4-byte aligned."""
    _sim.store(a, v, np.float32, "st_shared_cluster_f32")


@primitive("void(uint32, uint64)", ptx="st.shared::cluster.u64 [a], v;", isa=78, sm=90, who=_LD,
           sass=("ST.E.64",))
def st_shared_cluster_u64(a, v):
    """Stores 8 bytes to the ``.shared::cluster`` address ``a``, 8-byte aligned."""
    _sim.store(a, v, np.uint64, "st_shared_cluster_u64")


@primitive("void(uint32, float64)", ptx="st.shared::cluster.f64 [a], v;", isa=78, sm=90, who=_LD,
           sass=("ST.E.64",))
def st_shared_cluster_f64(a, v):
    """Stores a float64 to the ``.shared::cluster`` address ``a``, 8-byte aligned."""
    _sim.store(a, v, np.float64, "st_shared_cluster_f64")
