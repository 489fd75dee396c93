"""One catalog of the rules asyncpipe checks, and the one error type that reports them.

Every message reads ``<api>: <rule> [<source>], got <value>`` so that a user sees which call
failed, which hardware or API rule it broke, where that rule comes from, and what was passed.
"""

from __future__ import annotations


class AsyncpipeError(ValueError):
    """Bad input caught before anything ran on the device (or in the simulator)."""

    def __init__(self, api: str, rule: str, got, source: str | None = None):
        self.api, self.rule, self.got, self.source = api, rule, got, source
        where = f" [{source}]" if source else ""
        super().__init__(f"{api}: {rule}{where}, got {got}")


class UnsupportedDeviceError(AsyncpipeError):
    """The GPU (or its absence) cannot run what was asked."""


def check(ok: bool, api: str, rule: str, got, source: str | None = None, cls=AsyncpipeError):
    """Raise ``cls(api, rule, got, source)`` unless ``ok``."""
    if not ok:
        raise cls(api, rule, got, source)
