"""Kernel-side primitives: one function per PTX instruction form, one shim each.

Import as ``from asyncpipe import ptx`` and call inside ``@cuda.jit`` kernels::

    ptx.cp_async_cg_shared_global_16(ptx.addr(smem, i), ptx.addr(a, j))
    ptx.cp_async_commit_group()
    ptx.cp_async_wait_group(STAGES - 2)

Each primitive's docstring opens with its call line (argument names and types), then its PTX line,
the PTX ISA version, the minimum SM and who must execute it. ``REGISTRY`` lists them all; the modules
below hold them, one per shim file. ``INTRINSICS`` holds ``addr``, which is no shim.
``python -m asyncpipe primitives [FILTER]`` prints them with the SASS opcode their tests check.
"""

from importlib import import_module

from ._registry import REGISTRY, Intrinsic, Primitive, shim_dir, simulating

if not simulating():                # numba's inliner and lowering without their quadratic costs (unrolled kernels)
    from ..backend import numba_inline, numba_liveness, numba_lowering, numba_ssa

    numba_inline.install()
    numba_liveness.install()
    numba_lowering.install()
    numba_ssa.install()
from .address import ADDR, addr
from .tensor_map_type import tensormap, tensormap_ptr   # the numba types of a TensorMap argument and its addr

INTRINSICS = {ADDR.name: ADDR}    # kernel-side helpers that are no shim

MODULES = ("cp_async", "mbarrier", "fence", "bulk", "bulk_tensor", "cluster", "warp", "wgmma", "barrier", "convert", "special", "packed",
           "timer")

for _stem in MODULES:
    _mod = import_module(f"{__name__}.{_stem}")
    for _name, _p in REGISTRY.items():
        if _p.stem == _stem:
            globals()[_name] = getattr(_mod, _name)

__all__ = ["REGISTRY", "INTRINSICS", "Intrinsic", "Primitive", "addr", "tensormap", "tensormap_ptr", "shim_dir", "simulating", "MODULES", *REGISTRY]
