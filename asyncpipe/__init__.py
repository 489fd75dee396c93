"""asyncpipe: Ampere/Hopper asynchronous GPU kernels in Python."""
import os as _os

# ASYNCPIPE_SIM=1 selects the CPU simulator (asyncpipe.sim): numba's switch must be set before numba
# is first imported, which asyncpipe does only after this line.
if _os.environ.get("ASYNCPIPE_SIM", "0") not in ("", "0"):
    _os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

__version__ = "0.2.0"

# the tuner wraps kernels, which never import it: importing it here registers its cache as the source of the
# options a kernel function is not given (asyncpipe.kernels.options; light, no numba)
from . import tune as _tune  # noqa: E402,F401
