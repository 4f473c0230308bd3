"""A URL with a token in its query can be a secret (issue 30, item 5).

`url` takes the forms other secrets have (`url_file`, `url_env`, `url_credential`) on http-json,
feed, page and the sinks with a `url`. Such a URL is a secret everywhere: the whole value and
each query value (4 characters or more) are scrubbed, and where it is shown only
scheme://host[:port]/path appears.
"""
from __future__ import annotations

from urllib.parse import quote

import pytest

from fakes.hostile import HostilePair
from leaks import assert_nothing_leaks

TOKEN = "feed-token-31337"
KEY = "api-key-8080x"
HOOK = "hook-token-4242"
LEAKS = [TOKEN, KEY, HOOK, quote(TOKEN), "token-31337", "key-8080x", "token-4242"]


@pytest.fixture
def pair():
    with HostilePair() as p:
        yield p


def test_secret_urls_are_requested_whole_and_shown_without_their_query(tidings, pair):
    page = b"<html><body><p>" + TOKEN.encode() + b" echoed</p></body></html>"
    pair.script("/page", raw=page, headers={"Content-Type": "text/html"})
    pair.script("/items", echo=True, status=500)  # the error body echoes the query
    pair.script("/hook", echo=True, status=400)
    page_url = tidings.write_secret("page-url", f"{pair.main.url}/page?token={TOKEN}")
    tidings.write_plugin("page.toml", f"""
        provider = "page"
        url_file = "{page_url}"
        notify_existing = true
        """)
    tidings.write_plugin("api.toml", """
        provider = "http-json"
        url_env = "API_URL"
        key = "/id"
        """)
    creds = tidings.write_secret("hook-url", f"{pair.main.url}/hook?token={HOOK}")
    tidings.write_config("""
        [sinks.hook]
        type = "webhook"
        url_credential = "hook-url"
        """)
    env = {"API_URL": f"{pair.main.url}/items?key={KEY}&token={TOKEN}", "CREDENTIALS_DIRECTORY": str(creds.parent)}
    r = tidings.run("check", "--deliver", "--json", env=env)
    assert r.code == 2, r
    queries = {q.path: q.query for q in pair.main.requests}
    assert queries["/page"] == {"token": [TOKEN]} or queries["/page"] == {"token": TOKEN}, queries
    assert "HTTP 500" in r.stderr and "HTTP 400" in r.stderr, r
    assert f"POST {pair.main.url}/hook" in r.stderr, r

    outputs = {"check": r.stdout + r.stderr}
    for args in [("sources",), ("sources", "--json"), ("items", "--json", "page"), ("history", "--json"),
                 ("status", "--json"), ("outbox", "--json")]:
        out = tidings.run(*args, env=env)
        assert out.code == 0 or args[0] == "status" and out.stdout, out
        outputs[" ".join(args)] = out.stdout + out.stderr
    [item] = tidings.run("items", "--json", "page", env=env).events
    assert item["url"] == f"{pair.main.url}/page", item
    assert item["title"] == "‹redacted› echoed", item
    assert_nothing_leaks(tidings, outputs, LEAKS)


@pytest.mark.parametrize("provider", ["http-json", "feed", "page"])
def test_a_mistyped_secret_url_is_shown_without_its_query_at_its_line(tidings, provider):
    path = tidings.write_secret("url", f"htps://127.0.0.1/x?token={TOKEN}")
    tidings.write_plugin("s.toml", f'provider = "{provider}"\nurl_file = "{path}"\n')
    r = tidings.run("config", "check")
    assert r.code == 78, r
    assert "s.toml:2:" in r.stderr and 'not "htps://127.0.0.1/x"' in r.stderr, r
    assert TOKEN not in r.stderr


def test_url_and_url_file_together_are_refused(tidings):
    path = tidings.write_secret("url", f"http://127.0.0.1:9/x?token={TOKEN}")
    tidings.write_plugin("s.toml", f'provider = "feed"\nurl = "http://127.0.0.1:9/x"\nurl_file = "{path}"\n')
    r = tidings.run("config", "check")
    assert r.code == 78 and "s.toml:3:" in r.stderr and "set only one of" in r.stderr, r


@pytest.mark.parametrize("sink", ["ntfy", "gotify"])
def test_push_sinks_take_their_url_as_a_secret(tidings, sink):
    path = tidings.write_secret("url", f"htps://127.0.0.1/x?token={TOKEN}")
    extra = 'topic = "t"' if sink == "ntfy" else 'token = "gotify-token-1"'
    tidings.write_config(f'[sinks.s]\ntype = "{sink}"\nurl_file = "{path}"\n{extra}\n')
    r = tidings.run("config", "check")
    assert r.code == 78 and ":3:" in r.stderr and 'not "htps://127.0.0.1/x"' in r.stderr, r
    assert TOKEN not in r.stderr
