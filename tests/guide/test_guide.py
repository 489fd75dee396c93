"""The guide's pages are tests: for every ``docs/guide/*.md`` but its index, the ```python blocks, concatenated in
order, form a module that defines ``check(n)`` (run the page's kernel on fresh random data of about ``n``
elements, assert against float64 numpy) and ends with ``if __name__ == "__main__": check(...)``.

- ``test_page_is_a_module``: the blocks import (nothing runs: the ``__main__`` guard), define ``check(n)`` and
  end with the guard.
- ``test_page_in_simulator`` (``simulator_too``; the simulator run only): ``check(SIM_N)``.
- ``test_page_on_gpu`` (``gpu``): ``check(GPU_N)``. A page whose module sets ``MIN_COMPUTE_CAPABILITY`` (a tuple)
  is skipped on an older GPU.
Page-specific tests (bad input and its messages) follow.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import SIMULATING, gpu_cc

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide"
PAGES = sorted(p for p in GUIDE.glob("*.md") if p.name != "README.md")
SIM_N = 2048             # elements: seconds in the simulator
GPU_N = 1 << 22
_BLOCK = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_MAIN = re.compile(r'if __name__ == "__main__":\s*\n\s+.*check\(', re.S)


def python_blocks(page: Path) -> list[str]:
    """The page's ```python blocks, in order."""
    return _BLOCK.findall(page.read_text(encoding="utf-8"))


def load_source(source: str, path: Path):
    """Write ``source`` to ``path`` and import it as a module (``__name__`` is not ``"__main__"``)."""
    path.write_text(source, encoding="utf-8")
    name = f"{path.stem}_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module            # numba's cuda.jit looks a function's module up by name
    spec.loader.exec_module(module)
    return module


def load_page(page: Path, tmp_path: Path):
    """Write the page's blocks to ``tmp_path / guide_<stem>.py`` and import it."""
    blocks = python_blocks(page)
    assert blocks, f"{page.name}: no ```python blocks"
    return load_source("\n\n".join(blocks), tmp_path / f"guide_{page.stem}.py")


def load_broken_page(page: Path, tmp_path: Path, right: str, wrong: str):
    """The page's module with its one occurrence of ``right`` replaced by ``wrong`` (a mistake to be found)."""
    source = "\n\n".join(python_blocks(page))
    assert source.count(right) == 1, f"{page.name} no longer has {right!r} (once)"
    return load_source(source.replace(right, wrong), tmp_path / f"guide_{page.stem}_broken.py")


def mistake_is_caught(page: Path, tmp_path: Path, right: str, wrong: str, errors: str, also: tuple = ()):
    """In the simulator run: the page with ``right`` replaced by ``wrong`` makes ``check`` raise one of the simulator
    errors named in ``errors`` (space-separated), or of ``also``."""
    from asyncpipe import sim

    if not SIMULATING:
        pytest.skip("the simulator run (NUMBA_ENABLE_CUDASIM=1) finds the mistakes")
    module = load_broken_page(page, tmp_path, right, wrong)
    with pytest.raises(tuple(getattr(sim, e) for e in errors.split()) + tuple(also)):
        module.check(SIM_N)


def page_check(page: Path, tmp_path: Path):
    module = load_page(page, tmp_path)
    check = getattr(module, "check", None)
    assert callable(check), f"{page.name}: its python blocks define no check(n)"
    assert "n" in inspect.signature(check).parameters, f"{page.name}: check takes no argument n"
    return module, check


def test_there_are_pages():
    assert PAGES, f"no pages in {GUIDE}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_page_is_a_module(page, tmp_path):
    page_check(page, tmp_path)
    last = python_blocks(page)[-1]
    assert _MAIN.search(last), f"{page.name}: the last python block must be the `if __name__ == \"__main__\": check(...)`"


@pytest.mark.simulator_too
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_page_in_simulator(page, tmp_path, capsys):
    if not SIMULATING:
        pytest.skip("the simulator run (NUMBA_ENABLE_CUDASIM=1) runs the pages' check on the CPU")
    _, check = page_check(page, tmp_path)
    check(SIM_N)
    print(capsys.readouterr().out)


@pytest.mark.gpu
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_page_on_gpu(page, tmp_path):
    module, check = page_check(page, tmp_path)
    need = getattr(module, "MIN_COMPUTE_CAPABILITY", None)
    if need is not None and gpu_cc() < tuple(need):
        pytest.skip(f"{page.name} needs compute capability {need}; this GPU is {gpu_cc()}")
    check(GPU_N)


# ---- 01_cp_async: the row-sum's host checks (no launch: they run before anything else) --------------------------
def _rowsum(tmp_path):
    return load_page(GUIDE / "01_cp_async.md", tmp_path).rowsum


@pytest.mark.simulator_too
@pytest.mark.parametrize("x, message", [
    (np.zeros((3, 8), np.float64), "rowsum: x must be a C-contiguous 2-D float32 numpy array, got ndarray float64 (3, 8)"),
    (np.zeros((8, 3), np.float32).T, "rowsum: x must be a C-contiguous 2-D float32 numpy array, got ndarray float32 (3, 8)"),
    (np.zeros(8, np.float32), "rowsum: x must be a C-contiguous 2-D float32 numpy array, got ndarray float32 (8,)"),
    ([[1.0] * 4], "rowsum: x must be a C-contiguous 2-D float32 numpy array, got list  "),
    (np.zeros((3, 6), np.float32), "rowsum: the row length must be a multiple of 4 floats (16 bytes), so that every "
     "row starts 16-byte aligned for the 16-byte cp.async [PTX ISA, cp.async: addresses aligned to the copy size], "
     "got 6 columns"),
])
def test_rowsum_refuses_bad_input(x, message, tmp_path):
    from asyncpipe.errors import AsyncpipeError

    with pytest.raises(AsyncpipeError) as err:
        _rowsum(tmp_path)(x)
    assert str(err.value) == message


@pytest.mark.simulator_too
@pytest.mark.parametrize("stages", (1, 10))
def test_rowsum_refuses_bad_stage_counts(stages, tmp_path):
    from asyncpipe.errors import AsyncpipeError

    with pytest.raises(AsyncpipeError) as err:
        _rowsum(tmp_path)(np.zeros((2, 4), np.float32), stages)
    assert str(err.value) == f"rowsum: stages must be 2..9 [asyncpipe.pipeline.cp_async_ring], got {stages}"


@pytest.mark.sass
def test_rowsum_sass(tmp_path):
    """What the page says the compiler made of its loop (offline, sm_90a, 3 stages)."""
    from collections import Counter

    from numba import types

    from tests.sass import assert_sass

    page = load_page(GUIDE / "01_cp_async.md", tmp_path)
    cubin = assert_sass(page.rowsum_kernel(3), (types.float32[:, ::1], types.float32[::1]))
    loop = Counter(i.opcode for i in cubin.main_loop())
    assert [i.operands.strip() for i in cubin.main_loop() if i.opcode == "DEPBAR.LE"] == ["SB0, 0x1"]
    assert (loop["BAR.SYNC.DEFER_BLOCKING"], loop["LDGSTS.E.BYPASS.128"], loop["LDGDEPBAR"], loop["LDS"],
            loop["FADD"]) == (1, 2, 1, 8, 8), loop
    assert cubin.resources.shared == 3 * page.TILE * 4 + 1024       # + the 1 KiB sm_90 reserves per CTA
