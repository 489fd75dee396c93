"""numba-cuda's lowering without its quadratic search for singly assigned variables.

Before lowering a kernel, ``Lower._find_singly_assigned_variable`` picks the variables assigned once, in one block,
and used only there (those get no stack slot). For each candidate it scans every statement of its block again,
so its cost is candidates x block length: for an unrolled kernel with blocks of thousands of statements that is
most of lowering (FlashAttention's hd 128 kernel: 18.5 of 100 profiled seconds; bench/compile_experiments.md).
Here each block's assignments are counted once, by target name; the set found is the same (the test compares
it with numba-cuda's own on real kernels). ``install`` is idempotent; ``asyncpipe.ptx`` calls it on import (the
GPU backend only: the simulator runs no numba compiler).
"""

from __future__ import annotations

from collections import Counter, defaultdict


def find_singly_assigned_variable(self) -> None:
    """``Lower._find_singly_assigned_variable`` in time linear in the function's statements."""
    from numba.cuda import lowering
    from numba.cuda.core import ir

    func_ir = self.func_ir
    blocks = func_ir.blocks
    sav = set()
    if not func_ir.func_id.is_generator:
        use_defs = lowering.compute_use_defs(blocks)
        alloca_vars = lowering.must_use_alloca(blocks)
        defined_in = defaultdict(set)
        for blk, names in use_defs.defmap.items():
            for var in names:
                defined_in[var].add(blk)
        used_in = defaultdict(set)
        for blk, names in use_defs.usemap.items():
            for var in names:
                used_in[var].add(blk)
        assigned: dict = {}                    # block label -> Counter of the names its statements assign
        for var, where in defined_in.items():
            if var in alloca_vars or len(where) != 1 or used_in.get(var):
                continue
            [blk] = where
            counts = assigned.get(blk)
            if counts is None:
                counts = assigned[blk] = Counter(stmt.target.name
                                                 for stmt in self.blocks[blk].find_insts(ir.assign_types))
            if counts[var] == 1:
                sav.add(var)
    self._singly_assigned_vars = sav
    self._blk_local_varmap = {}


def install() -> None:
    from numba.cuda import lowering

    if lowering.Lower._find_singly_assigned_variable is not find_singly_assigned_variable:
        lowering.Lower._numba_find_singly_assigned_variable = lowering.Lower._find_singly_assigned_variable
        lowering.Lower._find_singly_assigned_variable = find_singly_assigned_variable


__all__ = ["find_singly_assigned_variable", "install"]
