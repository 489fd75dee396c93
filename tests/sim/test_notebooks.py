"""Every notebook runs top to bottom on asyncpipe's simulator, and is committed executed.

The simulator run re-executes each notebook headless (nbclient; its kernel inherits
``NUMBA_ENABLE_CUDASIM=1``): a cell that needs a GPU runs its kernel on the simulator at a small size
and says so, a SASS cell compiles offline in a child process (``asyncpipe.codegen.compile_kernel``
does that by itself when the simulator is on), figures come from ``bench/``. Any error fails the test.

The committed notebooks hold the outputs of such an execution, without timing metadata. To refresh
them (all, or the ones named)::

    NUMBA_ENABLE_CUDASIM=1 python3 -m tests.sim.test_notebooks --write [01_primitives ...]
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
TIMEOUT_S = 300                         # one cell; the slowest (an offline SGEMM compile) takes ~25 s
FIGURE_DPI = 60                         # inline figures: small PNGs keep the committed notebooks small
# inline figures at FIGURE_DPI, set before the first cell (a kernel setting, not part of the notebook)
_SETUP = f"%config InlineBackend.rc = {{'figure.dpi': {FIGURE_DPI}}}"


def execute(path: Path):
    """Run the notebook at ``path`` top to bottom in a fresh kernel; returns the executed notebook."""
    import nbclient
    import nbformat
    from nbclient.util import run_sync

    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") in ("", "0"):
        raise RuntimeError("execute: the notebooks are executed on the simulator: set NUMBA_ENABLE_CUDASIM=1")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=TIMEOUT_S, kernel_name="python3", record_timing=False,
                                     resources={"metadata": {"path": str(path.parent)}})
    with client.setup_kernel():
        run_sync(client.kc.execute_interactive)(_SETUP, silent=True, store_history=False, timeout=TIMEOUT_S)
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
    return nb


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_on_the_simulator(path):
    pytest.importorskip("nbclient")
    nb = execute(path)                  # raises CellExecutionError on the first cell that fails
    cells = code_cells(nb)
    assert [c.execution_count for c in cells] == list(range(1, len(cells) + 1))
    assert not [o for c in cells for o in c.outputs if o.output_type == "error"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_committed_executed(path):
    """Executed top to bottom once (counts 1, 2, ...), with outputs, no errors, no timing metadata."""
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(path, as_version=4)
    cells = code_cells(nb)
    assert [c.execution_count for c in cells] == list(range(1, len(cells) + 1)), \
        f"{path.name} is not committed executed: run python3 -m tests.sim.test_notebooks --write {path.stem}"
    assert sum(bool(c.outputs) for c in cells) >= len(cells) // 2, f"{path.name}: most cells have no output"
    assert not [o for c in cells for o in c.outputs if o.output_type == "error"], f"{path.name} holds an error"
    assert not [c for c in nb.cells if "execution" in c.metadata], f"{path.name} holds timing metadata"


def test_offline_sass_from_the_simulator_process():
    """The SASS cells' route: compile_kernel, called where the simulator is on, compiles in a child."""
    import numpy as np
    from numba import cuda
    from numba.cuda import types

    from asyncpipe import ptx
    from asyncpipe.codegen import compile_kernel

    def copy_in(src, dst):
        tile = cuda.shared.array(128, np.float32)
        t = cuda.threadIdx.x
        ptx.cp_async_cg_shared_global_16(ptx.addr(tile, 4 * t), ptx.addr(src, 4 * t))
        ptx.cp_async_commit_group()
        ptx.cp_async_wait_group(0)
        dst[t] = tile[4 * t]

    assert ptx.simulating()
    cubin = compile_kernel(cuda.jit(copy_in), (types.float32[::1], types.float32[::1]))
    assert cubin.arch == "sm_90a"
    assert cubin.count("LDGSTS.E.BYPASS.128") == 1 and cubin.count("CALL") == 0 and not cubin.spills


def test_offline_sass_from_the_simulator_process_takes_asyncpipe_intrinsics():
    """A kernel naming an asyncpipe intrinsic whose simulator stand-in is a plain function (``opaque_f32`` is
    ``lambda x: x`` there, as the SGEMM's epilogue uses it) compiles in the child with the intrinsic itself:
    its ``mov.b32`` stays in the SASS (a lambda sent by value was an untyped global in the child)."""
    from numba import cuda
    from numba.cuda import types

    from asyncpipe.codegen import compile_kernel
    from asyncpipe.kernels.vector import opaque_f32

    def scale(x, beta):
        i = cuda.threadIdx.x
        if opaque_f32(beta[0]) == 0:
            x[i] = 0
        else:
            x[i] *= beta[0]

    assert opaque_f32.__name__ == "<lambda>"          # the stand-in this test is about
    cubin = compile_kernel(cuda.jit(scale), (types.float32[::1], types.float32[::1]))
    assert cubin.count("CALL") == 0 and not cubin.spills
    assert cubin.count("FSETP") >= 1 and cubin.count("FMUL") == 1


def coalesce_streams(nb):
    """Merge each cell's consecutive stdout (stderr) outputs into one: how the kernel splits a cell's prints
    into messages varies from run to run, and the committed diffs should not."""
    for cell in code_cells(nb):
        merged = []
        for out in cell.outputs:
            if merged and out.output_type == "stream" and merged[-1].output_type == "stream" \
                    and merged[-1].name == out.name:
                merged[-1].text += out.text
            else:
                merged.append(out)
        cell.outputs = merged
    return nb


def write(names=()):
    """Execute the notebooks (all, or those whose stem is in ``names``) and write them back."""
    import nbformat

    for path in NOTEBOOKS:
        if names and path.stem not in names:
            continue
        start = time.perf_counter()
        nb = execute(path)
        nbformat.write(coalesce_streams(nb), path)
        print(f"{path.name}: executed in {time.perf_counter() - start:.1f} s, {path.stat().st_size // 1024} KiB")


if __name__ == "__main__":
    if sys.argv[1:2] != ["--write"]:
        raise SystemExit("usage: NUMBA_ENABLE_CUDASIM=1 python3 -m tests.sim.test_notebooks --write [stem ...]")
    write(sys.argv[2:])
