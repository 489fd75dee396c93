"""What the simulator checks and updates when a thread, then a whole CTA, exits."""

from __future__ import annotations

from ..errors import TxCountError, UnwaitedAsyncReadError
from ..where import describe_site
from . import async_ops, cluster


def thread_exits(th):
    """Before ``th`` counts as exited (a check here fails the launch at the thread's last line)."""
    async_ops.check_exit(th)
    if th.wgmma is not None:
        from . import wgmma

        wgmma.check_exit(th)


def after_exit(th):
    cluster.thread_exited(th.sim)


def cta_exits(cta):
    sim = cta.sim
    if sim.check_async:
        for op in sim.inflight:
            for mem, _, bar in getattr(op, "targets", ()):
                if mem is cta.smem:
                    raise UnwaitedAsyncReadError(
                        "CTA exit", "a CTA must not exit while a TMA copy still writes its shared memory",
                        f"block {tuple(cta.blockIdx)} exits with the {op.kind} issued at {describe_site(op.site)} "
                        f"in flight (it completes on the {bar.name()})", "PTX ISA, cp.async.bulk",
                        where=f"when the last thread of block {tuple(cta.blockIdx)} exits", seed=sim.seed)
    if sim.check_txcount:
        for bar in sim.mbarriers.values():
            if bar.cta is cta and bar.valid and bar.tx < 0:
                raise TxCountError(
                    "CTA exit", "a phase must not receive more bytes than expect_tx announced (expect_tx announced "
                    "fewer bytes than the copies deliver)", f"the {bar.name()} ends in {bar.state()}{bar.announced_text()}",
                    "PTX ISA, mbarrier", where=f"when the last thread of block {tuple(cta.blockIdx)} exits",
                    seed=sim.seed)
    cluster.check_cta_exit(cta)
    for key in [k for k, b in sim.mbarriers.items() if b.cta is cta]:
        sim.mbarriers[key].valid = False
