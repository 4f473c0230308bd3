"""The slack sink through the real binary against a fake incoming webhook (fakes/slack.py):
mrkdwn escaping and links, the 3000-character section cut, Retry-After, Slack's plain-text
error codes as dead sink or dead letter, and the webhook URL never shown."""
from __future__ import annotations

from chat import HOSTILE, Slack, assert_no_secret, outputs_of, check_dead_sink_reported_once, check_retried_after_the_wait
from fakes.server import FakeServer
from feed import Feed, item


def test_events_arrive_with_severity_link_and_escaped_text(tidings):
    ch = Slack()
    Feed(tidings).set([
        item("a", "Disk & <ok>", url="https://example.org/a?x=1&y=2|z>w"),
        item("b", HOSTILE, body="first line\n<@U123> & *more*", severity="critical", url="https://example.org/b"),
        item("c", "Warm", severity="warning"),
    ])
    with FakeServer(ch.handler, state=ch.state()) as srv:
        ch.configure(tidings, srv.url)
        r = tidings.run("check", "--deliver")
        assert r.code == 1, r  # delivered, new events
        msgs = {ch.title_of(m): m for m in srv.state["messages"]}
        assert len(msgs) == 3, msgs
        for m in msgs.values():
            assert m["blocks"] == [{"type": "section", "text": {"type": "mrkdwn", "text": m["text"]}}]
        a = next(m for t, m in msgs.items() if t.startswith("ℹ️"))
        # The URL cannot end the link or become its label: `|` and `>` are percent-encoded.
        assert a["text"] == "ℹ️ *<https://example.org/a?x=1&amp;y=2%7Cz%3Ew|Disk &amp; &lt;ok&gt;>*"
        b = next(m for t, m in msgs.items() if t.startswith("🚨"))
        # A word joiner after "@" keeps Mattermost and Rocket.Chat (which take this shape) from pinging.
        assert b["text"] == ("🚨 *<https://example.org/b|&lt;b&gt;x&lt;/b&gt; @\u2060everyone &lt;!channel&gt; ](http://evil)>*"
                             "\nfirst line\n&lt;@\u2060U123&gt; &amp; *more*"), "no <!channel>, <@user> or @everyone mention survives"
        assert "<!channel>" not in b["text"]
        assert next(m for t, m in msgs.items() if t.startswith("⚠️"))["text"] == "⚠️ *Warm*"
        assert_no_secret(ch, r.stdout + r.stderr)


def test_a_long_body_is_cut_to_the_section_limit_without_breaking_entities(tidings):
    ch = Slack()
    Feed(tidings).set([item("long", "Long", body="<&> " * 2000, url="https://example.org/l")])
    with FakeServer(ch.handler, state=ch.state()) as srv:
        ch.configure(tidings, srv.url)
        r = tidings.run("check", "--deliver")
        assert r.code == 1, r  # delivered, new events
        [m] = srv.state["messages"]
        assert len(m["text"]) <= 3000 and m["text"].endswith("…")
        assert m["text"].rstrip("…").endswith(("&lt;", "&amp;", "&gt;", " ")), "cut between entities"


def test_5xx_retried_and_429_waits_for_retry_after(tidings):
    check_retried_after_the_wait(tidings, Slack(), ("429", 4), wait=4)


def test_a_revoked_webhook_disables_the_sink_once_and_keeps_the_events(tidings):
    ch = Slack()
    log = check_dead_sink_reported_once(tidings, ch, ch.state(script=["action_prohibited"]))
    assert "HTTP 403: action_prohibited" in log and "an admin has restricted posting" in log
    assert "slack webhook at 127.0.0.1" in log


def test_sinks_test_maps_slack_error_codes_and_never_shows_the_url(tidings):
    ch = Slack()
    script = [None, "channel_is_archived", "channel_not_found", "invalid_payload", "echo", 500]
    with FakeServer(ch.handler, state=ch.state(script=script)) as srv:
        ch.configure(tidings, srv.url)
        runs = [tidings.run("sinks", "test", "chat") for _ in script]
        ok, archived, not_found, invalid, echo, busy = runs
        assert ok.code == 0 and "delivered" in ok.stderr, ok
        assert "tidings test event" in srv.state["messages"][0]["text"]
        assert archived.code == 2 and "channel is archived" in archived.stderr and "would disable" in archived.stderr, archived
        assert not_found.code == 2 and "channel does not exist" in not_found.stderr and "would disable" in not_found.stderr
        assert invalid.code == 2 and "invalid_payload" in invalid.stderr and "would not retry" in invalid.stderr, invalid
        assert echo.code == 2 and "‹redacted›" in echo.stderr, "the server echoed the webhook path: it is scrubbed"
        assert busy.code == 2 and "would retry" in busy.stderr, busy
        assert_no_secret(ch, outputs_of(tidings, *runs))

        # A webhook URL that is not (or no longer) there: 404 no_service.
        srv.state["path"] = "/services/elsewhere"
        r = tidings.run("sinks", "test", "chat")
        assert r.code == 2 and "no_service" in r.stderr and "would disable" in r.stderr, r
