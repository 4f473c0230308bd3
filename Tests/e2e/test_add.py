"""`tidings add WHAT` (DESIGN §14): discovery on real-world page shapes served from loopback, the
file it writes (mode, comments, secrets as files), a check that takes the items, and errors that
write nothing."""
import os
import socket
import stat

import subprocess
import tomllib

from conftest import Result, binary, read_log, wait_for
from fakes.github import GitHub, new_state, release
from fakes.server import FakeHandler, FakeServer

ATOM = "application/atom+xml"
HTML = "text/html; charset=utf-8"


def atom(*titles, blog="Blog"):
    entries = "".join(f"<entry><id>urn:{blog}:{i}</id><title>{t}</title><link href='http://127.0.0.1/{i}'/>"
                      f"<updated>2026-11-20T10:00:00Z</updated></entry>" for i, t in enumerate(titles))
    return ('<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom">'
            f"<title>{blog}</title><id>urn:{blog}</id><updated>2026-11-20T10:00:00Z</updated>{entries}</feed>")


def rss(*titles):
    items = "".join(f"<item><guid>r{i}</guid><title>{t}</title></item>" for i, t in enumerate(titles))
    return f'<?xml version="1.0"?><rss version="2.0"><channel><title>News</title>{items}</channel></rss>'


def page(head="", body="<main><p>Hello</p></main>", title="A page"):
    return f"<!doctype html><html><head><title>{title}</title>{head}</head><body>{body}</body></html>"


class Site(FakeHandler):
    """state["pages"][path] = (body, content type); state["redirects"][path] = (status, location)."""

    def route(self, req):
        s = self.state
        if req.path in s.get("redirects", {}):
            code, location = s["redirects"][req.path]
            return code, {"Location": location}, b""
        if req.path not in s.get("pages", {}):
            return 404, {"Content-Type": "text/plain"}, "no such page"
        body, ctype = s["pages"][req.path]
        return 200, {"Content-Type": ctype}, body


def plugin_files(t):
    return sorted(str(p.relative_to(t.plugins)) for p in t.plugins.rglob("*"))


def assert_private_enough(path, mode=0o644):
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == mode, oct(st.st_mode)
    assert st.st_uid == os.getuid()


def value_of(text, key):
    for line in text.splitlines():
        if line.startswith(f"{key} = "):
            return line.split(" = ", 1)[1]
    return None


def items_of(t, name):
    r = t.run("items", name, "--json")
    assert r.code == 0, r
    return [i["title"] for i in r.events]


def add_then_check(t, *args):
    """`tidings add …`, then one check: the new source's items as the check took them."""
    r = t.run("add", *args)
    assert r.code == 0, r
    c = t.check()
    assert c.code in (0, 1), c
    return r


def test_a_feed_link_with_a_relative_href_and_base_then_a_check_takes_its_entries(tidings):
    with FakeServer(Site, {"pages": {
        "/blog/": (page('<base href="/feeds/"><link rel="alternate" type="application/atom+xml" href="atom.xml" title="The Blog">'), HTML),
        "/feeds/atom.xml": (atom("First post", "Second post"), ATOM),
    }}) as srv:
        r = add_then_check(tidings, f"{srv.url}/blog/", "--name", "blog", "--interval", "1h")
        path = tidings.plugins / "blog.toml"
        text = path.read_text()
        assert value_of(text, "url") == f'"{srv.url}/feeds/atom.xml"', text
        assert value_of(text, "provider") == '"feed"' and value_of(text, "interval") == '"1h"'
        assert text.startswith("# The feed \"The Blog\" announced by"), text
        assert_private_enough(path)
        assert f"wrote {path}" in r.stdout and "source blog: polled, 2 items" in r.stdout, r
        assert "Second post" in r.stdout
        assert "no daemon is running" in r.stdout
        assert sorted(items_of(tidings, "blog")) == ["First post", "Second post"]
        assert plugin_files(tidings) == ["blog.toml"]
        # Once more: already watched (the same address), nothing written, no second source.
        again = tidings.run("add", f"{srv.url}/feeds/atom.xml/")
        assert again.code == 0 and "already watched by the source blog" in again.stdout, again
        assert plugin_files(tidings) == ["blog.toml"]


def test_several_feeds_the_first_unless_pick_and_a_pick_out_of_range_is_usage(tidings):
    head = ('<link rel="alternate" type="application/rss+xml" href="/rss.xml" title="RSS">'
            '<link rel="stylesheet" href="/s.css">'
            '<link rel="Alternate feed" type="application/atom+xml; charset=utf-8" href="atom.xml" title="Atom">'
            '<link rel="alternate" type="text/html" href="/other-language/">')
    with FakeServer(Site, {"pages": {"/": (page(head), HTML), "/rss.xml": (rss("From RSS"), "application/rss+xml"),
                                     "/atom.xml": (atom("From Atom"), ATOM)}}) as srv:
        dry = tidings.run("add", srv.url + "/", "--dry-run")
        assert dry.code == 0, dry
        assert value_of(dry.stdout, "url") == f'"{srv.url}/rss.xml"', dry.stdout
        assert "announces 2 feeds" in dry.stdout and "← chosen" in dry.stdout
        assert plugin_files(tidings) == [], "--dry-run writes nothing"

        bad = tidings.run("add", srv.url + "/", "--pick", "3")
        assert bad.code == 64 and "announces 2 feeds" in bad.stderr, bad
        assert plugin_files(tidings) == []

        add_then_check(tidings, srv.url + "/", "--pick", "2", "--name", "atom")
        assert value_of((tidings.plugins / "atom.toml").read_text(), "url") == f'"{srv.url}/atom.xml"'
        assert items_of(tidings, "atom") == ["From Atom"]


def test_a_feed_served_as_text_html_is_a_feed_and_a_page_without_feeds_is_a_page(tidings):
    with FakeServer(Site, {"pages": {"/news": (rss("One", "Two", "Three"), "text/html"),
                                     "/about": (page(body="<main><p>We make things.</p></main>"), HTML),
                                     "/team": (page(body="<main><p>Us.</p></main>"), HTML)}}) as srv:
        add_then_check(tidings, f"{srv.url}/news", "--name", "news")
        text = (tidings.plugins / "news.toml").read_text()
        assert value_of(text, "provider") == '"feed"', text
        assert sorted(items_of(tidings, "news")) == ["One", "Three", "Two"]

        r = add_then_check(tidings, f"{srv.url}/about", "--name", "about")
        text = (tidings.plugins / "about.toml").read_text()
        assert value_of(text, "provider") == '"page"' and value_of(text, "select") is None, text
        assert "announces no feed" in r.stdout
        assert len(items_of(tidings, "about")) == 1

        sel = tidings.run("add", "page", f"{srv.url}/team", "--select", "main p", "--name", "part")
        assert sel.code == 0, sel
        assert value_of((tidings.plugins / "part.toml").read_text(), "select") == '"css:main p"'


def test_a_redirect_chain_resolves_links_against_the_last_page(tidings):
    with FakeServer(Site, {"pages": {"/new/": (page('<link rel="alternate" type="application/feed+json" href="feed.json">'), HTML),
                                     "/new/feed.json": ('{"version": "https://jsonfeed.org/version/1.1", "title": "J", '
                                                        '"items": [{"id": "1", "title": "Jay"}]}', "application/feed+json")},
                           "redirects": {"/old": (301, "/mid"), "/mid": (302, "/new/")}}) as srv:
        r = add_then_check(tidings, f"{srv.url}/old", "--name", "moved")
        assert f"led to {srv.url}/new/" in r.stdout, r
        assert value_of((tidings.plugins / "moved.toml").read_text(), "url") == f'"{srv.url}/new/feed.json"'
        assert items_of(tidings, "moved") == ["Jay"]


def test_a_github_repository_becomes_its_releases(tidings):
    state = new_state(releases={"octo/hello": [release(7, "v1.0.0"), release(8, "v1.1.0")]})
    with FakeServer(GitHub, state) as srv:
        api = f"{srv.url}/api/v3"
        add_then_check(tidings, "github.com/octo/hello", "--github-api", api)
        path = tidings.plugins / "octo-hello.toml"
        text = path.read_text()
        assert value_of(text, "provider") == '"github"' and value_of(text, "repo") == '"octo/hello"', text
        assert value_of(text, "watch") == '"releases"' and value_of(text, "api_url") == f'"{api}"'
        assert sorted(items_of(tidings, "octo-hello")) == ["octo/hello v1.0.0", "octo/hello v1.1.0"]
        # The https form of the same repository is watched already.
        again = tidings.run("add", "https://github.com/octo/hello/", "--github-api", api)
        assert again.code == 0 and "already watched by the source octo-hello" in again.stdout, again
        # A repository that does not exist: the sample poll fails, nothing is written.
        missing = tidings.run("add", "github.com/octo/nothing", "--github-api", api)
        assert missing.code == 69 and "nothing written" in missing.stderr, missing
        assert plugin_files(tidings) == ["octo-hello.toml"]


def test_errors_write_nothing(tidings):
    with FakeServer(Site, {"pages": {"/": (page('<link rel="alternate" type="application/rss+xml" href="/gone.xml">'), HTML),
                                     "/api": ('{"builds": []}', "application/json"),
                                     "/logo.png": (b"\x89PNG\r\n\x1a\n", "image/png"),
                                     "/feed.xml": (rss("x"), "application/rss+xml")}}) as srv:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # bound, not listening: connections are refused
        r = tidings.run("add", f"http://127.0.0.1:{closed}/")
        assert r.code == 69 and "cannot be reached" in r.stderr, r
        s.close()

        r = tidings.run("add", srv.url + "/")
        assert r.code == 69 and "gone.xml" in r.stderr and "404" in r.stderr, r

        r = tidings.run("add", srv.url + "/api")
        assert r.code == 64 and "--items" in r.stderr, r

        r = tidings.run("add", srv.url + "/logo.png")
        assert r.code == 69 and "neither a feed, an HTML page nor JSON" in r.stderr, r

        # A selector the page provider refuses is a configuration error at the would-be file's line.
        r = tidings.run("add", "page", srv.url + "/", "--select", "css:p[[", "--name", "bad")
        assert r.code == 78 and f"{tidings.plugins}/bad.toml:" in r.stderr and "nothing written" in r.stderr, r

        r = tidings.run("add", "no-such-provider-or-address")
        assert r.code == 64, r

        tidings.write_plugin("taken.toml", 'provider = "feed"\nurl = "http://127.0.0.1:9/x.xml"\nenabled = false\n')
        r = tidings.run("add", srv.url + "/feed.xml", "--name", "taken")
        assert r.code == 64 and "exists already" in r.stderr, r

        # A mailbox needs a password: no terminal and no --password-file is a question unanswered.
        r = tidings.run("add", "imaps://me@127.0.0.1:9/INBOX", input="")
        assert r.code == 64 and "--password-file" in r.stderr, r
        assert plugin_files(tidings) == ["taken.toml"]

        # A broken configuration is reported, and nothing is added to it.
        tidings.write_plugin("broken.toml", 'provider = "feed"\nurl = 3\n')
        r = tidings.run("add", srv.url + "/feed.xml")
        assert r.code == 78 and "broken.toml:2" in r.stderr, r
        assert plugin_files(tidings) == ["broken.toml", "taken.toml"]


def test_a_mailbox_password_goes_to_a_file_of_mode_600_never_inline(tidings, tmp_path):
    pw = tmp_path / "pw"
    pw.write_text("correct-horse-battery\n")
    r = tidings.run("add", "imaps://me@127.0.0.1:9993/Lists", "--password-file", str(pw), "--disabled")
    assert r.code == 0, r
    path = tidings.plugins / "me-127.0.0.1.toml"
    text = path.read_text()
    assert "correct-horse-battery" not in text + r.stdout + r.stderr
    assert value_of(text, "password_file") == '"secrets/me-127.0.0.1.password"', text
    assert value_of(text, "url") == '"imaps://127.0.0.1:9993/Lists"' and value_of(text, "username") == '"me"'
    assert value_of(text, "enabled") == "false"
    secret = tidings.plugins / "secrets" / "me-127.0.0.1.password"
    assert secret.read_text() == "correct-horse-battery\n"
    assert_private_enough(secret, 0o600)
    assert_private_enough(path)
    assert stat.S_IMODE(os.stat(tidings.plugins / "secrets").st_mode) == 0o700
    c = tidings.run("config", "check")
    assert c.code == 0, c


def test_exec_and_certificate_from_words_and_a_daemon_is_asked_to_reload(tidings):
    script = tidings.root / "hello.sh"
    script.write_text('#!/bin/sh\necho \'{"key": "a", "title": "from exec"}\'\n')
    os.chmod(script, 0o700)
    d = tidings.start_daemon()
    wait_for(lambda: (tidings.state / "tidings.sock").exists(), what="the control socket")
    # The command follows `--`, so the common options come before it.
    r = Result(subprocess.run([binary(), "--config", str(tidings.config), "--state-dir", str(tidings.state), "add", "exec",
                               "--name", "hello", "--", str(script)], capture_output=True, text=True, env=tidings.env, timeout=60))
    assert r.code == 0, r
    # (Read as TOML: a long path puts the array on lines of its own.)
    assert tomllib.loads((tidings.plugins / "hello.toml").read_text())["command"] == [str(script)]
    assert "from exec" in r.stdout
    assert f"asked the running daemon (pid {d.pid}) to reload" in r.stdout, r
    wait_for(lambda: "reloaded configuration: 1 sources" in read_log(d), what="the daemon's reload")

    # A certificate by HOST:PORT: nothing listens, so the sample poll fails and nothing is written.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    r = tidings.run("add", f"127.0.0.1:{s.getsockname()[1]}", "--dry-run")
    assert r.code == 0 and value_of(r.stdout, "provider") == '"certificate"', r
    r = tidings.run("add", f"127.0.0.1:{s.getsockname()[1]}")
    assert r.code == 69, r
    s.close()
    assert plugin_files(tidings) == ["hello.toml"]


def test_help_and_bash_completion_know_add(tidings, tmp_path):
    r = subprocess.run([binary(), "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "add" in r.stdout.split("SUBCOMMANDS:")[1], r.stdout
    script = tmp_path / "tidings.bash"
    made = subprocess.run([binary(), "--generate-completion-script", "bash"], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    script.write_text(made.stdout)

    def complete(*words):
        line = " ".join(words)
        bash = f"""
            source /usr/share/bash-completion/bash_completion
            source {script}
            COMP_WORDS=({' '.join(f"'{w}'" for w in words)})
            COMP_CWORD={len(words) - 1}
            COMP_LINE='{line}'
            COMP_POINT=${{#COMP_LINE}}
            _tidings tidings '{words[-1]}' '{words[-2]}'
            printf 'offer:%s\\n' "${{COMPREPLY[@]}}"
        """
        p = subprocess.run(["bash", "-c", bash], capture_output=True, text=True,
                           env={"PATH": f"{os.path.dirname(binary())}:/usr/bin:/bin", "HOME": str(tmp_path)})
        assert p.returncode == 0, p.stderr
        return [l[6:] for l in p.stdout.splitlines() if l.startswith("offer:") and l != "offer:"]

    assert "add" in complete("tidings", "a")
    assert {"feed", "page", "github", "certificate", "imap", "exec"} <= set(complete("tidings", "add", ""))
    assert {"--pick", "--password-file"} <= set(complete("tidings", "add", "--p"))


def test_a_mailbox_password_is_asked_on_the_terminal_without_echo(tidings):
    import pty
    import select
    pid, fd = pty.fork()
    if pid == 0:  # the child: the pty is its controlling terminal
        os.execve(binary(), tidings.args("add", "imaps://me@127.0.0.1:9993/INBOX", "--disabled", "--name", "mail"), tidings.env)
    seen = b""

    def read_until(marker):
        nonlocal seen
        while marker not in seen:
            ready, _, _ = select.select([fd], [], [], 20)
            assert ready, seen
            try:
                chunk = os.read(fd, 1024)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        return seen

    assert b"password (not shown" in read_until(b"): ")
    os.write(fd, b"typed-on-the-tty\n")
    read_until(b"reload")
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, seen
    assert b"typed-on-the-tty" not in seen, "not echoed"
    assert (tidings.plugins / "secrets" / "mail.password").read_text() == "typed-on-the-tty\n"
    assert "typed-on-the-tty" not in (tidings.plugins / "mail.toml").read_text()


def test_json_becomes_http_json_when_told_where_the_items_are(tidings):
    with FakeServer(Site, {"pages": {"/api/builds": ('{"builds": [{"id": 1, "name": "one"}, {"id": 2, "name": "two"}]}',
                                                     "application/json")}}) as srv:
        r = add_then_check(tidings, f"{srv.url}/api/builds", "--items", "/builds", "--name", "builds")
        text = (tidings.plugins / "builds.toml").read_text()
        assert value_of(text, "provider") == '"http-json"' and value_of(text, "items") == '"/builds"', text
        assert "source builds: polled, 2 items" in r.stdout, r
        assert len(items_of(tidings, "builds")) == 2


def test_a_dry_run_for_a_mailbox_asks_nothing_and_shows_the_file_a_run_would_write(tidings):
    r = tidings.run("add", "imaps://me@127.0.0.1:9993/INBOX", "--dry-run", input="")
    assert r.code == 0, r
    assert value_of(r.stdout, "password_file") == '"secrets/me-127.0.0.1.password"', r.stdout
    assert value_of(r.stdout, "enabled") is None, "written enabled: a real run asks for the password first"
    assert "would also create" in r.stderr and plugin_files(tidings) == []
