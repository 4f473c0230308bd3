"""The discord sink through the real binary against a fake webhook (fakes/discord.py): embeds
with severity colour and link, Markdown escaping, no mentions, the embed limits, ?wait=true,
429 retry_after, Unknown Webhook as a dead sink, and the webhook URL never shown."""
from __future__ import annotations

from chat import HOSTILE, Discord, assert_no_secret, markdown_text, outputs_of, check_dead_sink_reported_once, check_retried_after_the_wait
from fakes.server import FakeServer
from feed import Feed, item


def test_events_arrive_as_embeds_with_colour_link_and_escaped_text(tidings):
    ch = Discord()
    Feed(tidings).set([
        item("a", "Disk & <ok>", url="https://example.org/a?x=1&y=2"),
        item("b", HOSTILE, body="first line\n**not bold** @here <@123>", severity="critical", url="https://example.org/b"),
        item("c", "Warm", severity="warning", url="javascript:alert(1)"),
    ])
    with FakeServer(ch.handler, state=ch.state()) as srv:
        ch.configure(tidings, srv.url)
        r = tidings.run("check", "--deliver")
        assert r.code == 1, r  # delivered, new events
        assert srv.state["waited"] == [True, True, True], "?wait=true: Discord confirms the message was saved"
        msgs = {ch.title_of(m): m for m in srv.state["messages"]}
        assert set(msgs) == {"ℹ️ Disk & <ok>", "🚨 " + HOSTILE, "⚠️ Warm"}
        for m in msgs.values():
            assert m["allowed_mentions"] == {"parse": []}, "no text can ping anyone"
            assert "content" not in m
        [a] = msgs["ℹ️ Disk & <ok>"]["embeds"]
        assert a["url"] == "https://example.org/a?x=1&y=2" and a["color"] == 0x3498DB and "description" not in a
        [b] = msgs["🚨 " + HOSTILE]["embeds"]
        assert b["color"] == 0xE74C3C and b["url"] == "https://example.org/b"
        assert "\\]\\(http://evil\\)" in b["title"] and "\\@everyone" in b["title"], "no link or mention markup survives"
        assert markdown_text(b["description"]) == "first line\n**not bold** @here <@123>"
        assert "\\*\\*not bold\\*\\*" in b["description"]
        [c] = msgs["⚠️ Warm"]["embeds"]
        assert c["color"] == 0xF1C40F and "url" not in c, "a javascript: URL is not linked"
        assert_no_secret(ch, r.stdout + r.stderr)


def test_long_title_and_body_are_cut_to_the_embed_limits(tidings):
    ch = Discord()
    Feed(tidings).set([item("long", "t*" * 300, body="b_" * 3000)])
    with FakeServer(ch.handler, state=ch.state()) as srv:
        ch.configure(tidings, srv.url)
        r = tidings.run("check", "--deliver")
        assert r.code == 1, r  # delivered, new events
        [e] = srv.state["messages"][0]["embeds"]
        assert len(e["title"]) <= 256 and e["title"].endswith("\\*…"), "cut after a whole escape"
        assert len(e["description"]) <= 4096 and e["description"].endswith("\\_…")


def test_5xx_retried_and_429_waits_for_retry_after(tidings):
    # The body's retry_after (3.5) is longer than the backoff; Retry-After says 4 (rounded up).
    log = check_retried_after_the_wait(tidings, Discord(), ("429", 3.5), wait=3.5)
    assert "rate limited" in log


def test_an_unknown_webhook_disables_the_sink_once_and_keeps_the_events(tidings):
    ch = Discord()
    log = check_dead_sink_reported_once(tidings, ch, ch.state(script=["unknown"]))
    assert "HTTP 404" in log and "Unknown Webhook" in log and "no such webhook" in log


def test_sinks_test_reports_token_and_form_errors_and_never_the_url(tidings):
    ch = Discord()
    with FakeServer(ch.handler, state=ch.state(script=[None, "echo", 500, "invalid_form"])) as srv:
        ch.configure(tidings, srv.url)
        runs = [tidings.run("sinks", "test", "chat") for _ in range(4)]
        ok, echo, busy, invalid = runs
        assert ok.code == 0 and "delivered" in ok.stderr, ok
        assert "tidings test event" in markdown_text(srv.state["messages"][0]["embeds"][0]["title"])
        assert echo.code == 2 and "‹redacted›" in echo.stderr and "would disable" in echo.stderr, echo
        assert busy.code == 2 and "would retry" in busy.stderr, busy
        assert invalid.code == 2 and "Invalid Form Body" in invalid.stderr and "would not retry" in invalid.stderr, invalid
        for r in runs[1:]:
            assert "discord webhook at 127.0.0.1" in r.stderr
        assert_no_secret(ch, outputs_of(tidings, *runs))

        # A body template longer than the description limit is cut, not refused.
        tidings.write_config(tidings.config.read_text() + 'body_template = "' + "x" * 5000 + '"\n')
        r = tidings.run("sinks", "test", "chat")
        assert r.code == 0, "the sink cuts what it renders"
        # A token that no longer matches (the webhook was reset): 401, the sink stops.
        srv.state["token"] = "reset"
        r = tidings.run("sinks", "test", "chat")
        assert r.code == 2 and "Invalid Webhook Token" in r.stderr and "would disable" in r.stderr, r
