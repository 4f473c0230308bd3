"""Helpers shared by the provider end-to-end tests."""
from __future__ import annotations

from pathlib import Path


def assert_no_secrets(t, results, secrets):
    """No secret value in any stdout/stderr, or anywhere in the state directory (DB, WAL)."""
    for r in results:
        for s in secrets:
            assert s not in r.stdout, f"secret leaked on stdout: {r!r}"
            assert s not in r.stderr, f"secret leaked on stderr: {r!r}"
    for f in Path(t.state).rglob("*"):
        if f.is_file():
            blob = f.read_bytes()
            for s in secrets:
                assert s.encode() not in blob, f"secret leaked into {f}"


def items_events(result):
    """Events about items (not source health)."""
    return [e for e in result.events if e["kind"] != "source"]


def by_key(events):
    return {(e["event"], e["key"]): e for e in events}
