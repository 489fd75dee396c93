"""``python -m asyncpipe primitives [FILTER]``: call lines, PTX, SM and SASS; filters; addr; --json."""

import json
import subprocess
import sys

import pytest

from asyncpipe import ptx
from asyncpipe.__main__ import main
from asyncpipe.primitives import WIDTH


def run(capsys, *argv):
    rc = main(["primitives", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def call_names(out: str) -> list[str]:
    """The names of the entries printed: the lines that start in column 0 with ``name(``."""
    return [line.split("(", 1)[0] for line in out.splitlines() if line[:1].isalpha() and "(" in line]


def test_a_filter_prints_call_ptx_sm_and_sass(capsys):
    rc, out, err = run(capsys, "cp_async_cg_shared_global_16")
    assert rc == 0 and err == ""
    assert out == """\
== ptx_shims/cp_async.cu (asyncpipe/ptx/cp_async.py)
cp_async_cg_shared_global_16(dst: ptr shared, src: ptr global)
    PTX   cp.async.cg.shared.global [dst], [src], 16;
    SM    sm_80 (PTX ISA 7.0)     SASS  LDGSTS.E.BYPASS.128
    who   each thread, for its own copies (groups are per thread)
cp_async_cg_shared_global_16_src_size(dst: ptr shared, src: ptr global, src_size: uint32)
    PTX   cp.async.cg.shared.global [dst], [src], 16, src_size;
    SM    sm_80 (PTX ISA 7.0)     SASS  LDGSTS.E.BYPASS.128.ZFILL
    who   each thread, for its own copies (groups are per thread)

2 primitives
"""


def test_arch_specific_primitives_say_sm_90a(capsys):
    rc, out, _ = run(capsys, "setmaxnreg_dec*")
    assert rc == 0 and call_names(out) == ["setmaxnreg_dec_sync_aligned_u32"]
    assert "    SM    sm_90a (PTX ISA 8.0)    SASS  USETMAXREG.DEALLOC.CTAPOOL" in out.splitlines()
    assert "setmaxnreg_dec_sync_aligned_u32(imm_reg_count: uint32)" in out.splitlines()


def test_addr_is_listed_as_an_intrinsic(capsys):
    rc, out, _ = run(capsys, "addr")
    assert rc == 0 and call_names(out) == ["addr"]
    lines = out.splitlines()
    assert lines[0] == "== asyncpipe/ptx/address.py (a numba intrinsic, no shim)"
    assert lines[1] == "addr(arr: array, idx: int | tuple) -> ptr"
    assert lines[2].startswith("    PTX   none of its own: a numba @intrinsic")
    assert lines[3] == "    SM    any                     SASS  none of its own"
    assert lines[-1] == "1 intrinsic"


@pytest.mark.parametrize("pattern, names", [
    ("*multicast", [f"cp_async_bulk_tensor_{r}d_shared_global_multicast" for r in range(1, 6)]),
    ("cp.async.bulk.tensor.2d*", ["cp_async_bulk_tensor_2d_shared_global",          # a glob over PTX opcodes
                                  "cp_async_bulk_tensor_2d_shared_global_multicast",
                                  "cp_async_bulk_tensor_2d_global_shared"]),
    ("warp", ["elect_sync"]),                                                       # a file stem
    ("BAR.", ["bar_sync", "bar_arrive"]),                                           # case-insensitive, opcodes
])
def test_filters_match_names_stems_and_opcodes(capsys, pattern, names):
    rc, out, _ = run(capsys, pattern)
    assert rc == 0 and call_names(out) == names


def test_several_filters_list_each_match_once(capsys):
    rc, out, _ = run(capsys, "elect", "*sync", "addr")
    names = call_names(out)
    assert rc == 0 and names[0] == "addr" and names.count("elect_sync") == 1 and "bar_sync" in names


def test_unknown_filter_is_refused_with_the_rule_and_the_closest_names(capsys):
    rc, out, err = run(capsys, "cp_asnyc_wait_grop")
    assert rc == 2 and out == ""
    assert err == ("python -m asyncpipe primitives: FILTER must match a primitive's name, file stem or PTX "
                   "opcode (a substring, or a glob with * ? [...]) [ptx.REGISTRY], got 'cp_asnyc_wait_grop' "
                   "(closest names: cp_async_wait_group, cp_async_bulk_wait_group, cp_async_commit_group)\n")
    rc, out, err = run(capsys, "elect", "zzz*")       # one bad filter among good ones: nothing listed
    assert rc == 2 and out == "" and err.endswith("got 'zzz*'\n")


def test_everything_fits_100_columns_once_each(capsys):
    rc, out, _ = run(capsys)
    assert rc == 0
    too_long = [line for line in out.splitlines() if len(line) > WIDTH]
    assert not too_long, too_long
    assert call_names(out) == ["addr", *(n for stem in ptx.MODULES for n, p in ptx.REGISTRY.items() if p.stem == stem)]
    assert out.splitlines()[-1] == f"{len(ptx.REGISTRY)} primitives, 1 intrinsic"


def test_json_rows_are_the_registry_and_the_docstrings(capsys):
    rc, out, _ = run(capsys, "--json")
    rows = json.loads(out)
    assert rc == 0 and len(rows) == len(ptx.REGISTRY) + 1
    for row in rows:
        fn = getattr(ptx, row["name"])
        assert row["call"] == fn.__doc__.splitlines()[0], "the CLI's call line is the docstring's first line"
        if row["kind"] == "shim":
            p = ptx.REGISTRY[row["name"]]
            assert (row["ptx"], row["sass"], row["sm"], row["symbol"]) == (p.ptx, list(p.sass), p.arch, p.symbol)
            assert [a["name"] for a in row["params"]] == [a.name for a in p.params]
        else:
            assert row["name"] == "addr" and row["sass"] == [] and row["symbol"] is None
    wgmma = next(r for r in rows if r["name"] == "wgmma_fence_sync_aligned")
    assert wgmma["sm"] == "sm_90a" and wgmma["ptx_isa"] == "8.0" and wgmma["params"] == []


def test_python_dash_m_exits_with_2_for_an_unknown_filter():
    bad = subprocess.run([sys.executable, "-m", "asyncpipe", "primitives", "nothing_like_it"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stdout == "" and "got 'nothing_like_it'" in bad.stderr
