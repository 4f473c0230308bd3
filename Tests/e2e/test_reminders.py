"""repeat_interval reminders through the real binary (DESIGN §10): a warning item still present is
reminded of (`"event": "reminder"`) at the route's interval, only through routes that have one,
never for an info item, and no more once it is gone."""
from __future__ import annotations

import time
from datetime import datetime

from conftest import read_log, wait_for
from fakes.server import FakeServer
from fakes.webhook_receiver import WebhookReceiver, receiver_state
from feed import Feed, item

WARN = item("disk", "disk /var 95% full", severity="warning", body="95% used", url="https://example.org/disk")
INFO = item("note", "backup finished", severity="info")


def config(t, url, interval="2s"):
    """`hook` reminds every `interval`; `log` takes every event of the feed but never reminds."""
    t.write_config(f"""
        [sinks.hook]
        type = "webhook"
        url = "{url}/hook"
        timeout = "5s"
        [sinks.log]
        type = "webhook"
        url = "{url}/log"
        timeout = "5s"

        [[routes]]
        match = {{ source = "feed", event = ["new", "changed"] }}
        sinks = ["hook"]
        repeat_interval = "{interval}"
        continue = true
        [[routes]]
        sinks = ["log"]
        """)


def at(event) -> float:
    return datetime.fromisoformat(event["observed_at"].replace("Z", "+00:00")).timestamp()


def received(srv, path):
    return [r.json() for r in list(srv.requests) if r.path == path]


def test_the_daemon_reminds_of_a_warning_item_at_the_interval_until_it_is_gone(tidings):
    feed = Feed(tidings)
    feed.set([WARN, INFO])
    with FakeServer(WebhookReceiver, state=receiver_state()) as srv:
        config(tidings, srv.url)
        d = tidings.start_daemon()
        reminders = lambda: [e for e in received(srv, "/hook") if e["event"] == "reminder"]
        wait_for(lambda: len(reminders()) >= 3, timeout=30, what="three reminders")
        got = reminders()
        assert {e["key"] for e in got} == {"disk"}, "none for the info item"
        first = got[0]
        assert first["title"] == WARN["title"] and first["url"] == WARN["url"] and first["severity"] == "warning"
        new = next(e for e in received(srv, "/hook") if e["event"] == "new" and e["key"] == "disk")
        assert first["data"]["since"] == new["observed_at"], "present since it was first seen"
        assert first["body"].startswith(f"Still present since {new['observed_at']}"), first["body"]
        assert first["body"].endswith("95% used")
        assert [e["data"]["reminder_count"] for e in got[:3]] == [1, 2, 3]
        assert len({e["id"] for e in got}) == len(got), "a new id for each reminder"
        gaps = [at(b) - at(a) for a, b in zip([new] + got, got)]
        assert all(2 <= g <= 8 for g in gaps), f"spaced by the 2s interval (polled every 1s): {gaps}"
        assert [e["event"] for e in received(srv, "/log") if e["key"] == "disk"] == ["new"], \
            "a route without repeat_interval never gets reminders"

        feed.set([INFO])
        wait_for(lambda: any(e["event"] == "removed" for e in received(srv, "/hook") + received(srv, "/log")),
                 timeout=20, what="the removal")
        count = len(reminders())
        time.sleep(4)  # two intervals, four polls
        assert len(reminders()) == count, "no reminder once the item is gone"
        assert d.poll() is None, read_log(d)


def test_check_deliver_reminds_when_due_and_dry_run_or_printing_only_does_not(tidings):
    feed = Feed(tidings)
    feed.set([WARN])
    with FakeServer(WebhookReceiver, state=receiver_state()) as srv:
        config(tidings, srv.url, interval="1s")
        assert tidings.run("check", "--deliver").code == 1  # notify_existing: `new`
        time.sleep(1.2)
        for args in (["--dry-run"], [], ["--dry-run", "--deliver"]):
            r = tidings.check(*args)
            assert r.code == 0 and r.events == [], (args, r)
        r = tidings.check("--deliver")
        assert r.code == 1, r
        assert [(e["event"], e["key"]) for e in r.events] == [("reminder", "disk")]
        assert [e["id"] for e in received(srv, "/hook") if e["event"] == "reminder"] == [r.events[0]["id"]]
        assert all(e["event"] != "reminder" for e in received(srv, "/log"))


def test_a_restarted_daemon_reminds_an_interval_after_the_last_reminder_not_at_once(tidings):
    feed = Feed(tidings)
    feed.set([WARN])
    with FakeServer(WebhookReceiver, state=receiver_state()) as srv:
        config(tidings, srv.url, interval="3s")
        reminders = lambda: [e for e in received(srv, "/hook") if e["event"] == "reminder"]
        d = tidings.start_daemon()
        wait_for(lambda: reminders(), timeout=20, what="the first reminder")
        d.terminate()
        d.wait(timeout=20)
        tidings.start_daemon()
        wait_for(lambda: len(reminders()) >= 2, timeout=20, what="the reminder after the restart")
        first, second = reminders()[:2]
        assert at(second) - at(first) >= 3, "the last reminder's time was kept in the state"
        assert second["data"]["reminder_count"] == 2
