"""asyncpipe: Ampere/Hopper asynchronous GPU kernels in Python."""

# GPU or CPU simulator (ASYNCPIPE_SIM=1 or NUMBA_ENABLE_CUDASIM=1), chosen once, here, before anything of
# asyncpipe imports numba.cuda: asyncpipe.backend says how, and raises if numba.cuda was imported too early.
from . import backend as _backend

_backend.simulating()

__version__ = "0.2.0"

# the tuner wraps kernels, which never import it: importing it here registers its cache as the source of the
# options a kernel function is not given (asyncpipe.kernels.options; light, no numba)
from . import tune as _tune  # noqa: E402,F401
