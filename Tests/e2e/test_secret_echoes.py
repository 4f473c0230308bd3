"""Secrets a server echoes escaped (issue 30, item 1).

The raw body is scrubbed before it is parsed, but a credential written escaped (`&amp;` in XML,
`&#116;` in HTML, `\\u0074` in JSON) only shows once the parser has decoded it. Every field of an
item that is stored or sent (key, title, body, url, `data` keys and values) is scrubbed where a
poll's items enter the engine, so none of `items`, `history --json`, `status --json`, `sources`
or what a sink receives holds it.
"""
from __future__ import annotations

import json

import pytest

from fakes.hostile import HostilePair
from leaks import assert_nothing_leaks

SECRET = "pa&ss-t0ken-42"
# The secret as each format escapes it: none of these is a form the raw scrub knows.
XML = "pa&amp;ss-t0ken-42"
HTML = "pa&#38;ss-&#116;0ken-42"
JSON = "pa&ss-\\u00740ken-42"


@pytest.fixture
def pair():
    with HostilePair() as p:
        yield p


def feed_body():
    return f"""<?xml version="1.0"?>
<rss version="2.0"><channel><title>t</title>
<item><guid>guid-{XML}</guid><link>http://example.com/{XML}</link><title>title {XML}</title>
<description>body {XML}</description><category>cat {XML}</category><author>{XML}</author></item>
</channel></rss>""".encode()


def page_body():
    return f"""<html><body><ul>
<li data-id="id-{HTML}"><a href="/x">job {HTML}</a> in {HTML}</li>
</ul></body></html>""".encode()


def json_body():
    return f"""[{{"id": "id-{JSON}", "name": "name {JSON}", "link": "http://example.com/{JSON}",
  "extra": {{"k-{JSON}": ["v {JSON}"]}}}}]""".encode()


def test_secrets_echoed_escaped_are_scrubbed_from_every_field_stored_or_sent(tidings, pair):
    key = tidings.write_secret("key", SECRET)
    pair.script("/feed", raw=feed_body(), headers={"Content-Type": "application/rss+xml"})
    pair.script("/page", raw=page_body(), headers={"Content-Type": "text/html; charset=utf-8"})
    pair.script("/items", raw=json_body(), headers={"Content-Type": "application/json"})
    pair.script("/hook", json={"ok": True})
    common = f"""headers = {{ X-Api-Key_file = "{key}" }}
        notify_existing = true"""
    tidings.write_plugin("feed.toml", f"""
        provider = "feed"
        url = "{pair.main.url}/feed"
        {common}
        """)
    tidings.write_plugin("page.toml", f"""
        provider = "page"
        url = "{pair.main.url}/page"
        select = "css:li"
        each = true
        key = "@data-id"
        {common}
        """)
    tidings.write_plugin("api.toml", f"""
        provider = "http-json"
        url = "{pair.main.url}/items"
        key = "/id"
        title = "{{/name}}"
        link = "/link"
        {common}
        """)
    tidings.write_config(f"""
        [sinks.hook]
        type = "webhook"
        url = "{pair.main.url}/hook"
        """)
    r = tidings.run("check", "--deliver", "--json")
    assert r.code == 1, r
    assert {e["source"] for e in r.events} == {"feed", "page", "api"}, r
    assert all(q.headers.get("x-api-key") == SECRET for q in pair.main.requests if q.path != "/hook")
    posts = [q.body.decode() for q in pair.main.requests if q.path == "/hook"]
    assert len(posts) == 3, posts

    outputs = {"check": r.stdout + r.stderr, "sink": "\n".join(posts)}
    for args in [("items", "--json", "feed", "page", "api"), ("items", "feed", "page", "api"), ("history", "--json"),
                 ("status", "--json"), ("sources",), ("sources", "--json")]:
        out = tidings.run(*args)
        assert out.code == 0 or args[0] == "status" and out.stdout, out  # status: 1, no daemon runs
        outputs[" ".join(args)] = out.stdout + out.stderr
    assert_nothing_leaks(tidings, outputs, {SECRET, json.dumps(SECRET)[1:-1], "t0ken-42", XML, HTML, JSON})
    # The fields are there, scrubbed (the check would pass if nothing were read at all).
    items = tidings.run("items", "--json", "feed", "page", "api").events
    assert {i["source"] for i in items} == {"feed", "page", "api"}, items
    for i in items:
        assert "‹redacted›" in i["key"], i
    assert "‹redacted›" in outputs["sink"]
