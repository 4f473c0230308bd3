"""ntfy sink through the real binary against a fake ntfy server (fakes/ntfy.py): JSON publish,
severity → priority, click, plain text as sent, the 4,096-byte limit, retries on 5xx and 429,
auth failure as a dead sink reported once, no secret anywhere, `sinks test`.
(The crash test for all three phone channels: test_push_crash.py.)"""
from __future__ import annotations

import base64
import json

from conftest import read_log, wait_for
from fakes.ntfy import NtfyServer, ntfy_state
from fakes.server import FakeServer
from feed import Feed, item
from push_util import assert_no_secret, disabled_once, outbox, token

TOKEN = token(29, "tk_")
PASSWORD = token(20)


def config(t, url, auth=None, extra=""):
    auth = auth if auth is not None else f'token_file = "{t.write_secret("ntfy.token", TOKEN)}"'
    t.write_config(f"""
        [sinks.phone]
        type = "ntfy"
        url = "{url}"
        topic = "alerts"
        tags = ["bell", "tidings"]
        {auth}
        {extra}
        """)


def fake(**kw):
    return FakeServer(NtfyServer, state=ntfy_state(tokens={TOKEN}, users={"phil": PASSWORD}, protected={"alerts"}, **kw))


def test_events_are_published_with_priority_click_and_text_as_sent(tidings):
    feed = Feed(tidings)
    feed.set([
        item("a", "Påminnelse från Lisa <b>&amp; **fet**", url="https://example.org/a?x=1&y=2"),
        item("b", "Disk \"full\"", body="line 1\nline 2 ✓", severity="warning", url="javascript:alert(1)"),
        item("c", "Down", body="x" * 5000, severity="critical"),
    ])
    with fake() as srv:
        config(tidings, srv.url)
        r = tidings.run("check", "--deliver")
        assert r.code == 1, r  # new events, all delivered
        sent = {m["message"][:4]: m for m in srv.state["accepted"]}
        assert len(srv.requests) == 3
        for req in srv.requests:
            assert req.method == "POST" and req.path == "/", "JSON publishing goes to the server root"
            assert req.headers["authorization"] == f"Bearer {TOKEN}"
            assert req.headers["content-type"] == "application/json"
            assert "title" not in req.headers and "x-title" not in req.headers
        a = sent["Påmi"]
        assert a == {"topic": "alerts", "message": "Påminnelse från Lisa <b>&amp; **fet**", "priority": 3,
                     "tags": ["bell", "tidings"], "click": "https://example.org/a?x=1&y=2"}, \
            "no body: the title is the message (no title twice); text exactly as the source gave it"
        b = sent["line"]
        assert (b["title"], b["message"], b["priority"]) == ('Disk "full"', "line 1\nline 2 ✓", 4)
        assert "click" not in b, "only http(s) links become tap actions"
        c = sent["xxxx"]
        assert c["priority"] == 5 and c["title"] == "Down"
        assert len(c["message"].encode()) <= 4096 and c["message"].endswith("…"), "cut to ntfy's limit, marked"
        assert "markdown" not in a


def test_basic_auth_and_the_default_server_when_url_is_omitted(tidings):
    feed = Feed(tidings)
    feed.set([item("a")])
    with fake() as srv:
        pw = tidings.write_secret("ntfy.pw", PASSWORD)
        config(tidings, srv.url, auth=f'username = "phil"\npassword_file = "{pw}"')
        r = tidings.run("check", "--deliver")
        assert r.code == 1, r  # new events, all delivered
        expected = "Basic " + base64.b64encode(f"phil:{PASSWORD}".encode()).decode()
        assert srv.requests[0].headers["authorization"] == expected
        assert_no_secret(tidings, [PASSWORD, expected.split()[1]], r.stdout, r.stderr)
    tidings.write_config('[sinks.phone]\ntype = "ntfy"\ntopic = "alerts"\n')
    r = tidings.run("config", "check")
    assert r.code == 0, r


def test_5xx_and_429_are_retried_and_delivered_once(tidings):
    feed = Feed(tidings)
    feed.set([item("a", "Hello")])
    with fake(script=[503, 429]) as srv:
        config(tidings, srv.url)
        d = tidings.start_daemon()
        wait_for(lambda: srv.state["accepted"], timeout=40, what="the publish after 503 and 429")
        assert [m["message"] for m in srv.state["accepted"]] == ["Hello"]
        assert len(srv.requests) == 3
        gaps = [b - a for a, b in zip(srv.request_times, srv.request_times[1:])]
        # ntfy's 429 carries no Retry-After: the outbox's backoff (2 s, then 4 s, ±20 %) paces it.
        assert gaps[0] >= 1.5 and gaps[1] >= 3.0, f"retries back off: {gaps}"
        log = read_log(d)
        assert "HTTP 503" in log and "retrying in" in log
        wait_for(lambda: outbox(tidings) == [], what="the outbox to empty")
        assert len(srv.state["accepted"]) == 1


def test_wrong_token_disables_the_sink_once_keeps_the_events_and_prints_no_secret(tidings):
    feed = Feed(tidings)
    feed.set([item("a")])
    wrong = token(29, "tk_")
    with fake(echo=True) as srv:
        config(tidings, srv.url, auth=f'token_file = "{tidings.write_secret("wrong.token", wrong)}"')
        line = disabled_once(tidings, feed)
        assert "HTTP 401" in line and "unauthorized" in line and "credentials" in line, line
        assert srv.state["accepted"] == [] and len(srv.requests) == 1, "nothing more is sent to a dead sink"
        r = tidings.run("sinks", "test", "phone")
        assert r.code == 2 and "HTTP 401" in r.stderr and "disable" in r.stderr, r
        assert_no_secret(tidings, [wrong], r.stdout, r.stderr)
        assert wrong not in json.dumps(outbox(tidings))


def test_anonymous_publisher_to_a_protected_topic_is_told_why(tidings):
    feed = Feed(tidings)
    feed.set([item("a")])
    with fake() as srv:
        config(tidings, srv.url, auth="")
        r = tidings.run("check", "--deliver")
        assert r.code == 2, r
        assert "HTTP 403" in r.stderr and "forbidden" in r.stderr and "authentication failed" in r.stderr, r


def test_sinks_test_publishes_a_test_event_and_reports_failures(tidings):
    with fake(script=[200, 503]) as srv:
        config(tidings, srv.url)
        r = tidings.run("sinks", "test", "phone")
        assert r.code == 0 and "delivered" in r.stderr, r
        [m] = srv.state["accepted"]
        assert m["title"].startswith("tidings test event") and m["priority"] == 3
        r2 = tidings.run("sinks", "test", "phone")
        assert r2.code == 2 and "HTTP 503" in r2.stderr and "would retry" in r2.stderr, r2
        assert_no_secret(tidings, [TOKEN], r.stdout, r.stderr, r2.stdout, r2.stderr)
        assert outbox(tidings) == []
