"""apprise sink with the real `apprise` CLI (from the test venv) posting to a local `json://`
receiver (fakes/webhook_receiver.py), which records what Apprise sends: version, title,
message, attachments, type."""
from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from conftest import kill_while_queued, outbox, read_log, wait_for
from fakes.server import FakeServer
from fakes.webhook_receiver import WebhookReceiver, receiver_state
from feed import Feed, item

APPRISE = Path(os.path.abspath(sys.executable)).parent / "apprise"  # the venv's, beside its python
pytestmark = pytest.mark.skipif(not APPRISE.exists(), reason="apprise is not installed: run the suite in the venv `make test-venv` makes")


def apprise_config(t, urls, extra=""):
    secret = t.write_secret("apprise.urls", "\n".join(["# one Apprise URL per line", *urls]))
    t.write_config(f"""
        [sinks.push]
        type = "apprise"
        urls_file = "{secret}"
        command = "{APPRISE}"
        timeout = "60s"
        {extra}
        """)


class SlowReceiver(WebhookReceiver):
    """Answers after `state["delay"]` seconds: apprise is still running while a test looks at it."""

    def route(self, req):
        time.sleep(self.state.get("delay", 0))
        return super().route(req)


class ProcessWatch:
    """Reads every process's argv (/proc/PID/cmdline, which any local user can read) while a
    delivery runs, to show what `ps` would show."""

    def __init__(self):
        self.seen: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.is_set():
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                if str(APPRISE) in argv and argv not in self.seen:
                    self.seen.append(argv)
            self.stop.wait(0.05)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def test_delivered_end_to_end_retried_after_5xx_urls_never_shown(tidings):
    token = "tok" + uuid.uuid4().hex
    Feed(tidings).set([item("disk", "Disk full", body="sda1 at 99%", severity="critical", url="https://example.org/disk"),
                       item("news", "-n looks like an option", body="-n too")])
    with FakeServer(SlowReceiver, state={**receiver_state(None, script=[503]), "delay": 1}) as srv:
        apprise_config(tidings, [f"json://127.0.0.1:{srv.port}/hook/{token}"])
        with ProcessWatch() as watch:
            d = tidings.start_daemon()
            wait_for(lambda: len(srv.state["accepted"]) == 2, timeout=120, what="both notifications")
        wait_for(lambda: outbox(tidings) == [], what="the outbox to empty")
        first, second = srv.state["accepted"]
        assert first == {"version": "1.0", "title": "Disk full", "message": "sda1 at 99%\nhttps://example.org/disk",
                         "attachments": [], "type": "failure"}
        assert second == {"version": "1.0", "title": "-n looks like an option", "message": "-n too",
                          "attachments": [], "type": "info"}
        assert [r.path for r in srv.requests] == [f"/hook/{token}"] * 3, "the first failed (503) and was retried"
        log = read_log(d)
        assert "apprise failed to notify (exit 1)" in log and "retrying in" in log, log
        assert watch.seen, "no apprise process was seen running"
        assert all(token not in argv and "json://" not in argv for argv in watch.seen), watch.seen
        assert any("--title=Disk full" in argv for argv in watch.seen), watch.seen
        assert token not in log


def test_missing_command_disables_the_sink_and_keeps_the_event(tidings):
    token = "tok" + uuid.uuid4().hex
    Feed(tidings).set([item("a")])
    apprise_config(tidings, [f"json://127.0.0.1:9/{token}"])
    tidings.write_config(tidings.config.read_text().replace(str(APPRISE), "/nonexistent/bin/apprise"))
    d = tidings.start_daemon()
    wait_for(lambda: "DISABLED" in read_log(d), timeout=30, what="the sink to be disabled")
    log = read_log(d)
    assert "the apprise command /nonexistent/bin/apprise was not found" in log, log
    assert [(r["sink"], r["status"]) for r in outbox(tidings)] == [("push", "retrying")]
    r = tidings.run("sinks", "test", "push")
    assert r.code == 2 and "not found" in r.stderr, r
    for text in (log, r.stdout, r.stderr, tidings.run("outbox").stdout, tidings.run("config", "check").stdout):
        assert token not in text


def test_sinks_test_and_failures_never_show_the_urls(tidings):
    token = "tok" + uuid.uuid4().hex
    with FakeServer(WebhookReceiver, state=receiver_state(None, script=[200, 500])) as srv:
        apprise_config(tidings, [f"json://u:{token}@127.0.0.1:{srv.port}/hook"])
        ok = tidings.run("sinks", "test", "push", timeout=120)
        assert ok.code == 0, ok
        [event] = srv.state["accepted"]
        assert "test" in event["title"].lower()
        failed = tidings.run("sinks", "test", "push", timeout=120)
        assert failed.code == 2 and "exit 1" in failed.stderr, failed
        for out in (ok, failed):
            assert token not in out.stdout + out.stderr


def test_receiver_down_daemon_killed_each_event_shown_once(tidings):
    Feed(tidings).set([item("a", "Alpha"), item("b", "Beta")])
    port, _ = kill_while_queued(tidings, lambda port: apprise_config(tidings, [f"json://127.0.0.1:{port}/hook"]), timeout=120)
    with FakeServer(WebhookReceiver, state=receiver_state(None), port=port) as srv:
        tidings.start_daemon()
        wait_for(lambda: outbox(tidings) == [], timeout=120, what="the queued events after restart")
        # Without a body, the title is the body (Apprise refuses a notification without one).
        assert sorted((e["title"], e["message"]) for e in srv.state["accepted"]) == [("", "Alpha"), ("", "Beta")]
        assert len(srv.requests) == 2
