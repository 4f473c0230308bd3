"""Libraries loaded at first use (DESIGN §15, issue 31 item 7): libcurl only when a request is made, libxml2 only when a feed, page or
HTML mail is parsed, libnotify and GLib only for a desktop notification or the daemon's
system-bus watcher, libpq only for a PostgreSQL state. The dynamic loader says what it opened (LD_DEBUG=files, on stderr); a
library that is missing is a failed poll naming its Debian package, not a crash."""
import os
import re
import shutil
import subprocess

import pytest

from fakes.server import FakeServer
from feed import Feed, item
from fakes.json_api import JSONAPI
from fakes.webhook_receiver import WebhookReceiver, receiver_state
from postgres import free_port, hook_and_api_toml
from test_feed import FeedServer, atom, entry, feed_source

LAZY = re.compile(r"^lib(curl|xml2|notify|gio-2\.0|gobject-2\.0|glib-2\.0|gdk_pixbuf-2\.0|pq)\.so")
LD_DEBUG = {"LD_DEBUG": "files"}


def opened(result):
    """The shared objects the dynamic loader opened, by the name asked for."""
    return {os.path.basename(name) for name in re.findall(r"\bfile=(\S+) \[\d+\];", result.stderr)}


def test_version_and_config_check_open_none_of_them(tidings):
    with FakeServer(FeedServer, {"body": atom(entry(1))}) as srv:
        feed_source(tidings, srv.url)
        tidings.write_config("""
            [sinks.desktop]
            type = "desktop"
        """)
        for args in (["--version"], ["config", "check"], ["sources"]):
            r = tidings.run(*args, env=LD_DEBUG)
            assert r.code == 0, r
            names = opened(r)
            assert "libcrypto.so.3" in names, "the loader's report was read"
            assert not {n for n in names if LAZY.match(n)}, (args, sorted(names))


def test_a_feed_poll_opens_libcurl_and_libxml2_and_not_the_desktop_stack(tidings):
    with FakeServer(FeedServer, {"body": atom(entry(1), entry(2))}) as srv:
        feed_source(tidings, srv.url)
        r = tidings.check(env=LD_DEBUG)
        assert r.code == 0, r
        names = {n for n in opened(r) if LAZY.match(n)}
        assert names == {"libcurl.so.4", "libxml2.so.2"}, sorted(names)
        for lib in names:
            assert re.search(rf"file={re.escape(lib)} \[0\];\s+dynamically loaded by", r.stderr), f"{lib}: by dlopen, not DT_NEEDED"


def hidden(library):
    """A command prefix that runs its command with `library` unreadable as a library (/dev/null
    mounted over it in a private mount namespace); None where that cannot be done here."""
    path = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    found = re.search(rf"\s{re.escape(library)} \(.*x86-64.*\) => (\S+)", path) or re.search(rf"\s{re.escape(library)} .*=> (\S+)", path)
    if not found or not shutil.which("unshare"):
        return None
    target = os.path.realpath(found.group(1))
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind /dev/null '{target}'"], capture_output=True)
    if probe.returncode != 0:
        return None
    return ["unshare", "-m", "sh", "-c", f"mount --bind /dev/null '{target}' && exec \"$@\"", "sh"]


def run_hidden(prefix, t, *args):
    return subprocess.run(prefix + t.args(*args), capture_output=True, text=True, timeout=60, env=t.env)


def test_without_libxml2_a_feed_poll_fails_naming_the_package(tidings):
    prefix = hidden("libxml2.so.2")
    if prefix is None:
        pytest.skip("needs `unshare -m` and mount (root) to hide libxml2")
    with FakeServer(FeedServer, {"body": atom(entry(1))}) as srv:
        feed_source(tidings, srv.url)
        p = run_hidden(prefix, tidings, "check", "--json")
        assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
        assert "libxml2.so.2 could not be loaded" in p.stderr, p.stderr
        assert "install the Debian package libxml2" in p.stderr, p.stderr
        # The commands that do not parse still run.
        p = run_hidden(prefix, tidings, "config", "check")
        assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)


def test_without_libcurl_commands_without_requests_run_and_a_poll_fails_naming_the_package(tidings):
    prefix = hidden("libcurl.so.4")
    if prefix is None:
        pytest.skip("needs `unshare -m` and mount (root) to hide libcurl")
    with FakeServer(FeedServer, {"body": atom(entry(1))}) as srv:
        feed_source(tidings, srv.url)
        for args in (["--version"], ["config", "check"], ["sources"]):
            p = run_hidden(prefix, tidings, *args)
            assert p.returncode == 0, (args, p.returncode, p.stdout, p.stderr)
        p = run_hidden(prefix, tidings, "check", "--json")
        assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
        assert "libcurl.so.4 could not be loaded" in p.stderr, p.stderr
        assert "install the Debian package libcurl4" in p.stderr, p.stderr


def test_without_libnotify_a_desktop_delivery_fails_naming_the_package(tidings):
    prefix = hidden("libnotify.so.4")
    if prefix is None:
        pytest.skip("needs `unshare -m` and mount (root) to hide libnotify")
    Feed(tidings).set([item("a", "Disk full")])
    tidings.write_config("""
        [sinks.desktop]
        type = "desktop"
        timeout = "2s"
    """)
    p = run_hidden(prefix, tidings, "check", "--deliver")
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)  # a delivery failed; not a crash
    assert "desktop notifications unavailable: libnotify.so.4 could not be loaded" in p.stderr, p.stderr
    assert "install the Debian package libnotify4" in p.stderr, p.stderr


def postgres_config(t, pg_db, api, hook, url=None):
    state = pg_db.state_toml(url=url, extra='connect_timeout = "3s"') if url else pg_db.state_toml()
    t.write_config(hook_and_api_toml(hook.url, api.url, {"api": "{/name} is {/status}"}, state))


def test_a_postgresql_state_opens_libpq_by_dlopen(tidings, pg_db):
    with FakeServer(JSONAPI, {"items": []}) as api, FakeServer(WebhookReceiver, state=receiver_state()) as hook:
        postgres_config(tidings, pg_db, api, hook)
        r = tidings.run("sources", env=LD_DEBUG, timeout=60)
        assert r.code == 0, r
        assert "libpq.so.5" in opened(r), sorted(opened(r))
        assert re.search(r"file=libpq\.so\.5 \[0\];\s+dynamically loaded by", r.stderr), "libpq: by dlopen, not DT_NEEDED"


def test_without_libpq_a_postgresql_state_cannot_open_naming_the_package(tidings, pg_db):
    prefix = hidden("libpq.so.5")
    if prefix is None:
        pytest.skip("needs `unshare -m` and mount (root) to hide libpq")
    with FakeServer(JSONAPI, {"items": []}) as api, FakeServer(WebhookReceiver, state=receiver_state()) as hook:
        # What an unreachable server exits with: a missing libpq is the same failure to open the state.
        port = free_port()  # nothing listens there
        postgres_config(tidings, pg_db, api, hook, url=f"postgres://tidings@127.0.0.1:{port}/tidings?sslmode=disable")
        unreachable = tidings.run("check", timeout=60)
        assert unreachable.code != 0, unreachable
        postgres_config(tidings, pg_db, api, hook)
        p = run_hidden(prefix, tidings, "check")
        assert p.returncode == unreachable.code, (p.returncode, unreachable.code, p.stdout, p.stderr)
        assert "libpq.so.5 could not be loaded" in p.stderr, p.stderr
        assert "install the Debian package libpq5" in p.stderr, p.stderr
        assert pg_db.password not in p.stdout + p.stderr
        # An SQLite state (no [state] url) does not need it.
        tidings.write_config(hook_and_api_toml(hook.url, api.url, {"api": "{/name} is {/status}"}))
        for args in (["--version"], ["config", "check"], ["sources"]):
            p = run_hidden(prefix, tidings, *args)
            assert p.returncode == 0, (args, p.returncode, p.stdout, p.stderr)
