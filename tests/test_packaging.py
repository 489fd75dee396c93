"""pyproject.toml lists every package, so a regular (non-editable) install ships all of asyncpipe."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_is_listed():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "asyncpipe").rglob("__init__.py")}
    missing = on_disk - listed
    assert not missing, f"add {sorted(missing)} to [tool.setuptools] packages in pyproject.toml"
    assert listed - on_disk == {"asyncpipe.ptx_shims"}, f"listed but absent: {sorted(listed - on_disk - {'asyncpipe.ptx_shims'})}"
