"""What a 401/403 means depends on whether credentials were sent (issue 9, item 11).

- A source that sent no credentials is never `auth-failed`: a 403 is an ordinary failure,
  retried with backoff, so one 403 cannot disable a public source for good.
- A 403 with `Retry-After`, a rate-limit counter at zero or a body that says "rate limit" is
  rate limiting, not rejected credentials.
- A plain 403 to a request that carried credentials is still `auth-failed`.
"""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from fakes.hostile import HostilePair


@pytest.fixture
def pair():
    with HostilePair() as p:
        yield p


def http_json(t, url, secret=None):
    headers = ""
    if secret:
        headers = f'headers = {{ X-Api-Key_file = "{t.write_secret("key", secret)}" }}'
    t.write_plugin("api.toml", f"""
        provider = "http-json"
        url = "{url}"
        key = "/id"
        {headers}
        """)


def source(t):
    r = t.run("sources", "--json")
    assert r.code == 0, r
    [s] = r.events
    return s


def polls(pair):
    return len([q for q in pair.main.requests if q.path == "/items"])


def test_a_403_to_a_public_source_is_an_ordinary_failure_polled_again(tidings, pair):
    pair.script("/items", status=403, json={"message": "Forbidden"})
    http_json(tidings, f"{pair.main.url}/items")
    r = tidings.check()
    assert r.code == 2, r
    assert "HTTP 403" in r.stderr and "no credentials were sent" in r.stderr, r
    assert "credentials rejected" not in r.stderr
    assert source(tidings)["state"] == "failing"
    r = tidings.check()
    assert r.code == 2 and "rejected earlier" not in r.stderr, r
    assert polls(pair) == 2, "polled again"

    pair.script("/items", json=[{"id": "1"}])
    assert tidings.check().code == 0
    assert source(tidings)["state"] == "ok"


@pytest.mark.parametrize("signal", [
    {"headers": {"Retry-After": "120"}, "json": {"message": "Forbidden"}},
    {"headers": {"X-RateLimit-Remaining": "0"}, "json": {"message": "API rate limit exceeded for this key"}},
])
def test_a_403_that_signals_rate_limiting_is_rate_limited_not_auth_failed(tidings, pair, signal):
    pair.script("/items", status=403, **signal)
    http_json(tidings, f"{pair.main.url}/items", secret="key-403-rate")
    r = tidings.check()
    assert r.code == 2, r
    assert "HTTP 403 (rate limited)" in r.stderr and "credentials rejected" not in r.stderr, r
    s = source(tidings)
    assert s["state"] == "failing", s
    if "Retry-After" in signal["headers"]:
        due = datetime.fromisoformat(s["next_due"].replace("Z", "+00:00"))
        assert (due - datetime.now(timezone.utc)).total_seconds() > 110, s
    assert tidings.check().code == 2
    assert polls(pair) == 2, "not disabled"


def test_a_plain_403_with_credentials_is_still_auth_failed(tidings, pair):
    pair.script("/items", status=403, json={"message": "Forbidden"})
    http_json(tidings, f"{pair.main.url}/items", secret="key-403-rejected")
    r = tidings.check()
    assert r.code == 2 and "credentials rejected" in r.stderr, r
    assert source(tidings)["state"] == "auth-failed"
    tidings.check()
    assert polls(pair) == 1, "not polled again until the configuration changes"
