"""mbarrier: a 64-bit barrier object in shared memory that counts arrivals and asynchronous
transactions, phase after phase (the chapter's producer/consumer handshake).

Declare it as an element of ``cuda.shared.array(n, np.uint64)`` and pass ``addr(bars, i)``. One
thread initialises it with the number of arrivals a phase needs (``mbarrier_init``), then the block
passes a barrier (``cuda.syncthreads()``). When TMA (the async proxy) or other CTAs of the cluster
will signal it, the initialising thread first publishes the init with a fence:
``fence_mbarrier_init_release_cluster`` (CUTLASS's choice; other CTAs then need a cluster barrier) or,
for TMA within one CTA, ``fence_proxy_async_shared_cta`` (the CUDA programming guide's).
A phase completes when the pending arrival count reaches zero *and* the tx-count (bytes announced with
``expect_tx`` and not yet delivered by ``complete_tx``) is zero; the barrier then moves to the next
phase by itself.

Waits name a phase by its parity (phase number & 1). Only two phases can be asked about: the current,
incomplete one (the answer is 0) and the one just before it (the answer is 1). A freshly initialised
barrier is in phase 0, so a wait on parity 1 returns at once: that is why a producer starts waiting on
its "empty" barriers with parity 1 and a consumer on its "full" barriers with parity 0. For each
phase, at least one wait must return 1 before any arrival in the next phase: a thread arrives, waits,
and only then arrives again.
"""

from ..sim.prim import cluster as _sim_cluster
from ..sim.prim import mbarrier as _sim
from ._registry import primitive

_BAR = "void(voidptr, uint32)"
_WAIT = "uint32(voidptr, uint32)"
_ONE = "one thread per barrier, before any other thread uses it"
_ARRIVER = "each arriving thread (the count given to mbarrier_init says how many per phase)"
_PRODUCER = "the thread that issues the asynchronous copies of the phase (one thread)"
_WAITER = "any thread of the CTA that owns the barrier"


@primitive(_BAR, ptx="mbarrier.init.shared::cta.b64 [addr], count;", isa=78, sm=80, who=_ONE, sass=("SYNCS.EXCH.64",))
def mbarrier_init(addr, count):
    """Sets the barrier at ``addr`` to phase 0, expecting ``count`` (1 .. 2**20 - 1) arrivals per
    phase, with a tx-count of 0. Other threads may use it only after a block barrier; TMA and other
    CTAs only after this thread's ``fence_mbarrier_init_release_cluster`` (see the module doc) and a
    block or cluster barrier. Initialising a location that holds a valid barrier is undefined:
    ``mbarrier_inval`` it first."""
    _sim.init(addr, count)


@primitive("uint64(voidptr)", ptx="mbarrier.arrive.shared::cta.b64 state, [addr];", isa=78, sm=80, who=_ARRIVER,
           sass=("SYNCS.ARRIVE.TRANS64.A1T0",))
def mbarrier_arrive(addr):
    """One arrival on the barrier at ``addr`` (release semantics at CTA scope: this thread's earlier
    writes are visible to a thread whose wait then returns 1). Returns an opaque ``state`` token that
    names the phase arrived in; its bits are implementation-defined."""
    return _sim.arrive(addr, 0, "mbarrier_arrive")


@primitive("uint64(voidptr, uint32)", ptx="mbarrier.arrive.expect_tx.shared::cta.b64 state, [addr], tx_count;",
           isa=80, sm=90, who=_PRODUCER, sass=("SYNCS.ARRIVE.TRANS64",))
def mbarrier_arrive_expect_tx(addr, tx_count):
    """Raises the current phase's tx-count by ``tx_count`` bytes, then arrives once (release, CTA
    scope): the producer's "I have issued the copies of this stage, expect this many bytes". The phase
    cannot complete before the copies' ``complete_tx`` bring the tx-count back to zero. Returns the
    opaque ``state`` token."""
    return _sim.arrive(addr, tx_count, "mbarrier_arrive_expect_tx")


@primitive(_BAR, ptx="mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [addr], tx_count;", isa=80, sm=90,
           who=_PRODUCER, sass=("SYNCS.ARRIVE.TRANS64.RED.A0TR",))
def mbarrier_expect_tx(addr, tx_count):
    """Raises the current phase's tx-count by ``tx_count`` bytes without arriving (relaxed: orders no
    memory). Use it when one stage's bytes are announced in several pieces, or by a thread that does
    not count as an arrival."""
    _sim.expect_tx(addr, tx_count)


@primitive(_BAR, ptx="mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [addr], tx_count;", isa=80, sm=90,
           who="any thread (it stands in for an asynchronous copy that delivered tx_count bytes)",
           sass=("SYNCS.ARRIVE.TRANS64.RED.A0TX",))
def mbarrier_complete_tx(addr, tx_count):
    """Lowers the current phase's tx-count by ``tx_count`` bytes, as a finished TMA or bulk copy does,
    without copying anything (relaxed: orders no memory); the phase completes here if that was all it
    waited for. For tests and for producers that deliver data with ordinary stores."""
    _sim.complete_tx(addr, tx_count)


@primitive(_WAIT, ptx="mbarrier.try_wait.parity.shared::cta.b64 p, [addr], phase_parity;", isa=78, sm=90,
           who=_WAITER, sass=("SYNCS.PHASECHK.TRANS64.TRYWAIT",), debug=True)
def mbarrier_try_wait_parity(addr, phase_parity):
    """One attempt to see the phase of parity ``phase_parity`` (0 or 1) complete: returns 1 if it has,
    0 if it has not yet (the hardware may first suspend the thread for a while). With 1 it acquires
    (CTA scope) what the arriving threads released. Ask only about the current phase (answer 0 until
    it completes) or the one just before it (answer 1)."""
    return _sim.wait(addr, phase_parity, "poll", "mbarrier_try_wait_parity")


@primitive(_WAIT, ptx="mbarrier.test_wait.parity.shared::cta.b64 p, [addr], phase_parity;", isa=78, sm=80,
           who=_WAITER, sass=("SYNCS.PHASECHK.TRANS64",), debug=True)
def mbarrier_test_wait_parity(addr, phase_parity):
    """As ``mbarrier_try_wait_parity`` but never suspends: tests once and returns 1 (the phase of
    parity ``phase_parity`` has completed, with acquire semantics) or 0."""
    return _sim.wait(addr, phase_parity, "poll", "mbarrier_test_wait_parity")


@primitive(_BAR, ptx="mbarrier.try_wait.parity.shared::cta.b64 p, [addr], phase_parity; (repeated until p)",
           isa=78, sm=90, who=_WAITER, sass=("SYNCS.PHASECHK.TRANS64.TRYWAIT",), debug=True)
def mbarrier_wait_parity(addr, phase_parity):
    """Blocks until the phase of parity ``phase_parity`` has completed: ``mbarrier_try_wait_parity``
    in a loop. It returns only when that phase completes, so every arrival and byte the phase expects
    must come (or the kernel hangs)."""
    _sim.wait(addr, phase_parity, "block", "mbarrier_wait_parity")


@primitive("void(voidptr)", ptx="mbarrier.inval.shared::cta.b64 [addr];", isa=78, sm=80,
           who="one thread per barrier, once no thread uses it any more", sass=("SYNCS.CCTL.IV",))
def mbarrier_inval(addr):
    """Invalidates the barrier at ``addr`` so that its 8 bytes may be reused, as another barrier
    (``mbarrier_init`` again) or as data. No thread may still use it: pass a block barrier first."""
    _sim.inval(addr)


@primitive("void(uint32)", ptx="mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote_addr];", isa=80,
           sm=90, who="each arriving thread, in any CTA of the cluster",
           sass=("SYNCS.ARRIVE.TRANS64.RED.A1T0", "MEMBAR.ALL.GPU"))
def mbarrier_arrive_release_cluster_shared_cluster(remote_addr):
    """One arrival, with release semantics at cluster scope, on a barrier that may live in another CTA
    of the cluster: ``remote_addr`` is its 32-bit ``.shared::cluster`` address from
    ``mapa_shared_cluster(addr(bars, i), rank)``. Every earlier memory access of the thread is ordered
    before the arrival for the whole cluster: data this thread wrote (into its own or a peer's shared
    memory) is visible to whoever acquires the barrier's phase. The price: ptxas fences with
    ``MEMBAR.ALL.GPU``, which waits for the thread's outstanding global stores too. To hand back a
    buffer that was only read, ``mbarrier_arrive_shared_cluster`` is enough. No state is returned (a
    remote barrier's phase cannot be waited on from here)."""
    _sim_cluster.arrive_remote(remote_addr, "mbarrier_arrive_release_cluster_shared_cluster")


@primitive("void(uint32)", ptx="mbarrier.arrive.shared::cluster.b64 _, [remote_addr];", isa=80,
           sm=90, who="each arriving thread, in any CTA of the cluster",
           sass=("SYNCS.ARRIVE.TRANS64.RED.A1T0",))
def mbarrier_arrive_shared_cluster(remote_addr):
    """One arrival on a barrier that may live in another CTA of the cluster (``remote_addr`` from
    ``mapa_shared_cluster``), with the default semantics, release at CTA scope: a bare ``SYNCS.ARRIVE``,
    no fence. This is how a consumer hands a ring slot back to a producer CTA once its reads of the slot
    are complete (loaded values in registers, or ``wgmma_wait_group`` returned): nothing it wrote needs
    publishing. Data written for a peer needs ``mbarrier_arrive_release_cluster_shared_cluster``."""
    _sim_cluster.arrive_remote(remote_addr, "mbarrier_arrive_shared_cluster")
