"""Notice lifecycle across providers: Sportdate messagebox entries, redelivery at daemon start."""
from __future__ import annotations

import json
import os
import signal
import time

import pytest

from conftest import read_log, wait_for
from fakes import sportdate
from fakes.server import FakeServer
from fakes.webhook_receiver import WebhookReceiver, receiver_state

EMAIL, PASSWORD = "me@example.com", "pw-for-notices-99"
BOX1 = {"type": "messagebox", "messagetext": "Planerat underhåll i natt 02–04", "actionURL": "https://www.sportdate.se/mobile/nyhet.aspx"}
BOX2 = {"type": "messagebox", "messagetext": "Nytt erbjudande för medlemmar", "actionURL": "https://www.sportdate.se/mobile/erbjudande.aspx"}
NOTIFY = {"type": "notify", "messagetext": "Du har ett nytt meddelande från Lisa", "actionURL": "https://www.sportdate.se/mobile/mail.aspx"}


@pytest.fixture
def fake():
    srv = sportdate.start(users={EMAIL: PASSWORD})
    yield srv
    srv.stop()


def configure_sources(t, fake):
    t.write_config("""
        [sinks.console]
        type = "stdout"
        format = "json"
        """)
    t.write_secret("pw", PASSWORD)
    t.write_plugin("sportdate.toml", f"""
        provider = "sportdate"
        base_url = "{fake.url}"
        email = "{EMAIL}"
        password_file = "{t.root / 'secrets' / 'pw'}"
        interval = "1h"
        """)


def delivered(log_text, title):
    out = []
    for line in log_text.splitlines():
        if line.startswith("{"):
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("title") == title:
                out.append(e)
    return out


def stop(p):
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=20) == 0


def test_sportdate_messagebox_is_a_pending_notice_and_messages_are_not(tidings, fake):
    configure_sources(tidings, fake)
    assert tidings.check().code == 0
    fake.state["messages"] = [BOX1, NOTIFY]
    assert tidings.check().code == 1
    r = tidings.run("notices", "--json")
    assert [n["title"] for n in r.events] == [BOX1["messagetext"]]
    assert r.events[0]["source"] == "sportdate"


def test_unseen_notices_are_delivered_again_once_at_daemon_start(tidings, fake):
    configure_sources(tidings, fake)
    assert tidings.check().code == 0
    fake.state["messages"] = [BOX1, BOX2]
    assert tidings.check().code == 1         # recorded, not delivered (no --deliver)
    seen = tidings.run("notices")            # the user looks at the notices: BOX1 and BOX2 are seen ...
    assert BOX1["messagetext"] in seen.stdout
    fake.state["messages"] = [BOX1, BOX2, NOTIFY]
    fake.state["messages"][1] = {**BOX2, "messagetext": BOX2["messagetext"] + " (förlängt)"}
    assert tidings.check().code == 1         # ... then a new notice arrives that nobody has seen
    unseen_title = BOX2["messagetext"] + " (förlängt)"

    d = tidings.start_daemon()
    wait_for(lambda: delivered(read_log(d), unseen_title), what="unseen notice delivered at start")
    time.sleep(1)
    stop(d)
    log1 = read_log(d)
    assert len(delivered(log1, unseen_title)) == 1
    assert delivered(log1, BOX1["messagetext"]) == []     # seen: not again
    assert delivered(log1, NOTIFY["messagetext"]) == []   # not a notice

    d2 = tidings.start_daemon()
    wait_for(lambda: "starting" in read_log(d2), what="second daemon start")
    time.sleep(2)
    stop(d2)
    assert delivered(read_log(d2), unseen_title) == []    # once only


def test_notice_ids_are_abbreviated_and_a_prefix_must_be_long_and_unambiguous(tidings, fake):
    configure_sources(tidings, fake)
    assert tidings.check().code == 0
    fake.state["messages"] = [BOX1, BOX2]
    assert tidings.check().code == 1
    ids = {n["title"]: n["id"] for n in tidings.run("notices", "--json").events}
    a, b = ids[BOX1["messagetext"]], ids[BOX2["messagetext"]]
    common = len(os.path.commonprefix([a, b]))
    assert common >= 8, "ids from one poll share their time prefix (ULIDs)"

    # `notices` shows the shortest prefix (8 characters or more) that tells them apart.
    listed = tidings.run("notices")
    shown = {line.split()[0] for line in listed.stdout.splitlines()}
    assert shown == {a[:common + 1], b[:common + 1]}, listed

    r = tidings.run("notices", "dismiss", a[:8])
    assert r.code == 64, r
    assert f"2 pending notices match {a[:8]}" in r.stderr, r.stderr
    assert BOX1["messagetext"] in r.stderr and BOX2["messagetext"] in r.stderr, "the candidates are listed"
    assert a[:common + 1] in r.stderr and b[:common + 1] in r.stderr

    r = tidings.run("notices", "dismiss", a[:5])
    assert r.code == 64 and "too short" in r.stderr and "at least 8" in r.stderr, r

    r = tidings.run("notices", "dismiss", a[:common + 1].lower())   # the short form, in any case
    assert r.code == 0, r
    assert [n["id"] for n in tidings.run("notices", "--json").events] == [b]


def test_a_notice_still_queued_at_a_restart_is_delivered_once(tidings, fake):
    """Issue 9, item 6: the redelivery of unseen notices at daemon start added a second
    outbox row while the first was still queued, so a clean restart delivered it twice."""
    configure_sources(tidings, fake)
    with FakeServer(WebhookReceiver, state=receiver_state(default=503)) as hook:
        tidings.write_config(f"""
            [sinks.hook]
            type = "webhook"
            url = "{hook.url}/hook"
            timeout = "5s"
            """)
        assert tidings.check().code == 0
        fake.state["messages"] = [BOX1]
        r = tidings.run("check", "--deliver")
        assert r.code == 2 and "HTTP 503" in r.stderr, r    # the notice is queued for the hook

        d = tidings.start_daemon()                              # the hook is still down ...
        wait_for(lambda: len(hook.requests) >= 2, what="the daemon retrying the notice")
        stop(d)
        hook.state["default"] = 200                             # ... and up after a clean restart
        d2 = tidings.start_daemon()
        wait_for(lambda: hook.state["accepted"], what="the notice delivered")
        time.sleep(2)
        stop(d2)
        assert [e["title"] for e in hook.state["accepted"]] == [BOX1["messagetext"]], read_log(d2)
        assert tidings.run("outbox", "--json").events == []
