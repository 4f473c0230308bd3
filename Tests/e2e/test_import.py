"""`tidings import urlwatch|opml` and `tidings export opml` (DESIGN §14), against real peers:
urlwatch 2.29 (from the test venv) watching the same local pages from the same urls.yaml, and
newsboat (Debian) importing tidings' OPML and exporting its own. Local servers only."""
import json
import os
import resource
import subprocess
import sys
import time

import pytest

from fakes.server import FakeServer
from test_page import HTML, PageServer


def page(rows, footer="1", news="Quiet day"):
    items = "".join(f"<li>{r}</li>" for r in rows)
    return (f"<html><body><ul id='jobs'>{items}</ul><div id='news'><p>{news}</p></div>"
            f"<p class='footer'>visits {footer}</p></body></html>")


URLS_YAML = """\
name: jobs
url: {base}/jobs
filter:
  - css: "ul#jobs li"
  - html2text
---
name: news
url: {base}/news
filter:
  - xpath: '//div[@id="news"]'
  - html2text
"""


class Urlwatch:
    """urlwatch 2.29 run as its cron job would be, with its files in a folder of the test."""

    def __init__(self, root, urls):
        self.root = root
        self.urls = urls

    def run(self):
        p = subprocess.run(
            [sys.executable, "-c", "from urlwatch.cli import main; main()", "--urls", str(self.urls),
             "--config", str(self.root / "urlwatch.yaml"), "--hooks", str(self.root / "hooks.py"),
             "--cache", str(self.root / "cache.db")],
            capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": str(self.root)})
        assert p.returncode == 0, p.stderr
        return {line.split(": ", 1)[1].split(" (")[0] for line in p.stdout.splitlines()
                if line.startswith("CHANGED: ")}


def changed(r):
    assert r.code in (0, 1), r
    return {e["source"] for e in r.events if e["event"] == "changed"}


def test_urlwatch_and_tidings_report_the_same_edits_from_one_urls_yaml(tidings, tmp_path):
    """css and xpath jobs: both report a change on the same edits, and none on edits outside
    the selection (a visit counter in the footer)."""
    uw_dir = tmp_path / "urlwatch"
    uw_dir.mkdir()
    state = {"pages": {"/jobs": (page(["Dev Oslo", "Ops Bergen"]), HTML), "/news": (page([]), HTML)}}
    with FakeServer(PageServer, state) as srv:
        urls = uw_dir / "urls.yaml"
        urls.write_text(URLS_YAML.format(base=srv.url))
        r = tidings.run("import", "urlwatch", str(urls))
        assert r.code == 0, r
        assert "2 created, 0 already watched, 0 not importable" in r.stdout, r.stdout
        uw = Urlwatch(uw_dir, urls)
        assert uw.run() == set() and tidings.check().code == 0, "both take a baseline"

        def edit(path, html):
            srv.state["pages"][path] = (html, HTML)
            # urlwatch keeps each job's snapshots by time to the second and compares with the
            # newest: two runs in one second can compare with the wrong one (a change reported twice).
            time.sleep(1.1)
            return uw.run(), changed(tidings.check())

        assert edit("/jobs", page(["Dev Oslo", "Ops Bergen"], footer="2")) == (set(), set()), "outside the selection"
        assert edit("/news", page([], footer="7")) == (set(), set())
        assert edit("/jobs", page(["Dev Oslo", "Ops Bergen", "QA Trondheim"], footer="3")) == ({"jobs"}, {"jobs"})
        assert edit("/news", page([], footer="8", news="Big news")) == ({"news"}, {"news"})
        assert edit("/news", page(["not in news"], footer="9", news="Big news")) == (set(), set())


def test_import_is_repeatable_dry_run_writes_nothing_and_refusals_are_listed(tidings, tmp_path):
    urls = tmp_path / "urls.yaml"
    urls.write_text("""\
url: http://127.0.0.1:9/a
filter: "css:div.main,html2text"
---
command: "echo hello"
---
navigate: http://127.0.0.1:9/app
---
url: http://127.0.0.1:9/b
filter: [sha1sum]
""")
    r = tidings.run("import", "urlwatch", str(urls), "--dry-run")
    assert r.code == 0, r
    assert f"# would write {tidings.plugins}/http-127.0.0.1-9-a.toml\n" in r.stdout, r.stdout
    assert 'select = "css:div.main"' in r.stdout and 'format = "text"' in r.stdout
    assert "2 would be created, 0 already watched, 2 not importable" in r.stdout, r.stdout
    assert os.listdir(tidings.plugins) == [], "a dry run writes nothing"
    assert "(%s:6): a browser job" % urls in r.stdout and "(%s:9): filter sha1sum: compares a checksum" % urls in r.stdout, r.stdout

    r = tidings.run("import", "urlwatch", str(urls))
    assert r.code == 0 and "2 created" in r.stdout, r
    files = sorted(os.listdir(tidings.plugins))
    assert len(files) == 2 and all(f.endswith(".toml") for f in files), files
    for f in files:
        assert os.stat(tidings.plugins / f).st_mode & 0o777 == 0o644
    assert tidings.run("config", "check").code == 0
    r = tidings.run("import", "urlwatch", str(urls))
    assert r.code == 0 and "0 created, 2 already watched, 2 not importable" in r.stdout, r.stdout
    assert sorted(os.listdir(tidings.plugins)) == files, "a second import writes nothing"
    (e,) = [e for e in tidings.check().events] or [None]  # the exec source's first poll is a baseline
    assert e is None


@pytest.mark.parametrize("text,message", [
    ("url: http://127.0.0.1:9/a\n---\nurl: [unclosed\n", "urls.yaml:4: while parsing a flow sequence"),
    ("a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{n}: &{n} [" + ",".join([f"*{p}"] * 10) + "]\n" for p, n in zip("abcdefg", "bcdefgh")), "aliases expand"),
    ("".join("- " * 1 + "[" * 100 + "]" * 100), "nested deeper"),
])
def test_a_file_that_cannot_be_read_whole_writes_nothing(tidings, tmp_path, text, message):
    urls = tmp_path / "urls.yaml"
    urls.write_text(text)
    r = tidings.run("import", "urlwatch", str(urls))
    assert r.code == 65 and message in r.stderr and "nothing imported" in r.stderr, r
    assert os.listdir(tidings.plugins) == []
    r = tidings.run("import", "urlwatch", str(tmp_path / "missing.yaml"))
    assert r.code == 66 and "No such file" in r.stderr, r


def test_ten_thousand_jobs(tidings, tmp_path):
    """Time and memory go to the note (printed with -s), not into assertions."""
    urls = tmp_path / "urls.yaml"
    urls.write_text("".join(f"name: job {i}\nurl: http://127.0.0.1:9/{i}\nfilter: [{{css: 'div#x'}}, html2text]\n---\n"
                            for i in range(10_000)))
    start = time.monotonic()
    r = tidings.run("import", "urlwatch", str(urls), timeout=600)
    took = time.monotonic() - start
    assert r.code == 0 and "10000 created" in r.stdout, r.stderr
    assert len(os.listdir(tidings.plugins)) == 10_000
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(f"\n10,000 urlwatch jobs imported in {took:.1f}s, max RSS of a child so far {rss // 1024} MiB")
    r = tidings.run("import", "urlwatch", str(urls), timeout=600)
    assert "0 created, 10000 already watched" in r.stdout


def feeds(t, base):
    t.write_plugin("blog.toml", f'provider = "feed"\nurl = "{base}/blog/atom.xml"\ngroup = "Tech & Co"\n')
    t.write_plugin("news.toml", f'provider = "feed"\nurl = "{base}/news.rss?a=1&b=2"\n')
    t.write_plugin("page.toml", f'provider = "page"\nurl = "{base}/page"\n')


def newsboat(home, *args):
    p = subprocess.run(["newsboat", "-u", str(home / "urls"), "-c", str(home / "cache.db"), "-C", str(home / "config"), *args],
                       capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": str(home)}, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p
    return p.stdout


def test_newsboat_imports_the_export_and_its_export_imports_back(tidings, tmp_path):
    """newsboat reads tidings' export: the same feeds (its urls file), each fetched and read
    (one unread article per feed); newsboat's own export imports into tidings."""
    pages = {"/blog/atom.xml": (ATOM, "application/atom+xml"),
             "/news.rss": (ATOM.replace("urn:blog", "urn:news").replace("urn:1", "urn:n1"), "application/atom+xml")}
    with FakeServer(PageServer, {"pages": pages}) as srv:
        base = srv.url
        feeds(tidings, base)
        r = tidings.run("sources", "--json")
        assert {s["name"]: s["group"] for s in map(json.loads, r.stdout.splitlines())} == \
            {"blog": "Tech & Co", "news": None, "page": None}, r
        assert "group: Tech & Co" in tidings.run("sources").stdout
        r = tidings.run("export", "opml")
        assert r.code == 0, r
        assert f'xmlUrl="{base}/news.rss?a=1&amp;b=2"' in r.stdout and f"{base}/page" not in r.stdout
        opml = tmp_path / "tidings.opml"
        opml.write_text(r.stdout)
        home = tmp_path / "nb"
        home.mkdir()
        newsboat(home, "-i", str(opml))
        lines = sorted((home / "urls").read_text().splitlines())
        assert lines == [f'{base}/blog/atom.xml "Tech & Co"', f"{base}/news.rss?a=1&b=2"], lines
        assert newsboat(home, "-x", "reload", "print-unread").strip() == "2 unread articles"

        exported = tmp_path / "newsboat.opml"
        exported.write_text(newsboat(home, "-e"))
        other = tmp_path / "other"
        other.mkdir()
        from conftest import Tidings
        t2 = Tidings(other)
        r = t2.run("import", "opml", str(exported))
        assert r.code == 0 and "2 created, 0 already watched, 0 not importable" in r.stdout, r
        r = t2.run("export", "opml")
        assert sorted(l.split('xmlUrl="')[1].split('"')[0] for l in r.stdout.splitlines() if "xmlUrl" in l) == \
            [f"{base}/blog/atom.xml", f"{base}/news.rss?a=1&amp;b=2"]
        assert t2.check().code == 0, "the imported feeds poll (a silent baseline)"
        r = tidings.run("import", "opml", str(exported))
        assert "0 created, 2 already watched" in r.stdout, r.stdout


def test_hostile_opml_is_refused_whole(tidings, tmp_path):
    big = tmp_path / "big.opml"
    with open(big, "w") as f:
        f.write('<?xml version="1.0"?><opml version="2.0"><body>\n')
        line = '<outline type="rss" text="x" xmlUrl="http://127.0.0.1:9/feed"/>\n'
        for _ in range((100 << 20) // len(line)):
            f.write(line)
        f.write("</body></opml>\n")
    start = time.monotonic()
    r = tidings.run("import", "opml", str(big))
    print(f"\n100 MB OPML refused in {time.monotonic() - start:.2f}s")
    assert r.code in (65, 66) and "larger than" in r.stderr, r
    deep = tmp_path / "deep.opml"
    deep.write_text("<opml><body>" + "<outline text='x'>" * 5000 + "</outline>" * 5000 + "</body></opml>")
    r = tidings.run("import", "opml", str(deep))
    assert r.code == 65 and "not well-formed" in r.stderr, r
    bomb = tmp_path / "bomb.opml"
    bomb.write_text('<?xml version="1.0"?>\n<!DOCTYPE opml [<!ENTITY a "aaaaaaaaaa">\n<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>\n'
                    '<opml><body><outline text="&b;" xmlUrl="http://127.0.0.1:9/"/></body></opml>\n')
    r = tidings.run("import", "opml", str(bomb))
    assert r.code == 65 and ":2: the document declares entities" in r.stderr, r
    assert os.listdir(tidings.plugins) == []


def test_every_urlwatch_job_key_and_filter_is_mapped_in_the_docs_and_known_to_the_reader(tidings, tmp_path):
    """Asked of urlwatch 2.29 itself: each filter kind and job key has its row in
    docs/coming-from-urlwatch.md, and the reader knows each filter (its reason is never
    "not a urlwatch filter")."""
    from urlwatch.filters import FilterBase
    from urlwatch.jobs import JobBase
    from conftest import ROOT
    doc = (ROOT / "docs/coming-from-urlwatch.md").read_text()
    rows = {cell.strip().strip("`") for line in doc.splitlines() if line.startswith("| `")
            for cell in line.split("|")[1].split(",")}
    rows = {r.split("`")[0].split(" ")[0] for r in rows}
    kinds = set(FilterBase.__subclasses__)
    keys = {k for c in JobBase.__subclasses__.values() for k in (*c.__required__, *c.__optional__)} | {"kind"}
    assert kinds - rows == set() and keys - rows == set(), (kinds - rows, keys - rows)
    urls = tmp_path / "urls.yaml"
    urls.write_text("---\n".join(f"url: http://127.0.0.1:9/{i}\nfilter: [{k}]\n" for i, k in enumerate(sorted(kinds))))
    r = tidings.run("import", "urlwatch", str(urls), "--dry-run")
    assert r.code == 0 and "not a urlwatch" not in r.stdout, r.stdout


def test_completions_offer_the_formats(tidings):
    bash = tidings.run("--generate-completion-script", "bash").stdout
    fish = tidings.run("--generate-completion-script", "fish").stdout
    assert "_tidings_import()" in bash and "'urlwatch'$'\\n''opml'$'\\n''urls'" in bash, bash
    assert "\"tidings import\" -eq 1' -fka 'urlwatch opml urls'" in fish and "\"tidings export\" -eq 1' -fka 'opml'" in fish


ATOM = """<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>Blog</title><id>urn:blog</id>
<entry><id>urn:1</id><title>First post</title><link href="/posts/1"/></entry></feed>"""


def test_a_list_of_addresses_goes_through_adds_discovery(tidings, tmp_path):
    """Each line is looked at as `tidings add` looks: a page announcing a feed (relative href)
    gives the feed, a feed is a feed, other HTML a page; an address that fails is listed with
    its line. A second import fetches nothing already watched and writes nothing."""
    pages = {
        "/blog/": ('<html><head><link rel="alternate" type="application/atom+xml" href="atom.xml"></head>'
                   "<body><p>Blog</p></body></html>", HTML),
        "/blog/atom.xml": (ATOM, "application/atom+xml"),
        "/news.xml": (ATOM.replace("urn:blog", "urn:news"), "application/xml"),
        "/about": ("<html><body><p>About us</p></body></html>", HTML),
    }
    with FakeServer(PageServer, {"pages": pages}) as srv:
        lst = tmp_path / "urls.txt"
        lst.write_text(f"# my list\n{srv.url}/blog/\n\n{srv.url}/news.xml  # news\n{srv.url}/about\n"
                       f"{srv.url}/gone\n{srv.url}/a {srv.url}/b\n")
        r = tidings.run("import", "urls", str(lst))
        assert r.code == 0, r
        assert "3 created, 0 already watched, 2 not importable" in r.stdout, r.stdout
        assert f"({lst}:6): " in r.stdout and f"({lst}:7): one address per line" in r.stdout, r.stdout
        texts = {p.name: p.read_text() for p in tidings.plugins.glob("*.toml")}
        providers = sorted((t.split('provider = "')[1].split('"')[0], t.split('url = "')[1].split('"')[0]) for t in texts.values())
        assert providers == [("feed", f"{srv.url}/blog/atom.xml"), ("feed", f"{srv.url}/news.xml"), ("page", f"{srv.url}/about")], texts
        assert all("Imported from a list of addresses (urls.txt, line " in t for t in texts.values())
        assert tidings.run("config", "check").code == 0
        seen = len(srv.requests)
        r = tidings.run("import", "urls", str(lst))
        assert "0 created, 3 already watched, 2 not importable" in r.stdout, r.stdout
        assert sorted(p.name for p in tidings.plugins.glob("*.toml")) == sorted(texts)
        fetched = {q.path for q in srv.requests[seen:]}
        assert fetched <= {"/gone", "/blog/", "/blog/atom.xml"} and "/gone" in fetched, fetched


def test_a_running_daemon_is_asked_to_reload_and_polls_what_was_imported(tidings, tmp_path):
    from conftest import read_log, wait_for
    with FakeServer(PageServer, {"pages": {"/feed.xml": (ATOM, "application/atom+xml")}}) as srv:
        d = tidings.start_daemon()
        wait_for(lambda: (tidings.state / "tidings.sock").exists(), what="the control socket")
        opml = tmp_path / "subs.opml"
        opml.write_text(f'<opml version="1.0"><body><outline text="Blog" xmlUrl="{srv.url}/feed.xml"/></body></opml>')
        r = tidings.run("import", "opml", str(opml))
        assert r.code == 0 and "1 created" in r.stdout, r
        assert f"asked the running daemon (pid {d.pid}) to reload" in r.stdout, r
        wait_for(lambda: "reloaded configuration: 1 sources" in read_log(d), what="the daemon's reload")
        wait_for(lambda: any(q.path == "/feed.xml" for q in srv.requests), what="the imported feed's first poll")


def test_group_must_be_one_line(tidings):
    tidings.write_plugin("blog.toml", 'provider = "feed"\nurl = "http://127.0.0.1:9/a.xml"\ngroup = ""\n')
    r = tidings.run("config", "check")
    assert r.code == 78 and f"{tidings.plugins}/blog.toml:3" in r.stderr and "'group' must be one line" in r.stderr, r


def test_a_password_in_a_job_url_becomes_a_0600_secret_file(tidings, tmp_path):
    urls = tmp_path / "urls.yaml"
    urls.write_text("name: private\nurl: http://me:s3cret-pw@127.0.0.1:9/feed\n")
    r = tidings.run("import", "urlwatch", str(urls), "--dry-run")
    assert r.code == 0 and "s3cret-pw" not in r.stdout, r
    r = tidings.run("import", "urlwatch", str(urls))
    assert r.code == 0 and "1 created" in r.stdout and "s3cret-pw" not in r.stdout, r
    text = (tidings.plugins / "private.toml").read_text()
    assert "s3cret-pw" not in text and 'url_file = "secrets/private.url"' in text, text
    secret = tidings.plugins / "secrets" / "private.url"
    assert secret.read_text().strip() == "http://me:s3cret-pw@127.0.0.1:9/feed"
    assert os.stat(secret).st_mode & 0o777 == 0o600 and os.stat(tidings.plugins / "private.toml").st_mode & 0o777 == 0o644
    assert tidings.run("config", "check").code == 0
    r = tidings.run("import", "urlwatch", str(urls))
    assert "0 created, 1 already watched" in r.stdout, r.stdout


def test_interval_option(tidings, tmp_path):
    urls = tmp_path / "urls.yaml"
    urls.write_text("url: http://127.0.0.1:9/a\n---\ncommand: date\n")
    r = tidings.run("import", "urlwatch", str(urls), "--dry-run")
    assert r.stdout.count('interval = "1d"') == 2 and "urlwatch ran from cron" in r.stdout, r
    r = tidings.run("import", "urlwatch", str(urls), "--dry-run", "--interval", "6h")
    assert r.stdout.count('interval = "6h"') == 2 and "urlwatch ran from cron" not in r.stdout, r
    r = tidings.run("import", "urlwatch", str(urls), "--interval", "soon")
    assert r.code == 64 and "--interval soon: not a duration" in r.stderr, r
    assert os.listdir(tidings.plugins) == []
