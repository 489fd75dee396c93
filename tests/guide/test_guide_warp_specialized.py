"""docs/guide/03_warp_specialized.md beyond its check(n) (which tests/guide/test_guide.py runs): the host function's
bad-input messages (both runs: they come before anything touches a device), its kernel's SASS offline, and every
barrier and wait of the page enforced in the simulator run: the page with one of them edited out must fail with
the error that names its rule."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.guide.test_guide import GUIDE, load_page, load_source, mistake_is_caught, python_blocks

PAGE = GUIDE / "03_warp_specialized.md"


@pytest.fixture
def page(tmp_path):
    return load_page(PAGE, tmp_path)


_NOT_2D_FLOAT32 = "x must be a 2-D float32 numpy array (the kernel's boxes are float32), got "


@pytest.mark.simulator_too
@pytest.mark.parametrize("x, message", [
    (np.zeros((3, 8), np.float64), _NOT_2D_FLOAT32 + "ndarray float64 (3, 8)"),
    (np.zeros(8, np.float32), _NOT_2D_FLOAT32 + "ndarray float32 (8,)"),
    ([[1.0] * 4], _NOT_2D_FLOAT32 + "list  "),
    (np.zeros((0, 8), np.float32), ("x must have a row and a column (the log-sum-exp of nothing is -inf), "
                                    "got shape (0, 8)")),
    (np.zeros((3, 6), np.float32), ("the row length must be a multiple of 4 floats, so that the tensor map's row "
                                    "stride is a multiple of 16 bytes (pad the rows otherwise) "
                                    "[cuTensorMapEncodeTiled], got 6 columns")),
])
def test_logsumexp_rows_refuses_bad_input(page, x, message):
    from asyncpipe.errors import AsyncpipeError

    with pytest.raises(AsyncpipeError) as err:
        page.logsumexp_rows(x)
    assert str(err.value) == f"logsumexp_rows: {message}"


def test_register_split_fits_the_launch(page):
    """What the page's assert and prose say: 168 registers at launch, and the hand-over gives back what it takes."""
    from asyncpipe.ptx.wgmma import SETMAXNREG_MAX, SETMAXNREG_MIN, SETMAXNREG_STEP

    assert page.LAUNCH_REGS == 168 and page.THREADS == 384
    assert 128 * page.PRODUCER_REGS + 256 * page.CONSUMER_REGS == 384 * 168
    for regs in (page.PRODUCER_REGS, page.CONSUMER_REGS):
        assert SETMAXNREG_MIN <= regs <= SETMAXNREG_MAX and regs % SETMAXNREG_STEP == 0


@pytest.mark.sass
def test_logsumexp_ws_sass(page):
    """Offline (no GPU), sm_90a: the role shuffle, the ring's barrier operations, one TMA load, the register
    hand-over with the page's counts, 168 registers at launch, no CALL, nothing spilled."""
    from numba.cuda import types

    from asyncpipe.codegen import compile_kernel
    from asyncpipe.ptx.tensor_map_type import tensormap

    cubin = compile_kernel(page.logsumexp_ws, (tensormap, types.float32[::1], types.int32),
                           launch_bounds=page.LAUNCH_BOUNDS)
    ops, sass = cubin.opcodes, cubin.sass
    assert ops.count("SHFL.IDX") == 1                                   # warpgroup_index: lane 0's value
    assert ops.count("SYNCS.EXCH.64") == 2 * page.STAGES                # pipeline_init: full and empty
    assert ops.count("UTMALDG.2D") == 1 and ops.count("UTMACCTL.IV") == 1
    assert ops.count("SYNCS.ARRIVE.TRANS64") == 1                       # producer_commit: arrive.expect_tx
    assert ops.count("SYNCS.ARRIVE.TRANS64.A1T0") == 1                  # consumer_release: a plain arrival
    assert ops.count("SYNCS.PHASECHK.TRANS64.TRYWAIT") >= 2             # producer_acquire, consumer_wait
    assert "MUFU.EX2" in ops
    assert re.findall(r"USETMAXREG\.DEALLOC\.CTAPOOL (0x[0-9a-f]+)", sass) == [hex(page.PRODUCER_REGS)]
    assert re.findall(r"USETMAXREG\.TRY_ALLOC\.CTAPOOL UP\d, (0x[0-9a-f]+)", sass) == [hex(page.CONSUMER_REGS)]
    assert cubin.resources.registers == page.LAUNCH_REGS
    assert cubin.resources.shared == page.STAGES * (page.TILE_BYTES + 16) + 1024   # + the 1 KiB sm_90 reserves
    assert not any(o.startswith(("CALL", "LDL", "STL")) for o in ops) and not cubin.spills, cubin.resources


# ---- every "why" of the page, enforced: the page without it fails in the simulator, naming the rule --------------
_SETMAXNREG_DEC = "        ptx.setmaxnreg_dec_sync_aligned_u32(PRODUCER_REGS)\n"
_CONSUMER_WAIT = "            consumer_wait(full, st)                      # the tile has landed\n"
MISTAKES = {
    "no consumer_wait": (_CONSUMER_WAIT, "", "SharedMemoryRaceError UnwaitedAsyncReadError"),
    "no producer_acquire": ("                producer_acquire(empty, st)", "                pass",
                            "MbarrierPhaseError SharedMemoryRaceError UnwaitedAsyncReadError SimUsageError"),
    "no syncwarp before the release": ("            cuda.syncwarp()", "            pass", "SharedMemoryRaceError"),
    "the consumers' parity fixed at 0": (_CONSUMER_WAIT, _CONSUMER_WAIT.replace("(full, st)",
                                         "(full, pipeline_state(st.stage, 0))"), "MbarrierParityError"),
    "empty counting threads": ("pipeline_init(full, empty, STAGES, 1, CONSUMER_WARPS)",
                               "pipeline_init(full, empty, STAGES, 1, CONSUMER_WARPS * 32)", "DeadlockError"),
    "expect_tx with half the bytes": ("producer_commit(full, st, TILE_BYTES)",
                                      "producer_commit(full, st, TILE_BYTES // 2)", "TxCountError"),
    "no block barrier after the init": ("    cuda.syncthreads()\n", "", "MbarrierInitError"),
    "setmaxnreg in one thread": (_SETMAXNREG_DEC + "        if tid == 0:\n",
                                 "        if tid == 0:\n    " + _SETMAXNREG_DEC, "WarpgroupError"),
    "consumers stop a tile early": ("        for k in range(tiles):\n            consumer_wait",
                                    "        for k in range(tiles - 1):\n            consumer_wait",
                                    "UnwaitedAsyncReadError"),
}


@pytest.mark.simulator_too
@pytest.mark.parametrize("mistake", MISTAKES)
def test_each_barrier_and_wait_is_needed(mistake, tmp_path):
    mistake_is_caught(PAGE, tmp_path, *MISTAKES[mistake])


@pytest.mark.simulator_too
def test_the_quoted_simulator_message(tmp_path):
    """The page quotes the simulator's message for the page without consumer_wait: it is still what it says."""
    from asyncpipe import sim
    from tests.conftest import SIMULATING

    if not SIMULATING:
        pytest.skip("the simulator run (NUMBA_ENABLE_CUDASIM=1) finds the mistake")
    text = PAGE.read_text(encoding="utf-8")
    quoted = text[text.index("```text\nSharedMemoryRaceError"):]
    quoted = " ".join(quoted[len("```text\n"):quoted.index("```", 8)].split())
    source = "\n\n".join(python_blocks(PAGE)).replace(_CONSUMER_WAIT, "")
    module = load_source(source, tmp_path / "warp_specialized.py")
    with sim.settings(seed=0), pytest.raises(sim.SharedMemoryRaceError) as err:
        module.check(2048)
    assert " ".join(f"SharedMemoryRaceError: {err.value}".split()) == quoted
