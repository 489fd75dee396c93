"""What asyncpipe adds to numba's CUDA simulator when it runs kernels (``install``).

numba's simulator runs one block at a time with no warps, clusters or asynchrony; asyncpipe keeps its
API (``cuda.jit``, device arrays, ``kernel[grid, block](...)``) and its ``cuda`` module swap, and
changes, once, at import of ``asyncpipe.ptx`` under ``NUMBA_ENABLE_CUDASIM=1``:

- a kernel launch (``FakeCUDAKernel.__call__``) runs in asyncpipe's engine;
- simulator device arrays expose ``__cuda_array_interface__`` (a host address: simulated device
  memory is host memory) and ``device_ctypes_pointer``, and ``numba.cuda`` gets ``is_cuda_array``
  and ``as_cuda_array``, so host code written for the GPU (tensor maps, alignment checks) runs;
- the simulated device answers the attributes host code reads (``MULTIPROCESSOR_COUNT``...) as an
  sm_90 GPU with ``ASYNCPIPE_SIM_SMS`` SMs;
- ``cuda.jit`` accepts (and ignores) the code-generation options the simulator does not know
  (``launch_bounds``, ``lineinfo``, ``max_registers``);
- ``numba.cuda.bf16`` gets the fp32 -> bfloat16 conversions kernels use (``asyncpipe.sim.bf16``).
"""

from __future__ import annotations

import ctypes

import numpy as np

_installed = False
IGNORED_JIT_OPTIONS = ("launch_bounds", "lineinfo", "max_registers")


def _cai(self):
    a = self._ary
    return {"shape": tuple(a.shape), "strides": None if a.flags.c_contiguous else tuple(a.strides),
            "typestr": a.dtype.str, "data": (a.__array_interface__["data"][0], False), "version": 3}


def is_cuda_array(obj) -> bool:
    return hasattr(obj, "__cuda_array_interface__")


def as_cuda_array(obj, sync=True):
    """A simulator device array over the (host) memory ``obj``'s CUDA array interface describes."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    if isinstance(obj, FakeCUDAArray):
        return obj
    cai = obj.__cuda_array_interface__
    dt = np.dtype(cai["typestr"])
    shape = tuple(cai["shape"])
    strides = cai.get("strides")
    if strides is None:
        strides, step = [], dt.itemsize
        for n in reversed(shape):
            strides.insert(0, step)
            step *= n
    span = sum((n - 1) * s for n, s in zip(shape, strides)) + dt.itemsize if all(shape) else 0
    raw = (ctypes.c_uint8 * max(span, 1)).from_address(cai["data"][0]) if span else bytearray(1)
    base = np.frombuffer(raw, np.uint8)
    view = np.lib.stride_tricks.as_strided(base.view(dt) if span else np.zeros(0, dt), shape=shape,
                                           strides=tuple(strides))
    out = FakeCUDAArray(view)
    out._asyncpipe_owner = obj
    return out


def _device_getattr(self, name):
    """``FakeCUDADevice.__getattr__``: the simulated GPU's attributes (see ``asyncpipe.sim.device``)."""
    from .device import attribute

    return attribute(name)


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    import numba.cuda as cuda_pkg
    from numba.cuda.simulator import kernel as simkernel
    from numba.cuda.simulator.cudadrv import devicearray, devices

    original_call = simkernel.FakeCUDAKernel.__call__

    def __call__(self, *args):
        if self._device or simkernel._get_kernel_context() is not None:
            return original_call(self, *args)
        from .host import check_plain_launch
        from .launcher import run_kernel

        grid, block = check_plain_launch(self.grid_dim, self.block_dim, self.dynshared_size, self)
        return run_kernel(self, args, grid, block, None, self.dynshared_size, opt_in=False)

    simkernel.FakeCUDAKernel.__call__ = __call__
    devicearray.FakeCUDAArray.__cuda_array_interface__ = property(_cai)
    devicearray.FakeCUDAArray.device_ctypes_pointer = property(
        lambda self: ctypes.c_void_p(self._ary.__array_interface__["data"][0]))
    devices.FakeCUDADevice.__getattr__ = _device_getattr
    devices._SIMULATOR_CC = (9, 0)
    devices.FakeCUDADevice.compute_capability = property(lambda self: (9, 0))
    cuda_pkg.is_cuda_array = is_cuda_array
    cuda_pkg.as_cuda_array = as_cuda_array

    original_jit = cuda_pkg.jit

    def jit(func_or_sig=None, **options):
        for name in IGNORED_JIT_OPTIONS:
            options.pop(name, None)
        return original_jit(func_or_sig, **options)

    jit.__doc__ = original_jit.__doc__
    cuda_pkg.jit = jit

    from numba.cuda.simulator import bf16 as sim_bf16

    from .bf16 import install as install_bf16

    install_bf16(sim_bf16)
