"""Where a secret must never show: every given output, every file of the state, and the cache
of parsed plugin files (the test's $XDG_CACHE_HOME)."""
from __future__ import annotations

from pathlib import Path


def assert_nothing_leaks(t, outputs: dict[str, str], forms) -> None:
    for name, text in outputs.items():
        for form in forms:
            assert form not in text, f"{form!r} leaked in {name}:\n{text}"
    for f in [*Path(t.state).rglob("*"), *Path(t.root, "cache").rglob("*")]:
        if f.is_file():
            blob = f.read_bytes()
            for form in forms:
                assert form.encode() not in blob, f"{form!r} leaked into {f}"
