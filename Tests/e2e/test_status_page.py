"""The status page on [http] (DESIGN §13, issue 24 items 2-4; docs/status-page.md): the overview
and its pages over a daemon with a failing source, dead letters, a notice and hostile item text;
changes only as same-origin POSTs with a CSRF token; the security headers; no secret on any
page; [http.auth] required off loopback and enforced when set. Plain HTTP (urllib) for the
protocol, and Debian's headless Chromium over its DevTools protocol for what a person sees."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from browser import Chromium, require_chromium
from conftest import ROOT, Tidings, read_log, wait_for
from fakes.hostile import HOSTILE_TITLE
from fakes.json_api import JSONAPI
from fakes.server import FakeServer
from fakes.webhook_receiver import WebhookReceiver, receiver_state
from postgres import free_port
from test_check import api_source
from test_status import exec_plugin, status_json

# Remote text that would run if it reached the page as markup.
XSS_TITLE = '<script>window.__pwned = "title"</script><b>bold</b> ' + HOSTILE_TITLE
XSS_BODY = '<img src=x onerror="window.__pwned = \'body\'">"><svg onload="window.__pwned = \'svg\'">'
XSS_URL = "javascript:window.__pwned='url'"
SECRET = "sp-hook-Token-5f1c9a"
PAGES = ["/", "/sources/lister", "/sources/api", "/history", "/outbox", "/silences", "/notices"]


class Page:
    """A response: status, headers (lower-case names), text."""

    def __init__(self, status, headers, text):
        self.status, self.headers, self.text = status, {k.lower(): v for k, v in headers.items()}, text


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kw):
        return None


OPENER = urllib.request.build_opener(NoRedirect)


def http(url, method="GET", data=None, headers=None, timeout=15) -> Page:
    body = urllib.parse.urlencode(data).encode() if isinstance(data, dict) else data
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    if isinstance(data, dict):
        req.add_header("Content-Type", "application/x-www-form-urlencoded")
    try:
        with OPENER.open(req, timeout=timeout) as r:
            return Page(r.status, dict(r.headers), r.read().decode())
    except urllib.error.HTTPError as e:
        return Page(e.code, dict(e.headers), e.read().decode(errors="replace"))


def status(url, headers=None) -> int:
    """The status of a GET, 0 while nothing listens there yet."""
    try:
        return http(url, headers=headers, timeout=2).status
    except OSError:
        return 0


def csrf(base, path="/silences", headers=None) -> str:
    page = http(base + path, headers=headers)
    assert page.status == 200, page.text
    m = re.search(r'name="csrf" value="([0-9]+\.[0-9a-f]{64})"', page.text)
    assert m, page.text
    return m.group(1)


def silences(t):
    r = t.run("silence", "list", "--json")
    assert r.code == 0, r
    return r.events


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A daemon serving the status page on loopback: `api` failing (its error text hostile),
    `lister` with hostile items routed to a webhook that refuses them (dead letters), `bulletin`
    with a notice; the webhook sends a secret header."""
    root = tmp_path_factory.mktemp("statuspage")
    t = Tidings(root / "daemon")
    port = free_port()
    with FakeServer(JSONAPI, {"status": 500, "error_body": b"<script>alert('err')</script> backend down"}) as api, \
            FakeServer(WebhookReceiver, state=receiver_state(default=400)) as hook:
        token = t.write_secret("hook-token", "Bearer " + SECRET)
        t.write_config(f"""
            [http]
            listen = "127.0.0.1:{port}"
            status_page = true

            [sinks.hook]
            type = "webhook"
            url = "{hook.url}/hook"
            headers = {{ Authorization_file = "{token}" }}
            [sinks.console]
            type = "stdout"
            format = "json"

            [[routes]]
            match = {{ source = "lister" }}
            sinks = ["hook"]
            [[routes]]
            sinks = ["console"]
        """)
        api_source(t, "api", api.url, 'interval = "1h"\njitter = 0.0\nerror_threshold = 1')
        exec_plugin(t, "lister", [
            {"key": "x1", "title": XSS_TITLE, "body": XSS_BODY, "url": XSS_URL, "severity": "critical"},
            {"key": "x2", "title": "Second <i>item</i>", "url": "http://127.0.0.1:9/second"},
            {"key": "x3", "title": "Third & last"},
        ], "notify_existing = true")
        exec_plugin(t, "bulletin", [{"key": "n1", "title": "Maintenance <b>tonight</b>", "kind": "notice"}],
                    "notify_existing = true")
        d = t.start_daemon()
        try:
            def ready():
                r = t.run("status", "--json")
                if r.code == 2:
                    return None  # the daemon has not made its state yet
                s = json.loads(r.stdout)
                return (s["sources"]["counts"]["failing"] == 1 and s["outbox"].get("hook", {}).get("dead") == 3
                        and s["notices"]) and s
            wait_for(ready, timeout=40, what="a failing source, three dead letters, a notice")
            yield {"t": t, "d": d, "base": f"http://127.0.0.1:{port}", "api": api, "hook": hook, "root": root}
        finally:
            t.stop_all()


# Plain HTTP ----------------------------------------------------------------------------------

def test_the_overview_says_what_tidings_status_says(site):
    t, base = site["t"], site["base"]
    code, s = status_json(t)
    page = http(base + "/")
    assert page.status == 200 and page.headers["content-type"] == "text/html; charset=utf-8", page.text
    assert "Needs attention" in page.text
    for reason in s["attention"]:
        assert reason in page.text, reason
    assert f"Daemon PID {site['d'].pid}" in page.text
    for name in ("api", "lister", "bulletin", "hook", "console"):
        assert f">{name}" in page.text, name
    assert '<svg class="chart"' in page.text  # events per hour, server-rendered
    assert "Maintenance &lt;b&gt;tonight&lt;/b&gt;" in page.text


def test_every_page_has_the_security_headers_and_the_monitoring_routes_are_unchanged(site):
    base = site["base"]
    for path in PAGES + ["/static/style.css", "/static/app.js", "/no/such/page"]:
        page = http(base + path)
        assert page.status == (404 if path == "/no/such/page" else 200), (path, page.status)
        csp = page.headers.get("content-security-policy", "")
        assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp and "script-src 'self'" in csp, (path, csp)
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert page.headers.get("x-content-type-options") == "nosniff", path
        assert page.headers.get("referrer-policy") in ("same-origin", "no-referrer"), path
    assert "<script>" not in http(base + "/").text.replace('<script src="/static/app.js" defer></script>', "")
    # /metrics, /-/healthy and /-/ready answer as before, without the page's headers.
    metrics = http(base + "/metrics")
    assert metrics.status == 200 and "tidings_build_info" in metrics.text
    assert "content-security-policy" not in metrics.headers
    assert http(base + "/-/healthy").text == "healthy\n" and http(base + "/-/ready").text == "ready\n"
    assert http(base + "/metrics", method="POST").status == 405


def test_a_change_needs_the_csrf_token_and_a_same_origin_request(site):
    t, base = site["t"], site["base"]
    token = csrf(base)
    form = {"matchers": "source=nowhere", "duration": "1h", "comment": "csrf test", "csrf": token}
    own = {"Origin": base}
    refused = [
        ({k: v for k, v in form.items() if k != "csrf"}, own),                       # no token
        ({**form, "csrf": token[:-4] + ("0000" if not token.endswith("0000") else "1111")}, own),  # forged
        ({**form, "csrf": "1." + "0" * 64}, own),                                    # ancient
        (form, {"Origin": "http://127.0.0.1:1"}),                                    # another origin
        (form, {"Origin": "null"}),                                                  # an opaque origin
        (form, {"Origin": "null", "Referer": base + "/silences"}),                   # opaque, whatever the Referer says
        (form, {"Referer": "http://127.0.0.1:1/evil"}),                              # another referer
        (form, {}),                                                                  # neither
    ]
    for data, headers in refused:
        r = http(base + "/silences", method="POST", data=data, headers=headers)
        assert r.status == 403, (data, headers, r.status)
        assert "content-security-policy" in r.headers
    # A text/plain "form" (what a cross-site form could send without a preflight) is refused too.
    r = http(base + "/silences", method="POST", data=urllib.parse.urlencode(form).encode(),
             headers={**own, "Content-Type": "text/plain"})
    assert r.status == 415, r.status
    assert [s for s in silences(t) if s["comment"] == "csrf test"] == []

    # The same POST from the page itself: 303 back to the list, and the silence exists.
    r = http(base + "/silences", method="POST", data=form, headers=own)
    assert r.status == 303 and r.headers["location"] == "/silences?done=added", (r.status, r.text)
    [made] = [s for s in silences(t) if s["comment"] == "csrf test"]
    assert made["matchers"] and made["state"] == "active"
    # A Referer of the page counts when a client sends no Origin; GET changes nothing.
    assert http(base + f"/silences/{made['id']}/expire").status == 404
    r = http(base + f"/silences/{made['id']}/expire", method="POST", data={"csrf": token}, headers={"Referer": base + "/silences"})
    assert r.status == 303, r.text
    assert [s for s in silences(t) if s["comment"] == "csrf test"] == []


def test_a_bad_silence_form_says_why_and_keeps_what_was_typed(site):
    base = site["base"]
    r = http(base + "/silences", method="POST", headers={"Origin": base},
             data={"matchers": "no-operator-here\nsource=<x>", "duration": "soon", "comment": "<b>typed</b>", "csrf": csrf(base)})
    assert r.status == 400, r.text
    assert 'id="form-error"' in r.text and "duration" in r.text
    assert "&lt;b&gt;typed&lt;/b&gt;" in r.text and "<b>typed</b>" not in r.text


def test_remote_text_is_escaped_on_every_page(site):
    base = site["base"]
    seen_lister = False
    for path in PAGES + ["/history?source=lister"]:
        text = http(base + path).text
        assert "<script>window.__pwned" not in text and "<script>alert" not in text, path
        assert "onerror=\"window" not in text and "<svg onload" not in text and "<b>bold</b>" not in text, path
        assert 'href="javascript:' not in text.lower(), path
        seen_lister |= "&lt;script&gt;window.__pwned = &quot;title&quot;&lt;/script&gt;" in text
    assert seen_lister
    api = http(base + "/sources/api").text
    assert "&lt;script&gt;alert(&#39;err&#39;)&lt;/script&gt;" in api and "HTTP 500" in api


def test_no_secret_value_is_on_any_page(site):
    base = site["base"]
    for path in PAGES + ["/history", "/sources/nope"]:
        page = http(base + path)
        assert SECRET not in page.text and SECRET not in json.dumps(page.headers), path
    assert "auth</th><td>none (loopback only)" in http(base + "/").text


def test_history_filters_by_source_kind_and_severity(site):
    base = site["base"]
    text = http(base + "/history?source=api").text
    assert "backend down" in text or "HTTP 500" in text
    assert "Third &amp; last" not in text
    text = http(base + "/history?severity=critical").text
    assert "window.__pwned" in text and "Third &amp; last" not in text
    text = http(base + "/history?kind=notice").text
    assert "Maintenance" in text and "Third &amp; last" not in text
    assert '<option value="api" selected>' in http(base + "/history?source=api").text


def test_poll_now_goes_through_the_daemon(site):
    base, api = site["base"], site["api"]
    before = len(api.requests)
    r = http(base + "/sources/api/poll", method="POST", data={"csrf": csrf(base)}, headers={"Origin": base})
    assert r.status == 502 and "poll failed" in r.text and "HTTP 500" in r.text, r.text
    assert len(api.requests) == before + 1
    r = http(base + "/sources/lister/poll", method="POST", data={"csrf": csrf(base)}, headers={"Origin": base})
    assert r.status == 200 and "polled: ok" in r.text, r.text
    assert http(base + "/sources/nope/poll", method="POST", data={"csrf": csrf(base)}, headers={"Origin": base}).status == 404
    # The daemon remembers its polls: the scheduled one and the one on request, the newest first.
    page = http(base + "/sources/api").text
    polls = page[page.index('<table class="polls">'):]
    polls = polls[:polls.index("</table>")]
    assert polls.count("<tr>") >= 3 and polls.count('class="error"') >= 2, polls  # a head row and two failed polls
    assert re.search(r"<td>\d+\.\d{3} s</td>", polls), polls
    assert re.search(r"last 24 h: [2-9] polls \([2-9] failed\), 1 events", page), page


def test_poll_now_keeps_the_pacing_its_own_poll_received(tidings):
    """issue 30 item 9: a poll on request that receives Retry-After (a 429) or X-Poll-Interval
    records it as a scheduled poll does; the next request within it, from the page or from
    `tidings check` beside the daemon, is answered without contacting the server."""
    from fakes.github import GitHub, new_state
    from test_github import gh_source
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    tidings.write_config(f'[http]\nlisten = "127.0.0.1:{port}"\n[sinks.out]\ntype = "stdout"\n')
    with FakeServer(JSONAPI, {"items": [{"id": 1, "name": "db1", "status": "up"}]}) as api, \
            FakeServer(GitHub, new_state(token="ghp_e2eSecretToken0123456789abcdefABCDEF", poll_interval=None)) as gh:
        api_source(tidings, "api", api.url, 'interval = "1h"\njitter = 0.0')
        gh_source(tidings, gh, 'interval = "1h"\njitter = 0.0')
        d = tidings.start_daemon()
        wait_for(lambda: len(api.requests) >= 1 and len(gh.requests) >= 1 and status(base + "/-/ready") == 200,
                 what="the scheduled first polls")

        def poll_now(name):
            return http(base + f"/sources/{name}/poll", method="POST", data={"csrf": csrf(base)}, headers={"Origin": base})

        # GitHub's X-Poll-Interval, received by a poll on request: the same.
        gh.state["poll_interval"] = 120
        before = len(gh.requests)
        r = poll_now("gh")
        assert r.status == 200 and "polled: ok" in r.text, r.text
        assert len(gh.requests) == before + 1
        for _ in range(3):
            r = poll_now("gh")
            assert r.status == 502 and "not polling it before" in r.text, r.text
        c = tidings.run("check", "gh")
        assert c.code != 0 and "not polling it before" in c.stderr, c
        assert len(gh.requests) == before + 1
        # The server now answers 429 with Retry-After: 2 minutes. The click that gets it sends one request.
        api.state.update({"status": 429, "retry_after": 120})
        before = len(api.requests)
        r = poll_now("api")
        assert r.status == 502 and "HTTP 429" in r.text, r.text
        assert len(api.requests) == before + 1
        # The next clicks, and `check` through the daemon, do not reach the server, and say until when and why.
        for _ in range(3):
            r = poll_now("api")
            assert r.status == 502 and "Retry-After" in r.text and "not polling it before" in r.text, r.text
        c = tidings.run("check", "api")
        assert c.code != 0 and "Retry-After" in c.stderr and "not polling it before" in c.stderr, c
        assert len(api.requests) == before + 1, [q.path for q in api.requests[before:]]
        # The failure on request counts for nothing else: the source is not failing.
        srcs = {x["name"]: x for x in tidings.run("sources", "--json").events}
        assert srcs["api"]["state"] == "ok", srcs["api"]

        assert d.poll() is None, read_log(d)


# Host (DNS rebinding, issue 30 item 6) -----------------------------------------------------------

def test_a_request_for_another_host_is_misdirected(site):
    """A page whose name was re-bound to 127.0.0.1 sends its own name as Host: 421 for every
    page, /metrics and a POST whose Origin matches that Host; the listener's own names work."""
    t, base = site["t"], site["base"]
    port = base.rsplit(":", 1)[1]
    evil = {"Host": "evil.test"}
    for path in ["/", "/sources/api", "/history", "/static/app.js", "/metrics"]:
        r = http(base + path, headers=evil)
        assert r.status == 421, (path, r.status, r.text)
        assert "allowed_hosts" in r.text and "SECRET" not in r.text, r.text
    for host in ["evil.test:" + port, "EVIL.test", "127.0.0.1.evil.test:" + port, "localhost.evil.test", "127.0.0.1:1"]:
        assert http(base + "/", headers={"Host": host}).status == 421, host
    # The attack that worked: a POST with a valid token whose Origin matches its own Host.
    token = csrf(base)
    r = http(base + "/silences", method="POST", headers={"Host": "evil.test:" + port, "Origin": "http://evil.test:" + port},
             data={"matchers": "source=api", "duration": "1h", "comment": "rebound", "csrf": token})
    assert r.status == 421, (r.status, r.text)
    assert [s for s in silences(t) if s["comment"] == "rebound"] == []
    # An Origin must name a host the listener is for, even when Host does.
    r = http(base + "/silences", method="POST", headers={"Origin": "http://evil.test:" + port},
             data={"matchers": "source=api", "duration": "1h", "comment": "rebound", "csrf": token})
    assert r.status == 403, (r.status, r.text)
    # Its address with and without the port, and localhost, are this listener.
    for host in ["127.0.0.1:" + port, "127.0.0.1", "localhost:" + port, "localhost", "LocalHost:" + port]:
        assert http(base + "/", headers={"Host": host}).status == 200, host
    # Probes answer whatever the Host (they show nothing but the daemon's readiness).
    assert http(base + "/-/healthy", headers=evil).status == 200 and http(base + "/-/ready", headers=evil).status == 200


def test_allowed_hosts_names_a_reverse_proxy(tidings):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    tidings.write_config(f"""
        [http]
        listen = "127.0.0.1:{port}"
        allowed_hosts = ["Status.Example.org", "192.0.2.7", "[2001:db8::7]"]
        [sinks.out]
        type = "stdout"
    """)
    exec_plugin(tidings, "lister", [{"key": "a", "title": "Alpha"}])
    r = tidings.run("config", "check")
    assert r.code == 0, r
    d = tidings.start_daemon()
    wait_for(lambda: status(base + "/-/ready") == 200, what="ready")
    proxy = {"Host": "status.example.org"}
    wait_for(lambda: status(base + "/", headers=proxy) == 200, what="the page through the proxy's name")
    assert "allowed_hosts</th><td>status.example.org, 192.0.2.7, [2001:db8::7]" in http(base + "/", headers=proxy).text
    for host in ["status.example.org:8443", "192.0.2.7:9464", "[2001:db8::7]:9464", "localhost:" + str(port)]:
        assert http(base + "/metrics", headers={"Host": host}).status == 200, host
    assert http(base + "/", headers={"Host": "evil.test"}).status == 421
    assert http(base + "/", headers={"Host": "example.org"}).status == 421
    # A change through the proxy: Host and Origin name it (https in front, plain HTTP behind).
    token = csrf(base, headers=proxy)
    form = {"matchers": "source=nowhere", "duration": "1h", "comment": "via proxy", "csrf": token}
    r = http(base + "/silences", method="POST", data=form, headers={**proxy, "Origin": "https://status.example.org"})
    assert r.status == 303, (r.status, r.text)
    r = http(base + "/silences", method="POST", data=form, headers={**proxy, "Origin": "https://evil.test"})
    assert r.status == 403, (r.status, r.text)
    d.terminate()
    d.wait(timeout=30)
    # Not a host name: refused at its line.
    for bad in ['["https://status.example.org/"]', '["status.example.org/x"]', '[""]', '["a b"]', '["[::1"]']:
        tidings.write_config(f'[http]\nlisten = "127.0.0.1:{port}"\nallowed_hosts = {bad}\n[sinks.out]\ntype = "stdout"\n')
        r = tidings.run("config", "check")
        assert r.code == 78 and "tidings.toml:3:" in r.stderr and "allowed_hosts" in r.stderr, (bad, r)


def test_a_wildcard_listen_without_allowed_hosts_is_warned_about(tidings):
    pw = tidings.write_secret("http-password", "pw-9d2e")
    tidings.write_config(f'[http]\nlisten = "0.0.0.0:9464"\n[http.auth]\nuser = "ops"\npassword_file = "{pw}"\n[sinks.out]\ntype = "stdout"\n')
    r = tidings.run("config", "check")
    assert r.code == 0 and "allowed_hosts" in r.stderr, r


# Configuration and authentication ---------------------------------------------------------------

def test_a_non_loopback_status_page_without_auth_is_refused_at_start(tidings):
    tidings.write_config("""
        [http]
        listen = "0.0.0.0:9464"
        status_page = true
        [sinks.out]
        type = "stdot"
    """)
    r = tidings.run("config", "check")
    assert r.code == 78, r
    assert "tidings.toml:3: [http] listen = \"0.0.0.0:9464\" is not a loopback address" in r.stderr, r
    assert "[http.auth]" in r.stderr
    assert "stdot" in r.stderr, "config check reports every error, the sink's too"
    r = tidings.run("run", timeout=30)
    assert r.code == 78 and "is not a loopback address" in r.stderr and "needs [http.auth]" in r.stderr, r
    # [http.auth] half given: the table is named, with its line.
    tidings.write_config('[http]\nlisten = "0.0.0.0:9464"\nstatus_page = true\n[http.auth]\nuser = "ops"\n')
    r = tidings.run("config", "check")
    assert r.code == 78 and "tidings.toml:4:" in r.stderr and "give 'user' and 'password'" in r.stderr, r
    # With auth it is accepted (not started here: no test binds a non-loopback address).
    pw = tidings.write_secret("http-password", "pw-9d2e")
    tidings.write_config(f'[http]\nlisten = "0.0.0.0:9464"\nstatus_page = true\n[http.auth]\nuser = "ops"\npassword_file = "{pw}"\n')
    r = tidings.run("config", "check")
    assert r.code == 0, r
    assert "pw-9d2e" not in r.stdout + r.stderr


def test_auth_is_required_when_configured_and_follows_a_reload(tidings):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    pw = tidings.write_secret("http-password", "Pass-w0rd-81ab")
    bearer = tidings.write_secret("http-token", "tok-3c6f0e2d")
    basic = lambda user, password: {"Authorization": "Basic " + __import__("base64").b64encode(f"{user}:{password}".encode()).decode()}

    def config(auth):
        tidings.write_config(f'[http]\nlisten = "127.0.0.1:{port}"\nstatus_page = true\n[http.auth]\n{auth}\n[sinks.out]\ntype = "stdout"\n')

    config(f'user = "ops"\npassword_file = "{pw}"')
    exec_plugin(tidings, "lister", [{"key": "a", "title": "Alpha"}])
    d = tidings.start_daemon()
    wait_for(lambda: status(base + "/-/ready") == 200, what="ready")
    wait_for(lambda: status(base + "/", headers=basic("ops", "Pass-w0rd-81ab")) == 200, what="the page")
    for path in ["/", "/sources/lister", "/outbox", "/static/style.css", "/metrics"]:
        none = http(base + path)
        assert none.status == 401 and none.headers["www-authenticate"].startswith("Basic realm="), path
        assert http(base + path, headers=basic("ops", "wrong")).status == 401, path
        assert http(base + path, headers=basic("other", "Pass-w0rd-81ab")).status == 401, path
        ok = http(base + path, headers=basic("ops", "Pass-w0rd-81ab"))
        assert ok.status == 200, path
        assert "Pass-w0rd-81ab" not in ok.text
    assert "basic, user ops, password set" in http(base + "/", headers=basic("ops", "Pass-w0rd-81ab")).text
    # Probes need no credentials.
    assert http(base + "/-/healthy").status == 200 and http(base + "/-/ready").status == 200

    # A reload to a bearer token applies at once on the same address.
    config(f'token_file = "{bearer}"')
    d.send_signal(signal.SIGHUP)
    wait_for(lambda: status(base + "/", headers={"Authorization": "Bearer tok-3c6f0e2d"}) == 200, what="the token accepted")
    assert http(base + "/", headers=basic("ops", "Pass-w0rd-81ab")).status == 401
    assert http(base + "/").headers["www-authenticate"].startswith("Bearer")
    page = http(base + "/", headers={"Authorization": "Bearer tok-3c6f0e2d"}).text
    assert "tok-3c6f0e2d" not in page and "bearer, token set" in page
    assert "Pass-w0rd-81ab" not in read_log(d) and "tok-3c6f0e2d" not in read_log(d)


def test_an_empty_secret_is_a_config_error_in_every_form(tidings, tmp_path):
    """issue 30 item 7: `password = ""` let `Basic ops:` in, `token = ""` locked everyone out."""
    empty_file = tidings.write_secret("empty", "")  # only a newline
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "http-token").write_text("\n")
    cases = [
        ('user = "ops"\npassword = ""', {}, "password"),
        ('token = ""', {}, "token"),
        (f'user = "ops"\npassword_file = "{empty_file}"', {}, "empty"),
        ('token_env = "TIDINGS_TEST_EMPTY"', {"TIDINGS_TEST_EMPTY": ""}, "TIDINGS_TEST_EMPTY"),
        ('token_credential = "http-token"', {"CREDENTIALS_DIRECTORY": str(creds)}, "http-token"),
    ]
    for listen in ["127.0.0.1:9464", "0.0.0.0:9464"]:
        for auth, env, named in cases:
            tidings.write_config(f'[http]\nlisten = "{listen}"\n[http.auth]\n{auth}\n[sinks.out]\ntype = "stdout"\n')
            r = tidings.run("config", "check", env=env)
            assert r.code == 78, (listen, auth, r)
            line = 4 + auth.count("\n")  # the secret's own line
            assert f"tidings.toml:{line}:" in r.stderr and "empty" in r.stderr and named in r.stderr, (auth, r.stderr)
    # Every secret option, not only [http.auth]'s: an empty inline header secret too.
    tidings.write_config('[sinks.hook]\ntype = "webhook"\nurl = "http://127.0.0.1:9/x"\nheaders = { Authorization = "" }\n')
    r = tidings.run("config", "check")
    assert r.code == 78 and "tidings.toml:4:" in r.stderr and "empty" in r.stderr, r
    r = tidings.run("run", timeout=30)
    assert r.code == 78 and "empty" in r.stderr, r


# A real browser ------------------------------------------------------------------------------------

@pytest.fixture
def browser(tmp_path):
    require_chromium()
    with Chromium(tmp_path) as b:
        yield b


def no_violations(b):
    assert b.eval("window.__csp") == [], b.eval("window.__csp")
    assert b.eval("window.__pwned === undefined")


def test_browser_overview_desktop_and_phone_with_screenshots(site, browser, tmp_path):
    b, base = browser, site["base"]
    b.go(base + "/")
    assert b.eval("document.title") == "Overview · tidings"
    assert b.eval("document.querySelector('meta[name=viewport]').content") == "width=device-width, initial-scale=1"
    assert b.eval("getComputedStyle(document.querySelector('header')).backgroundColor") == "rgb(34, 34, 51)", "the stylesheet loaded"
    assert "Needs attention" in b.eval("document.querySelector('.verdict').innerText")
    assert b.eval("document.querySelectorAll('svg.chart').length") == 3
    no_violations(b)
    shot = b.screenshot(tmp_path / "status-page.png", width=1280, height=900)
    assert shot.stat().st_size > 10_000
    phone = b.screenshot(tmp_path / "status-page-phone.png", width=390, height=844, mobile=True)
    assert phone.stat().st_size > 5_000
    # At a phone's width nothing but the tables' own scroll boxes is wider than the screen.
    b.send("Emulation.setDeviceMetricsOverride", width=390, height=844, deviceScaleFactor=1, mobile=True)
    try:
        b.go(base + "/")
        assert b.eval("document.documentElement.scrollWidth") <= 390
    finally:
        b.send("Emulation.clearDeviceMetricsOverride")
    if os.environ.get("TIDINGS_DOCS_SCREENSHOT") == "1":
        (ROOT / "docs" / "images").mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, ROOT / "docs" / "images" / "status-page.png")


def test_browser_hostile_item_text_runs_no_script(site, browser):
    b, base = browser, site["base"]
    b.go(base + "/sources/lister")
    text = b.eval("document.querySelector('main').innerText")
    assert '<script>window.__pwned = "title"</script><b>bold</b>' in text
    assert "onerror=" in text
    assert b.eval("document.querySelectorAll('main script, main img, main b, main svg:not(.chart)').length") == 0
    assert b.eval("[...document.querySelectorAll('a')].filter(a => !/^https?:/.test(a.href)).length") == 0
    no_violations(b)
    for path in ["/", "/history", "/outbox", "/notices"]:
        b.go(base + path)
        no_violations(b)
    # The policy is enforced: an inline script put into the page does not run and is reported.
    b.eval("var s = document.createElement('script'); s.textContent = 'window.__pwned = \"inline\"'; document.body.appendChild(s)")
    wait_for(lambda: b.eval("window.__csp.length") > 0, timeout=5, what="a CSP violation")
    assert b.eval("window.__pwned === undefined")
    assert "script-src" in b.eval("window.__csp[0]")


def test_browser_adds_and_expires_a_silence(site, browser):
    b, base, t = browser, site["base"], site["t"]
    b.go(base + "/silences")
    b.eval("document.querySelector('textarea[name=matchers]').value = 'source=api\\nseverity!=info'")
    b.eval("document.querySelector('input[name=duration]').value = '90m'")
    b.eval("document.querySelector('input[name=comment]').value = 'from the browser <3'")
    b.submit("button[name=add]")
    assert b.eval("location.pathname + location.search") == "/silences?done=added"
    [made] = [s for s in silences(t) if s["comment"] == "from the browser <3"]
    assert b.eval(f"document.querySelector('button[name=expire][value=\"{made['id']}\"]') !== null")
    assert "source=api severity!=info" in b.eval("document.querySelector('ul.silences').innerText")
    no_violations(b)
    b.submit(f"button[name=expire][value=\"{made['id']}\"]")
    assert b.eval("location.search") == "?done=expired"
    assert [s for s in silences(t) if s["comment"] == "from the browser <3"] == []
    assert "source=api severity!=info" in b.eval("document.querySelector('ul.expired').innerText")


def test_browser_retries_and_drops_dead_letters(site, browser):
    b, base, t, hook = browser, site["base"], site["t"], site["hook"]
    dead = lambda: [r for r in t.run("outbox", "--json").events if r["status"] == "dead"]
    wait_for(lambda: len(dead()) >= 2, what="dead letters")
    before = len(dead())
    b.go(base + "/outbox")
    assert b.eval("document.querySelectorAll('button[name=retry]').length") == before
    no_violations(b)
    b.submit("button[name=drop]")
    assert b.eval("location.search") == "?done=dropped"
    assert len(dead()) == before - 1
    # The receiver takes deliveries now: a retried dead letter goes out.
    hook.state["default"] = 200
    accepted = len(hook.state["accepted"])
    b.submit("button[name=retry]")
    assert b.eval("location.search") == "?done=retried"
    wait_for(lambda: len(hook.state["accepted"]) == accepted + 1, timeout=30, what="the retried delivery")
    assert len(dead()) == before - 2


def test_browser_dismisses_a_notice(site, browser):
    b, base, t = browser, site["base"], site["t"]
    b.go(base + "/notices")
    assert "Maintenance <b>tonight</b>" in b.eval("document.querySelector('ul.notices').innerText")
    b.submit("button[name=dismiss]")
    assert b.eval("location.search") == "?done=dismissed"
    assert status_json(t)[1]["notices"] == []
    assert "None pending." in b.eval("document.querySelector('main').innerText")


def test_on_postgres_the_page_shows_the_shared_state_and_no_password(tidings, pg_db):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    tidings.write_config(f'[http]\nlisten = "127.0.0.1:{port}"\nstatus_page = true\n[sinks.out]\ntype = "stdout"\n'
                         + pg_db.state_toml())
    exec_plugin(tidings, "lister", [{"key": "a", "title": "Alpha <on> PostgreSQL"}], "notify_existing = true")
    d = tidings.start_daemon()
    wait_for(lambda: "Alpha &lt;on&gt; PostgreSQL" in (http(base + "/").text if status(base + "/-/ready") == 200 else ""),
             timeout=30, what="the event on the overview")
    page = http(base + "/").text
    assert "State: postgres " in page and f"Instance {os.uname().nodename}:{d.pid}" in page, page
    assert pg_db.password not in page
    r = http(base + "/silences", method="POST", headers={"Origin": base},
             data={"matchers": "source=lister", "duration": "1h", "comment": "pg", "csrf": csrf(base)})
    assert r.status == 303 and [s["comment"] for s in silences(tidings)] == ["pg"]
