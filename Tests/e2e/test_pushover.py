"""Pushover sink through the real binary against a fake Pushover API (fakes/pushover.py):
credentials in the body only, severity → priority, url, timestamp, Pushover's length limits,
5xx retried no sooner than 5 s, 429 (monthly limit) retried after X-Limit-App-Reset, an invalid
token or user key as a dead sink reported once, other 4xx as dead letters, no secret anywhere,
`sinks test`. (The crash test: test_push_crash.py.)"""
from __future__ import annotations

import json

from conftest import read_log, wait_for
from fakes.pushover import PushoverServer, pushover_state
from fakes.server import FakeServer
from feed import Feed, item
from push_util import assert_no_secret, disabled_once, outbox, token

APP = token()
USER = token()


def config(t, url, app=APP, user=USER):
    t.write_config(f"""
        [sinks.phone]
        type = "pushover"
        api_url = "{url}/1/messages.json"
        api_token_file = "{t.write_secret("pushover.app", app)}"
        user_key_env = "TEST_PUSHOVER_USER"
        """)
    t.env["TEST_PUSHOVER_USER"] = user


def fake(**kw):
    return FakeServer(PushoverServer, state=pushover_state(tokens={APP}, users={USER}, **kw))


def test_events_are_sent_with_priority_url_and_pushovers_limits(tidings):
    feed = Feed(tidings)
    feed.set([
        item("a", "Faktura <b>förfallen</b> & obetald", url="https://bank.example/i/1"),
        item("b", "T" * 300, body="ö" * 1500, severity="warning", url="https://x.example/" + "p" * 600),
        item("c", "Down", body="since 10:00", severity="critical"),
    ])
    with fake() as srv:
        config(tidings, srv.url)
        r = tidings.run("check", "--deliver")
        assert r.code == 1, r  # new events, all delivered
        assert len(srv.requests) == 3
        for req in srv.requests:
            assert req.method == "POST" and req.path == "/1/messages.json" and req.query == {}
            assert req.headers["content-type"] == "application/json"
            assert "authorization" not in req.headers
        sent = {m["message"][:4]: m for m in srv.state["accepted"]}
        a = sent["Fakt"]
        assert (a["token"], a["user"]) == (APP, USER)
        assert a["message"] == "Faktura <b>förfallen</b> & obetald" and "title" not in a and "html" not in a, \
            "plain text, exactly as given; no body: the title is the message"
        assert (a["priority"], a["url"]) == ("0", "https://bank.example/i/1")
        assert a["timestamp"].isdigit()
        b = sent["öööö"]
        assert b["priority"] == "1" and "url" not in b, "a URL over 512 characters is left out, not cut"
        assert len(b["title"]) == 250 and len(b["message"]) == 1024 and b["message"].endswith("…")
        c = sent["sinc"]
        assert (c["title"], c["priority"]) == ("Down", "1"), "critical is high priority, never 2 (emergency)"


def test_5xx_waits_5_seconds_and_429_waits_for_the_limit_reset(tidings):
    feed = Feed(tidings)
    feed.set([item("a", "Hello")])
    with fake(script=[503, 429], reset_in=5) as srv:
        config(tidings, srv.url)
        d = tidings.start_daemon()
        wait_for(lambda: srv.state["accepted"], timeout=40, what="the message after 503 and 429")
        assert [m["message"] for m in srv.state["accepted"]] == ["Hello"] and len(srv.requests) == 3
        t = srv.request_times
        assert t[1] - t[0] >= 4.9, f"resent {t[1] - t[0]:.1f}s after a 5xx (Pushover: no more than once every 5 s)"
        assert t[2] - t[1] >= 3.9, f"resent {t[2] - t[1]:.1f}s after a 429 whose X-Limit-App-Reset was ~5 s away"
        assert "HTTP 503" in read_log(d)
        wait_for(lambda: outbox(tidings) == [], what="the outbox to empty")
        srv.state["script"] = [429]
        r = tidings.run("sinks", "test", "phone")
        assert r.code == 2 and "would retry" in r.stderr, r
        assert "application is over its message limit" in r.stderr, r
        assert "monthly limit of 10000 messages is used up until" in r.stderr, r


def test_invalid_token_disables_the_sink_once_keeps_the_events_and_prints_no_secret(tidings):
    feed = Feed(tidings)
    feed.set([item("a")])
    wrong = token()
    with fake(echo=True) as srv:
        config(tidings, srv.url, app=wrong)
        line = disabled_once(tidings, feed)
        assert "HTTP 400" in line and "application token is invalid" in line and "api_token is invalid" in line, line
        assert len(srv.requests) == 1 and srv.state["accepted"] == []
        r = tidings.run("sinks", "test", "phone")
        assert r.code == 2 and "api_token is invalid" in r.stderr, r
        assert_no_secret(tidings, [wrong, USER], r.stdout, r.stderr)
        assert wrong not in json.dumps(outbox(tidings))


def test_invalid_user_key_is_a_dead_sink_and_other_4xx_a_dead_letter(tidings):
    feed = Feed(tidings)
    feed.set([item("a")])
    with fake() as srv:
        config(tidings, srv.url, user=token())
        r = tidings.run("check", "--deliver")
        assert r.code == 2 and "user_key is invalid" in r.stderr, r
        assert [x["status"] for x in outbox(tidings)] == ["retrying"], "kept for after the fix"
    feed.set([item("a"), item("z")])
    with fake(script=[422]) as srv:
        config(tidings, srv.url)
        r = tidings.run("check", "--deliver")
        assert r.code == 2 and "HTTP 422: scripted failure" in r.stderr, r
        dead = [x for x in outbox(tidings) if x["status"] == "dead"]
        assert len(dead) == 1 and "HTTP 422" in dead[0]["last_error"]


def test_sinks_test_sends_a_test_event(tidings):
    with fake() as srv:
        config(tidings, srv.url)
        r = tidings.run("sinks", "test", "phone")
        assert r.code == 0 and "delivered" in r.stderr, r
        [m] = srv.state["accepted"]
        assert m["title"].startswith("tidings test event") and m["priority"] == "0"
        assert_no_secret(tidings, [APP, USER], r.stdout, r.stderr)
