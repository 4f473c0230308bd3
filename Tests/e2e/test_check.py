"""`tidings check` against a local HTTP server: baseline, changes, validators and failures."""
import os
import sqlite3
from collections import Counter
from datetime import datetime

from fakes.json_api import JSONAPI
from fakes.server import FakeServer


def api_source(t, name, url, extra=""):
    t.write_plugin(f"{name}.toml", f"""
        provider = "http-json"
        url = "{url}/items"
        items = "/items"
        key = "/id"
        title = "{{/name}} is {{/status}}"
        link = "/url"
        severity = "/level"
        timeout = "2s"
        {extra}
    """)


def test_baseline_then_exact_changes_and_conditional_requests(tidings):
    with FakeServer(JSONAPI, {"items": [{"id": 1, "name": "db1", "status": "up"},
                                        {"id": 2, "name": "db2", "status": "up"}]}) as api:
        api_source(tidings, "api", api.url)
        r = tidings.check()
        assert r.code == 0, r
        assert r.stdout == "", "the baseline is silent"
        assert "baseline: stored 2 existing items" in r.stderr

        api.state["items"] = [{"id": 1, "name": "db1", "status": "down", "level": "critical", "url": "https://x/1"},
                              {"id": 3, "name": "db3", "status": "up"}]
        r = tidings.check()
        assert r.code == 1, r
        got = sorted((e["event"], e["key"], e["title"]) for e in r.events)
        assert got == [("changed", "1", "db1 is down"), ("new", "3", "db3 is up"), ("removed", "2", "db2 is up")]
        changed = next(e for e in r.events if e["event"] == "changed")
        assert changed["severity"] == "critical"
        assert changed["url"] == "https://x/1"
        assert changed["source"] == "api" and changed["provider"] == "http-json" and changed["kind"] == "item"
        assert changed["data"]["changes"]["status"] == {"old": "up", "new": "down"}
        assert set(changed) == {"id", "source", "provider", "kind", "event", "key", "title", "body", "url",
                                "severity", "observed_at", "data"}

        api.clear()
        r = tidings.check()
        assert r.code == 0, r
        assert r.stdout == ""
        assert api.requests[-1].headers.get("if-none-match"), "the request carried If-None-Match"
        # The event ids are in history, unique.
        h = tidings.run("history", "--json")
        ids = [e["id"] for e in h.events]
        assert len(ids) == 3 and len(set(ids)) == 3


def test_failing_source_gives_exit_2_and_others_still_run(tidings):
    with FakeServer(JSONAPI, {"items": [{"id": 1, "name": "a", "status": "up"}]}) as good, \
         FakeServer(JSONAPI, {"status": 404, "error_body": {"error": "no such thing"}}) as bad:
        api_source(tidings, "good", good.url)
        api_source(tidings, "bad", bad.url)
        tidings.check()
        good.state["items"].append({"id": 2, "name": "b", "status": "up"})
        r = tidings.check()
        assert r.code == 2, r
        assert "source bad failed: HTTP 404" in r.stderr
        assert "no such thing" in r.stderr
        assert [e["key"] for e in r.events] == ["2"], "the healthy source still reported its change"


def test_retry_after_is_reported_and_honoured_in_schedule(tidings):
    with FakeServer(JSONAPI, {"status": 429, "retry_after": 120}) as api:
        api_source(tidings, "limited", api.url, 'interval = "10s"\njitter = 0.0')
        r = tidings.check()
        assert r.code == 2
        (line,) = [l for l in r.stderr.splitlines() if "limited" in l]
        assert "source limited failed: HTTP 429" in line and "the server asked for no request for 2m (Retry-After)" in line, r.stderr
        (s,) = tidings.run("sources", "--json").events
        due, failed = (datetime.fromisoformat(s[k].replace("Z", "+00:00")) for k in ("next_due", "last_error_at"))
        assert (due - failed).total_seconds() >= 119, s


def test_a_failure_is_one_line_naming_the_source_and_no_next_try(tidings):
    """A one-shot check has no next try: its stderr says that the source failed and why, once."""
    with FakeServer(JSONAPI, {"status": 500, "error_body": {"error": "boom"}}) as api:
        api_source(tidings, "flaky500", api.url)
        r = tidings.check()
        assert r.code == 2, r
        assert "next try" not in r.stderr, r.stderr
        lines = [l for l in r.stderr.splitlines() if "flaky500" in l]
        assert len(lines) == 1 and "HTTP 500" in lines[0] and "boom" in lines[0], r.stderr


def counted_plugin(t, name, polls):
    """An exec source that appends its name to `polls` on each run and reports one item."""
    t.write_plugin(name, f"#!/bin/sh\necho {name} >> {polls}\necho '{{\"key\": \"k\", \"title\": \"{name}\"}}'\n", mode=0o755)
    t.write_plugin(f"{name}.toml", 'notify_existing = true\ninterval = "1h"\n')


def test_a_source_named_twice_is_polled_once_in_the_order_of_first_mention(tidings):
    polls = tidings.root / "polls"
    for name in ("a", "b"):
        counted_plugin(tidings, name, polls)
    r = tidings.check("b", "a", "b", "a", "b")
    assert r.code == 1, r
    assert [e["source"] for e in r.events] == ["b", "a"]
    assert Counter(polls.read_text().split()) == {"a": 1, "b": 1}


def test_malformed_json_slow_response_and_oversized_body(tidings):
    with FakeServer(JSONAPI, {"malformed": True}) as broken, \
         FakeServer(JSONAPI, {"delay": 4, "items": []}) as slow, \
         FakeServer(JSONAPI, {"huge": 3_000_000}) as huge:
        api_source(tidings, "broken", broken.url)
        api_source(tidings, "slow", slow.url)
        api_source(tidings, "huge", huge.url, 'max_body = "1MiB"')
        r = tidings.check(timeout=60)
        assert r.code == 2, r
        assert "source broken failed:" in r.stderr and "malformed JSON" in r.stderr
        assert "source slow failed:" in r.stderr and "timed out" in r.stderr
        assert "source huge failed: response body larger than max_body" in r.stderr
        assert r.stdout == ""


def test_error_event_after_threshold_then_recovered(tidings):
    with FakeServer(JSONAPI, {"items": []}) as api:
        api_source(tidings, "flaky", api.url, "error_threshold = 2")
        assert tidings.check().code == 0
        api.state["status"] = 500
        first = tidings.check()
        assert first.code == 2 and first.events == []
        second = tidings.check()
        assert [(e["kind"], e["event"], e["severity"]) for e in second.events] == [("source", "error", "warning")]
        assert "2 failed polls in a row" in second.events[0]["body"]
        third = tidings.check()
        assert third.events == [], "one error event, not one per failure"
        del api.state["status"]
        r = tidings.check()
        assert r.code == 1
        assert [(e["kind"], e["event"]) for e in r.events] == [("source", "recovered")]


def test_dry_run_records_nothing(tidings):
    with FakeServer(JSONAPI, {"items": []}) as api:
        api_source(tidings, "api", api.url)
        tidings.check()
        api.state["items"] = [{"id": 9, "name": "n", "status": "s"}]
        assert tidings.check("--dry-run").code == 1
        r = tidings.check()
        assert r.code == 1 and [e["key"] for e in r.events] == ["9"]


def test_state_forget_makes_next_poll_a_baseline(tidings):
    with FakeServer(JSONAPI, {"items": [{"id": 1, "name": "a", "status": "b"}]}) as api:
        api_source(tidings, "api", api.url)
        tidings.check()
        assert "forgot 1 item" in tidings.run("state", "forget", "api").stdout
        api.state["items"].append({"id": 2, "name": "c", "status": "d"})
        r = tidings.check()
        assert r.code == 0 and r.stdout == ""


def test_secret_header_never_appears_anywhere(tidings):
    secret = "tok-9f8e7d6c5b4a"
    path = tidings.write_secret("api.token", secret)
    with FakeServer(JSONAPI, {"status": 401, "error_body": {"error": f"bad token {secret}"}}) as api:
        api_source(tidings, "api", api.url, f'headers = {{ Authorization_file = "{path}" }}')
        r = tidings.check()
        assert r.code == 2
        assert api.requests[0].headers["authorization"] == secret, "the secret was sent"
        assert secret not in r.stdout + r.stderr
        assert "‹redacted›" in r.stderr
        s = tidings.run("sources", "--json")
        assert secret not in s.stdout + s.stderr
        db = sqlite3.connect(tidings.state / "tidings.sqlite")
        dump = "\n".join(db.iterdump())
        assert secret not in dump


def test_unknown_source_is_a_usage_error(tidings):
    r = tidings.check("nope")
    assert r.code == 64 and "no source named 'nope'" in r.stderr


def test_sources_lists_health(tidings):
    with FakeServer(JSONAPI, {"items": []}) as api:
        api_source(tidings, "api", api.url)
        tidings.check()
        r = tidings.run("sources", "--json")
        assert r.code == 0
        (s,) = r.events
        assert s["name"] == "api" and s["provider"] == "http-json" and s["state"] == "ok"
        assert s["failures"] == 0 and s["last_success"]
