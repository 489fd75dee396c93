"""The mbarrier instructions in the simulator (state and checks live in ``mbarrier_state``)."""

from __future__ import annotations

from ..arrays import shared_operand
from . import mbarrier_state as state
from .common import enter


def init(addr, count, api="mbarrier_init"):
    th = enter(api)
    state.init_at(th, shared_operand(th, api, addr, "addr"), count, api)


def arrive(addr, tx_count, api):
    th = enter(api)
    bar = state.use(th, shared_operand(th, api, addr, "addr"), api)
    if tx_count:
        bar.change_tx(th, int(tx_count), api)
    return state.arrive(th, bar, 1, api)


def expect_tx(addr, tx_count, api="mbarrier_expect_tx"):
    th = enter(api)
    bar = state.use(th, shared_operand(th, api, addr, "addr"), api)
    bar.change_tx(th, int(tx_count), api)
    th.sim.sched.progress += 1
    bar.try_complete(th)


def complete_tx(addr, tx_count, api="mbarrier_complete_tx"):
    th = enter(api)
    bar = state.use(th, shared_operand(th, api, addr, "addr"), api)
    state.complete_tx(bar, int(tx_count), th, api)


def wait(addr, phase_parity, mode, api):
    th = enter(api)
    bar = state.use(th, shared_operand(th, api, addr, "addr"), api)
    return state.wait(th, bar, phase_parity, api, mode)


def inval(addr, api="mbarrier_inval"):
    th = enter(api)
    state.inval(th, shared_operand(th, api, addr, "addr"), api)
