"""Gotify sink through the real binary against a fake Gotify server (fakes/gotify.py): the token
as X-Gotify-Key only, severity → priority, click extras, plain text as sent, retries on 5xx and
on a proxy's 429 after its Retry-After, a bad token as a dead sink reported once, no secret
anywhere, `sinks test`. (The crash test: test_push_crash.py.)"""
from __future__ import annotations

from conftest import wait_for
from fakes.gotify import GotifyServer, gotify_state
from fakes.server import FakeServer
from feed import Feed, item
from push_util import assert_no_secret, disabled_once, outbox, token

TOKEN = token(15)


def config(t, url, tok=TOKEN):
    t.write_config(f"""
        [sinks.phone]
        type = "gotify"
        url = "{url}/"
        token_file = "{t.write_secret("gotify.token", tok)}"
        """)


def fake(**kw):
    return FakeServer(GotifyServer, state=gotify_state(tokens={TOKEN: "tidings"}, **kw))


def test_events_are_posted_with_priority_click_and_text_as_sent(tidings):
    feed = Feed(tidings)
    feed.set([
        item("a", "Ny **order** <i>#7</i>", url="https://shop.example/o/7"),
        item("b", "Poll failing", body="HTTP 500 from [api](https://evil.example)", severity="warning"),
        item("c", "Auth failed", body="ç", severity="critical", url="intent://x#Intent;end"),
    ])
    with fake() as srv:
        config(tidings, srv.url)
        r = tidings.run("check", "--deliver")
        assert r.code == 1, r  # new events, all delivered
        assert len(srv.requests) == 3
        for req in srv.requests:
            assert req.method == "POST" and req.path == "/message" and req.query == {}
            assert req.headers["x-gotify-key"] == TOKEN
        stored = {m["sent"]["message"][:4]: m for m in srv.state["accepted"]}
        a = stored["Ny *"]
        assert a["sent"] == {"message": "Ny **order** <i>#7</i>", "priority": 5, "extras": {
            "client::display": {"contentType": "text/plain"},
            "client::notification": {"click": {"url": "https://shop.example/o/7"}}}}
        assert a["title"] == "tidings", "no body: the title is the message, Gotify shows the app's name above it"
        b = stored["HTTP"]
        assert (b["title"], b["priority"]) == ("Poll failing", 8)
        assert b["extras"]["client::display"] == {"contentType": "text/plain"}, "remote markdown is shown, not rendered"
        c = stored["ç"]
        assert c["priority"] == 10 and "client::notification" not in c["extras"], "only http(s) links become tap actions"


def test_5xx_and_a_proxys_429_are_retried_honouring_retry_after(tidings):
    feed = Feed(tidings)
    feed.set([item("a", "Hello")])
    with fake(script=[502, 429], retry_after="4") as srv:
        config(tidings, srv.url)
        tidings.start_daemon()
        wait_for(lambda: srv.state["accepted"], timeout=40, what="the message after 502 and 429")
        assert [m["message"] for m in srv.state["accepted"]] == ["Hello"] and len(srv.requests) == 3
        gap = srv.request_times[2] - srv.request_times[1]
        assert gap >= 3.9, f"retried {gap:.1f}s after a 429 with Retry-After: 4"
        wait_for(lambda: outbox(tidings) == [], what="the outbox to empty")


def test_bad_token_disables_the_sink_once_keeps_the_events_and_prints_no_secret(tidings):
    feed = Feed(tidings)
    feed.set([item("a")])
    wrong = token(15)
    with fake(echo=True) as srv:
        config(tidings, srv.url, tok=wrong)
        line = disabled_once(tidings, feed)
        assert "HTTP 401" in line and "valid access token" in line, line
        assert len(srv.requests) == 1 and srv.state["accepted"] == []
        r = tidings.run("sinks", "test", "phone")
        assert r.code == 2 and "HTTP 401" in r.stderr, r
        assert_no_secret(tidings, [wrong], r.stdout, r.stderr)


def test_sinks_test_and_config_errors(tidings):
    with fake() as srv:
        config(tidings, srv.url)
        r = tidings.run("sinks", "test", "phone")
        assert r.code == 0, r
        [m] = srv.state["accepted"]
        assert m["title"].startswith("tidings test event") and m["priority"] == 5
        assert_no_secret(tidings, [TOKEN], r.stdout, r.stderr)
    tidings.write_config('[sinks.phone]\ntype = "gotify"\nurl = "gotify.example"\n')
    r = tidings.run("config", "check")
    assert r.code != 0 and ":3: sink \"phone\": 'url' must be an http:// or https:// URL" in r.stderr, r
