"""Helpers for the offline SASS tests: compile a kernel for sm_90a with its shims, check the SASS."""

from asyncpipe.codegen import compile_kernel


def assert_sass(kernel, argtypes, has=(), lacks=("CALL",), spills_ok=False, **options):
    """Compile ``kernel`` and check that every opcode prefix in ``has`` appears, none in ``lacks``
    does (by default no ``CALL``: every shim was inlined), and nothing went to local memory (unless
    ``spills_ok``: the caller then checks where the spills are)."""
    cubin = compile_kernel(kernel, argtypes, **options)
    ops = cubin.opcodes
    for prefix in has:
        assert any(op.startswith(prefix) for op in ops), f"{prefix} missing from SASS:\n{cubin.sass}"
    for prefix in lacks:
        bad = [op for op in ops if op.startswith(prefix)]
        assert not bad, f"{prefix} found in SASS ({bad}):\n{cubin.sass}"
    assert spills_ok or not cubin.spills, f"local memory used: {cubin.resources}\n{cubin.sass}"
    return cubin


def loop_opcodes(cubin) -> list[str]:
    """The opcodes of the kernel's main loop (``Cubin.main_loop``)."""
    return [i.opcode for i in cubin.main_loop()]
