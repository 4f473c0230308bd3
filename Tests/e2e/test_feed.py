"""provider = "feed" (DESIGN §12): RSS/Atom/JSON Feed entries through the whole pipeline, against
a local HTTP server that serves the document the test last set, with ETag and Last-Modified."""
import hashlib
import time

from fakes.server import FakeHandler, FakeServer
from providers_util import assert_poll_stops_using_cpu


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


def feed_source(t, url, extra="", timeout="5s"):
    return t.write_plugin("blog.toml", f"""
        provider = "feed"
        url = "{url}/feed.xml"
        timeout = "{timeout}"
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

        # Issue 30 item 14: one that could not search a long title within the step budget.
        p = feed_source(tidings, srv.url, 'exclude = ["(?:.{900}){20}x"]')
        r = tidings.run("config", "check")
        assert r.code == 78, r
        assert f"{p}:5: source \"blog\": 'exclude': invalid regular expression \"(?:.{{900}}){{20}}x\": too costly" in r.stderr, r


def test_not_a_feed_is_a_failed_poll(tidings):
    with FakeServer(FeedServer, {"body": "<html><body>Moved</body></html>", "type": "text/html"}) as srv:
        feed_source(tidings, srv.url)
        r = tidings.check()
        assert r.code == 2, r
        assert "not an RSS, Atom or JSON feed" in r.stderr, r


def test_links_that_gain_tracking_parameters_are_the_same_entries(tidings):
    # RSS 0.91-style items without guid are keyed by their link; a feed proxy that starts adding
    # utm_* (or fbclid...) to every link must not make them new again.
    def rss(query, *names):
        return ('<rss version="0.91"><channel><title>R</title>'
                + "".join(f"<item><title>{n}</title><link>/r/{n}{query}</link></item>" for n in names)
                + "</channel></rss>")

    with FakeServer(FeedServer, {"body": rss("", "a", "b"), "type": "application/rss+xml"}) as srv:
        feed_source(tidings, srv.url)
        assert tidings.check().code == 0
        srv.state["body"] = rss("?utm_source=feedburner&amp;utm_medium=feed&amp;utm_campaign=x", "a", "b")
        r = tidings.check()
        assert r.code == 0 and r.stdout == "", r
        srv.state["body"] = rss("?utm_source=rss", "a", "b", "c")
        r = tidings.check("--json")
        assert [(e["event"], e["key"], e["url"]) for e in r.events] == \
            [("new", f"{srv.url}/r/c", f"{srv.url}/r/c?utm_source=rss")], r


def test_entity_bombs_external_entities_and_a_huge_feed_are_bounded(tidings, tmp_path):
    secret = tmp_path / "local-file.txt"
    secret.write_text("LOCAL-FILE-CONTENT\n")
    laughs = ('<?xml version="1.0"?>\n<!DOCTYPE rss [<!ENTITY x SYSTEM "file://' + str(secret) + '">'
              '<!ENTITY a "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa">'
              + "".join(f'<!ENTITY {chr(98 + k)} "' + f"&{chr(97 + k)};" * 10 + '">' for k in range(9))
              + ']><rss version="2.0"><channel><title>R</title>'
              '<item><guid>1</guid><title>T &j; &x;</title></item></channel></rss>')
    huge = ('<rss version="2.0"><channel><title>R</title>'
            + "".join(f"<item><guid>{n}</guid><title>Entry {n}</title></item>" for n in range(300_000))
            + "</channel></rss>")
    with FakeServer(FeedServer, {"body": laughs, "type": "application/rss+xml"}) as srv:
        feed_source(tidings, srv.url, 'notify_existing = true\nmax_body = "64MiB"')
        start = time.monotonic()
        r = tidings.check("--json")
        took = time.monotonic() - start
        assert took < 20, f"the entity bomb took {took:.1f}s"
        assert "LOCAL-FILE-CONTENT" not in r.stdout + r.stderr, "an external entity was loaded"
        for e in r.events:
            assert len(e["title"]) <= 300, "entity text is bounded"

        # 300,000 entries (~12 MB): read within max_entries (500 by default), in bounded time.
        srv.state["body"] = huge
        feed_source(tidings, srv.url, 'max_body = "64MiB"')
        start = time.monotonic()
        r = tidings.check()
        took = time.monotonic() - start
        assert r.code in (0, 1), r
        assert took < 60, f"a 300,000-entry feed took {took:.1f}s"
        items = tidings.run("items", "--json").events
        assert 0 < len(items) <= 500, len(items)


def test_entity_amplification_is_a_bounded_poll_error(tidings):
    # Issue 30 item 11: one 120 KB internal entity referenced across 500 items (a document of
    # ~160 KB) cost minutes of CPU per poll, and went on after the timeout. Now the document's
    # text is budgeted as a whole: the poll fails at once, naming the limit, and the daemon idles.
    big = "x" * 120_000
    doc = ('<?xml version="1.0"?>\n<!DOCTYPE rss [<!ENTITY big "' + big + '">]>\n'
           '<rss version="2.0"><channel><title>R</title>'
           + "".join(f"<item><guid>{n}</guid><title>&big;</title><description>&big;</description></item>"
                     for n in range(500))
           + "</channel></rss>")
    with FakeServer(FeedServer, {"body": doc, "type": "application/rss+xml"}) as srv:
        feed_source(tidings, srv.url, 'interval = "1h"', timeout="2s")
        line = assert_poll_stops_using_cpu(tidings, "blog", ["with its entities expanded", "timed out"])
        assert "with its entities expanded" in line, line
        r = tidings.check()
        assert r.code == 2, r
        assert "the feed's text is more than" in r.stderr and "4 × the document's size" in r.stderr, r
