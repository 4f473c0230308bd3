"""Desktop sink through the real binary against a private session bus with dbusmock's
notification daemon: the Notify calls, burst summaries, a hung server, and no bus at all."""
from __future__ import annotations

import os

import pytest

from conftest import read_log, wait_for
from fakes.server import FakeServer
from fakes.session_bus import SessionBus, available
from fakes.webhook_receiver import WebhookReceiver, receiver_state
from feed import Feed, item

pytestmark = pytest.mark.skipif(available() is not None, reason=available() or "")


@pytest.fixture
def bus():
    with SessionBus() as b:
        yield b


def desktop_config(t, extra="", more=""):
    t.write_config(f"""
        [sinks.desktop]
        type = "desktop"
        timeout = "2s"
        {extra}
        {more}
        """)


def test_notify_call_carries_app_name_summary_escaped_body_urgency_timeout_actions(tidings, bus):
    feed = Feed(tidings)
    feed.set([
        item("a", "Nytt meddelande från Lisa", body='Hej <b>du</b> & <a href="x">klick</a>', url="https://example.org/m/1"),
        item("b", "Disk full", body="", severity="critical"),
        item("c", "Planned maintenance", kind="notice", severity="warning"),
    ])
    desktop_config(tidings, 'expire_timeout = "8s"', '[sinks.desktop.expire_timeouts]\nmessage = "12s"')
    r = tidings.run("check", "--deliver", env=bus.env)
    assert r.code == 1, r
    calls = {c["summary"]: c for c in bus.notifications()}
    assert set(calls) == {"Nytt meddelande från Lisa", "Disk full", "Planned maintenance"}
    msg = calls["Nytt meddelande från Lisa"]
    assert msg["app_name"] == "tidings"
    assert msg["body"] == 'Hej &lt;b&gt;du&lt;/b&gt; &amp; &lt;a href="x"&gt;klick&lt;/a&gt;'
    assert msg["hints"]["urgency"] == 1
    assert msg["hints"]["category"] == "x-tidings.message"
    assert msg["hints"]["desktop-entry"] == "tidings"
    assert msg["expire_timeout"] == 12000
    assert msg["actions"] == ["default", "Open", "open", "Open", "snooze", "Snooze 1h"]
    crit = calls["Disk full"]
    assert crit["hints"]["urgency"] == 2 and crit["expire_timeout"] == 0 and crit["actions"] == ["snooze", "Snooze 1h"]
    notice = calls["Planned maintenance"]
    assert notice["hints"]["urgency"] == 1 and notice["expire_timeout"] == 0, "notices stay until dismissed"


def test_burst_becomes_one_summary(tidings, bus):
    feed = Feed(tidings)
    feed.set([item(f"m{i}", f"Message {i}") for i in range(12)])
    desktop_config(tidings)
    r = tidings.run("check", "--deliver", env=bus.env)
    assert r.code == 1, r
    [call] = bus.notifications()
    assert call["summary"] == "12 new messages from feed"
    assert call["body"].startswith("• Message 0\n") and call["body"].endswith("…and 7 more")


def test_sinks_test_sends_a_marked_event(tidings, bus):
    desktop_config(tidings)
    r = tidings.run("sinks", "test", "desktop", env=bus.env)
    assert r.code == 0, r
    [call] = bus.notifications()
    assert "test" in call["summary"].lower()
    bus.stop_server()
    r = tidings.run("sinks", "test", "desktop", env=bus.env)
    assert r.code == 2, r
    assert "desktop notifications unavailable" in r.stderr


def test_hung_server_does_not_block_other_sinks(tidings, bus):
    feed = Feed(tidings)
    feed.set([item("a", "urgent thing")])
    with FakeServer(WebhookReceiver, state=receiver_state()) as srv:
        tidings.write_config(f"""
            [sinks.desktop]
            type = "desktop"
            timeout = "1s"
            [sinks.hook]
            type = "webhook"
            url = "{srv.url}/hook"
            """)
        d = tidings.start_daemon(env=bus.env)
        bus.freeze()
        try:
            wait_for(lambda: srv.state["accepted"], timeout=15, what="the webhook despite the hung desktop server")
            wait_for(lambda: "desktop notifications unavailable" in read_log(d), timeout=15,
                     what="the desktop sink to report the hung server")
            assert "did not answer within 1s" in read_log(d)
            rows = tidings.run("outbox", "--json").events
            assert [(x["sink"], x["status"]) for x in rows] == [("desktop", "retrying")]
        finally:
            bus.thaw()
        wait_for(lambda: tidings.run("outbox", "--json").events == [], timeout=60, what="the desktop retry after thaw")
        assert any(c["summary"] == "urgent thing" for c in bus.notifications())


def test_no_session_bus_check_deliver_exits_2_naming_desktop_webhook_still_delivers(tidings, tmp_path):
    feed = Feed(tidings)
    feed.set([item("a", "headless")])
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    for var in ("DBUS_SESSION_BUS_ADDRESS", "DISPLAY", "WAYLAND_DISPLAY"):
        tidings.env.pop(var, None)
    env = {"XDG_RUNTIME_DIR": str(runtime)}
    with FakeServer(WebhookReceiver, state=receiver_state()) as srv:
        tidings.write_config(f"""
            [sinks.desktop]
            type = "desktop"
            [sinks.hook]
            type = "webhook"
            url = "{srv.url}/hook"
            """)
        r = tidings.run("check", "--deliver", env=env)
        assert r.code == 2, r
        assert "sink desktop failed: desktop notifications unavailable: " in r.stderr
        assert [e["title"] for e in srv.state["accepted"]] == ["headless"]
        rows = tidings.run("outbox", "--json").events
        assert [(x["sink"], x["status"]) for x in rows] == [("desktop", "retrying")], "the event is kept"

        # The daemon keeps retrying and says so once per outage, not once per attempt.
        d = tidings.start_daemon(env=env)
        wait_for(lambda: tidings.run("outbox", "--json").events[0]["attempts"] >= 3, timeout=30,
                 what="two more failed attempts")
        assert read_log(d).count("deliveries stay in the outbox and are retried") == 1, read_log(d)

        # The bus appears (as under a systemd user unit: $XDG_RUNTIME_DIR/bus): the kept event arrives.
        with SessionBus() as bus:
            os.symlink(bus.address.split("path=", 1)[1].split(",", 1)[0], runtime / "bus")
            wait_for(lambda: bus.notifications(), timeout=30, what="the kept notification")
            assert [c["summary"] for c in bus.notifications()] == ["headless"]
            wait_for(lambda: "desktop notifications available again" in read_log(d), what="the recovery to be logged")

def test_open_action_runs_xdg_open_with_the_url_while_the_daemon_runs(tidings, bus):
    opened = tidings.root / "opened"
    fake_bin = tidings.root / "bin"
    fake_bin.mkdir()
    (fake_bin / "xdg-open").write_text(f"#!/bin/sh\nprintf '%s\\n' \"$1\" >> '{opened}'\n")
    os.chmod(fake_bin / "xdg-open", 0o755)
    tidings.env["PATH"] = f"{fake_bin}:{tidings.env['PATH']}"
    feed = Feed(tidings)
    feed.set([item("a", "Click me", url="https://example.org/inbox?id=1&x=<2>")])
    desktop_config(tidings)
    tidings.start_daemon(env=bus.env)
    wait_for(lambda: bus.notifications(), what="the notification")
    bus.invoke_action(1, "open")
    wait_for(lambda: opened.exists() and opened.read_text(), what="xdg-open to run")
    assert opened.read_text() == "https://example.org/inbox?id=1&x=<2>\n"
