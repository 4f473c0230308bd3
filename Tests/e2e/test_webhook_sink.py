"""Webhook sink through the real binary: Standard Webhooks signatures, retries through the
outbox, Retry-After, 410 and 400 handling, ordering, and durability across kill -9."""
from __future__ import annotations

import base64
import json
import os

import pytest

from conftest import kill_while_queued, outbox, read_log, wait_for
from fakes.server import FakeServer
from fakes.webhook_receiver import WebhookReceiver, receiver_state, verify
from feed import Feed, item

SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()


def webhook_config(t, url, extra=""):
    secret = t.write_secret("hook.secret", SECRET)
    t.write_config(f"""
        [sinks.hook]
        type = "webhook"
        url = "{url}/hook"
        secret_file = "{secret}"
        timeout = "5s"
        headers = {{ X-Team = "ops" }}
        {extra}
        """)


def test_signed_post_retried_through_a_receiver_that_fails_twice(tidings):
    feed = Feed(tidings)
    feed.set([item("a", "Påminnelse: <b>bold</b> & more", url="https://example.org/a")])
    with FakeServer(WebhookReceiver, state=receiver_state(SECRET, script=[503, 502])) as srv:
        webhook_config(tidings, srv.url)
        d = tidings.start_daemon()
        wait_for(lambda: srv.state["accepted"], timeout=30, what="the webhook to be accepted")
        reqs = srv.requests
        assert len(reqs) == 3, reqs
        event = srv.state["accepted"][0]
        assert event["title"] == "Påminnelse: <b>bold</b> & more" and event["source"] == "feed"
        assert set(event) == {"id", "source", "provider", "kind", "event", "key", "title", "body", "url",
                              "severity", "observed_at", "data"}
        for r in reqs:
            assert r.method == "POST" and r.path == "/hook"
            assert r.headers["content-type"] == "application/json"
            assert r.headers["x-team"] == "ops"
            assert r.headers["webhook-id"] == event["id"], "the same id on every retry"
            assert verify(SECRET, r.headers, r.body) is None
        assert srv.state["bad_signatures"] == []
        assert "retrying in" in read_log(d)
        wait_for(lambda: outbox(tidings) == [], what="the outbox to empty")


def test_wrong_secret_is_detected_by_the_receiver(tidings):
    """The receiver's verification is real: a different secret fails it."""
    feed = Feed(tidings)
    feed.set([item("a")])
    other = "whsec_" + base64.b64encode(os.urandom(32)).decode()
    with FakeServer(WebhookReceiver, state=receiver_state(other)) as srv:
        webhook_config(tidings, srv.url)
        r = tidings.run("check", "--deliver")
        assert r.code == 2, r
        assert "HTTP 401" in r.stderr and "hook" in r.stderr
        assert [p for _, p in srv.state["bad_signatures"]] == ["signature mismatch"]


def test_retry_after_is_honoured(tidings):
    feed = Feed(tidings)
    feed.set([item("a")])
    with FakeServer(WebhookReceiver, state=receiver_state(SECRET, script=[(429, {"Retry-After": "4"})])) as srv:
        webhook_config(tidings, srv.url)
        tidings.start_daemon()
        wait_for(lambda: srv.state["accepted"], timeout=30, what="delivery after 429")
        first, second = srv.requests[:2]
        gap = srv.request_times[1] - srv.request_times[0]
        assert gap >= 3.9, f"retried after {gap:.1f}s despite Retry-After: 4"
        assert first.headers["webhook-id"] == second.headers["webhook-id"]


def test_400_is_a_dead_letter_and_later_events_still_flow_in_order(tidings):
    feed = Feed(tidings)
    feed.set([item("a"), item("b"), item("c")])
    with FakeServer(WebhookReceiver, state=receiver_state(SECRET, script=[400])) as srv:
        webhook_config(tidings, srv.url)
        r = tidings.run("check", "--deliver")
        assert r.code == 2, r
        assert "HTTP 400" in r.stderr
        assert "stays queued" not in r.stderr, "a dead letter is not queued (issue 9, item 22)"
        refused = json.loads(srv.requests[0].body)
        assert [e["key"] for e in srv.state["accepted"]] == [k for k in ("a", "b", "c") if k != refused["key"]]
        dead = outbox(tidings)
        assert [(d["status"], d["sink"], d["event"]["id"], d["attempts"]) for d in dead] == [("dead", "hook", refused["id"], 1)]
        assert "HTTP 400" in dead[0]["last_error"]
        text = tidings.run("outbox")
        assert "1 dead" in text.stdout and refused["id"] in text.stdout

        r = tidings.run("outbox", "retry", refused["id"])
        assert r.code == 0, r
        assert [d["status"] for d in outbox(tidings)] == ["pending"]
        r = tidings.run("check", "--deliver")
        assert r.code == 0, r
        assert outbox(tidings) == []
        assert srv.state["ids"].count(refused["id"]) == 1
        assert tidings.run("outbox", "retry", "nope").code == 64


def test_a_failing_head_blocks_later_events_so_order_is_kept(tidings):
    feed = Feed(tidings)
    feed.set([item("a")])
    with FakeServer(WebhookReceiver, state=receiver_state(SECRET, script=[503, 503])) as srv:
        webhook_config(tidings, srv.url)
        tidings.start_daemon()
        wait_for(lambda: len(srv.requests) >= 1, what="first attempt")
        feed.set([item("a"), item("b")])
        wait_for(lambda: len(srv.state["accepted"]) == 2, timeout=30, what="both events")
        assert [e["key"] for e in srv.state["accepted"]] == ["a", "b"]
        assert len(set(srv.state["ids"])) == 2


def test_410_disables_the_sink_loudly_and_keeps_the_event(tidings):
    feed = Feed(tidings)
    feed.set([item("a")])
    with FakeServer(WebhookReceiver, state=receiver_state(SECRET, script=[410])) as srv:
        webhook_config(tidings, srv.url)
        d = tidings.start_daemon()
        wait_for(lambda: "DISABLED" in read_log(d), what="the sink to be disabled")
        assert "HTTP 410" in read_log(d)
        rows = outbox(tidings)
        assert [(r["status"], r["sink"]) for r in rows] == [("retrying", "hook")]
        assert "410" in rows[0]["last_error"]
        assert srv.state["accepted"] == []


def test_batch_sends_one_signed_array_per_poll(tidings):
    feed = Feed(tidings)
    feed.set([item("a"), item("b"), item("c")])
    with FakeServer(WebhookReceiver, state=receiver_state(SECRET, script=[503])) as srv:
        webhook_config(tidings, srv.url, extra="batch = true")
        r = tidings.run("check", "--deliver")
        assert r.code == 2, r
        d = tidings.start_daemon()
        wait_for(lambda: srv.state["accepted"], timeout=30, what="the batch")
        batch = srv.state["accepted"][0]
        assert isinstance(batch, list) and sorted(e["key"] for e in batch) == ["a", "b", "c"]
        ids = {r.headers["webhook-id"] for r in srv.requests}
        assert len(ids) == 1, "a batch keeps its webhook-id across retries"
        assert all(verify(SECRET, r.headers, r.body) is None for r in srv.requests)


def test_receiver_down_daemon_killed_nothing_lost_delivered_once(tidings):
    feed = Feed(tidings)
    feed.set([item("a"), item("b")])
    # Per-sink order: the head is retried, the second waits behind it.
    port, queued = kill_while_queued(tidings, lambda port: webhook_config(tidings, f"http://127.0.0.1:{port}"))
    with FakeServer(WebhookReceiver, state=receiver_state(SECRET), port=port) as srv:
        tidings.start_daemon()
        wait_for(lambda: len(srv.state["accepted"]) == 2, timeout=30, what="the queued events after restart")
        assert set(srv.state["ids"]) == queued
        assert sorted(srv.state["ids"]) == sorted(e["id"] for e in srv.state["accepted"])
        wait_for(lambda: outbox(tidings) == [], what="the outbox to empty")
        assert len(srv.requests) == 2, "each queued event once, no duplicates"


def test_sinks_test_sends_a_signed_test_event_and_reports_failures(tidings):
    with FakeServer(WebhookReceiver, state=receiver_state(SECRET, script=[200, 503, 410])) as srv:
        webhook_config(tidings, srv.url)
        r = tidings.run("sinks", "test", "hook")
        assert r.code == 0, r
        [event] = srv.state["accepted"]
        assert event["kind"] == "test" and "test" in event["title"] and event["data"] == {"test": True}
        assert verify(SECRET, srv.requests[0].headers, srv.requests[0].body) is None
        r = tidings.run("sinks", "test", "hook")
        assert r.code == 2 and "HTTP 503" in r.stderr and "would retry" in r.stderr, r
        r = tidings.run("sinks", "test", "hook")
        assert r.code == 2 and "HTTP 410" in r.stderr and "disable" in r.stderr, r
        assert tidings.run("sinks", "test", "nope").code == 64
        assert tidings.run("outbox", "--json").events == [], "a test event never enters the outbox"
