"""scripts/gpu_check.sh names GPU tests by id for compute-sanitizer; an id that no longer exists (a renamed
parameter) would silently sanitize nothing. Offline: every id it names must be collected."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def sanitizer_ids() -> list[str]:
    text = (ROOT / "scripts" / "gpu_check.sh").read_text()
    block = re.search(r'SANITIZER_DEFAULT="(.*?)"', text, re.S).group(1)
    return [w for w in block.replace("\\\n", " ").split() if "::" in w]


def test_the_sanitizers_test_ids_exist():
    ids = sanitizer_ids()
    assert len(ids) >= 8
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *ids],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    collected = {line.strip() for line in out.stdout.splitlines()}
    assert not [i for i in ids if i not in collected], out.stdout[-2000:]


def test_the_tune_step_names_a_kernel_spec_that_loads():
    """The tune step's user kernel (examples/rowsum_tune.py:row_sum) loads, and its --problem names the spec's
    problem: a renamed example or dimension would fail only on the GPU machine."""
    from asyncpipe.tune.cli import load_kernel, parse_problem

    text = (ROOT / "scripts" / "gpu_check.sh").read_text()
    m = re.search(r"python3 -m asyncpipe tune (\S+\.py:\w+) --problem (\S+)", text)
    assert m, "no user-kernel tune step"
    tuned = load_kernel(str(ROOT / m.group(1)))
    assert parse_problem(m.group(2), tuned.spec.problem) == {"rows": 8192, "cols": 8192}
    assert 'json "$OUT/tune_h200_row_sum.json"' in text
