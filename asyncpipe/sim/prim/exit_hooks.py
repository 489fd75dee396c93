"""What the simulator checks and updates when a thread, then a whole CTA, exits."""

from __future__ import annotations

from ..errors import TxCountError, UnwaitedAsyncReadError
from ..where import describe_site, describe_thread
from . import async_ops, cluster, cp_async


def thread_exits(th):
    """Before ``th`` counts as exited (a check here fails the launch at the thread's last line)."""
    async_ops.check_exit(th)
    cp_async.check_exit(th)
    if th.wgmma is not None:
        from . import wgmma

        wgmma.check_exit(th)


def after_exit(th):
    cluster.thread_exited(th.sim)


def cta_exits(cta):
    sim = cta.sim
    if sim.check_txcount:
        for bar in sim.mbarriers.values():
            if bar.cta is cta and bar.valid and bar.tx < 0:
                raise TxCountError(
                    "CTA exit", "a phase must not receive more bytes than expect_tx announced (expect_tx announced "
                    "fewer bytes than the copies deliver)", f"the {bar.name()} ends in {bar.state()}{bar.announced_text()}",
                    "PTX ISA, mbarrier", where=f"when the last thread of block {tuple(cta.blockIdx)} exits",
                    seed=sim.seed)
    if sim.check_async:                 # after the tx-count: a surplus copy lands in a phase nobody waits for
        _check_loads_waited(cta)
    cluster.check_cta_exit(cta)
    for key in [k for k, b in sim.mbarriers.items() if b.cta is cta]:
        sim.mbarriers[key].valid = False


def _check_loads_waited(cta):
    """Every TMA or bulk load into the CTA's shared memory must have been waited for when its last thread
    exits: some thread of the CTA acquired the mbarrier phase the load completes in (its wait returned, or a
    barrier came after such a wait). A load still in flight is refused; so is one that landed when nothing
    orders its phase before the exit, since under another interleaving it would still be in flight: the
    verdict does not depend on the seed."""
    sim = cta.sim
    for op in sim.inflight:
        for mem, _, bar in getattr(op, "targets", ()):
            if mem is cta.smem:
                phase = next((p for o, p in bar.inflight if o is op), bar.phase)
                raise _unwaited_load(cta, op, bar, phase, "it is still in flight")
    if not sim.clocks_on:
        return
    rows = [t.vci for t in cta.threads]
    for bar in sim.mbarriers.values():
        if bar.cta is cta and bar.last_load is not None and bar.column is not None:
            op, phase = bar.last_load
            if sim.vc[rows, bar.column].max() <= phase:
                raise _unwaited_load(cta, op, bar, phase, "it landed, but under another interleaving it would "
                                     "still be in flight")


def _unwaited_load(cta, op, bar, phase, state):
    return UnwaitedAsyncReadError(
        "CTA exit", "a CTA must not exit before one of its threads has waited for the mbarrier phase that each TMA "
        "or bulk load into its shared memory completes in (until then the copy may still write it)",
        f"block {tuple(cta.blockIdx)} exits and no thread of it waited for phase {phase} (parity {phase & 1}) of the "
        f"{bar.name()}, which the {op.kind} issued by {describe_thread(op.thread)} at {describe_site(op.site)} "
        f"completes in; {state}", "PTX ISA, cp.async.bulk; mbarrier",
        where=f"when the last thread of block {tuple(cta.blockIdx)} exits", seed=cta.sim.seed)
