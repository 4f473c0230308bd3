"""Matrix sink against a real Synapse homeserver (from the test venv, SQLite, loopback).

One homeserver for the module. A relay (fakes/relay.py) sits between tidings and Synapse where
a test needs a fault Synapse will not make by itself: an answer lost after the message was
posted, or the homeserver unreachable. Rate limits are Synapse's own (synapse.py)."""
from __future__ import annotations

import importlib.util
import json
import time
import uuid

import pytest

from conftest import kill_while_queued, outbox, read_log, wait_for
from fakes.relay import Relay, relay_state
from fakes.server import FakeServer
from feed import Feed, item

from synapse_server import Synapse, quote

pytestmark = pytest.mark.skipif(importlib.util.find_spec("synapse") is None,
                                reason="Synapse is not installed: run the suite in the venv `make test-venv` makes")


@pytest.fixture(scope="module")
def hs(tmp_path_factory):
    with Synapse(tmp_path_factory.mktemp("synapse")) as server:
        server.bot = server.register("bot")
        yield server


@pytest.fixture
def relay(hs):
    with FakeServer(Relay, state=relay_state(hs.url)) as r:
        yield r


def sink(t, name, homeserver, token, room, extra=""):
    secret = t.write_secret(f"{name}.token", token)
    return f"""
        [sinks.{name}]
        type = "matrix"
        homeserver = "{homeserver}"
        access_token_file = "{secret}"
        room = "{room}"
        timeout = "10s"
        {extra}
        """


def alias():
    return "alerts-" + uuid.uuid4().hex[:8]


def puts(relay):
    return [x for x in relay.state["exchanges"] if x.method == "PUT"]


def assert_no_token(token, *texts):
    for text in texts:
        assert token not in text


def test_events_arrive_once_formatted_through_a_resolved_alias(tidings, hs, relay):
    bot = hs.bot
    room = bot.create_room(alias=alias())
    feed = Feed(tidings)
    feed.set([item("disk", "Disk <full> & hot", body="sda1 at 99%\nsdb1 at 98%", severity="critical",
                   url="https://example.org/disk?a=1&b=2"),
              item("note", "Plain news")])
    tidings.write_config(sink(tidings, "mx", relay.url, bot.token, room.alias))
    r = tidings.run("check", "--deliver")
    assert r.code == 1, r

    messages = {m["content"]["body"].split("\n")[0]: m for m in bot.messages(room.id)}
    assert set(messages) == {"Critical: Disk <full> & hot", "Plain news"}, messages
    disk = messages["Critical: Disk <full> & hot"]
    assert disk["sender"] == bot.user_id
    assert disk["content"] == {
        "msgtype": "m.text",
        "body": "Critical: Disk <full> & hot\nsda1 at 99%\nsdb1 at 98%\nhttps://example.org/disk?a=1&b=2",
        "format": "org.matrix.custom.html",
        "formatted_body": '<strong><font color="#d00000" data-mx-color="#d00000">Critical:</font> Disk &lt;full&gt; &amp; hot</strong>'
                          '<br>sda1 at 99%<br>\nsdb1 at 98%<br><a href="https://example.org/disk?a=1&amp;b=2">'
                          'https://example.org/disk?a=1&amp;b=2</a>',
        "m.mentions": {},
    }
    assert messages["Plain news"]["content"]["formatted_body"] == "<strong>Plain news</strong>"

    lookups = [x for x in relay.state["exchanges"] if x.method == "GET"]
    assert [x.path for x in lookups] == [f"/_matrix/client/v3/directory/room/%23{room.alias[1:].replace(':', '%3A')}"], \
        "the alias is resolved once, for both events"
    sends = puts(relay)
    assert len(sends) == 2 and len({x.path for x in sends}) == 2, "one transaction id per event"
    assert all(x.path.startswith(f"/_matrix/client/v3/rooms/{room.id.replace('!', '%21').replace(':', '%3A')}/send/m.room.message/tidings-")
               for x in sends)
    assert_no_token(bot.token, r.stdout, r.stderr, json.dumps([x.path for x in relay.state["exchanges"]]))


def test_a_lost_answer_is_retried_and_the_room_shows_the_message_once(tidings, hs, relay):
    bot = hs.bot
    room = bot.create_room()
    relay.state["lose_answers"] = 1
    Feed(tidings).set([item("a", "Once only")])
    tidings.write_config(sink(tidings, "mx", relay.url, bot.token, room.id))
    d = tidings.start_daemon()
    wait_for(lambda: len(puts(relay)) >= 2 and outbox(tidings) == [], timeout=60, what="the retried send")
    first, second = puts(relay)[:2]
    assert first.lost and first.status == 200, "Synapse posted the first send; its answer was lost"
    assert second.path == first.path, "the retry reuses the transaction id"
    assert json.loads(second.body)["event_id"] == json.loads(first.body)["event_id"], "Synapse recognised the retry"
    assert [m["content"]["body"] for m in bot.messages(room.id)] == ["Once only"]
    assert "retrying in" in read_log(d)


def test_a_group_is_one_message_and_its_retry_after_a_lost_answer_is_not_posted_twice(tidings, hs, relay):
    """group_wait through a real Synapse: four events of one poll are one m.room.message (plain
    body and an HTML list, remote text escaped); Synapse's answer to it is lost, the retry uses
    the same transaction id, and the room shows the digest once."""
    bot = hs.bot
    room = bot.create_room()
    relay.state["lose_answers"] = 1
    feed = Feed(tidings)
    feed.set([])
    tidings.write_config(sink(tidings, "mx", relay.url, bot.token, room.id) + """
        [[routes]]
        sinks = ["mx"]
        group_wait = "2s"
        """)
    assert tidings.check("--deliver").code == 0, "baseline"
    d = tidings.start_daemon()
    feed.set([item("a", "Disk <b>full</b> & hot", severity="critical", url="https://example.org/a?x=1&y=2"),
              item("b", "Backup late", severity="warning"), item("c", "Cert renewed"), item("d", "Fan noisy")])
    wait_for(lambda: len(puts(relay)) >= 2 and outbox(tidings) == [], timeout=60, what="the digest, its answer lost, retried")
    first, second = puts(relay)[:2]
    assert first.lost and second.path == first.path, "the retry reuses the digest's transaction id"
    messages = bot.messages(room.id)
    assert len(messages) == 1, messages
    content = messages[0]["content"]
    assert content["body"].split("\n")[0] == "Critical: 4 events from feed (grouped)", content
    assert "[critical] Disk <b>full</b> & hot (new) https://example.org/a?x=1&y=2" in content["body"], content
    assert "&lt;b&gt;full&lt;/b&gt; &amp; hot" in content["formatted_body"] and "<b>full</b>" not in content["formatted_body"], content
    assert 'href="https://example.org/a?x=1&amp;y=2"' in content["formatted_body"], content
    assert "delivered a digest of 4 events (grouped)" in read_log(d)


def test_refused_token_forbidden_room_and_unknown_alias_stop_their_sinks_and_keep_events(tidings, hs):
    outsider = hs.register("outsider-" + uuid.uuid4().hex[:6])
    room = hs.bot.create_room()
    bogus = "syt_" + uuid.uuid4().hex
    Feed(tidings).set([item("a", "Kept")])
    tidings.write_config(sink(tidings, "badtoken", hs.url, bogus, room.id)
                         + sink(tidings, "notinroom", hs.url, outsider.token, room.id)
                         + sink(tidings, "noalias", hs.url, hs.bot.token, "#does-not-exist:localhost"))
    d = tidings.start_daemon()
    wait_for(lambda: read_log(d).count("DISABLED") == 3, timeout=60, what="three disabled sinks")
    time.sleep(3)  # reported once: no retries, no repeated reports
    log = read_log(d)
    lines = {name: [l for l in log.splitlines() if "DISABLED" in l and f"SINK {name} " in l]
             for name in ("badtoken", "notinroom", "noalias")}
    assert all(len(v) == 1 for v in lines.values()), lines
    assert "M_UNKNOWN_TOKEN" in lines["badtoken"][0] and "access token was refused" in lines["badtoken"][0]
    assert "M_FORBIDDEN" in lines["notinroom"][0] and f"not allowed to post in {room.id}" in lines["notinroom"][0]
    assert "no room has the alias #does-not-exist:localhost" in lines["noalias"][0]
    rows = outbox(tidings)
    assert sorted((r["sink"], r["status"]) for r in rows) == [("badtoken", "retrying"), ("noalias", "retrying"),
                                                             ("notinroom", "retrying")]
    assert hs.bot.messages(room.id) == []
    text = tidings.run("outbox").stdout
    assert_no_token(bogus, log, text, json.dumps(rows))
    assert_no_token(outsider.token, log, text, json.dumps(rows))
    assert_no_token(hs.bot.token, log, text, json.dumps(rows))


def test_synapse_rate_limit_is_honoured(tidings, hs, relay):
    slow = hs.register("slow-" + uuid.uuid4().hex[:6], limited=True)
    room = slow.create_room()
    Feed(tidings).set([item("a", "First"), item("b", "Second")])
    tidings.write_config(sink(tidings, "mx", relay.url, slow.token, room.id))
    tidings.start_daemon()
    wait_for(lambda: len(slow.messages(room.id)) == 2, timeout=60, what="both messages")
    sends = puts(relay)
    limited = [i for i, x in enumerate(sends) if x.status == 429]
    assert limited, [x.status for x in sends]
    i = limited[0]
    answer = json.loads(sends[i].body)
    assert answer["errcode"] == "M_LIMIT_EXCEEDED"
    gap = sends[i + 1].at - sends[i].at
    assert gap >= answer["retry_after_ms"] / 1000 - 0.3, f"retried after {gap:.1f}s, Synapse asked for {answer['retry_after_ms']} ms"
    assert sends[i + 1].path == sends[i].path
    assert [m["content"]["body"] for m in slow.messages(room.id)] == ["First", "Second"]


def test_homeserver_down_daemon_killed_each_event_shown_once(tidings, hs):
    bot = hs.bot
    room = bot.create_room(alias=alias())
    Feed(tidings).set([item("a", "Alpha"), item("b", "Beta")])
    # The relay's port refuses connections: the homeserver is down.
    port, _ = kill_while_queued(
        tidings, lambda port: tidings.write_config(sink(tidings, "mx", f"http://127.0.0.1:{port}", bot.token, room.alias)), timeout=60)
    with FakeServer(Relay, state=relay_state(hs.url), port=port) as relay:
        tidings.start_daemon()
        wait_for(lambda: outbox(tidings) == [], timeout=60, what="the queued events after restart")
        assert sorted(m["content"]["body"] for m in bot.messages(room.id)) == ["Alpha", "Beta"]
        assert len(puts(relay)) == 2


def test_sinks_test_posts_a_test_message_and_never_prints_the_token(tidings, hs):
    bot = hs.bot
    room = bot.create_room()
    tidings.write_config(sink(tidings, "mx", hs.url, bot.token, room.id, extra='msgtype = "m.notice"')
                         + sink(tidings, "bad", hs.url, "syt_" + uuid.uuid4().hex, room.id))
    r = tidings.run("sinks", "test", "mx")
    assert r.code == 0, r
    [m] = bot.messages(room.id)
    assert m["content"]["msgtype"] == "m.notice" and "test" in m["content"]["body"].lower()
    bad = tidings.run("sinks", "test", "bad")
    assert bad.code == 2 and "M_UNKNOWN_TOKEN" in bad.stderr, bad
    check = tidings.run("config", "check")
    for out in (r, bad, check):
        assert_no_token(bot.token, out.stdout, out.stderr)


def test_a_digest_of_more_than_ten_thousand_events_arrives_whole(tidings, hs):
    """A held batch larger than one digest (10,000 rows) goes as several messages, each with a
    transaction id of its own (issue 20, item 3): the second part used to reuse the first's id,
    and Synapse dropped it as a retry, losing 50 of 10,050 events with the outbox empty."""
    bot = hs.bot
    room = bot.create_room()
    n = 10_050
    feed = Feed(tidings)
    feed.set([])
    # All in one poll, each its own event (not max_events' one summary).
    toml = tidings.plugins / "feed.toml"
    toml.write_text(toml.read_text() + "max_events = 20000\n")
    tidings.write_config(sink(tidings, "mx", hs.url, bot.token, room.id) + """
        [[routes]]
        sinks = ["mx"]
        group_wait = "1s"
        """)
    assert tidings.check("--deliver").code == 0, "baseline"
    feed.set([item(f"k{i}", f"Item {i}") for i in range(n)])
    d = tidings.start_daemon()
    wait_for(lambda: "delivered a digest of 50 events" in read_log(d), timeout=180, what="both parts of the digest")
    wait_for(lambda: outbox(tidings) == [], timeout=30, what="an empty outbox")
    heads = sorted(m["content"]["body"].split("\n")[0] for m in bot.messages(room.id))
    assert heads == ["10000 events from feed (grouped)", "50 events from feed (grouped)"], heads
    history = tidings.run("history", "--limit", str(2 * n), "--json")
    assert len([e for e in history.events if e["source"] == "feed"]) == n


def test_remote_text_mentions_nobody(tidings, hs):
    """`@room` or a member's display name in remote text highlights nobody (issue 20, item 5):
    every message says `m.mentions: {}` (Matrix v1.7 intentional mentions), so Synapse does not
    fall back to matching the text against the room's members."""
    bot = hs.bot
    alice = hs.register("alice-" + uuid.uuid4().hex[:6])
    alice.call("PUT", f"/_matrix/client/v3/profile/{alice.user_id}/displayname", {"displayname": "Alice Ops"})
    room = bot.create_room(invite=[alice])
    alice.join(room)
    feed = Feed(tidings)
    feed.set([])
    tidings.write_config(sink(tidings, "mx", hs.url, bot.token, room.id))
    assert tidings.check("--deliver").code == 0, "baseline"
    feed.set([item("a", "@room: the disk is full"), item("b", "Alice Ops, please look", body="@room @room")])
    r = tidings.check("--deliver")
    assert r.code == 1, r
    messages = bot.messages(room.id)
    assert len(messages) == 2, messages
    assert all(m["content"]["m.mentions"] == {} for m in messages), messages

    # The control: the same text sent without `m.mentions` does highlight Alice.
    bot.call("PUT", f"/_matrix/client/v3/rooms/{quote(room.id)}/send/m.room.message/control-1",
             {"msgtype": "m.text", "body": "Alice Ops, please look"})
    highlights = wait_for(lambda: alice.call("GET", "/_matrix/client/v3/notifications?only=highlight")["notifications"],
                          what="the control message's highlight")
    assert [h["event"]["content"]["body"] for h in highlights] == ["Alice Ops, please look"], highlights
    assert all("m.mentions" not in h["event"]["content"] for h in highlights)
