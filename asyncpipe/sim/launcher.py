"""Launching a kernel in the simulator: arguments as numba's simulator prepares them, the launch's
``cuda`` module swapped into the kernel's globals, the grid run cluster by cluster."""

from __future__ import annotations

import numpy as np

from ..spec.tensor_map import EncodedTensorMap
from . import config as sim_config
from .engine import Launch, run_launch


def _prepare(arg, retr, extensions):
    """One kernel argument as the kernel sees it (numba's simulator conventions): host arrays copied
    in and back out, device arrays wrapped for in-kernel indexing, tensor maps passed as they are."""
    from numba.cuda.simulator.args import ArgHint, InOut
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray, FakeWithinKernelCUDAArray

    for ext in extensions:
        _, arg = ext.prepare_args(None, arg, stream=0, retr=retr)
    if isinstance(arg, EncodedTensorMap):
        return arg
    if isinstance(arg, np.ndarray) and arg.ndim > 0:
        arg = InOut(arg).to_device(retr)
    elif isinstance(arg, ArgHint):
        arg = arg.to_device(retr)
    elif isinstance(arg, np.void):
        arg = FakeCUDAArray(arg)
    elif not isinstance(arg, FakeCUDAArray) and hasattr(arg, "__cuda_array_interface__"):
        from .numba_patch import as_cuda_array

        arg = as_cuda_array(arg)
    if isinstance(arg, FakeCUDAArray):
        return FakeWithinKernelCUDAArray(arg)
    return arg


def run_kernel(kernel, args, grid, block, cluster=None, shared_mem: int = 0, opt_in: bool = True):
    """Run ``kernel`` (a numba simulator kernel, or a plain function) on ``grid`` x ``block`` (3-tuples),
    optionally as clusters of ``cluster`` CTAs, with ``shared_mem`` bytes of dynamic shared memory;
    ``opt_in``: the launch set the attribute that allows more than 48 KB (``asyncpipe.host.launch``)."""
    from numba.cuda.simulator import kernel as simkernel
    from numba.cuda.simulator.kernelapi import swapped_cuda_module

    from .cuda_module import SimCudaModule

    fn = getattr(kernel, "fn", kernel)
    retr: list = []
    prepared = [_prepare(a, retr, getattr(kernel, "extensions", ())) for a in args]
    launch = Launch(fn, prepared, grid, block, cluster, shared_mem, sim_config.current(), opt_in=opt_in)
    module = SimCudaModule(launch)
    with simkernel._push_kernel_context(module), swapped_cuda_module(fn, module):
        run_launch(launch)
    for writeback in retr:
        writeback()
