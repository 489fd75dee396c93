"""The registry that ties each Python primitive to its shim, its PTX line and its simulator body.

A primitive is declared once, in ``asyncpipe/ptx/<stem>.py``, by decorating its simulator body::

    @primitive("void()", ptx="cp.async.commit_group;", isa=70, sm=80, who="each thread", sass=("LDGDEPBAR",))
    def cp_async_commit_group():
        \"\"\"Closes this thread's pending cp.async operations into one group.\"\"\"

On the GPU the decorator returns ``numba.cuda.declare_device("ap_cp_async_commit_group", ...)``
linked to ``ptx_shims/<stem>.cu``, which LTO inlines into the kernel. Under numba's simulator
(``NUMBA_ENABLE_CUDASIM=1``) it returns the simulator body instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Callable

from numba import cuda

SHIM_PREFIX = "ap_"


def simulating() -> bool:
    """True when kernels run in numba's CUDA simulator instead of on a GPU."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def shim_dir() -> Path:
    """The folder holding the ``.cu`` shims: ``ptx_shims/`` in a checkout, the installed copy otherwise."""
    checkout = Path(__file__).resolve().parents[2] / "ptx_shims"
    if checkout.is_dir():
        return checkout
    return Path(str(resources.files("asyncpipe.ptx_shims")))


@dataclass(frozen=True)
class Primitive:
    """One PTX instruction form: its Python name, shim, PTX line and requirements."""

    name: str                       # PTX opcode path with '.' and '::' turned into '_'
    stem: str                       # file stem shared by asyncpipe/ptx/<stem>.py and ptx_shims/<stem>.cu
    signature: str                  # numba signature of the C-ABI shim
    ptx: str                        # the exact PTX the shim emits
    isa: int                        # minimum PTX ISA version, times 10 (80 = PTX ISA 8.0)
    sm: int                         # minimum SM, e.g. 80, 90; "90a" features use sm=90 and arch_specific
    who: str                        # who must execute it
    sass: tuple[str, ...] = ()      # SASS opcodes (prefixes) its codegen test must find
    arch_specific: bool = False     # needs sm_90a (wgmma, setmaxnreg)
    sim: Callable | None = field(default=None, compare=False, repr=False)

    @property
    def symbol(self) -> str:
        return SHIM_PREFIX + self.name

    @property
    def shim_path(self) -> Path:
        return shim_dir() / f"{self.stem}.cu"

    @property
    def header(self) -> str:
        arch = f"sm_{self.sm}{'a' if self.arch_specific else ''}"
        return f"``{self.ptx}``\n\nPTX ISA {self.isa // 10}.{self.isa % 10}, {arch}. Executed by {self.who}."


REGISTRY: dict[str, Primitive] = {}


def _add_shim_include_path() -> None:
    """Let NVRTC find ``common.cuh`` when numba compiles a shim (it passes no source directory)."""
    from numba.cuda.core import config

    paths = [p for p in (config.CUDA_NVRTC_EXTRA_SEARCH_PATHS or "").split(":") if p]
    if str(shim_dir()) not in paths:
        config.CUDA_NVRTC_EXTRA_SEARCH_PATHS = ":".join([*paths, str(shim_dir())])


if not simulating():
    _add_shim_include_path()
else:   # the asyncpipe simulator runs launches in numba's simulator (asyncpipe.sim.numba_patch)
    from ..sim import install as _install_simulator

    _install_simulator()


def _sim_pending(p: Primitive) -> Callable:
    def pending(*args):
        raise NotImplementedError(
            f"{p.name}: the asyncpipe simulator has no body for this primitive yet; run on a GPU"
        )

    return pending


def primitive(signature: str, *, ptx: str, isa: int, sm: int, who: str, sass=(), arch_specific=False):
    """Declare the primitive whose simulator body is the decorated function (see the module doc)."""

    def declare(body: Callable):
        stem = body.__module__.rsplit(".", 1)[-1]
        p = Primitive(body.__name__, stem, signature, ptx, isa, sm, who, tuple(sass), arch_specific, body)
        if p.name in REGISTRY:
            raise RuntimeError(f"primitive {p.name} declared twice")
        REGISTRY[p.name] = p
        doc = p.header + ("\n\n" + body.__doc__.strip() if body.__doc__ else "")
        if simulating():
            has_body = body.__code__.co_code != _empty.__code__.co_code
            fn = body if has_body else _sim_pending(p)
            fn.__doc__ = doc
            return fn
        fn = cuda.declare_device(p.symbol, signature, link=[str(p.shim_path)], abi="c")
        fn.__doc__ = doc
        fn.__name__ = p.name
        fn.primitive = p
        return fn

    return declare


def _empty():
    """A body with nothing but a docstring: the simulator body is not written yet."""
