"""The registry, the shims and the tests agree one to one."""

import re
from pathlib import Path

import pytest

from asyncpipe import ptx

ROOT = Path(__file__).resolve().parents[2]
SHIM_DEF = re.compile(r'extern "C" __device__ [\w\s\*]+?\bap_(\w+)\s*\(')


def shim_symbols():
    found = {}
    for cu in sorted((ROOT / "ptx_shims").glob("*.cu")):
        for name in SHIM_DEF.findall(cu.read_text()):
            assert name not in found, f"ap_{name} defined in {found.get(name)} and {cu.stem}"
            found[name] = cu.stem
    return found


def test_every_shim_has_one_primitive_and_back():
    shims = shim_symbols()
    registered = {name: p.stem for name, p in ptx.REGISTRY.items()}
    assert shims == registered


def test_stems_match_files():
    for stem in ptx.MODULES:
        assert (ROOT / "ptx_shims" / f"{stem}.cu").exists(), stem
        assert (ROOT / "asyncpipe" / "ptx" / f"{stem}.py").exists(), stem
        assert (ROOT / "tests" / "ptx" / f"test_{stem}.py").exists(), stem


@pytest.mark.parametrize("name", sorted(ptx.REGISTRY))
def test_primitive_is_documented_and_tested(name):
    p = ptx.REGISTRY[name]
    fn = getattr(ptx, name)
    assert fn.__doc__.startswith(f"``{p.ptx}``"), "docstring must open with the PTX line"
    assert f"sm_{p.sm}" in fn.__doc__ and "PTX ISA" in fn.__doc__ and "Executed by" in fn.__doc__
    assert p.sass, f"{name} names no SASS opcode for its codegen test"
    # the shim's comment carries the same PTX line
    shim_text = p.shim_path.read_text()
    opcode = p.ptx.split()[0]
    assert opcode in shim_text
    # its test file uses it (a SASS test and a GPU test live there)
    test_text = (ROOT / "tests" / "ptx" / f"test_{p.stem}.py").read_text()
    assert f"ptx.{name}" in test_text, f"tests/ptx/test_{p.stem}.py never calls ptx.{name}"


def test_one_asm_statement_per_shim():
    """A shim is one inline-asm statement; a switch over immediates or a wait loop may repeat it."""
    for cu in (ROOT / "ptx_shims").glob("*.cu"):
        for body in re.split(r'extern "C" __device__', cu.read_text())[1:]:
            n = len(re.findall(r"\basm\s*(?:volatile\s*)?\(", body))   # plain asm: pure (a conversion)
            assert n >= 1, f"{cu.name}: a shim without inline asm:\n{body[:200]}"
            if n > 1:
                assert "switch" in body or "while" in body or "for" in body, f"{cu.name}: {body[:300]}"
