"""numba's CUDA target, initialised without its CPU BLAS probe.

The first compile or cache load in a process initialises numba's CUDA target context
(``BaseContext.refresh``): it imports numba's implementation modules and installs their registries.
One of them, ``numba.cuda.np.arraymath``, asks at import whether a host BLAS exists
(``_check_blas`` -> ``ensure_blas`` -> ``import scipy.linalg.cython_blas``) so that ``np.vdot`` and friends
may call ``np.dot``. A CUDA kernel cannot call a host BLAS, and where scipy is installed the import
costs more than any kernel's cached load: measured on the H200 (first call of a cached kernel in a
fresh process, cProfile), 0.35 s in scipy.linalg plus 0.26 s in the numpy submodules scipy's array-API
layer touches, of 0.84 s in all; the cache load itself took 0.007 s. Here the probe answers "no host
BLAS" while the target initialises (``_HAVE_BLAS`` False: those functions use numba's own loop, which is
what runs on a GPU), and scipy is not imported. ``install`` is idempotent; ``asyncpipe.backend``
calls it when it loads the GPU backend.
"""

from __future__ import annotations

import sys

_ARRAYMATH = "numba.cuda.np.arraymath"


def _no_host_blas():
    raise ImportError("asyncpipe: CUDA kernels call no host BLAS (asyncpipe.backend.numba_init)")


def install() -> None:
    from numba.cuda.target import CUDATargetContext

    if getattr(CUDATargetContext.load_additional_registries, "asyncpipe_no_blas_probe", False):
        return
    original = CUDATargetContext.load_additional_registries

    def load_additional_registries(self):
        if _ARRAYMATH in sys.modules:            # probed already (or numba's own import order changed)
            return original(self)
        from numba.cuda.np import linalg

        probe = linalg.ensure_blas
        linalg.ensure_blas = _no_host_blas
        try:
            return original(self)
        finally:
            linalg.ensure_blas = probe

    load_additional_registries.asyncpipe_no_blas_probe = True
    CUDATargetContext.load_additional_registries = load_additional_registries
