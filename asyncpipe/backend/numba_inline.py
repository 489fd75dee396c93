"""numba-cuda's inliner without its per-block copies of the callee's scope.

``inline="always"`` device functions are inlined at numba's IR level (``InlineWorker.inline_ir``). Its
``copy_ir`` deep-copies the callee's blocks one by one, each with a fresh memo, and every block refers to the
function's ``Scope``, which holds every variable of the callee: the scope is copied once per block, blocks x
variables in all. For the wgmma GEMM's unrolled epilogue (258 blocks, 4645 variables) that was 4 s of a
10.5 s cold compile on a 2-core machine (bench/compile_experiments.md). Here the blocks of one copy share
one memo, so the scope is copied once per copy, as a deep copy of the whole IR would: the cubin is the same
(opcode sequence), the compile 6.5 s (TMA epilogue: 9.2 -> 5.8 s). ``install`` is idempotent;
``asyncpipe.ptx`` calls it on import (the GPU backend only: the simulator runs no numba compiler).
"""

from __future__ import annotations

import copy as _copy


class _InlinerCopy:
    """The ``copy`` module as numba-cuda's inliner sees it: ``deepcopy(block)`` without a memo shares one memo
    among the consecutive blocks of one IR (one scope); a block already in that memo (the same IR copied
    again) or a block of another scope starts a fresh one. Everything else is the ``copy`` module."""

    def __init__(self, ir_block):
        self._block_type = ir_block
        self._scope = None
        self._memo = None

    def __getattr__(self, name):
        return getattr(_copy, name)

    def deepcopy(self, x, memo=None):
        if memo is not None or not isinstance(x, self._block_type):
            return _copy.deepcopy(x, memo)
        if self._memo is None or self._scope is not x.scope or id(x) in self._memo:
            self._scope, self._memo = x.scope, {}
        return _copy.deepcopy(x, self._memo)


def install() -> None:
    from numba.cuda.core import inline_closurecall, ir

    if not isinstance(inline_closurecall.copy, _InlinerCopy):
        inline_closurecall.copy = _InlinerCopy(ir.Block)


__all__ = ["install"]
