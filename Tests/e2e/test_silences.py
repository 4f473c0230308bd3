"""Silences (DESIGN §10) through the real binary: `tidings silence add|list|expire`, a running
daemon that keeps silenced events from its sinks and delivers again once the silence ends,
`history` marking them, and the desktop's "Snooze 1h" action (dbusmock's notification daemon)."""
from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from conftest import read_log, wait_for
from fakes.server import FakeServer
from fakes.session_bus import SessionBus, available
from fakes.webhook_receiver import WebhookReceiver, receiver_state
from feed import Feed, item


@pytest.fixture(scope="module")
def hook():
    with FakeServer(WebhookReceiver, state=receiver_state()) as srv:
        yield srv


def delivered(srv, source):
    return [(e["key"], e["event"]) for e in srv.state["accepted"] if e["source"] == source]


def history(t, *args):
    r = t.run("history", "--json", "--limit", "200", *args)
    assert r.code == 0, r
    return r.events


def silences(t, *args):
    r = t.run("silence", "list", "--json", *args)
    assert r.code == 0, r
    return r.events


def test_silence_stops_delivery_until_it_expires_while_the_daemon_runs(tidings, hook):
    hook.state["accepted"].clear()
    helpdesk, other = Feed(tidings, "helpdesk"), Feed(tidings, "other")
    tidings.write_config(f"""
        [sinks.hook]
        type = "webhook"
        url = "{hook.url}/hook"
        """)
    d = tidings.start_daemon()
    wait_for(lambda: len(tidings.run("sources", "--json").events) == 2
             and all(s.get("last_success") for s in tidings.run("sources", "--json").events),
             timeout=30, what="both baselines")

    r = tidings.run("silence", "add", "source=helpdesk", "--for", "6s", "--comment", "helpdesk migration")
    assert r.code == 0, r
    sid = r.stdout.strip()
    assert len(sid) == 10 and r.stdout == sid + "\n", "only the id on stdout"
    helpdesk.set([item("t1", "Printer on fire")])
    other.set([item("o1", "Not silenced")])

    # The other source is delivered; helpdesk's event is in history, marked, and not delivered.
    wait_for(lambda: delivered(hook, "other") == [("o1", "new")], timeout=20, what="the unsilenced event")
    silenced = wait_for(lambda: [e for e in history(tidings, "--source", "helpdesk") if e["key"] == "t1"],
                        timeout=20, what="the silenced event in history")
    assert silenced[0]["silenced_by"] == sid
    assert set(silenced[0]) - {"silenced_by"} == {"id", "source", "provider", "kind", "event", "key", "title", "body",
                                                  "url", "severity", "observed_at", "data"}
    text = tidings.run("history", "--source", "helpdesk")
    assert f"Printer on fire  [silenced by {sid}]" in text.stdout, text
    assert "silenced_by" not in history(tidings, "--source", "other")[0]
    [listed] = silences(tidings)
    assert listed["id"] == sid and listed["silenced"] == 1 and listed["state"] == "active"
    assert listed["matchers"] == [{"name": "source", "op": "=", "value": "helpdesk"}]
    assert listed["comment"] == "helpdesk migration" and "@" in listed["created_by"]
    assert "silenced 1 event," in tidings.run("silence", "list").stdout
    assert delivered(hook, "helpdesk") == [], "nothing of helpdesk while silenced"

    # The silence ends by itself, the daemon still running: the next helpdesk event is delivered.
    ends = listed["ends_at"]
    wait_for(lambda: silences(tidings) == [], timeout=15, what=f"the silence to end ({ends})")
    helpdesk.set([item("t1", "Printer on fire"), item("t2", "Paper jam")])
    wait_for(lambda: delivered(hook, "helpdesk"), timeout=20, what="delivery after the silence ended")
    assert delivered(hook, "helpdesk") == [("t2", "new")], "the silenced event is not delivered later"
    [ended] = silences(tidings, "--expired")
    assert ended["id"] == sid and ended["state"] == "expired" and ended["silenced"] == 1
    assert "silenced_by" not in [e for e in history(tidings) if e["key"] == "t2"][0]
    assert d.poll() is None, read_log(d)


def test_expire_ends_a_silence_early_and_list_escapes_what_it_shows(tidings):
    r = tidings.run("silence", "add", "kind=alert", "title~=(?i)disk .* full", "--until", "23:59",
                    "--comment", "evil \x1b]0;pwned\x07\x1b[31mred\nsecond line", "--author", "ops\x1b[2J")
    assert r.code == 0, r
    sid = r.stdout.strip()
    text = tidings.run("silence", "list")
    assert text.code == 0, text
    assert "\x1b" not in text.stdout and "\x07" not in text.stdout
    assert "evil \\u{1B}]0;pwned\\u{7}\\u{1B}[31mred second line" in text.stdout, text.stdout
    assert "by ops\\u{1B}[2J" in text.stdout
    assert f'{sid}  active  kind=alert title~="(?i)disk .* full"' in text.stdout
    [listed] = silences(tidings)
    assert listed["comment"] == "evil \x1b]0;pwned\x07\x1b[31mred\nsecond line", "JSON keeps the text, escaped for JSON"
    assert listed["matchers"][1] == {"name": "title", "op": "~=", "value": "(?i)disk .* full"}

    r = tidings.run("silence", "expire", sid[:5].upper())
    assert r.code == 0, r
    assert f"expired silence {sid}" in r.stderr and r.stdout == ""
    assert silences(tidings) == []
    assert tidings.run("silence", "list").stdout == "no active silences\n"
    [ended] = silences(tidings, "--expired")
    assert ended["id"] == sid and ended["state"] == "expired"
    r = tidings.run("silence", "expire", sid)
    assert r.code == 64 and "already ended" in r.stderr, r
    r = tidings.run("silence", "expire", "zzzzzz")
    assert r.code == 64 and "no silence with id zzzzzz" in r.stderr, r
    r = tidings.run("silence", "expire", sid[:3])
    assert r.code == 64 and "too short" in r.stderr, r


@pytest.mark.parametrize("tz, zone", [
    ("Asia/Kolkata", "Asia/Kolkata"),
    (":Australia/Lord_Howe", "Australia/Lord_Howe"),
    ("/usr/share/zoneinfo/Europe/Dublin", "Europe/Dublin"),
    ("EST5EDT,M3.2.0,M11.1.0", "America/New_York"),
])
def test_until_a_local_time_is_in_the_zone_TZ_names(tidings, tz, zone):
    """`--until HH:MM` is that wall time in the zone `TZ` names (a name, `:name`, a file, a POSIX
    rule), read from the zoneinfo files, not ICU; the expected instant is Python's zoneinfo's."""
    z = ZoneInfo(zone)
    for hours in (2, 3):  # two hours ahead, or three should that wall time fall in a DST gap
        wall = (datetime.now(z) + timedelta(hours=hours)).replace(second=0, microsecond=0, tzinfo=None)
        if datetime.fromtimestamp(wall.replace(tzinfo=z).timestamp(), z).replace(tzinfo=None) == wall:
            break
    r = tidings.run("silence", "add", "source=a", "--until", wall.strftime("%H:%M"), env={"TZ": tz})
    assert r.code == 0, r
    [listed] = silences(tidings)
    ends = datetime.fromisoformat(listed["ends_at"].replace("Z", "+00:00"))
    assert ends == wall.replace(tzinfo=z, fold=0), (listed["ends_at"], wall, zone)


@pytest.mark.parametrize("args, message", [
    (["host=db1"], "unknown matcher name 'host'"),
    (["source"], "is not NAME=VALUE"),
    (["title~=(unclosed"], "invalid regular expression in title~=(unclosed"),
    # Issue 30 item 14: searched within a step budget, so too large for the field's longest value.
    (["title~=(?:.{900}){20}x"], "invalid regular expression in title~=(?:.{900}){20}x: too costly for a text of 2048 characters"),
    (["body~=[a-z]{100}"], "invalid regular expression in body~=[a-z]{100}: too costly for a text of 65536 characters"),
    (["severity=crit"], "severity is one of info, warning, critical"),
    ([], "give at least one matcher"),
    (["source=a", "--for", "1h", "--until", "10:00"], "give --for or --until, not both"),
    (["source=a", "--for", "soon"], "invalid duration"),
    (["source=a", "--until", "2001-01-01T00:00:00Z"], "not in the future"),
])
def test_bad_matchers_and_times_are_usage_errors(tidings, args, message):
    r = tidings.run("silence", "add", *args)
    assert r.code == 64, r
    assert message in r.stderr, r
    assert r.stdout == ""
    assert silences(tidings) == []


def test_check_marks_silenced_events_and_help_lists_silence(tidings):
    feed = Feed(tidings)
    feed.set([item("a", "Quiet please"), item("b", "Loud")])
    assert tidings.run("silence", "add", "source=feed", "key=a").code == 0
    r = tidings.run("check")
    assert r.code == 1, r
    [quiet] = [l for l in r.stdout.splitlines() if "Quiet please" in l]
    assert "[silenced by " in quiet
    assert "silenced" not in [l for l in r.stdout.splitlines() if "Loud" in l][0]
    r = tidings.run("--help")
    assert "silence" in r.stdout and "Silence matching events" in r.stdout


def test_check_through_the_daemon_marks_silenced_events_too(tidings, hook):
    hook.state["accepted"].clear()
    feed = Feed(tidings, "ondemand", interval="1h")
    tidings.write_config(f"""
        [sinks.hook]
        type = "webhook"
        url = "{hook.url}/hook"
        """)
    assert tidings.run("silence", "add", "source=ondemand", "key=a").code == 0
    d = tidings.start_daemon()
    wait_for(lambda: (tidings.state / "tidings.sock").exists(), what="the control socket")
    # The daemon's own first poll (within 2 s of its start: the start-up spread) finds the feed
    # empty; the items appear after it, so that the poll `check` asks for is the one that
    # finds them (the daemon's next own poll is an hour away).
    wait_for(lambda: [s for s in tidings.run("sources", "--json").events if s["name"] == "ondemand" and s["last_success"]],
             what="the daemon's first poll")
    feed.set([item("a", "Quiet please"), item("b", "Loud")])
    r = tidings.run("check", "ondemand")
    assert r.code == 1, r
    assert "the daemon" in r.stderr and "owns the state" in r.stderr, r
    lines = r.stdout.splitlines()
    assert [("[silenced by " in l) for l in lines if "Quiet please" in l or "Loud" in l] == [True, False], r.stdout
    wait_for(lambda: delivered(hook, "ondemand"), what="the unsilenced event")
    assert delivered(hook, "ondemand") == [("b", "new")]
    assert d.poll() is None, read_log(d)


@pytest.mark.skipif(available() is not None, reason=available() or "")
def test_desktop_snooze_silences_that_item_for_an_hour(tidings):
    feed = Feed(tidings)
    feed.set([item("a", "Snooze me", url="https://example.org/a")])
    tidings.write_config("""
        [sinks.desktop]
        type = "desktop"
        timeout = "2s"
        """)
    with SessionBus() as bus:
        d = tidings.start_daemon(env=bus.env)
        [note] = wait_for(lambda: bus.notifications(), what="the notification")
        assert note["actions"] == ["default", "Open", "open", "Open", "snooze", "Snooze 1h"]
        bus.invoke_action(1, "snooze")
        [s] = wait_for(lambda: silences(tidings), what="the snooze silence")
        assert s["matchers"] == [{"name": "source", "op": "=", "value": "feed"}, {"name": "key", "op": "=", "value": "a"}]
        assert s["comment"] == "snoozed from the desktop"
        lasts = time.mktime(time.strptime(s["ends_at"], "%Y-%m-%dT%H:%M:%SZ")) - time.mktime(time.strptime(s["starts_at"], "%Y-%m-%dT%H:%M:%SZ"))
        assert lasts == 3600
        assert "snoozed source=feed key=a for 1h from the desktop" in read_log(d)

        # The snoozed item changes: not shown. Another item still is.
        feed.set([item("a", "Snooze me, changed", url="https://example.org/a"), item("b", "Still shown")])
        wait_for(lambda: len(bus.notifications()) == 2, what="the other item's notification")
        assert [n["summary"] for n in bus.notifications()] == ["Snooze me", "Still shown"]
        changed = wait_for(lambda: [e for e in history(tidings) if e["key"] == "a" and e["event"] == "changed"],
                           what="the snoozed change in history")
        assert changed[0]["silenced_by"] == s["id"]
        assert silences(tidings)[0]["silenced"] == 1


@pytest.mark.skipif(available() is not None, reason=available() or "")
def test_no_snooze_without_action_support_or_for_health_events(tidings):
    feed = Feed(tidings)
    feed.set([item("a", "No buttons here")])
    tidings.write_config("""
        [sinks.desktop]
        type = "desktop"
        timeout = "2s"
        """)
    with SessionBus(capabilities="body body-markup") as bus:
        r = tidings.run("check", "--deliver", env=bus.env)
        assert r.code == 1, r
        [note] = bus.notifications()
        assert "snooze" not in note["actions"]
    tidings.write_plugin("broken", "#!/bin/sh\necho down >&2\nexit 1\n", mode=0o700)
    tidings.write_plugin("broken.toml", 'error_threshold = 1\ninterval = "1s"\n')
    with SessionBus() as bus:
        r = tidings.run("check", "--deliver", "broken", env=bus.env)
        assert r.code == 2, r
        [health] = bus.notifications()
        assert "snooze" not in health["actions"], health


def test_a_pathological_silence_regex_cannot_stall_a_poll(tidings):
    """`title~=`/`body~=` run in linear time (issue 20, item 4): a backtracking engine took
    34 s for the README's own `(?i)disk .* full` over 1,000 hostile 2 KiB titles and ran for
    ever on `(a+)+$`, inside the poll's write transaction, so every other source's delivery
    stopped with it. The bound here (60 s for a check that takes well under one) only tells a
    hang from an answer; the engine's cost is measured in `make bench`."""
    feed = Feed(tidings, "hostile")
    toml = tidings.plugins / "hostile.toml"
    toml.write_text(toml.read_text() + "max_events = 5000\n")  # each its own event, not one summary
    tidings.write_config('[sinks.console]\ntype = "stdout"\n')
    for matcher in ["title~=(a+)+$", "title~=(?i)disk .* full", "body~=(x+x+)+y"]:
        assert tidings.run("silence", "add", matcher, "--for", "1h").code == 0
    titles = ["a" * 40 + "!"] + [f"disk {i} " + "x" * 2048 for i in range(1000)]
    items = [item(f"k{i}", t, body="x" * (65_536 if i < 20 else 10)) for i, t in enumerate(titles)]
    items.append(item("full", "Disk /var almost FULL", body="x" * 100))
    items.append(item("aaa", "aaaa", body="ok"))
    feed.set(items)
    r = tidings.run("check", "--json", timeout=60)
    assert r.code == 1, r
    h = tidings.run("history", "--json", "--limit", "2000")
    by_key = {e["key"]: e for e in h.events}
    assert len(by_key) == len(items), len(by_key)
    assert by_key["full"].get("silenced_by") and by_key["aaa"].get("silenced_by"), "the patterns still match what they should"
    assert not any(by_key[f"k{i}"].get("silenced_by") for i in range(len(titles))), "and only that"
