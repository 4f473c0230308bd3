"""The telegram sink through the real binary against a fake Bot API server (fakes/telegram.py):
HTML formatting, escaping and links as Telegram would parse them, the 4096-character cut,
parameters.retry_after, auth and chat errors as a dead sink, dead letters, no token anywhere."""
from __future__ import annotations

from chat import HOSTILE, Telegram, assert_no_secret, outputs_of, check_dead_sink_reported_once, check_retried_after_the_wait
from fakes.server import FakeServer
from feed import Feed, item


def test_events_arrive_with_severity_link_and_escaped_text(tidings):
    ch = Telegram()
    Feed(tidings).set([
        item("a", "Disk & <ok>", url="https://example.org/a?x=1&y=2"),
        item("b", HOSTILE, body="first line\n<i>not italic</i> & more", severity="critical", url="https://example.org/b"),
        item("c", "Warm", severity="warning", url="javascript:alert(1)"),
    ])
    with FakeServer(ch.handler, state=ch.state()) as srv:
        ch.configure(tidings, srv.url)
        r = tidings.run("check", "--deliver")
        assert r.code == 1, r  # delivered, new events
        msgs = {m["plain"].split("\n")[0]: m for m in srv.state["messages"]}
        assert set(msgs) == {"ℹ️ Disk & <ok>", "🚨 " + HOSTILE, "⚠️ Warm"}
        a = msgs["ℹ️ Disk & <ok>"]
        assert a["chat_id"] == 4242 and a["parse_mode"] == "HTML" and a["link_preview_options"] == {"is_disabled": True}
        assert a["links"] == ["https://example.org/a?x=1&y=2"]
        assert a["text"].startswith('ℹ️ <b><a href="https://example.org/a?x=1&amp;y=2">Disk &amp; &lt;ok&gt;</a></b>')
        b = msgs["🚨 " + HOSTILE]
        assert b["plain"] == "🚨 " + HOSTILE + "\nfirst line\n<i>not italic</i> & more", "remote text is shown, not parsed"
        assert b["links"] == ["https://example.org/b"], "no link but the event's"
        assert "&lt;b&gt;x&lt;/b&gt;" in b["text"]
        assert msgs["⚠️ Warm"]["links"] == [], "a javascript: URL is not linked"
        assert_no_secret(ch, r.stdout + r.stderr)


def test_a_long_body_is_cut_to_4096_visible_characters_without_breaking_entities(tidings):
    ch = Telegram()
    body = ("a&b<c>d " * 700)[:5000]
    Feed(tidings).set([item("long", "Long <one>", body=body, url="https://example.org/l")])
    with FakeServer(ch.handler, state=ch.state()) as srv:
        ch.configure(tidings, srv.url)
        r = tidings.run("check", "--deliver")
        assert r.code == 1, r  # delivered, new events
        [m] = srv.state["messages"]
        assert len(m["plain"].encode("utf-16-le")) // 2 <= 4096
        assert m["plain"].endswith("…") and len(m["plain"]) > 4000
        assert m["plain"].startswith("ℹ️ Long <one>\na&b<c>d a&b<c>d")
        assert m["links"] == ["https://example.org/l"]


def test_5xx_retried_and_429_waits_for_parameters_retry_after(tidings):
    # Telegram's wait is in the body only (no Retry-After header).
    log = check_retried_after_the_wait(tidings, Telegram(), ("429", 4), wait=4)
    assert "rate limited" in log


def test_a_refused_token_disables_the_sink_once_and_keeps_the_events(tidings):
    ch = Telegram()
    log = check_dead_sink_reported_once(tidings, ch, Telegram().state())
    assert "HTTP 401" in log and "bot token was refused" in log


def test_sinks_test_reports_chat_and_rights_errors_clearly_and_never_the_token(tidings):
    ch = Telegram()
    script = [None, "blocked", "migrate", "echo", 500]
    with FakeServer(ch.handler, state=ch.state(script=script)) as srv:
        ch.configure(tidings, srv.url)
        runs = [tidings.run("sinks", "test", "chat") for _ in script]
        ok, blocked, migrate, echo, busy = runs
        assert ok.code == 0 and "delivered" in ok.stderr, ok
        [m] = srv.state["messages"]
        assert "tidings test event" in m["plain"]
        assert blocked.code == 2 and "bot was blocked by the user" in blocked.stderr and "would disable" in blocked.stderr, blocked
        assert migrate.code == 2 and "set chat_id = -1001234567890" in migrate.stderr and "would disable" in migrate.stderr, migrate
        assert echo.code == 2 and "‹redacted›" in echo.stderr, "the server echoed the token: it is scrubbed"
        assert busy.code == 2 and "would retry" in busy.stderr, busy
        for r in runs[1:]:
            assert "telegram sendMessage at 127.0.0.1" in r.stderr
        assert_no_secret(ch, outputs_of(tidings, *runs))

        # A chat the bot cannot see is configuration, not this message: the sink stops.
        tidings.write_config(tidings.config.read_text().replace("chat_id = 4242", 'chat_id = "@elsewhere"'))
        r = tidings.run("sinks", "test", "chat")
        assert r.code == 2 and "chat not found" in r.stderr and "check chat_id" in r.stderr and "would disable" in r.stderr, r


def test_a_message_telegram_refuses_is_a_dead_letter_not_a_dead_sink(tidings):
    ch = Telegram()
    Feed(tidings).set([item("a", "fine"), item("b", "also fine")])
    with FakeServer(ch.handler, state=ch.state()) as srv:
        # An unsupported tag in the user's own template: Telegram cannot parse that message.
        ch.configure(tidings, srv.url, extra='title_template = "<blink>{{title}}</blink>"\n')
        r = tidings.run("check", "--deliver")
        assert r.code == 2 and "can't parse entities" in r.stderr, r
        dead = tidings.run("outbox", "--json").events
        assert [d["status"] for d in dead] == ["dead", "dead"]
        assert srv.state["messages"] == []
