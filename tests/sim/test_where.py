"""Sites: a frame's code and instruction offset, turned into the line ``f_lineno`` names only for a message."""

import sys

import pytest

from asyncpipe.sim.where import describe_site, line_of

pytestmark = pytest.mark.sim

SEEN = []


def probe(*_):
    f = sys._getframe(1)
    SEEN.append((f.f_code, f.f_lasti, f.f_lineno))
    return 1


def long_function(lines: int):
    """A function of ``lines`` probed lines, some with two calls, some spanning two lines, a loop among them."""
    body = []
    for i in range(lines):
        if i % 7 == 0:
            body.append(f"    x = probe({i}) + probe(\n        {i})")
        elif i % 11 == 0:
            body.append(f"    for _ in range(2):\n        x += probe({i})")
        else:
            body.append(f"    x = probe({i}); y = probe(x)")
    src = "def f():\n    x = 0\n" + "\n".join(body) + "\n    return x\n"
    env = {"probe": probe}
    exec(compile(src, "<long kernel>", "exec"), env)
    return env["f"]


def test_line_of_says_what_f_lineno_says_at_every_call():
    SEEN.clear()
    long_function(1500)()
    assert len(SEEN) >= 3000
    assert [line_of(code, offset) for code, offset, _ in SEEN] == [line for _, _, line in SEEN]


def test_a_site_of_a_kernel_line_is_described_with_its_line():
    SEEN.clear()
    long_function(40)()
    code, offset, line = SEEN[-1]
    assert describe_site((code, offset)).startswith(f"<long kernel>:{line} (f)")
