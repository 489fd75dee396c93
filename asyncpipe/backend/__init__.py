"""The one door to the machine: whether launches, device queries and tensor maps go to the GPU or to
asyncpipe's CPU simulator is decided here, once, and both sides plug in behind it.

::

    from asyncpipe import backend

    backend.simulating()            # the choice, made when asyncpipe was imported
    backend.current().device_info("my_api")      # the chosen ``Backend``, loaded on first use

**The choice.** The simulator runs iff ``ASYNCPIPE_SIM`` or ``NUMBA_ENABLE_CUDASIM`` is set (to
anything but ``0`` or the empty string) when asyncpipe is imported, or numba's simulator is already
loaded. numba reads its switch (``numba.core.config.ENABLE_CUDASIM``, which ``numba.cuda.core.config``
is) when ``numba.cuda`` is first imported, so ``choose`` makes the import order not matter wherever
it can: it sets ``NUMBA_ENABLE_CUDASIM=1`` and, when ``numba`` is imported but ``numba.cuda`` is not
yet, has numba re-read its environment (``numba.core.config.reload_config``). Only where
``numba.cuda`` is already loaded for the GPU is it too late: ``import asyncpipe`` then raises an
``AsyncpipeError`` that says what to do.

**The backends.** ``Backend`` is the interface; ``asyncpipe.backend.gpu.GpuBackend`` (numba's
driver, cuda.core, ``cuTensorMapEncodeTiled``) and ``asyncpipe.sim.host.SimBackend`` (the CPU engine)
implement it. The host API (``asyncpipe.host``) and the primitives (``asyncpipe.ptx``) ask
``current()``; ``host/`` never imports ``sim/`` and ``sim/`` never imports ``host/``: what both need
(``DeviceInfo``, ``check_launch``, the tensor-map rules) lives below them, in ``asyncpipe.spec``.
"""

from __future__ import annotations

import os
import sys
from typing import Protocol

from ..errors import AsyncpipeError

ENV_SIM = "ASYNCPIPE_SIM"
ENV_DEBUG = "ASYNCPIPE_DEBUG"
ENV_NUMBA_SIM = "NUMBA_ENABLE_CUDASIM"
_API = "import asyncpipe"
_SOURCE = "numba reads NUMBA_ENABLE_CUDASIM when numba.cuda is first imported"
# numba.cuda's __init__ imports exactly one of these, by the switch (numba-cuda 0.30.4)
_NUMBA_GPU_INIT = "numba.cuda.device_init"
_NUMBA_SIM_INIT = "numba.cuda.simulator_init"


class Backend(Protocol):
    """What the host API needs from the machine that runs kernels."""

    name: str                 # "gpu" or "simulator"
    caches_plans: bool        # True: a kernel function's PreparedLaunch is kept and re-run (asyncpipe.host.plans)

    def device_info(self, api: str):
        """The current device's ``asyncpipe.spec.device.DeviceInfo``; ``UnsupportedDeviceError`` (naming
        ``api``) when there is none."""

    def prepare_launch(self, kernel, grid, block, *args, cluster=None, shared_mem=0, stream=0,
                       nonportable=False, keep=(), once=False):
        """Check ``kernel(*args)`` on ``grid`` x ``block`` and return a ``PreparedLaunch``."""

    def launch(self, kernel, grid, block, *args, cluster=None, shared_mem=0, stream=0, nonportable=False):
        """Check and run ``kernel(*args)`` once; return its ``LaunchConfig``."""

    def resident_blocks(self, kernel, block, *args, cluster=None, shared_mem=0, stream=0, nonportable=False) -> int:
        """How many blocks of ``kernel(*args)`` the device holds at once (whole clusters): a persistent grid's bound."""

    def tensor_map_words(self, layout):
        """The 16 ``uint64`` words a kernel receives for the validated ``TiledLayout`` (a device array)."""


def _on(name: str) -> bool:
    return os.environ.get(name, "0") not in ("", "0")


def _too_late(why: str) -> AsyncpipeError:
    return AsyncpipeError(
        _API, "the simulator must be chosen before numba.cuda is imported: import asyncpipe before numba.cuda "
        "(importing numba alone first is fine), or start Python with NUMBA_ENABLE_CUDASIM=1 in the environment",
        why, _SOURCE)


def choose() -> bool:
    """Decide GPU or simulator from the environment and numba's state (see the module doc); return True
    for the simulator. Called once, by ``import asyncpipe``."""
    asked = _on(ENV_SIM) or _on(ENV_NUMBA_SIM)
    if _on(ENV_SIM) and os.environ.get(ENV_NUMBA_SIM) in ("0", ""):
        raise AsyncpipeError(_API, f"{ENV_SIM}=1 asks for the simulator and {ENV_NUMBA_SIM} must then be unset or 1",
                             f"{ENV_NUMBA_SIM}={os.environ[ENV_NUMBA_SIM]!r}", "asyncpipe.backend")
    if asked and _NUMBA_GPU_INIT in sys.modules:
        env = ENV_SIM if _on(ENV_SIM) else ENV_NUMBA_SIM
        raise _too_late(f"{env}={os.environ[env]} set, but numba.cuda was already imported for the GPU")
    if not asked and _NUMBA_SIM_INIT not in sys.modules:
        return False
    if not _on(ENV_NUMBA_SIM):
        os.environ[ENV_NUMBA_SIM] = "1"      # for numba, and for any Python process started from this one
    config = sys.modules.get("numba.core.config")
    if config is not None and not config.ENABLE_CUDASIM:   # numba imported, numba.cuda not yet
        config.reload_config()
    return True


_SIMULATING: bool | None = None
_CURRENT: Backend | None = None


def simulating() -> bool:
    """True when kernels run on asyncpipe's CPU simulator (numba's ``NUMBA_ENABLE_CUDASIM``), False on the GPU."""
    global _SIMULATING
    if _SIMULATING is None:
        _SIMULATING = choose()
    return _SIMULATING


_DEBUGGING: bool | None = None


def debugging() -> bool:
    """True when ``ASYNCPIPE_DEBUG`` was set (not ``0``) when asyncpipe was imported: kernels then call the
    bounded forms of the blocking waits and a launch that would hang raises ``HangError``
    (``asyncpipe.backend.hang``). On the GPU only; the simulator names a deadlock whatever the mode."""
    global _DEBUGGING
    if _DEBUGGING is None:
        _DEBUGGING = _on(ENV_DEBUG) and not simulating()
    return _DEBUGGING


def current() -> Backend:
    """The chosen ``Backend``, loaded (and, for the simulator, installed into numba) on first use."""
    global _CURRENT
    if _CURRENT is None:
        sim = simulating()
        import numba.cuda  # noqa: F401  (the mode numba.cuda is in must be the one chosen)

        if (_NUMBA_SIM_INIT in sys.modules) != sim:
            raise AsyncpipeError(
                "asyncpipe.backend", f"{ENV_SIM} or {ENV_NUMBA_SIM} must be set before asyncpipe is imported and not "
                "changed after (asyncpipe and numba.cuda must run on the same backend)",
                f"asyncpipe chose the {'simulator' if sim else 'GPU'} at import, numba.cuda was then imported for "
                f"the {'GPU' if sim else 'simulator'}", _SOURCE)
        if sim:
            from ..sim.host import SimBackend

            _CURRENT = SimBackend()
        else:
            from . import numba_init
            from .gpu import GpuBackend

            numba_init.install()
            _CURRENT = GpuBackend()
            if debugging():
                from . import hang

                hang.install()
    return _CURRENT


__all__ = ["Backend", "ENV_DEBUG", "ENV_NUMBA_SIM", "ENV_SIM", "choose", "current", "debugging", "simulating"]
