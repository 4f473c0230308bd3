"""Quiet hours and group_wait end to end (DESIGN §10), the real binary with real windows a few
seconds long: held deliveries are visible in `tidings outbox` (text and --json), a critical event
bypasses the quiet hours, at the end of the window the held events arrive as ONE digest per
digest-rendering sink (ntfy through its fake, e-mail through aiosmtpd) while a webhook on the
same route gets them one by one; an item that came and went inside the window is one line;
group_wait turns 20 events of one poll into one digest (eight into one desktop summary on a
real notification server, 150 hostile titles into one Telegram, Slack or Discord message within
the channel's limit); and the crash tests: kill -9 while deliveries are held or grouped, or
while a digest is failing, restart: nothing lost, each digest sent once, not before its time."""
from __future__ import annotations

import html
import os
import re
import signal
import socket
import time
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from chat import CHANNELS, HOSTILE, markdown_text
from conftest import outbox, wait_for
from fakes import session_bus
from fakes.ntfy import NtfyServer, ntfy_state
from fakes.server import FakeServer
from fakes.smtp import SMTPServer, parse
from fakes.webhook_receiver import WebhookReceiver, receiver_state
from feed import Feed, item

# Where `tidings outbox` is asked to show local times: a zone whose offset has minutes, so a
# time shown in UTC (or in the machine's zone) by mistake would not match.
SHOWN_ZONE = "Asia/Kolkata"
DIGEST_SINKS = ("phone", "mail")


@pytest.fixture(scope="module")
def smtp():
    with SMTPServer() as server:
        yield server


class Receivers:
    """The three sinks' servers: ntfy (digests), e-mail (digests), a webhook (one by one)."""

    def __init__(self, smtp, ntfy, hook):
        self.smtp, self.ntfy, self.hook = smtp, ntfy, hook

    @property
    def pushes(self):
        return list(self.ntfy.state["accepted"])

    @property
    def mails(self):
        return [parse(m["content"]) for m in self.smtp.state["accepted"]]

    @property
    def hooked(self):
        return list(self.hook.state["accepted"])

    def counts(self):
        return len(self.pushes), len(self.smtp.state["accepted"]), len(self.hooked)


@pytest.fixture
def receivers(smtp):
    smtp.reset()
    with FakeServer(NtfyServer, state=ntfy_state()) as ntfy, FakeServer(WebhookReceiver, state=receiver_state()) as hook:
        yield Receivers(smtp, ntfy, hook)


def config(t, r, route):
    """ntfy, e-mail and webhook sinks, one route to all three with `route` (its attention options)."""
    t.write_config(f"""
        [sinks.phone]
        type = "ntfy"
        url = "{r.ntfy.url}"
        topic = "alerts"

        [sinks.mail]
        type = "email"
        smtp_url = "{r.smtp.url}"
        from = "Tidings <tidings@example.org>"
        to = "ops@example.org"
        timeout = "5s"

        [sinks.hook]
        type = "webhook"
        url = "{r.hook.url}/hook"
        timeout = "5s"

        [[routes]]
        sinks = ["phone", "mail", "hook"]
        {route}
        """)


def feeding(t, r, items, route):
    """The feed source with `items` and the three sinks behind one route with `route`."""
    feed = Feed(t)
    feed.set(items)
    config(t, r, route)
    return feed


class Window:
    """Quiet hours from a second ago until `seconds` from now, written in UTC as HH:MM:SS."""

    def __init__(self, seconds):
        now = time.time()
        self.end = int(now + seconds)  # the written end has whole seconds
        # The same instant on the monotonic clock the fakes stamp requests with.
        self.end_monotonic = time.monotonic() + (self.end - now)
        fmt = lambda at: time.strftime("%H:%M:%S", time.gmtime(at))
        self.route = f'quiet_hours = {{ start = "{fmt(now - 1)}", end = "{fmt(self.end)}", timezone = "UTC" }}\nquiet_bypass = "critical"'

    def remaining(self):
        return self.end - time.time()


def shown_time(at: float, zone: str = SHOWN_ZONE) -> str:
    """How `tidings outbox` shows an instant in `zone`: HH:MM, or HH:MM:SS when the seconds are
    not zero, with the date before it when it is not today there."""
    local = datetime.fromtimestamp(at, ZoneInfo(zone))
    text = local.strftime("%H:%M:%S" if local.second else "%H:%M")
    if local.date() != datetime.now(ZoneInfo(zone)).date():
        text = local.strftime("%Y-%m-%d ") + text
    return text


def held(t, n, hold):
    """Waits until `n` deliveries are held for `hold` ('quiet' or 'group'); returns them."""
    def rows():
        rows = [r for r in outbox(t) if r["status"] == "held"]
        return rows if len(rows) == n and all(r["hold"] == hold for r in rows) else None
    return wait_for(rows, timeout=15, what=f"{n} deliveries held ({hold})")


def outbox_text(t):
    r = t.run("outbox", env={"TZ": SHOWN_ZONE})
    assert r.code == 0, r
    return r.stdout


def digest_lines(push):
    return push["message"].split("\n")


def plain_body(mail):
    return mail.get_body(("plain",)).get_content().replace("\r\n", "\n")


def assert_done(t, r, counts, wait=1.5):
    """The outbox empties and nothing else arrives (a digest sent twice would)."""
    wait_for(lambda: outbox(t) == [], what="the outbox to empty")
    time.sleep(wait)
    assert r.counts() == counts, f"more arrived: {r.counts()} after {counts}"


def test_quiet_hours_hold_until_the_window_ends_then_one_digest_per_sink(tidings, receivers):
    r = receivers
    window = Window(12)
    a, b, x, c = (item("a", "Disk <full> & more", severity="warning", url="https://example.org/a?x=1&y=2"),
                  item("b", "Backup late", severity="warning"), item("x", "Blip", severity="warning"),
                  item("c", "Site down", severity="critical", url="https://example.org/c"))
    feed = feeding(tidings, r, [a, b, x, c], window.route)
    tidings.start_daemon()

    # The critical event bypasses the quiet hours: at once, to every sink, as itself.
    wait_for(lambda: r.counts() == (1, 1, 1), timeout=15, what="the critical event at once")
    assert r.pushes[0]["message"] == "Site down" and r.pushes[0]["priority"] == 5
    assert r.mails[0]["Subject"] == "[critical] Site down"
    assert r.hooked[0]["key"] == "c"

    # The warnings are held: three events for three sinks, each shown as held until the end.
    rows = held(tidings, 9, "quiet")
    assert {row["held_until"] for row in rows} == {time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(window.end))}
    assert {row["event"]["key"] for row in rows} == {"a", "b", "x"}
    # x goes away inside the window: it came and went.
    feed.set([a, b, c])
    held(tidings, 12, "quiet")
    text = outbox_text(tidings)
    assert f"held until {shown_time(window.end)} (quiet hours)" in text, text
    for sink in ("phone (ntfy): 4 held", "mail (email): 4 held", "hook (webhook): 4 held"):
        assert sink in text, text
    assert r.counts() == (1, 1, 1), "nothing held went out early"
    assert window.remaining() > 0, "the window is long enough for the checks above (else make it longer)"

    # The window ends: one digest per digest-rendering sink, the webhook gets each event.
    wait_for(lambda: r.counts() == (2, 2, 5), timeout=window.remaining() + 15, what="the digests after the window")
    assert min(r.ntfy.request_times[1:] + r.hook.request_times[1:]) >= window.end_monotonic - 0.05, "not before the window's end"
    push = r.pushes[1]
    assert push["title"] == "4 events from feed (held for quiet hours)"
    assert digest_lines(push) == [
        "[warning] Disk <full> & more (new) https://example.org/a?x=1&y=2",
        "[warning] Backup late (new)",
        "[warning] Blip (came and went)",
    ], "one line per item, remote text as it is (ntfy shows plain text), the item that came and went as one line"
    assert push["priority"] == 4 and push["click"] == "https://example.org/a?x=1&y=2", "the one link is the tap action"
    mail = r.mails[1]
    assert mail["Subject"] == "4 events from feed (held for quiet hours)"
    assert mail["Message-ID"].startswith("<digest-") and mail["Message-ID"].endswith(".mail@example.org>")
    assert mail["X-Priority"] == "2 (High)"
    body = plain_body(mail)
    assert "[warning] Blip (came and went)\n" in body and "[warning] Backup late (new)\n" in body, body
    assert [(h["key"], h["event"]) for h in r.hooked[1:]] == [("a", "new"), ("b", "new"), ("x", "new"), ("x", "removed")], \
        "a sink that renders no digest gets the held events one by one, in order"
    assert_done(tidings, r, (2, 2, 5))


def test_check_deliver_without_a_daemon_holds_too_and_a_later_check_sends_the_digest(tidings, receivers):
    """`tidings check --deliver` (cron, no daemon) inside quiet hours: the events are printed and
    recorded, their deliveries held (said on stderr, not a failure); a `check --deliver` after
    the window sends them, as one digest per digest-rendering sink."""
    r = receivers
    window = Window(4)
    feed = feeding(tidings, r, [], window.route)
    assert tidings.check("--deliver").code == 0, "baseline"
    feed.set([item("a", "Alpha", severity="warning"), item("b", "Beta", severity="warning")])
    first = tidings.check("--deliver")
    assert first.code == 1 and sorted(e["key"] for e in first.events) == ["a", "b"], first
    assert "sink mail: 2 deliveries held by quiet hours or group_wait" in first.stderr, first.stderr
    assert r.counts() == (0, 0, 0)
    assert len([row for row in outbox(tidings) if row["status"] == "held"]) == 6
    time.sleep(max(0, window.remaining()) + 0.2)
    later = tidings.check("--deliver")
    assert later.code == 0 and "held" not in later.stderr, later
    assert r.counts() == (1, 1, 2), "one digest for ntfy and for e-mail, the webhook one by one"
    assert r.pushes[0]["title"] == "2 events from feed (held for quiet hours)"
    assert outbox(tidings) == []


def test_group_wait_makes_twenty_events_of_one_poll_one_digest_per_sink(tidings, receivers):
    r = receivers
    feeding(tidings, r, [item(f"m{n:02}", f"Message {n:02}") for n in range(20)], 'group_wait = "5s"')
    tidings.start_daemon()

    rows = held(tidings, 60, "group")
    until = {row["held_until"] for row in rows}
    assert len(until) == 1, f"one group per sink, all ending together: {until}"
    end = datetime.strptime(until.pop(), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=ZoneInfo("UTC")).timestamp()
    text = outbox_text(tidings)
    assert f"grouping until {shown_time(end)}" in text, text
    assert "phone (ntfy): 20 held" in text, text
    assert r.counts() == (0, 0, 0)

    wait_for(lambda: r.counts() == (1, 1, 20), timeout=20, what="one digest per sink, the webhook's events one by one")
    push = r.pushes[0]
    assert push["title"] == "20 events from feed (grouped)" and push["priority"] == 3
    assert digest_lines(push) == [f"[info] Message {n:02} (new)" for n in range(20)]
    assert "click" not in push
    [mail] = r.mails
    assert mail["Subject"] == "20 events from feed (grouped)"
    assert plain_body(mail).count("[info] Message ") == 20
    assert sorted(h["key"] for h in r.hooked) == [f"m{n:02}" for n in range(20)]
    assert_done(tidings, r, (1, 1, 20))


def kill(daemon):
    os.killpg(daemon.pid, signal.SIGKILL)
    daemon.wait(timeout=10)


def test_kill_while_held_restart_nothing_lost_each_digest_once_not_before_its_time(tidings, receivers):
    r = receivers
    window = Window(12)
    feeding(tidings, r, [item("a", "First", severity="warning"), item("b", "Second", severity="warning")], window.route)
    d = tidings.start_daemon()
    before = held(tidings, 6, "quiet")
    kill(d)

    tidings.start_daemon()
    # The restarted daemon keeps the not-before time: nothing goes out while the window lasts.
    time.sleep(min(3.0, max(0.0, window.remaining() - 2)))
    after = held(tidings, 6, "quiet")
    assert {(x["id"], x["held_until"]) for x in after} == {(x["id"], x["held_until"]) for x in before}
    assert r.counts() == (0, 0, 0), "held deliveries stay held across a restart"

    wait_for(lambda: r.counts() == (1, 1, 2), timeout=window.remaining() + 15, what="the digests after the restart")
    assert min(r.ntfy.request_times + r.hook.request_times) >= window.end_monotonic - 0.05
    assert digest_lines(r.pushes[0]) == ["[warning] First (new)", "[warning] Second (new)"]
    assert sorted(h["key"] for h in r.hooked) == ["a", "b"]
    assert_done(tidings, r, (1, 1, 2))


def test_kill_while_grouping_restart_each_digest_once(tidings, receivers):
    r = receivers
    feeding(tidings, r, [item(f"g{n}", f"Grouped {n}") for n in range(5)], 'group_wait = "6s"')
    d = tidings.start_daemon()
    before = held(tidings, 15, "group")
    kill(d)
    assert r.counts() == (0, 0, 0)

    tidings.start_daemon()
    wait_for(lambda: r.counts() == (1, 1, 5), timeout=25, what="the grouped digests after the restart")
    assert {x["event"]["id"] for x in before} == {h["id"] for h in r.hooked}, "nothing lost"
    assert digest_lines(r.pushes[0]) == [f"[info] Grouped {n} (new)" for n in range(5)]
    assert r.mails[0]["Subject"] == "5 events from feed (grouped)"
    assert_done(tidings, r, (1, 1, 5))


def test_digest_failing_when_killed_goes_once_after_restart_and_sent_ones_stay_sent(tidings, receivers):
    """ntfy is down when the group closes (its port bound, not listening): the digest to it is
    retried, the e-mail digest and the webhook's events go; kill -9; ntfy back on its port;
    restart: the ntfy digest goes once, with every line, and nothing that went is sent again."""
    r = receivers
    down = socket.socket()
    down.bind(("127.0.0.1", 0))
    port = down.getsockname()[1]
    feeding(tidings, r, [item(f"r{n}", f"Retried {n}") for n in range(3)], 'group_wait = "1s"')
    tidings.write_config(tidings.config.read_text().replace(r.ntfy.url, f"http://127.0.0.1:{port}"))
    d = tidings.start_daemon()
    wait_for(lambda: r.counts() == (0, 1, 3), timeout=20, what="the e-mail digest and the webhook's events")
    wait_for(lambda: [x["status"] for x in outbox(tidings)] == ["retrying"] * 3, what="the ntfy digest failing")
    kill(d)
    down.close()
    with FakeServer(NtfyServer, state=ntfy_state(), port=port) as ntfy:
        tidings.start_daemon()
        wait_for(lambda: len(ntfy.state["accepted"]) == 1, timeout=30, what="the ntfy digest after the restart")
        [push] = ntfy.state["accepted"]
        assert push["title"] == "3 events from feed (grouped)"
        assert digest_lines(push) == [f"[info] Retried {n} (new)" for n in range(3)]
        assert_done(tidings, r, (0, 1, 3))
        assert len(ntfy.requests) == 1, "the digest once"


@pytest.mark.skipif(session_bus.available() is not None, reason=session_bus.available() or "")
def test_group_wait_on_the_desktop_is_one_summary_notification(tidings):
    """A real notification server (dbusmock's, on a private session bus): eight grouped events
    are one notification, the digest's heading and its first five lines, escaped."""
    feed = Feed(tidings)
    feed.set([item(f"d{n}", f"Note <{n}> & co", severity="critical" if n == 3 else "info") for n in range(8)])
    tidings.write_config("""
        [sinks.desktop]
        type = "desktop"
        timeout = "2s"

        [[routes]]
        sinks = ["desktop"]
        group_wait = "4s"
        """)
    with session_bus.SessionBus() as bus:
        tidings.start_daemon(env=bus.env)
        held(tidings, 8, "group")
        assert bus.notifications() == []
        [n] = wait_for(bus.notifications, timeout=15, what="the desktop summary")
        assert n["summary"] == "8 events from feed (grouped)"
        assert n["body"].split("\n") == [f"• [{'critical' if k == 3 else 'info'}] Note &lt;{k}&gt; &amp; co (new)" for k in range(5)] + ["…and 3 more"]
        assert n["hints"]["urgency"] == 2, "the highest severity decides"
        wait_for(lambda: outbox(tidings) == [], what="the outbox to empty")
        time.sleep(1)
        assert len(bus.notifications()) == 1


def chat_digest_text(name, message):
    """The text a chat channel's digest message shows (links as their labels), as its fake
    recorded it."""
    if name == "telegram":
        return message["plain"]
    if name == "slack":
        labels = re.sub(r"<[^|>]*\|([^>]*)>", r"\1", message["text"])
        return html.unescape(labels).replace("\u2060", "")
    embed = message["embeds"][0]
    labels = re.sub(r"\[((?:\\.|[^\]\\])*)\]\([^)]*\)", r"\1", embed["description"])
    return markdown_text(embed["title"]) + "\n" + markdown_text(labels)


@pytest.mark.parametrize("name", sorted(CHANNELS))
def test_a_big_group_is_one_chat_message_within_the_channels_limit(tidings, name):
    """150 hostile titles grouped into one Telegram, Slack or Discord message: the fake accepts it
    (each enforces its documented limit and markup), the lines that did not fit are counted,
    remote markup is shown as text and pings nobody."""
    ch = CHANNELS[name]()
    Feed(tidings).set([item(f"h{n:03}", f"{HOSTILE} {n:03}", url=f"https://example.org/h/{n}") for n in range(150)])
    with FakeServer(ch.handler, state=ch.state()) as srv:
        ch.configure(tidings, srv.url, '\n[[routes]]\nsinks = ["chat"]\ngroup_wait = "1s"\n')
        tidings.start_daemon()
        wait_for(lambda: ch.messages(srv), timeout=20, what="the digest")
        wait_for(lambda: outbox(tidings) == [], what="the outbox to empty")
        time.sleep(1)
        [message] = ch.messages(srv)
        lines = chat_digest_text(name, message).split("\n")
        assert "150 events from feed (grouped)" in lines[0], lines[0]
        assert HOSTILE + " 000 (new)" in lines[1], "remote markup shown as text"
        assert re.fullmatch(r"…and \d+ more", lines[-1]) and len(lines) > 10, lines[-3:]
        shown = len(lines) - 2 + int(lines[-1].split()[1])
        assert shown == 150, "every item is a line or counted"
    if name == "telegram":
        assert set(message["links"]) <= {f"https://example.org/h/{n}" for n in range(150)}, "no link but the items'"
    if name == "slack":
        assert "<!channel>" not in message["text"] and "@\u2060everyone" in message["text"]
    if name == "discord":
        assert message["allowed_mentions"] == {"parse": []}
