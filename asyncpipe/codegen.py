"""Offline compilation: a numba kernel and its shims to an sm_90a cubin, its SASS and resource use.

No GPU is needed: numba emits LTO-IR for the kernel, NVRTC compiles the linked ``.cu`` shims to
LTO-IR, nvJitLink links them with link-time optimisation (which inlines the shims), and
``cuobjdump``/``nvdisasm`` (pip packages ``nvidia-cuda-cuobjdump``, ``nvidia-cuda-nvdisasm``: the
``sass`` extra, ``pip install 'asyncpipe[sass]'``) read the result. The tests use it to prove that
each primitive became the instruction it names.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import types
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

HOPPER_A = (9, 0, "a")


def _tool(name: str) -> str:
    try:
        import nvidia

        for base in nvidia.__path__:
            cand = Path(base) / "cu13" / "bin" / name
            if cand.exists():
                return str(cand)
    except ImportError:
        pass
    found = shutil.which(name)
    if not found:
        raise FileNotFoundError(f"{name} not found: reading SASS needs the sass extra: pip install 'asyncpipe[sass]' "
                                "(the wheels nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm)")
    return found


@dataclass
class Resources:
    registers: int
    shared: int
    local: int
    stack: int


@dataclass(frozen=True)
class Instruction:
    """One SASS instruction: its address, guard predicate (``""``, ``"@P0"``, ``"@!PT"``...), opcode with its
    modifiers and operand text."""

    address: int
    predicate: str
    opcode: str
    operands: str


@dataclass(frozen=True)
class BankConflicts:
    """How an instruction stream reads its FFMAs' register operands (``Cubin.ffma_bank_conflicts``)."""

    ffma: int            # FFMA instructions looked at
    conflicted: int      # ... whose register reads include two from one bank
    reuse_flags: int     # operands they mark ``.reuse``

    @property
    def per_ffma(self) -> float:
        return self.conflicted / self.ffma if self.ffma else 0.0


_INSTRUCTION = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)([^;]*);")
_REGISTER = re.compile(r"(?<![A-Z])R(\d+)(\.reuse)?")


def bank_conflicts(instructions, banks: int = 2) -> BankConflicts:
    """Count the FFMAs of ``instructions`` that read two registers from one bank (register number mod ``banks``).

    Since Volta an SM sub-partition's register file has two banks; an FFMA reads up to three registers, and two
    from one bank cost a cycle more to collect. An operand the previous instruction flagged ``.reuse`` in the
    same slot, naming the same register, comes from the operand reuse cache and reads no bank. Any other
    instruction between two FFMAs is taken to clear the cache.

    A coarse guide, not a timing model. Four FFMA orders of the dbuf SGEMM (8 x 16, bk 16; counted on ptxas 13.5's
    SASS, timed on the H200, whose ptxas is 13.0): row by row 0.39 conflicted a FFMA, 44.6 TFLOPS; a snake over
    the rows 0.38, 44.3; a zigzag over row pairs 0.44, 43.5; column by column 0.59, 38.6 (``bench/h200.md``, sixth
    session). The large differences ranked as the speed did, where the count of reuse flags (0.75, 0.78, 0.70,
    0.84 a FFMA) ranked the slowest first; the 0.01 between the first two did not."""
    ffma = conflicted = flags = 0
    cached: dict[int, int] = {}               # operand slot -> register held for the next instruction
    for ins in instructions:
        if not ins.opcode.startswith("FFMA"):
            cached = {}
            continue
        sources = _REGISTER.findall(ins.operands)[1:]          # the first register is the destination
        reads = [int(r) for slot, (r, _) in enumerate(sources) if cached.get(slot) != int(r)]
        cached = {slot: int(r) for slot, (r, reuse) in enumerate(sources) if reuse}
        ffma += 1
        flags += len(cached)
        in_banks = [r % banks for r in reads]
        conflicted += len(in_banks) != len(set(in_banks))
    return BankConflicts(ffma, conflicted, flags)


@dataclass
class Cubin:
    """A linked cubin with helpers to read it."""

    data: bytes
    arch: str

    def _dump(self, *flags: str) -> str:
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "k.cubin"
            path.write_bytes(self.data)
            env = dict(os.environ)
            env["PATH"] = str(Path(_tool("nvdisasm")).parent) + os.pathsep + env.get("PATH", "")
            out = subprocess.run([_tool("cuobjdump"), *flags, str(path)], capture_output=True, text=True, env=env)
            if out.returncode:
                raise RuntimeError(f"cuobjdump {' '.join(flags)} failed: {out.stderr.strip()}")
            return out.stdout

    @cached_property
    def sass(self) -> str:
        """The disassembly, as ``cuobjdump --dump-sass`` prints it."""
        return self._dump("--dump-sass")

    @cached_property
    def instructions(self) -> list[Instruction]:
        """Every instruction, in order (all kernels of the cubin)."""
        out = []
        for line in self.sass.splitlines():
            m = _INSTRUCTION.match(line)
            if m:
                out.append(Instruction(int(m.group(1), 16), (m.group(2) or "").strip(), m.group(3), m.group(4)))
        return out

    @cached_property
    def opcodes(self) -> list[str]:
        """Every instruction's opcode with its modifiers (``LDGSTS.E.BYPASS.128``,
        ``HGMMA.64x256x16.F32.BF16``: modifiers may hold a lower-case "x"), in order."""
        return [i.opcode for i in self.instructions]

    def _loops(self, conditional: bool) -> list[tuple[int, int, int]]:
        """(span, target, branch address) of every backward branch (``conditional``: predicated ones only)."""
        return [(i.address - int(t.group(1), 16), int(t.group(1), 16), i.address) for i in self.instructions
                if i.opcode.startswith("BRA") and (t := re.search(r"0x([0-9a-f]+)", i.operands))
                and int(t.group(1), 16) < i.address
                and not (conditional and (not i.predicate or i.predicate.endswith("PT")))]

    def _body(self, lo: int, hi: int) -> list[Instruction]:
        """The instructions from ``lo`` to ``hi``, less those predicated off for good (``@!PT``, ptxas's padding)."""
        return [i for i in self.instructions if lo <= i.address <= hi and i.predicate != "@!PT"]

    def main_loop(self, conditional: bool = False) -> list[Instruction]:
        """The instructions of the kernel's main loop: from the target of the backward branch that spans the most
        code to that branch, leaving out those predicated off for good (``@!PT``, ptxas's padding).
        ``conditional``: only predicated backward branches count; warp-specialized kernels need it, where ptxas's
        out-of-line mbarrier retry ends in an unconditional jump back that spans the whole kernel."""
        spans = self._loops(conditional)
        if not spans:
            raise ValueError("no backward branch in the SASS: the kernel has no loop")
        _, lo, hi = max(spans)
        return self._body(lo, hi)

    def innermost_loop(self, prefix: str) -> list[Instruction]:
        """The instructions of the smallest loop (a predicated backward branch and its target) that holds an
        instruction starting with ``prefix``: a warp-specialized GEMM's k-loop is ``innermost_loop("QGMMA")``, inside
        the tile loop that ``main_loop(conditional=True)`` finds."""
        for _, lo, hi in sorted(self._loops(conditional=True)):
            body = self._body(lo, hi)
            if any(i.opcode.startswith(prefix) for i in body):
                return body
        raise ValueError(f"no loop in the SASS holds {prefix}")

    def ffma_bank_conflicts(self, loop: bool = True) -> BankConflicts:
        """``bank_conflicts`` over the main loop (``loop=True``) or the whole SASS."""
        return bank_conflicts(self.main_loop() if loop else self.instructions)

    def count(self, prefix: str) -> int:
        """How many instructions start with ``prefix`` (``"FFMA"``, ``"LDGSTS.E.128"``)."""
        return sum(op.startswith(prefix) for op in self.opcodes)

    @cached_property
    def resources(self) -> Resources:
        text = self._dump("--dump-resource-usage")
        m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", text)
        if not m:
            raise RuntimeError(f"no resource line in: {text}")
        reg, stack, shared, local = map(int, m.groups())
        return Resources(registers=reg, shared=shared, local=local, stack=stack)

    @property
    def spills(self) -> bool:
        """True if anything went to local memory (LDL/STL in the SASS or a local frame)."""
        return self.resources.local > 0 or self.resources.stack > 0 or any(
            op.startswith(("LDL", "STL")) for op in self.opcodes
        )


def compile_kernel(pyfunc, argtypes, cc=HOPPER_A, **options) -> Cubin:
    """Compile the Python kernel ``pyfunc`` (a plain function or ``cuda.jit`` dispatcher) for
    ``argtypes`` and ``cc`` with its shims, link with LTO, and return the cubin.

    Under the simulator (``NUMBA_ENABLE_CUDASIM=1`` in this process) numba's compiler is not loaded, so
    the same call compiles in a child process that runs without it (``compile_kernel_in_subprocess``)."""
    pyfunc = getattr(pyfunc, "py_func", None) or getattr(pyfunc, "fn", pyfunc)   # fn: the simulator's kernel
    if _simulating():
        return compile_kernel_in_subprocess(pyfunc, argtypes, cc, **options)
    from cuda.core import Linker, LinkerOptions, ObjectCode
    from numba import cuda

    objs, _ = cuda.compile_all(pyfunc, tuple(argtypes), device=False, abi="numba", cc=cc, output="ltoir", **options)
    codes = [o if isinstance(o, ObjectCode) else ObjectCode.from_ltoir(bytes(o)) for o in objs]
    arch = f"sm_{cc[0]}{cc[1]}{cc[2] if len(cc) > 2 else ''}"
    linked = Linker(*codes, options=LinkerOptions(arch=arch, link_time_optimization=True)).link("cubin")
    return Cubin(bytes(linked.code), arch)


# ------------------------------------------------------------------------------------------------
# The same compile from a process that runs the simulator (a notebook or test of the simulator run)
# ------------------------------------------------------------------------------------------------
_SIMULATOR_SWITCHES = ("NUMBA_ENABLE_CUDASIM", "ASYNCPIPE_SIM")


def _simulating() -> bool:
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def compile_kernel_in_subprocess(pyfunc, argtypes, cc=HOPPER_A, timeout: float = 900, **options) -> Cubin:
    """``compile_kernel`` in a fresh Python process with the simulator switched off.

    numba picks its simulator or its compiler once, at import, so a process that simulates cannot
    compile. ``pyfunc`` and ``argtypes`` travel by cloudpickle (numba's copy): the function's code by
    value, the modules it names (``ptx``, ``cuda``, ``np``) by reference, so that the child resolves
    them to the real compiler's objects. The cubin comes back; reading it (``sass``, ``resources``)
    needs only ``cuobjdump``. Raises ``RuntimeError`` with the child's traceback when it fails."""
    import io
    import pickle

    env = {k: v for k, v in os.environ.items() if k not in _SIMULATOR_SWITCHES}
    with tempfile.TemporaryDirectory() as d:
        job, result = Path(d) / "job.pkl", Path(d) / "cubin.pkl"
        buf = io.BytesIO()
        _pickler(buf).dump((pyfunc, tuple(argtypes), cc, options))
        job.write_bytes(buf.getvalue())
        out = subprocess.run([sys.executable, "-m", "asyncpipe.codegen", str(job), str(result)],
                             capture_output=True, text=True, env=env, timeout=timeout)
        if out.returncode:
            raise RuntimeError(f"compile_kernel_in_subprocess: the child failed:\n{out.stderr[-4000:]}")
        data, arch = pickle.loads(result.read_bytes())
    return Cubin(data, arch)


def _pickler(file):
    """A cloudpickle pickler that sends the simulator's ``cuda.jit`` device functions (a kernel's globals)
    as the child's numba has them: the same module attribute where there is one (``ptx``'s, the
    pipeline's); else (a notebook's, an unrolled one) jitted again with ``inline="always"``, the
    simulator having dropped the options, and offline (no GPU) numba compiles only inlined device
    functions (its separate device-function compile asks the current GPU for its compute capability)."""
    from numba import cloudpickle
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    class Pickler(cloudpickle.CloudPickler):
        def reducer_override(self, obj):
            if isinstance(obj, FakeCUDAKernel):
                where = _attribute_of(obj, obj.fn.__module__)
                if where:
                    return _module_attribute, where
                return _jit, (obj.fn, obj._device, obj._fastmath)
            if isinstance(obj, types.FunctionType) and hasattr(obj, "unrolled_from") and _attribute_of(
                    obj.unrolled_from[0], obj.unrolled_from[0].__module__):
                # an unrolled kernel: the simulator's expansion (llvm=True loops expanded, sim_index for
                # indices) is not the compiler's, so the child expands the same function with the same constants
                return _unrolled_again, obj.unrolled_from
            if getattr(obj, "__qualname__", None) == "sim_index" and obj.__module__ == "asyncpipe.kernels.unroll":
                # the simulator's index of a kernel unrolled from a function the child cannot import
                return _module_attribute, ("numba", "uint64")
            if (isinstance(obj, types.FunctionType) and (obj.__module__ or "").startswith("asyncpipe.")
                    and getattr(sys.modules.get(obj.__module__), obj.__qualname__, None) is not obj):
                # a simulator stand-in of an asyncpipe intrinsic (kernels.vector.opaque_f32 is ``lambda x: x``
                # there): the child takes the module's attribute, which is the intrinsic itself
                where = _attribute_of(obj, obj.__module__)
                if where:
                    return _module_attribute, where
            return super().reducer_override(obj)

    return Pickler(file)


def _attribute_of(obj, module: str) -> tuple[str, str] | None:
    """``(module, name)`` of the attribute of ``module`` bound to ``obj`` (its own name first), or None."""
    mod = sys.modules.get(module) if module != "__main__" else None
    if mod is None:
        return None
    name = getattr(getattr(obj, "fn", obj), "__name__", None)
    if name and getattr(mod, name, None) is obj:
        return module, name
    return next(((module, k) for k, v in vars(mod).items() if v is obj), None)


def _module_attribute(module: str, name: str):
    import importlib

    return getattr(importlib.import_module(module), name)


def _unrolled_again(fn, options: dict):
    from .kernels.unroll import unrolled

    return unrolled(fn, **options)


def _jit(fn, device: bool, fastmath: bool):
    from numba import cuda

    return cuda.jit(fn, device=True, inline="always", fastmath=fastmath) if device else cuda.jit(fn, fastmath=fastmath)


def _compile_job(job: str, result: str) -> None:
    import pickle

    pyfunc, argtypes, cc, options = pickle.loads(Path(job).read_bytes())
    cubin = compile_kernel(pyfunc, argtypes, cc, **options)
    Path(result).write_bytes(pickle.dumps((cubin.data, cubin.arch)))


if __name__ == "__main__":
    _compile_job(sys.argv[1], sys.argv[2])
