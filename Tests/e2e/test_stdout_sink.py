"""stdout sink: readable text, colour only on a terminal and never with NO_COLOR, no terminal
escapes from remote text, JSON lines when asked."""
from __future__ import annotations

import json
import os
import pty
import subprocess

from feed import Feed, item


def run_on_tty(t, *args, env):
    """Runs tidings with stdout on a pseudo-terminal; returns (exit code, stdout text)."""
    master, slave = pty.openpty()
    p = subprocess.Popen(t.args(*args), stdout=slave, stderr=subprocess.PIPE, env={**t.env, **env})
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    p.wait(timeout=30)
    return p.returncode, b"".join(chunks).decode()


def configure(t):
    feed = Feed(t)
    feed.set([item("a", "Disk \x1b[2Jfull", body="line1\nline2", url="https://h/1", severity="critical")])
    t.write_config("""
        [sinks.console]
        type = "stdout"
        """)


def test_text_on_a_terminal_is_coloured_and_safe(tidings):
    configure(tidings)
    env = {k: v for k, v in tidings.env.items() if k != "NO_COLOR"}
    tidings.env = env
    code, out = run_on_tty(tidings, "check", "--deliver", env={"TERM": "xterm"})
    assert code == 1, out
    lines = [l for l in out.splitlines() if "Disk" in l]
    assert len(lines) == 2, out  # check prints it, the stdout sink delivers it
    for l in lines:
        assert "\x1b[1;31mcritical" in l, repr(l)
        assert "\x1b[2J" not in l and "\\u{1B}[2J" in l, repr(l)
        assert "line1 line2" in l and "<https://h/1>" in l


def test_no_colour_with_NO_COLOR_even_on_a_terminal(tidings):
    configure(tidings)
    code, out = run_on_tty(tidings, "check", "--deliver", env={"TERM": "xterm", "NO_COLOR": "1"})
    assert code == 1, out
    assert "Disk" in out and "\x1b[" not in out.replace("\\u{1B}[", ""), repr(out)


def test_json_format_is_the_event_shape(tidings):
    feed = Feed(tidings)
    feed.set([item("a", "hello")])
    tidings.write_config("""
        [sinks.console]
        type = "stdout"
        format = "json"
        """)
    r = tidings.run("check", "--deliver")
    assert r.code == 1, r
    lines = r.stdout.splitlines()
    # check's own text line, then the sink's JSON line
    sink_line = json.loads(lines[-1])
    assert sink_line["title"] == "hello" and sink_line["source"] == "feed"
