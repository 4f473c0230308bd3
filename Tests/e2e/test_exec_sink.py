"""Exec sink through the real binary: the event JSON on stdin and the TIDINGS_* environment
arrive intact; a failing command keeps the delivery queued."""
from __future__ import annotations

import json
import os

from feed import Feed, item

RECORDER = """#!/bin/sh
# Records one delivery: stdin, and the environment as NUL-separated pairs.
out="$1/$(date +%s%N)-$$"
cat > "$out.stdin"
env -0 > "$out.env"
"""


def recorder(t):
    out = t.root / "deliveries"
    out.mkdir()
    bin_dir = t.etc / "bin"
    bin_dir.mkdir()
    script = bin_dir / "record"
    script.write_text(RECORDER)
    os.chmod(script, 0o700)
    return out


def deliveries(out):
    result = []
    for stdin in sorted(out.glob("*.stdin")):
        env = dict(kv.split("=", 1) for kv in stdin.with_suffix(".env").read_text().split("\0") if "=" in kv)
        result.append((stdin.read_text(), env))
    return result


def test_event_json_on_stdin_and_environment(tidings):
    out = recorder(tidings)
    feed = Feed(tidings)
    title = 'Faktura 42: "tre" <små> & $HOME `x` ñ'
    feed.set([item("k1", title, body="rad 1\nrad 2", url="https://example.org/i/42", severity="warning")])
    tidings.write_config(f"""
        [sinks.cmd]
        type = "exec"
        command = ["bin/record", "{out}"]
        """)
    r = tidings.run("check", "--json", "--deliver")
    assert r.code == 1, r
    [printed] = r.events
    [(stdin, env)] = deliveries(out)
    assert stdin.endswith("\n") and json.loads(stdin) == printed
    assert env["TIDINGS_TITLE"] == title
    assert env["TIDINGS_BODY"] == "rad 1\nrad 2"
    assert env["TIDINGS_URL"] == "https://example.org/i/42"
    assert env["TIDINGS_SEVERITY"] == "warning"
    assert env["TIDINGS_SOURCE"] == "feed"
    assert env["TIDINGS_EVENT"] == "new"
    assert env["TIDINGS_EVENT_ID"] == printed["id"]
    assert "PATH" in env, "the daemon's environment is passed on"


def test_failing_command_is_retryable_and_stays_queued(tidings):
    feed = Feed(tidings)
    feed.set([item("k1")])
    tidings.write_config("""
        [sinks.cmd]
        type = "exec"
        command = ["/bin/sh", "-c", "echo 'relay refused' >&2; exit 5"]
        """)
    r = tidings.run("check", "--deliver")
    assert r.code == 2, r
    assert "sink cmd failed" in r.stderr and "exited with status 5: relay refused" in r.stderr
    rows = tidings.run("outbox", "--json").events
    assert [(x["sink"], x["status"], x["attempts"]) for x in rows] == [("cmd", "retrying", 1)]


def test_missing_command_is_a_config_error(tidings):
    tidings.write_config("""
        [sinks.cmd]
        type = "exec"
        command = ["bin/nope"]
        """)
    r = tidings.run("config", "check")
    assert r.code == 78, r
    assert "tidings.toml:4:" in r.stderr and "not an executable file" in r.stderr
