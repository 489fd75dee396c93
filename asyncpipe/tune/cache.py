"""The tuner's memory: the best configuration per (GPU, kernel, kernel source, problem, search space,
asyncpipe version).

One JSON file, ``$ASYNCPIPE_CACHE_DIR/tune.json`` (default ``~/.cache/asyncpipe/tune.json``, next
to the unrolled kernel sources), holding ``{"entries": {key: entry}}``. A new asyncpipe version,
another GPU, an edited kernel (its source hash) or another search space misses the cache on purpose:
a stage count measured for other code or other hardware is not evidence. Writes replace the file atomically, so a reader never sees half of one;
reads are memoised on the file's modification time, so a kernel may ask on every call.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from .. import __version__
from ..errors import check

FILE_NAME = "tune.json"
FORMAT = 2


def cache_dir() -> Path:
    """``$ASYNCPIPE_CACHE_DIR`` or ``~/.cache/asyncpipe`` (the same folder asyncpipe uses elsewhere)."""
    return Path(os.environ.get("ASYNCPIPE_CACHE_DIR") or Path.home() / ".cache" / "asyncpipe")


def cache_path(path: str | os.PathLike | None = None) -> Path:
    """``path`` when given (a file), else ``cache_dir() / "tune.json"``."""
    return Path(path) if path is not None else cache_dir() / FILE_NAME


def problem_key(problem) -> str:
    """``(4096, 4096, 1024)`` -> ``"4096x4096x1024"``."""
    return "x".join(str(int(v)) for v in problem)


def cache_key(gpu: str, kernel: str, problem, version: str = __version__, source: str = "", space: str = "") -> str:
    """``gpu|kernel|source hash|problem|space hash|version``."""
    check(bool(gpu), "tune cache", "gpu name must be a non-empty string", repr(gpu))
    return f"{gpu}|{kernel}|{source}|{problem_key(problem)}|{space}|{version}"


_memo: dict[Path, tuple[int, dict]] = {}


def read_entries(path=None) -> dict:
    """Every cached entry by key; ``{}`` when the file is missing or is not a cache file."""
    p = cache_path(path)
    try:
        mtime = p.stat().st_mtime_ns
    except OSError:
        return {}
    hit = _memo.get(p)
    if hit and hit[0] == mtime:
        return hit[1]
    try:
        data = json.loads(p.read_text())
        entries = data["entries"] if isinstance(data, dict) and isinstance(data.get("entries"), dict) else {}
    except (OSError, ValueError):
        entries = {}
    _memo[p] = (mtime, entries)
    return entries


def lookup(gpu: str, kernel: str, problem, version: str = __version__, path=None, source: str = "",
           space: str = "") -> dict | None:
    """The cached entry for this GPU, kernel (and its source and search space hashes), problem and version,
    or None."""
    return read_entries(path).get(cache_key(gpu, kernel, problem, version, source, space))


def store(entry: dict, path=None) -> Path:
    """Add or replace ``entry`` (which carries ``gpu``, ``kernel``, ``problem``, ``version`` and the hashes
    ``source`` and ``space``)."""
    p = cache_path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    entries = dict(read_entries(p))
    entries[cache_key(entry["gpu"], entry["kernel"], entry["problem"], entry["version"], entry.get("source", ""),
                      entry.get("space", ""))] = entry
    fd, tmp = tempfile.mkstemp(prefix=".tune-", suffix=".json", dir=p.parent)
    with os.fdopen(fd, "w") as f:
        json.dump({"format": FORMAT, "entries": entries}, f, indent=1)
    os.replace(tmp, p)
    _memo.pop(p, None)
    return p


def cached_config(kernel, problem, *, gpu: str | None = None, path=None, **fixed):
    """The fastest measured configuration (``asyncpipe.tune.kernels.Config``) of ``kernel`` (a name, or a
    user's ``Tunable``) on
    ``problem`` on this GPU with this asyncpipe version, among those whose options (and stage count)
    agree with ``fixed`` (e.g. ``tile="8x16"``; an option not in a configuration means its default).
    None when it was never tuned (or there is no GPU to ask about). ``gpu`` overrides the current
    device's name."""
    from .kernels import Config, tunable

    if gpu is None:
        from ..errors import AsyncpipeError
        from ..host.device import device_info

        try:
            gpu = device_info("cached_config").name
        except AsyncpipeError:
            return None
    spec = tunable(kernel)
    entry = lookup(gpu, spec.name, spec.problem(problem), path=path, source=spec.source, space=spec.space)
    if not entry:
        return None
    rows = [r for r in entry.get("rows", []) if r.get("correct") and isinstance(r.get("measured_ms"), (int, float))
            and not r.get("pruned")
            and all(spec.kernel_kw(Config.of(r["stages"], **r.get("options", {}))).get(k) == v
                    for k, v in fixed.items())]
    if not rows:
        return None
    best = min(rows, key=lambda r: (r["measured_ms"], r["stages"]))
    return Config.of(best["stages"], **best.get("options", {}))


def cached_stages(kernel, problem, *, gpu: str | None = None, path=None) -> int | None:
    """The tuned stage count of ``kernel``'s default configuration (for the SGEMM the chapter's
    tile) on ``problem``, or None (``cached_config``)."""
    from .kernels import tunable

    c = cached_config(kernel, problem, gpu=gpu, path=path, **tunable(kernel).defaults)
    return c.stages if c else None
