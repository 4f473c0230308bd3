"""Remote text never drives the terminal (issue 9, item 12).

A hostile server's titles, bodies, links and error bodies carry terminal escapes (clear screen,
OSC 8 links, window titles), C1 controls and bidi overrides. Every human-readable output shows
them as visible `\\u{…}` escapes, on one line; JSON outputs keep the text as it was.
"""
from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from conftest import read_log, wait_for
from fakes.hostile import HOSTILE_BODY, HOSTILE_TITLE, HostilePair

BIDI = {0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}


def raw_controls(text: str) -> list[str]:
    """Characters a terminal would act on (or that reorder text): C0 but newline, DEL, C1, bidi."""
    return [f"U+{ord(c):04X}" for c in text
            if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) <= 0x9F or ord(c) in BIDI]


def assert_clean(text: str, what: str):
    bad = raw_controls(text)
    assert not bad, f"{what}: raw {sorted(set(bad))} in {text!r}"


@pytest.fixture
def hostile():
    with HostilePair() as pair:
        yield pair


def configure(t, hostile):
    hostile.script("/escapes", escapes=True)
    hostile.script("/broken", raw=HOSTILE_TITLE.encode(), status=500)
    hostile.script("/hook", raw=(HOSTILE_BODY + HOSTILE_TITLE).encode(), status=500)
    t.write_config(f"""
        [sinks.hook]
        type = "webhook"
        url = "{hostile.main.url}/hook"
        timeout = "2s"
        """)
    for name, kind in [("api", "item"), ("news", "notice")]:
        t.write_plugin(f"{name}.toml", f"""
            provider = "http-json"
            url = "{hostile.main.url}/escapes"
            key = "/id"
            title = "/name"
            body = "/text"
            link = "/link"
            kind = "{kind}"
            notify_existing = true
            interval = "1s"
            timeout = "2s"
            """)
    t.write_plugin("broken.toml", f"""
        provider = "http-json"
        url = "{hostile.main.url}/broken"
        interval = "1s"
        timeout = "2s"
        """)


def test_every_human_readable_output_escapes_remote_text(tidings, hostile):
    configure(tidings, hostile)
    r = tidings.run("check", "--deliver")
    assert r.code == 2, r
    assert_clean(r.stdout, "check stdout")
    assert_clean(r.stderr, "check stderr")
    assert "source broken failed: HTTP 500" in r.stderr and r"\u{1B}[2J" in r.stderr, r.stderr
    assert "sink hook failed" in r.stderr, r.stderr

    outputs = {what: tidings.run(*args) for what, args in {
        "items": ["items"], "notices": ["notices"], "outbox": ["outbox"], "sources": ["sources"],
        "history": ["history"]}.items()}
    for what, out in outputs.items():
        assert out.code == 0, (what, out)
        assert_clean(out.stdout, f"{what} stdout")
        assert_clean(out.stderr, f"{what} stderr")
        assert r"\u{1B}[2J" in out.stdout, f"{what} shows the remote text, escaped: {out.stdout!r}"
    assert r"\u{202E}exe.txt" in outputs["items"].stdout
    assert r"\u{2066}isolate\u{2069}" in outputs["notices"].stdout
    assert "last error: POST" in outputs["outbox"].stdout
    assert "error: HTTP 500" in outputs["sources"].stdout

    # Each text line is one line: a remote "\n" or "\r" cannot forge another.
    assert all(line.startswith(("api", "news")) for line in outputs["items"].stdout.splitlines())

    # JSON outputs are JSON: the text exactly as the server sent it.
    items = [json.loads(l) for l in tidings.run("items", "--json", "api").stdout.splitlines()]
    assert [(i["title"], i["body"]) for i in items] == [(HOSTILE_TITLE, HOSTILE_BODY)]


def test_daemon_log_lines_escape_remote_text(tidings, hostile):
    configure(tidings, hostile)
    d = tidings.start_daemon()
    wait_for(lambda: "poll failed" in read_log(d) and "POST" in read_log(d), timeout=30,
             what="a poll error and a delivery error quoting the hostile bodies")
    d.send_signal(signal.SIGTERM)
    assert d.wait(timeout=20) == 0
    log = Path(d.log_path).read_bytes().decode("utf-8")  # strictly UTF-8: no stray C1 byte either
    assert_clean(log, "daemon log")
    assert r"HTTP 500: \u{1B}[2J\u{1B}[Hpwned" in log, log
    # Every line is a log line (timestamp first) or a diagnostic, none forged by a body's "\n" or "\r".
    for line in log.splitlines():
        assert line.startswith("tidings: ") or (line[:4].isdigit() and line[10] == "T"), f"not a log line: {line!r}"
