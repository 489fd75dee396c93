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

import inspect
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Callable

from numba import cuda

from .. import backend

SHIM_PREFIX = "ap_"


simulating = backend.simulating   # True when kernels run on asyncpipe's simulator (chosen in asyncpipe.backend)


def shim_dir() -> Path:
    """The folder holding the ``.cu`` shims: ``ptx_shims/`` in a checkout, the installed copy otherwise."""
    checkout = Path(__file__).resolve().parents[2] / "ptx_shims"
    if checkout.is_dir():
        return checkout
    return Path(str(resources.files("asyncpipe.ptx_shims")))


# A primitive's call line (``Primitive.call``) is read off what is declared anyway: argument names from
# the simulator body, types from the shim's numba signature, state spaces from the PTX line.
CALL_TYPE_NAMES = {"voidptr": "ptr"}     # a generic address, as ``addr(...)`` makes it
# PTX qualifiers that name the state space of the address operands, in operand order: ``cp.async.ca
# .shared.global [dst], [src]`` (dst shared, src global); a completion mechanism ``.mbarrier::...``
# names the mbarrier operand that follows them.
STATE_SPACES = ("shared", "shared::cta", "shared::cluster", "global")
_SIGNATURE = re.compile(r"^\s*(\w+)\s*\((.*)\)\s*$")
_ADDRESS_OPERAND = re.compile(r"\[\s*(\w+)")


@dataclass(frozen=True)
class Param:
    """One argument of a primitive's Python call: name, type and, for an address, its state space."""

    name: str
    type: str
    space: str = ""

    def __str__(self) -> str:
        return f"{self.name}: {self.type}" + (f" {self.space}" if self.space else "")


def call_line(name: str, params, returns: str = "void") -> str:
    """``name(a: t, b: t space) -> r``: how a primitive is called (``-> r`` only when it returns a value)."""
    return f"{name}({', '.join(map(str, params))})" + ("" if returns == "void" else f" -> {returns}")


def parse_signature(signature: str) -> tuple[str, list[str]]:
    """``"uint64(voidptr, uint32)"`` -> ``("uint64", ["voidptr", "uint32"])``."""
    m = _SIGNATURE.match(signature)
    if m is None:
        raise RuntimeError(f"not a numba signature: {signature!r}")
    return m.group(1), [t.strip() for t in m.group(2).split(",") if t.strip()]


def operand_spaces(ptx: str, names: list[str], types: list[str]) -> dict[str, str]:
    """``{argument: state space}`` for the address operands (``[dst]``) of the PTX line ``ptx``.

    The i-th state-space qualifier of the opcode labels the i-th bracketed operand; an operand is the
    argument of the same name, else the next ``voidptr`` argument not yet labelled."""
    opcode, _, operands = ptx.partition(" ")
    spaces = ["mbarrier" if q.startswith("mbarrier::") else q for q in opcode.rstrip(";").split(".")[1:]
              if q in STATE_SPACES or q.startswith("mbarrier::")]
    free = [n for n, t in zip(names, types) if t == "voidptr"]
    found = {}
    for i, operand in enumerate(_ADDRESS_OPERAND.findall(operands)):
        name = operand if operand in names else next(iter(free), None)
        if name is None:
            continue
        if name in free:
            free.remove(name)
        if i < len(spaces):
            found[name] = spaces[i]
    return found


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
    tensor_maps: tuple[str, ...] = ()   # operands that must be addr(tmap, 0) of a TensorMap (tensor_map_type)
    debug: bool = False             # a blocking wait with a bounded form in ptx_shims/debug.cu (ASYNCPIPE_DEBUG)

    @property
    def symbol(self) -> str:
        return SHIM_PREFIX + self.name

    @property
    def shim_path(self) -> Path:
        return shim_dir() / f"{self.stem}.cu"

    @property
    def debug_symbol(self) -> str:
        """The shim of its debug form (``ap_debug_<name>`` in ``ptx_shims/debug.cu``), for ``debug=True``."""
        return f"{SHIM_PREFIX}debug_{self.name}"

    @property
    def arch(self) -> str:
        """The minimum target: ``sm_80``, ``sm_90``, or ``sm_90a`` for arch-specific features."""
        return f"sm_{self.sm}{'a' if self.arch_specific else ''}"

    @property
    def returns(self) -> str:
        """The result type as the call line spells it (``void``: none)."""
        ret = parse_signature(self.signature)[0]
        return CALL_TYPE_NAMES.get(ret, ret)

    @property
    def params(self) -> tuple[Param, ...]:
        """The Python arguments: the simulator body's names, the numba signature's types (``voidptr``
        spelled ``ptr``), the PTX line's state spaces."""
        types = parse_signature(self.signature)[1]
        names = list(inspect.signature(self.sim).parameters)
        if len(names) != len(types):
            raise RuntimeError(f"{self.name}: the simulator body takes {names}, the signature {self.signature!r}")
        spaces = operand_spaces(self.ptx, names, types)
        return tuple(Param(n, CALL_TYPE_NAMES.get(t, t), spaces.get(n, "")) for n, t in zip(names, types))

    @property
    def call(self) -> str:
        """How it is called, e.g. ``cp_async_cg_shared_global_16(dst: ptr shared, src: ptr global)``: the
        first line of its docstring and of ``python -m asyncpipe primitives``."""
        return call_line(self.name, self.params, self.returns)

    @property
    def header(self) -> str:
        return (f"{self.call}\n\n``{self.ptx}``\n\n"
                f"PTX ISA {self.isa // 10}.{self.isa % 10}, {self.arch}. Executed by {self.who}.")


REGISTRY: dict[str, Primitive] = {}
# name -> the kernel-side function of a blocking primitive's debug form (see ``asyncpipe.ptx.debug``):
# declared on the GPU whatever the mode; ASYNCPIPE_DEBUG=1 makes it the one ``asyncpipe.ptx`` exports.
DEBUG_FORMS: dict[str, Callable] = {}
DEBUG_SHIM = "debug.cu"


@dataclass(frozen=True)
class Intrinsic:
    """A kernel-side function that is no shim: numba emits its code itself (``ptx.addr``). Listed beside
    the primitives (``python -m asyncpipe primitives``) with the same fields, its own ``INTRINSICS``."""

    name: str
    source: str                     # the module that defines it, from the repository root
    types: dict = field(compare=False)   # argument name -> type as the call line spells it
    returns: str
    ptx: str                        # what it compiles to, in words (it has no PTX line of its own)
    who: str
    sim: Callable = field(compare=False, repr=False)   # its simulator body: the argument names
    arch: str = "any"
    sass: tuple[str, ...] = ()      # no SASS opcode of its own

    @property
    def params(self) -> tuple[Param, ...]:
        names = list(inspect.signature(self.sim).parameters)
        if names != list(self.types):
            raise RuntimeError(f"{self.name}: the simulator body takes {names}, the types name {list(self.types)}")
        return tuple(Param(n, self.types[n]) for n in names)

    @property
    def call(self) -> str:
        return call_line(self.name, self.params, self.returns)


def _add_shim_include_path() -> None:
    """Let NVRTC find ``common.cuh`` when numba compiles a shim (it passes no source directory)."""
    from numba.cuda.core import config

    paths = [p for p in (config.CUDA_NVRTC_EXTRA_SEARCH_PATHS or "").split(":") if p]
    if str(shim_dir()) not in paths:
        config.CUDA_NVRTC_EXTRA_SEARCH_PATHS = ":".join([*paths, str(shim_dir())])


backend.current()   # load the chosen backend (the simulator's installs itself into numba); numba must agree
if not simulating():
    _add_shim_include_path()


def _sim_pending(p: Primitive) -> Callable:
    def pending(*args):
        raise NotImplementedError(
            f"{p.name}: the asyncpipe simulator has no body for this primitive yet; run on a GPU"
        )

    return pending


def primitive(signature: str, *, ptx: str, isa: int, sm: int, who: str, sass=(), arch_specific=False,
              tensor_maps=(), debug=False):
    """Declare the primitive whose simulator body is the decorated function (see the module doc).
    ``tensor_maps``: the names of its ``voidptr`` operands that must be a tensor map's address.
    ``debug``: a blocking wait whose bounded form ``ap_debug_<name>`` is in ``ptx_shims/debug.cu``;
    with ``ASYNCPIPE_DEBUG=1`` kernels call that form instead (``asyncpipe.backend.debugging``)."""

    def declare(body: Callable):
        stem = body.__module__.rsplit(".", 1)[-1]
        p = Primitive(body.__name__, stem, signature, ptx, isa, sm, who, tuple(sass), arch_specific, body,
                      tuple(tensor_maps), debug)
        if p.name in REGISTRY:
            raise RuntimeError(f"primitive {p.name} declared twice")
        REGISTRY[p.name] = p
        doc = p.header + ("\n\n" + inspect.cleandoc(body.__doc__) if body.__doc__ else "")
        if simulating():
            has_body = body.__code__.co_code != _empty.__code__.co_code
            fn = body if has_body else _sim_pending(p)
            fn.__doc__ = doc
            return fn
        fn = _require_tensor_maps(cuda.declare_device(p.symbol, signature, link=[str(p.shim_path)], abi="c"), p)
        if p.debug:
            bounded = cuda.declare_device(p.debug_symbol, signature, link=[str(shim_dir() / DEBUG_SHIM)], abi="c")
            for f in (fn, bounded):
                f.__doc__, f.__name__, f.primitive = doc, p.name, p
            DEBUG_FORMS[p.name] = bounded
            return bounded if backend.debugging() else fn
        fn.__doc__ = doc
        fn.__name__ = p.name
        fn.primitive = p
        return fn

    return declare


def _require_tensor_maps(shim, p: Primitive):
    """The function kernels call for ``p``: ``declare_device``'s ``shim`` when ``p`` takes no tensor map;
    else a descriptor of its own whose typing accepts only a ``tensormap_ptr`` for ``p.tensor_maps``
    (``check_tensor_map_operand``'s TypingError otherwise) and is otherwise ``shim``'s: one case, the
    shim's signature, conversions allowed. Its template's key is ``shim``, so the call lowers to the
    shim's own implementation (same call, same linked file): a ``tensormap_ptr`` converts to its
    ``voidptr`` with no instruction."""
    if not p.tensor_maps:
        return shim
    from numba.cuda.compiler import ExternFunction
    from numba.cuda.descriptor import cuda_target
    from numba.cuda.typing.templates import make_concrete_template

    from .tensor_map_type import check_tensor_map_operand

    names, types = list(inspect.signature(p.sim).parameters), parse_signature(p.signature)[1]
    wrong = [n for n in p.tensor_maps if n not in names or types[names.index(n)] != "voidptr"]
    if wrong:
        raise RuntimeError(f"{p.name}: tensor_maps {wrong} must name voidptr arguments of {p.signature!r}")
    positions = [(names.index(n), n) for n in p.tensor_maps]

    class template(make_concrete_template(p.symbol, shim, [shim.sig])):   # key: shim, for the lowering
        def apply(self, args, kws):
            for i, name in positions:
                if i < len(args):
                    check_tensor_map_operand(p.name, name, args[i])
            return super().apply(args, kws)

    shim.__name__ = p.name                 # how numba's typing errors name the call
    front = ExternFunction(shim.name, shim.sig)
    cuda_target.typing_context.insert_user_function(front, template)
    front.unchecked = shim                 # the same call typed as declared (any voidptr): the SASS tests compile both
    return front


def _empty():
    """A body with nothing but a docstring: the simulator body is not written yet."""
