"""provider = "feed" (DESIGN §12): RSS/Atom/JSON Feed entries through the whole pipeline, against
a local HTTP server that serves the document the test last set, with ETag and Last-Modified."""
import hashlib

from fakes.server import FakeHandler, FakeServer


class FeedServer(FakeHandler):
    """Serves state["body"] at /feed.xml with state["type"]; answers conditional requests."""

    def route(self, req):
        s = self.state
        body = s["body"].encode() if isinstance(s["body"], str) else s["body"]
        etag = '"' + hashlib.sha1(body).hexdigest()[:16] + '"'
        headers = {"ETag": etag, "Last-Modified": "Thu, 26 Nov 2026 10:00:00 GMT",
                   "Content-Type": s.get("type", "application/atom+xml; charset=utf-8")}
        if req.headers.get("if-none-match") == etag:
            s["not_modified"] = s.get("not_modified", 0) + 1
            return 304, {"ETag": etag}, b""
        return 200, headers, body


def entry(n, updated="2026-11-20T10:00:00Z", title=None, link=None):
    link = link or f"https://example.org/posts/{n}"
    return f"""
      <entry>
        <id>tag:example.org,2026:{n}</id>
        <title>{title or f"Post {n}"}</title>
        <link href="{link}"/>
        <updated>{updated}</updated>
        <summary>Text of post {n}</summary>
      </entry>"""


def atom(*entries):
    return ('<?xml version="1.0" encoding="utf-8"?>\n<feed xmlns="http://www.w3.org/2005/Atom">'
            '<title>Blog</title><id>urn:blog</id><updated>2026-11-20T10:00:00Z</updated>'
            + "".join(entries) + "</feed>")


def feed_source(t, url, extra=""):
    return t.write_plugin("blog.toml", f"""
        provider = "feed"
        url = "{url}/feed.xml"
        timeout = "5s"
        {extra}
    """)


def test_baseline_new_changed_reorder_and_conditional_requests(tidings):
    with FakeServer(FeedServer, {"body": atom(entry(1), entry(2))}) as srv:
        feed_source(tidings, srv.url)
        r = tidings.check()
        assert r.code == 0, r
        assert r.stdout == "", "the baseline is silent"

        # A new entry.
        srv.state["body"] = atom(entry(3), entry(1), entry(2))
        r = tidings.check()
        assert r.code == 1, r
        assert [(e["event"], e["key"], e["title"]) for e in r.events] == [("new", "tag:example.org,2026:3", "Post 3")]
        e = r.events[0]
        assert e["provider"] == "feed" and e["kind"] == "entry" and e["source"] == "blog"
        assert e["url"] == "https://example.org/posts/3"
        assert e["body"] == "Text of post 3"
        assert e["data"]["updated"] == "2026-11-20T10:00:00Z"

        # Edited upstream: `updated` moves.
        srv.state["body"] = atom(entry(3), entry(1, updated="2026-11-21T09:00:00Z", title="Post 1 (fixed)"), entry(2))
        r = tidings.check()
        assert r.code == 1, r
        assert [(e["event"], e["key"], e["title"]) for e in r.events] == \
            [("changed", "tag:example.org,2026:1", "Post 1 (fixed)")]

        # Reordered: nothing.
        srv.state["body"] = atom(entry(2), entry(1, updated="2026-11-21T09:00:00Z", title="Post 1 (fixed)"), entry(3))
        r = tidings.check()
        assert r.code == 0, r
        assert r.stdout == ""

        # Unchanged: a conditional request, answered 304, is a quiet success.
        srv.clear()
        r = tidings.check()
        assert r.code == 0, r
        assert r.stdout == ""
        assert srv.state.get("not_modified") == 1
        sent = srv.requests[-1].headers
        assert sent.get("if-none-match", "").startswith('"'), sent
        assert sent.get("if-modified-since") == "Thu, 26 Nov 2026 10:00:00 GMT"

        # Tracking parameters added to the links: entries with ids are not new (nor changed).
        srv.state["body"] = atom(
            entry(2, link="https://example.org/posts/2?utm_source=rss&amp;utm_medium=feed"),
            entry(1, updated="2026-11-21T09:00:00Z", title="Post 1 (fixed)",
                  link="https://example.org/posts/1?utm_source=rss"),
            entry(3, link="https://example.org/posts/3?utm_campaign=x"))
        r = tidings.check()
        assert r.code == 0, r
        assert r.stdout == ""


def test_rss_with_undeclared_entities_and_an_entry_that_scrolls_off_and_back(tidings):
    def rss(*items):
        return ("<rss version=\"2.0\"><channel><title>R</title>"
                + "".join(f"<item><guid>{g}</guid><title>{t}</title><link>/r/{g}</link></item>" for g, t in items)
                + "</channel></rss>")

    with FakeServer(FeedServer, {"body": rss(("a", "First")), "type": "application/rss+xml"}) as srv:
        feed_source(tidings, srv.url)
        assert tidings.check().code == 0
        srv.state["body"] = rss(("b", "Caf&eacute;&nbsp;au&nbsp;lait &amp; more"))
        r = tidings.check()
        assert r.code == 1, r
        got = sorted((e["event"], e["key"], e["title"]) for e in r.events)
        assert got == [("new", "b", "Café au lait & more")], "an entry leaving the feed is not removed"
        new = next(e for e in r.events if e["event"] == "new")
        assert new["url"] == f"{srv.url}/r/b", "made absolute against the feed's URL"
        # a comes back unchanged: the same entry, no event; edited: changed, never new twice.
        srv.state["body"] = rss(("a", "First"), ("b", "Caf&eacute;&nbsp;au&nbsp;lait &amp; more"))
        r = tidings.check()
        assert r.code == 0 and r.stdout == "", r
        srv.state["body"] = rss(("b", "Caf&eacute;&nbsp;au&nbsp;lait &amp; more"))
        assert tidings.check().code == 0
        srv.state["body"] = rss(("a", "First, edited"), ("b", "Caf&eacute;&nbsp;au&nbsp;lait &amp; more"))
        r = tidings.check()
        assert [(e["event"], e["key"]) for e in r.events] == [("changed", "a")], r


def test_config_check_poll_and_a_bad_pattern_names_file_and_line(tidings):
    with FakeServer(FeedServer, {"body": atom(entry(1), entry(2))}) as srv:
        feed_source(tidings, srv.url, 'include = ["Post"]')
        r = tidings.run("config", "check", "--poll")
        assert r.code == 0, r
        assert "source blog: polled, 2 items" in r.stdout + r.stderr, r

        p = feed_source(tidings, srv.url, 'include = ["ok", "(unclosed"]')
        r = tidings.run("config", "check")
        assert r.code == 78, r
        assert f"{p}:5: source \"blog\": 'include': invalid regular expression \"(unclosed\"" in r.stderr, r


def test_not_a_feed_is_a_failed_poll(tidings):
    with FakeServer(FeedServer, {"body": "<html><body>Moved</body></html>", "type": "text/html"}) as srv:
        feed_source(tidings, srv.url)
        r = tidings.check()
        assert r.code == 2, r
        assert "not an RSS, Atom or JSON feed" in r.stderr, r
