"""Helpers for the offline SASS tests: compile a kernel for sm_90a with its shims, check the SASS."""

from asyncpipe.codegen import compile_kernel


def assert_sass(kernel, argtypes, has=(), lacks=("CALL",), **options):
    """Compile ``kernel`` and check that every opcode prefix in ``has`` appears, none in ``lacks``
    does (by default no ``CALL``: every shim was inlined), and nothing went to local memory."""
    cubin = compile_kernel(kernel, argtypes, **options)
    ops = cubin.opcodes
    for prefix in has:
        assert any(op.startswith(prefix) for op in ops), f"{prefix} missing from SASS:\n{cubin.sass}"
    for prefix in lacks:
        bad = [op for op in ops if op.startswith(prefix)]
        assert not bad, f"{prefix} found in SASS ({bad}):\n{cubin.sass}"
    assert not cubin.spills, f"local memory used: {cubin.resources}\n{cubin.sass}"
    return cubin


def loop_opcodes(cubin) -> list[str]:
    """The opcodes of the kernel's main loop: from the target of the backward branch that spans the most
    code to that branch, leaving out instructions predicated off for good (``@!PT``, ptxas's padding)."""
    import re

    ins = []
    for line in cubin.sass.splitlines():
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)([^;]*);", line)
        if m:
            ins.append((int(m.group(1), 16), (m.group(2) or "").strip(), m.group(3), m.group(4)))
    spans = [(addr - int(t.group(1), 16), int(t.group(1), 16), addr) for addr, _, op, rest in ins
             if op.startswith("BRA") and (t := re.search(r"0x([0-9a-f]+)", rest)) and int(t.group(1), 16) < addr]
    assert spans, "no backward branch in the SASS"
    _, lo, hi = max(spans)
    return [op for addr, pred, op, _ in ins if lo <= addr <= hi and pred != "@!PT"]
