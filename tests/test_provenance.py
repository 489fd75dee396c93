import re

from asyncpipe.provenance import commit


def test_commit_prefers_the_environment(monkeypatch):
    """The GPU machine's git metadata can be stale: $COMMIT (set by scripts/gpu_check.sh) wins."""
    monkeypatch.setenv("COMMIT", "abc1234")
    assert commit() == "abc1234"


def test_commit_from_git_or_unknown(monkeypatch):
    monkeypatch.delenv("COMMIT", raising=False)
    assert re.fullmatch(r"[0-9a-f]{7,}|unknown", commit())
