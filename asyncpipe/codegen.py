"""Offline compilation: a numba kernel and its shims to an sm_90a cubin, its SASS and resource use.

No GPU is needed: numba emits LTO-IR for the kernel, NVRTC compiles the linked ``.cu`` shims to
LTO-IR, nvJitLink links them with link-time optimisation (which inlines the shims), and
``cuobjdump``/``nvdisasm`` (pip packages ``nvidia-cuda-cuobjdump``, ``nvidia-cuda-nvdisasm``) read
the result. The tests use it to prove that each primitive became the instruction it names.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
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
        raise FileNotFoundError(f"{name} not found: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm")
    return found


@dataclass
class Resources:
    registers: int
    shared: int
    local: int
    stack: int


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
    def opcodes(self) -> list[str]:
        """Every instruction's opcode with its modifiers (``LDGSTS.E.BYPASS.128``,
        ``HGMMA.64x256x16.F32.BF16``), in order."""
        ops = []
        for line in self.sass.splitlines():
            # modifiers may hold a lower-case "x": HGMMA.64x256x16.F32.BF16
            m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)", line)
            if m:
                ops.append(m.group(1))
        return ops

    def count(self, prefix: str) -> int:
        """How many instructions start with ``prefix`` (``"FFMA"``, ``"LDGSTS.E.128"``)."""
        return sum(op == prefix or op.startswith(prefix + ".") or op.startswith(prefix) for op in self.opcodes)

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
    ``argtypes`` and ``cc`` with its shims, link with LTO, and return the cubin."""
    from cuda.core import Linker, LinkerOptions, ObjectCode
    from numba import cuda

    pyfunc = getattr(pyfunc, "py_func", pyfunc)
    objs, _ = cuda.compile_all(pyfunc, tuple(argtypes), device=False, abi="numba", cc=cc, output="ltoir", **options)
    codes = [o if isinstance(o, ObjectCode) else ObjectCode.from_ltoir(bytes(o)) for o in objs]
    arch = f"sm_{cc[0]}{cc[1]}{cc[2] if len(cc) > 2 else ''}"
    linked = Linker(*codes, options=LinkerOptions(arch=arch, link_time_optimization=True)).link("cubin")
    return Cubin(bytes(linked.code), arch)
