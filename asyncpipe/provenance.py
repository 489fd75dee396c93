"""Where a measurement came from: the commit recorded in the bench's and the tuner's JSON."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def commit() -> str:
    """``$COMMIT`` when set, else git's short hash of the checkout, else ``"unknown"``.

    The GPU machine gets a copy of the working tree whose git metadata can be stale, so
    ``scripts/gpu_check.sh`` passes the commit in ``$COMMIT``."""
    if os.environ.get("COMMIT"):
        return os.environ["COMMIT"]
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).resolve().parent,
                             capture_output=True, text=True)
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"
