"""Redirects against the hostile server pair (issue 9, items 5 and 7).

- Requests that carry credentials never leave the configured scheme, host and port: a redirect
  elsewhere is a poll error naming the target, and the other server receives nothing.
- Public requests (no credentials) may follow a redirect to another host.
- A webhook never follows a redirect: it is not delivered, the Location is named, the delivery
  is kept and goes out once the sink is fixed.
"""
from __future__ import annotations

import json
import re

import pytest

from conftest import outbox, wait_for
from fakes.hostile import HostilePair
from feed import Feed, item
from providers_util import assert_no_secrets

PASSWORD = "pw-Redirect-4711"
APP_TOKEN = "app-token-redirect-1"
GRANT_TOKEN = "grant-token-redirect-2"
API_KEY = "api-key-redirect-3"
BEARER = "bearer-redirect-4"
CREDENTIALS = [PASSWORD, APP_TOKEN, GRANT_TOKEN, API_KEY, BEARER]


@pytest.fixture
def pair():
    with HostilePair() as p:
        yield p


def other_received_nothing(pair):
    """The other origin saw no request at all, so no credential either."""
    seen = [(r.method, r.path, r.headers, r.body) for r in pair.other.requests]
    assert seen == [], f"the other origin received {seen}"


def sportdate(t, base, extra=""):
    path = t.write_secret("sd.pass", PASSWORD)
    t.write_plugin("sd.toml", f"""
        provider = "sportdate"
        base_url = "{base}"
        email = "me@example.com"
        password_file = "{path}"
        {extra}
        """)


def economic(t, base):
    app = t.write_secret("app", APP_TOKEN)
    grant = t.write_secret("grant", GRANT_TOKEN)
    t.write_plugin("eco.toml", f"""
        provider = "economic"
        base_url = "{base}"
        app_secret_token_file = "{app}"
        agreement_grant_token_file = "{grant}"
        """)


def http_json(t, url, extra=""):
    t.write_plugin("api.toml", f"""
        provider = "http-json"
        url = "{url}"
        key = "/id"
        title = "/name"
        {extra}
        """)


def alertmanager(t, base):
    token = t.write_secret("am.token", BEARER)
    t.write_plugin("am.toml", f"""
        provider = "alertmanager"
        base_url = "{base}"
        bearer_token_file = "{token}"
        """)


def assert_refused(t, r, target):
    assert r.code == 2, r
    assert f"redirect to {target}" in r.stderr and "refused" in r.stderr, r
    assert_no_secrets(t, [r], CREDENTIALS)


# Credentials stay on their origin ------------------------------------------------------------

@pytest.mark.parametrize("status", [302, 307])
def test_sportdate_login_redirected_to_another_port_is_refused(tidings, pair, status):
    # 307 would re-POST the JSON body with the password to the other port.
    target = pair.script("/api/member/get", server="other", echo=True)
    pair.script("/api/member/get", redirect=target, status=status)
    sportdate(tidings, pair.main.url)
    r = tidings.check()
    other_received_nothing(pair)
    assert_refused(tidings, r, target)


def test_sportdate_message_check_redirected_with_its_get_body_is_refused(tidings, pair):
    pair.script("/api/member/get", json={"success": True})
    target = pair.script("/api/message/check", server="other", echo=True)
    pair.script("/api/message/check", redirect=target, status=307)
    sportdate(tidings, pair.main.url)
    r = tidings.check()
    other_received_nothing(pair)
    assert_refused(tidings, r, target)


def test_sportdate_redirect_from_loopback_to_plain_http_elsewhere_is_refused(tidings, pair):
    """Loopback may use http (the password never leaves the machine); a redirect must not carry
    it to a non-loopback http URL. (0.0.0.0 is not loopback to tidings, but Linux connects it to
    the local machine, so this test never leaves it either.)"""
    pair.script("/api/member/get", server="other", echo=True)
    target = f"http://0.0.0.0:{pair.other.port}/api/member/get"
    pair.script("/api/member/get", redirect=target, status=307)
    sportdate(tidings, pair.main.url)
    r = tidings.check()
    other_received_nothing(pair)
    assert_refused(tidings, r, target)


def test_sportdate_same_origin_redirects_still_work_and_keep_the_body(tidings, pair):
    pair.script("/api/member/get", redirect=f"{pair.main.url}/v2/login", status=308)
    pair.script("/v2/login", json={"success": True})
    pair.script("/api/message/check", redirect="/v2/check", status=307)
    pair.script("/v2/check", json={"success": True, "messages": [{"type": "notify", "messagetext": "Hej"}]})
    sportdate(tidings, pair.main.url, "notify_existing = true")
    r = tidings.check()
    assert r.code == 1, r
    assert [e["title"] for e in r.events] == ["Hej"]
    moved = {q.path: q for q in pair.main.requests}
    assert moved["/v2/login"].method == "POST" and json.loads(moved["/v2/login"].body)["losen"] == PASSWORD
    assert moved["/v2/check"].method == "GET" and json.loads(moved["/v2/check"].body)["losen"] == PASSWORD
    other_received_nothing(pair)


def test_economic_tokens_never_follow_a_redirect_to_another_port(tidings, pair):
    target = pair.script("/invoices/drafts", server="other", echo=True)
    pair.script("/invoices/drafts", redirect=target, status=302)
    economic(tidings, pair.main.url)
    r = tidings.check()
    other_received_nothing(pair)
    assert_refused(tidings, r, target)


def test_http_json_header_secret_never_follows_a_redirect_to_another_port(tidings, pair):
    key = tidings.write_secret("api.key", API_KEY)
    target = pair.script("/items", server="other", json=[{"id": "1", "name": "from the other port"}])
    pair.script("/items", redirect=target, status=301)
    http_json(tidings, f"{pair.main.url}/items", f'headers = {{ X-Api-Key_file = "{key}" }}')
    r = tidings.check()
    other_received_nothing(pair)
    assert_refused(tidings, r, target)


def test_alertmanager_bearer_token_never_follows_a_redirect_to_another_port(tidings, pair):
    target = pair.script("/api/v2/alerts", server="other", json=[])
    pair.script("/api/v2/alerts", redirect=target, status=302)
    alertmanager(tidings, pair.main.url)
    r = tidings.check()
    other_received_nothing(pair)
    assert_refused(tidings, r, target)


# Public requests may move -----------------------------------------------------------------

def test_http_json_without_secrets_follows_a_redirect_to_another_port(tidings, pair):
    target = pair.script("/items", server="other", json=[{"id": "1", "name": "moved item"}])
    pair.script("/items", redirect=target, status=301)
    http_json(tidings, f"{pair.main.url}/items", "notify_existing = true")
    r = tidings.check()
    assert r.code == 1, r
    assert [e["title"] for e in r.events] == ["moved item"]
    assert [q.path for q in pair.other.requests] == ["/items"]


# Webhooks never follow ----------------------------------------------------------------------

def webhook(t, url):
    t.write_config(f"""
        [sinks.hook]
        type = "webhook"
        url = "{url}"
        timeout = "5s"
        """)


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_webhook_redirect_is_not_delivered_names_the_location_and_loses_nothing(tidings, pair, status):
    feed = Feed(tidings)
    feed.set([item("a", "redirected event")])
    target = pair.script("/hook", server="other", json={"ok": True})
    pair.script("/hook", redirect=target, status=status)
    webhook(tidings, f"{pair.main.url}/hook")
    r = tidings.run("check", "--deliver")
    assert r.code == 2, r
    assert target in r.stderr and f"HTTP {status}" in r.stderr, r
    other_received_nothing(pair)
    [row] = outbox(tidings)
    assert row["status"] != "dead" and target in row["last_error"], row
    assert [q.method for q in pair.main.requests] == ["POST"], "tried once, not followed"

    # Fixed (the url now points where the receiver moved): the kept delivery goes out, once.
    webhook(tidings, target)
    tidings.start_daemon()
    wait_for(lambda: [q for q in pair.other.requests if q.method == "POST"], timeout=30, what="the kept delivery")
    wait_for(lambda: outbox(tidings) == [], what="the outbox to empty")
    [post] = pair.other.requests
    delivered = json.loads(post.body)
    assert delivered["id"] == row["event"]["id"] and delivered["title"] == "redirected event"
    assert post.headers["webhook-id"] == row["event"]["id"]


# Redirects into private addresses (issue 30, "also decide and document") ---------------------

@pytest.fixture
def private_pair():
    """`main` on 127.0.0.1 redirects to `other` on 127.0.0.2: another host, another address."""
    from fakes.server import FakeServer
    from fakes.hostile import HostileHandler
    with HostilePair() as p:
        p.other.stop()
        p.other = FakeServer(HostileHandler, state={"routes": {}}, host="127.0.0.2")
        p.other.start()
        yield p


@pytest.mark.parametrize("where", ["source", "defaults"])
def test_refuse_private_redirects_refuses_a_redirect_to_a_private_address(tidings, private_pair, where):
    pair = private_pair
    target = pair.script("/items", server="other", json=[{"id": "1", "name": "inside"}])
    pair.script("/items", redirect=target, status=302)
    if where == "defaults":
        tidings.write_config("""
            [defaults]
            refuse_private_redirects = true
            """)
    http_json(tidings, f"{pair.main.url}/items", "refuse_private_redirects = true" if where == "source" else "")
    r = tidings.check()
    assert r.code == 2, r
    assert (f"HTTP 302 redirect to {target} refused: it leads to the private address 127.0.0.2 "
            "(refuse_private_redirects)") in r.stderr, r
    other_received_nothing(pair)


@pytest.mark.parametrize("setting", ["", "refuse_private_redirects = false"])
def test_a_private_source_may_redirect_to_a_private_address(tidings, private_pair, setting):
    """Unset, the check applies only when the configured URL's server is public: this one is on
    loopback (so is every test's), and may redirect within its network; `false` never checks."""
    pair = private_pair
    target = pair.script("/items", server="other", json=[{"id": "1", "name": "inside"}])
    pair.script("/items", redirect=target, status=302)
    http_json(tidings, f"{pair.main.url}/items", "notify_existing = true\n" + setting)
    r = tidings.check()
    assert r.code == 1, r
    assert [e["title"] for e in r.events] == ["inside"]
    assert [q.path for q in pair.other.requests] == ["/items"]


def test_refuse_private_redirects_must_be_a_boolean(tidings):
    http_json(tidings, "http://127.0.0.1:9/items", 'refuse_private_redirects = "yes"')
    r = tidings.run("config", "check")
    assert r.code == 78, r
    assert "api.toml:6:" in r.stderr and "refuse_private_redirects" in r.stderr, r.stderr


def test_refuse_private_redirects_checks_the_address_not_the_name(tidings, private_pair):
    """A name is no way around it: `localhost` is refused by the address it resolves to."""
    pair = private_pair
    port = pair.main.url.rsplit(":", 1)[1]
    pair.script("/moved", json=[{"id": "1", "name": "inside"}])
    pair.script("/items", redirect=f"http://localhost:{port}/moved", status=301)
    http_json(tidings, f"{pair.main.url}/items", "refuse_private_redirects = true")
    r = tidings.check()
    assert r.code == 2, r
    assert re.search(rf"HTTP 301 redirect to http://localhost:{port}/moved refused: it leads to the private address "
                     r"(127\.0\.0\.1|::1) \(refuse_private_redirects\)", r.stderr), r
    assert [q.path for q in pair.main.requests] == ["/items"]
