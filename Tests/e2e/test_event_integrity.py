"""Events and the state keep their shape whatever a server sends (issue 9, items 1, 13, 15,
16 and 19): items are cut to size when taken in, an outbox row that cannot be read is a
dead letter instead of a sink blocked for ever, floods become one summary event, repeated
keys do not flap, a newer state is refused, and `items` shows the latest text."""
from __future__ import annotations

import json
import sqlite3

from conftest import read_log, wait_for
from fakes.hostile import HostilePair
from fakes.server import FakeServer
from fakes.webhook_receiver import WebhookReceiver, receiver_state
from feed import Feed, item


def http_json_source(name, url):
    return f"""
        [sources.{name}]
        provider = "http-json"
        url = "{url}"
        key = "/id"
        title = "/name"
        """


def webhook_sink(url):
    return f"""
        [sinks.hook]
        type = "webhook"
        url = "{url}/hook"
        timeout = "5s"
        """


def db(t):
    return sqlite3.connect(t.state / "tidings.sqlite")


def test_a_deeply_nested_item_cannot_block_a_sink(tidings):
    """A hostile server's item nesting 509 levels deep changes: its event is delivered (cut,
    with a marker), and so is every later event to the same sink."""
    with HostilePair() as h, FakeServer(WebhookReceiver, state=receiver_state()) as hook:
        tidings.write_config(webhook_sink(hook.url) + http_json_source("deep", h.script("/deep", deep=509, key="d1"))
                             + http_json_source("plain", h.script("/plain", json=[])))
        r = tidings.run("check", "--deliver")
        assert r.code == 0, r                       # baselines

        h.script("/deep", deep=508, key="d1")       # the deep item changes (one level less)
        h.script("/plain", json=[{"id": "p1", "name": "after the deep one"}])
        r = tidings.run("check", "--deliver")
        assert sorted(e["key"] for e in hook.state["accepted"]) == ["d1", "p1"], r
        assert r.code == 1, r
        changed = next(e for e in hook.state["accepted"] if e["key"] == "d1")
        assert changed["event"] == "changed"
        assert "nested deeper than 64 levels; cut by tidings, digest " in json.dumps(changed["data"])

        h.script("/plain", json=[{"id": "p1", "name": "after the deep one"}, {"id": "p2", "name": "later still"}])
        r = tidings.run("check", "--deliver")
        assert r.code == 1, r
        assert [e["key"] for e in hook.state["accepted"]][-1] == "p2"
        assert tidings.run("outbox", "--json").events == []
        # Said once, when the cut item was stored; not on every poll of the unchanged item.
        assert "cut 1 item to size (key 'd1': data nested deeper than 64 levels)" not in r.stderr


def test_an_unreadable_outbox_row_is_a_dead_letter_and_the_sink_goes_on(tidings):
    """Older versions wrote a too-deep event as `{}`: that row must not block its sink."""
    feed = Feed(tidings)
    feed.set([item("a")])
    with FakeServer(WebhookReceiver, state=receiver_state(script=[503])) as hook:
        tidings.write_config(webhook_sink(hook.url))
        r = tidings.run("check", "--deliver")
        assert r.code == 2 and "HTTP 503" in r.stderr, r        # queued, to be retried
        with db(tidings) as c:
            (a_id,) = c.execute("SELECT id FROM event WHERE key = 'a'").fetchone()
            c.execute("UPDATE event SET payload = '{}' WHERE id = ?", (a_id,))

        feed.set([item("a"), item("b")])
        d = tidings.start_daemon()
        wait_for(lambda: [e["key"] for e in hook.state["accepted"]] == ["b"], timeout=30, what="b delivered past the unreadable row")
        log = read_log(d)
        assert log.count("is a dead letter") == 1, log
        assert f"(event {a_id}) is a dead letter: cannot read the stored event: event: missing 'event'" in log

        rows = tidings.run("outbox", "--json").events
        assert [(x["status"], x["event"], x["event_id"]) for x in rows] == [("dead", None, a_id)]
        assert rows[0]["last_error"] == "cannot read the stored event: event: missing 'event'"
        text = tidings.run("outbox").stdout
        assert "1 dead" in text and "(unreadable event)" in text and a_id in text and "cannot read the stored event" in text


def test_history_names_an_unreadable_event_instead_of_hiding_it(tidings):
    """The same path as the outbox: a stored event that cannot be read back is said, not dropped."""
    feed = Feed(tidings)
    feed.set([])
    assert tidings.check().code == 0
    feed.set([item("a"), item("b")])
    assert tidings.check().code == 1
    with db(tidings) as c:
        (a_id,) = c.execute("SELECT id FROM event WHERE key = 'a'").fetchone()
        c.execute("UPDATE event SET payload = '{}' WHERE id = ?", (a_id,))
    r = tidings.run("history", "--json")
    assert r.code == 0, r
    assert [e["key"] for e in r.events] == ["b"], "stdout stays JSON lines of readable events"
    assert f"event {a_id} of feed cannot be read from the state (event: missing 'event'); it is left out" in r.stderr, r
    assert a_id in tidings.run("history").stderr


def test_a_huge_snapshot_sends_one_summary_event(tidings):
    """20 000 new items in one poll: one summary event and one warning, not 20 000 events."""
    feed = Feed(tidings)
    feed.set([item(f"k{i}") for i in range(20_000)] + [item("crit", severity="critical")])
    r = tidings.check(timeout=120)
    assert r.code == 1, r.stderr
    (summary,) = r.events
    assert summary["title"] == "feed: 20001 events in one poll (20001 new), over max_events = 1000"
    assert summary["data"]["summary"] == {"events": 20001, "max_events": 1000, "by_type": {"new": 20001}}
    assert (summary["event"], summary["kind"], summary["severity"]) == ("new", "message", "critical")
    assert r.stderr.count("over max_events = 1000") == 1
    assert len(tidings.run("history", "--json", "--limit", "100").events) == 1
    assert len(tidings.run("items", "feed", "--json").events) == 20_001, "the state is recorded in full"

    feed.set([item(f"k{i}") for i in range(20_000)] + [item("crit", severity="critical"), item("one-more")])
    r = tidings.check(timeout=120)
    assert [e["key"] for e in r.events] == ["one-more"], "the next poll is normal"


def test_max_events_is_set_per_source(tidings):
    feed = Feed(tidings)
    tidings.write_plugin("feed.toml", 'notify_existing = true\ninterval = "1s"\nmax_events = 2\n')
    feed.set([item("a"), item("b"), item("c")])
    r = tidings.check()
    assert [e["title"] for e in r.events] == ["feed: 3 events in one poll (3 new), over max_events = 2"]


def test_repeated_keys_and_member_names_in_a_varying_order_are_not_changes(tidings):
    with HostilePair() as h:
        url = h.script("/items", json=[{"id": "x", "name": "A"}, {"id": "x", "name": "B"}])
        tidings.write_config(http_json_source("dupes", url))
        assert tidings.check().code == 0
        h.script("/items", json=[{"id": "x", "name": "B"}, {"id": "x", "name": "A"}])
        r = tidings.check()
        assert (r.code, r.events) == (0, []), r

        h.script("/items", raw=b'[{"id": "y", "name": "one", "name": "two"}]', headers={"Content-Type": "application/json"})
        assert tidings.check().code == 1            # y is new (x and x#2 removed)
        h.script("/items", raw=b'[{"id": "y", "name": "two", "name": "one"}]', headers={"Content-Type": "application/json"})
        r = tidings.check()
        assert (r.code, r.events) == (0, []), r


def test_a_state_from_a_newer_tidings_is_refused_naming_the_file(tidings):
    assert tidings.run("sources").code == 0
    with db(tidings) as c:
        c.execute("INSERT INTO grdb_migrations(identifier) VALUES ('v99-from-the-future')")
    r = tidings.run("sources")
    assert r.code == 2, r
    assert str(tidings.state / "tidings.sqlite") in r.stderr and "v99-from-the-future" in r.stderr
    assert "newer version of tidings" in r.stderr


def test_items_shows_the_latest_text_under_a_custom_fingerprint(tidings):
    data = tidings.plugins / "disk.jsonl"
    data.write_text('{"key": "disk", "title": "DISK WARNING - 91% used", "fingerprint": "WARNING"}\n')
    tidings.write_plugin("disk", "#!/bin/sh\ncat ./disk.jsonl\n", mode=0o755)
    assert tidings.check().code == 0
    data.write_text('{"key": "disk", "title": "DISK WARNING - 97% used", "fingerprint": "WARNING"}\n')
    assert tidings.check().code == 0                  # same state: no event
    [shown] = tidings.run("items", "disk", "--json").events
    assert shown["title"] == "DISK WARNING - 97% used"
    assert "97% used" in tidings.run("items", "disk").stdout
