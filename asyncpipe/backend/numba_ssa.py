"""numba-cuda's SSA reconstruction, visiting only the blocks that mention each variable.

``reconstruct_ssa`` fixes one SSA-violating variable (assigned more than once, or used where no single definition
dominates) at a time, and for each it rewrites every block of the function twice: once to give each assignment
a fresh name, once to point each use at its reaching definition. Its cost is violators x statements: for an
unrolled kernel with many reassigned scalars (FlashAttention's running maxima and sums, loop counters) that was
9.5 of 55 profiled seconds of the hd 256 causal kernel's cold compile (bench/compile_experiments.md). A block that
neither assigns nor uses the variable comes out of both rewrites unchanged, so here each variable's two rewrites
visit only the blocks that mention it, in the same order, with numba-cuda's own handlers: the same fresh names, the
same phi nodes (created as the uses are met, at the same places), the same IR. Blocks a variable does not mention
keep their objects; a block that gains phi nodes is copied first, as numba-cuda copies every block. ``install`` is
idempotent; ``asyncpipe.ptx`` calls it on import (the GPU backend only: the simulator runs no numba compiler).
"""

from __future__ import annotations

from collections import defaultdict


def _mentions(blocks, cache_list_vars) -> tuple[dict, dict]:
    """``{name: [labels]}`` of the blocks that assign each variable and of those that use it (as the handlers
    read them: an assignment's value, or the whole of any other statement), each in block order."""
    from numba.cuda.core import ir

    defs, uses = defaultdict(list), defaultdict(list)
    for label, blk in blocks.items():
        assigned, used = set(), set()
        for stmt in blk.body:
            if isinstance(stmt, ir.assign_types):
                assigned.add(stmt.target.name)
                rhs = stmt.value
                if isinstance(rhs, ir.inst_types):
                    used.update(v.name for v in cache_list_vars.get(rhs))
                elif isinstance(rhs, ir.var_types):
                    used.add(rhs.name)
            else:
                used.update(v.name for v in cache_list_vars.get(stmt))
        for name in assigned:
            defs[name].append(label)
        for name in used:
            uses[name].append(label)
    return defs, uses


def _rewrite(blocks, labels, states, handler):
    """numba-cuda's ``_run_block_rewrite`` over ``labels`` only: a new dict in which those blocks are rewritten
    copies and the others the same objects."""
    from numba.cuda.core import ir, ssa

    out = dict(blocks)
    for label in labels:
        blk = blocks[label]
        states["label"] = label
        states["block"] = blk
        new = ir.Block(scope=blk.scope, loc=blk.loc)
        new.body = list(ssa._run_ssa_block_pass(states, blk, handler))
        out[label] = new
    return out


def run_ssa(blocks):
    """``numba.cuda.core.ssa._run_ssa`` in time linear in the statements that mention each violating variable."""
    from numba.cuda.core import errors, ir, ssa
    from numba.cuda.core.analysis import compute_cfg_from_blocks

    if not blocks:
        return {}
    cfg = compute_cfg_from_blocks(blocks)
    df_plus = ssa._iterated_domfronts(cfg)
    violators = ssa._find_defs_violators(blocks, cfg)
    cache_list_vars = ssa._CacheListVars()
    def_blocks, use_blocks = _mentions(blocks, cache_list_vars)
    for varname in violators:
        # the fresh names of its assignments (ssa._fresh_vars)
        states = ssa._make_states(blocks)
        states["varname"] = varname
        states["defmap"] = defmap = defaultdict(list)
        blocks = _rewrite(blocks, def_blocks.get(varname, ()), states, ssa._FreshVarHandler())
        # each use to its reaching definition, phi nodes where the iterated dominance frontier needs them
        # (ssa._fix_ssa_vars)
        states = ssa._make_states(blocks)
        states.update(varname=varname, defmap=defmap, phimap=defaultdict(list), cfg=cfg,
                      phi_locations=ssa._compute_phi_locations(df_plus, defmap))
        phimap = states["phimap"]
        blocks = _rewrite(blocks, use_blocks.get(varname, ()), states, ssa._FixSSAVars(cache_list_vars))
        for label, philist in phimap.items():
            if not philist:
                continue
            blk = blocks[label]
            new = ir.Block(scope=blk.scope, loc=blk.loc)
            new.body = philist + blk.body
            blocks[label] = new
    if compute_cfg_from_blocks(blocks) != cfg:
        raise errors.CompilerError("CFG mutated in SSA pass")
    return blocks


def install() -> None:
    from numba.cuda.core import ssa

    if ssa._run_ssa is not run_ssa:
        ssa._numba_run_ssa = ssa._run_ssa
        ssa._run_ssa = run_ssa


__all__ = ["run_ssa", "install"]
