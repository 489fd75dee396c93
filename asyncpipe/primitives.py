"""``python -m asyncpipe primitives [FILTER ...]``: every primitive's Python call, PTX, SM and SASS.

    python -m asyncpipe primitives                     # all of them, grouped by shim file
    python -m asyncpipe primitives cp_async_cg         # a substring of a name, a file stem or a PTX opcode
    python -m asyncpipe primitives 'cp.async.bulk.tensor.2d*' '*multicast'   # globs (* ? [...])
    python -m asyncpipe primitives addr --json         # one JSON list, nothing else on stdout

Each entry is the call line that opens the primitive's docstring (argument names from its simulator
body, types from its shim's numba signature, state spaces from its PTX line), the PTX line, the
minimum SM (``sm_90a`` where the feature is arch-specific) with the PTX ISA version, the SASS opcodes
its offline test in ``tests/ptx`` asserts (the registry's ``sass`` field, which that test reads), and
who must execute it. ``ptx.addr`` is listed as what it is: a numba intrinsic, no shim. A FILTER that
matches nothing exits with 2 and the names closest to it.
"""

from __future__ import annotations

import argparse
import difflib
import fnmatch
import json
import os
import sys

WIDTH = 100          # the text output fits a 100-column terminal
INDENT = "    "
GLOB_CHARS = "*?["
API = "python -m asyncpipe primitives"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description, p.formatter_class = __doc__.replace("``", ""), argparse.RawDescriptionHelpFormatter
    p.add_argument("filters", nargs="*", metavar="FILTER",
                   help="a substring of a name, file stem or PTX opcode, or a glob over them (default: all)")
    p.add_argument("--json", action="store_true", help="print one JSON list instead of text")


def entries() -> list[dict]:
    """Every primitive as a dict (the ``--json`` rows): ``ptx.addr`` first, then ``ptx.REGISTRY`` in
    shim-file order."""
    from . import ptx

    rows = [_entry(i, "intrinsic", i.source, None) for i in ptx.INTRINSICS.values()]
    for stem in ptx.MODULES:
        rows += [_entry(p, "shim", f"ptx_shims/{stem}.cu", f"{p.isa // 10}.{p.isa % 10}")
                 for p in ptx.REGISTRY.values() if p.stem == stem]
    return rows


def _entry(p, kind: str, source: str, isa: str | None) -> dict:
    shim = kind == "shim"
    return {
        "name": p.name,
        "kind": kind,
        "call": p.call,
        "params": [{"name": a.name, "type": a.type, "space": a.space} for a in p.params],
        "returns": p.returns,
        "ptx": p.ptx,
        "opcode": p.ptx.split()[0].rstrip(";") if shim else "",
        "sm": p.arch,
        "ptx_isa": isa,
        "sass": list(p.sass),
        "who": p.who,
        "stem": p.stem if shim else os.path.splitext(os.path.basename(source))[0],
        "source": source,
        "symbol": p.symbol if shim else None,
    }


def matches(row: dict, pattern: str) -> bool:
    """A glob (``*``, ``?``, ``[...]``) must match a whole name, stem or opcode; other text is a
    case-insensitive substring of one of them."""
    keys = [k for k in (row["name"], row["stem"], row["opcode"]) if k]
    if any(c in pattern for c in GLOB_CHARS):
        return any(fnmatch.fnmatchcase(k, pattern) for k in keys)
    return any(pattern.lower() in k.lower() for k in keys)


def select(rows: list[dict], filters: list[str]) -> list[dict]:
    """The rows some filter matches (all without filters); raises ``AsyncpipeError`` for a filter that
    matches none."""
    from .errors import AsyncpipeError

    for f in filters:
        if not any(matches(r, f) for r in rows):
            near = difflib.get_close_matches(f, [r["name"] for r in rows], n=3, cutoff=0.5)
            got = repr(f) + (f" (closest names: {', '.join(near)})" if near else "")
            raise AsyncpipeError(API, "FILTER must match a primitive's name, file stem or PTX opcode "
                                 "(a substring, or a glob with * ? [...])", got, "ptx.REGISTRY")
    return [r for r in rows if not filters or any(matches(r, f) for f in filters)]


def _wrap_call(call: str) -> list[str]:
    """The call line, broken after commas into lines of at most ``WIDTH`` columns, continuations aligned
    under the first argument (or indented, for the longest names)."""
    if len(call) <= WIDTH:
        return [call]
    head, _, rest = call.partition("(")
    pad = " " * (len(head) + 1 if len(head) < WIDTH // 2 else 2 * len(INDENT))
    parts = rest.split(", ")
    lines, line = [], head + "(" + parts[0]
    for part in parts[1:]:
        if len(line) + 2 + len(part) > WIDTH:
            lines.append(line + ",")
            line = pad + part
        else:
            line += ", " + part
    return lines + [line]


def _field(label: str, text: str) -> list[str]:
    """``    PTX   text``, wrapped at spaces to ``WIDTH``; a word too long for a line (a PTX opcode with
    every qualifier) is cut before a ``.`` and continues on the next line."""
    first = f"{INDENT}{label:<6}"
    room = WIDTH - len(first)
    lines, line = [], ""
    for word in text.split():
        pieces = []
        while len(word) > room and "." in word[1:room]:
            cut = word.rindex(".", 1, room)
            pieces.append(word[:cut])
            word = word[cut:]
        for k, piece in enumerate([*pieces, word]):
            if line and (k > 0 or len(line) + 1 + len(piece) > room):
                lines.append(line)
                line = piece
            else:
                line = f"{line} {piece}" if line else piece
    lines.append(line)
    return [first + lines[0]] + [" " * len(first) + x for x in lines[1:]]


def format_entry(row: dict) -> list[str]:
    sm = row["sm"] if row["kind"] == "intrinsic" else f"{row['sm']} (PTX ISA {row['ptx_isa']})"
    sass = ", ".join(row["sass"]) if row["sass"] else "none of its own"
    return [*_wrap_call(row["call"]), *_field("PTX", row["ptx"]), f"{INDENT}{'SM':<6}{sm:<24}SASS  {sass}",
            *_field("who", row["who"])]


def format_text(rows: list[dict]) -> str:
    lines, source = [], None
    for row in rows:
        if row["source"] != source:
            source = row["source"]
            what = "a numba intrinsic, no shim" if row["kind"] == "intrinsic" else f"asyncpipe/ptx/{row['stem']}.py"
            lines += ["" if lines else None, f"== {source} ({what})"]
        lines += format_entry(row)
    shims = sum(r["kind"] == "shim" for r in rows)
    counts = [f"{shims} primitive{'s' if shims != 1 else ''}"] if shims else []
    if len(rows) > shims:
        counts.append(f"{len(rows) - shims} intrinsic{'s' if len(rows) - shims != 1 else ''}")
    lines += ["", ", ".join(counts)]
    return "\n".join(line for line in lines if line is not None)


def run(args) -> int:
    from .errors import AsyncpipeError

    try:
        rows = select(entries(), args.filters)
    except AsyncpipeError as e:
        print(e, file=sys.stderr)
        return 2
    out = json.dumps(rows, indent=1) if args.json else format_text(rows)
    try:
        print(out)
        sys.stdout.flush()
    except BrokenPipeError:         # `... primitives | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
