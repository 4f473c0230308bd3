"""Libraries loaded at first use (DESIGN §15, issue 31 item 7): libcurl only when a request is made, libxml2 only when a feed, page or
HTML mail is parsed, libnotify and GLib only for a desktop notification or the daemon's
system-bus watcher, libpq only for a PostgreSQL state, libsqlite3 only for an SQLite state,
libyaml only for `import urlwatch`, libcrypto only to sign a webhook or for the status page's
CSRF tokens and [http.auth]. The dynamic loader says what it opened (LD_DEBUG=files, on stderr); a
library that is missing is a failed poll, command or config line naming its Debian package, not a crash."""
import os
import re
import shutil
import subprocess
import urllib.request

import pytest

from conftest import read_log, wait_for
from fakes.server import FakeServer
from feed import Feed, item
from fakes.json_api import JSONAPI
from fakes.webhook_receiver import WebhookReceiver, receiver_state
from postgres import free_port, hook_and_api_toml
from test_feed import FeedServer, atom, entry, feed_source

LAZY = re.compile(r"^lib(curl|xml2|notify|gio-2\.0|gobject-2\.0|glib-2\.0|gdk_pixbuf-2\.0|pq|sqlite3|yaml-0|crypto|ssl)\.so")
LD_DEBUG = {"LD_DEBUG": "files"}
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # base64 of 24 bytes: a key, not a credential anywhere


def opened(result):
    """The shared objects the dynamic loader opened, by the name asked for."""
    return opened_in(result.stderr)


def opened_in(text):
    return {os.path.basename(name) for name in re.findall(r"\bfile=(\S+) \[\d+\];", text)}


def by_dlopen(text, lib):
    return re.search(rf"file={re.escape(lib)} \[0\];\s+dynamically loaded by", text)


def test_version_and_config_check_open_none_of_them(tidings):
    with FakeServer(FeedServer, {"body": atom(entry(1))}) as srv:
        feed_source(tidings, srv.url)
        tidings.write_config("""
            [sinks.desktop]
            type = "desktop"
            [sinks.hook]
            type = "webhook"
            url = "http://127.0.0.1:9/hook"
        """)
        for args in (["--version"], ["config", "check"], ["sources"]):
            r = tidings.run(*args, env=LD_DEBUG)
            assert r.code == 0, r
            names = opened(r)
            assert "libc.so.6" in names, "the loader's report was read"
            lazy = {n for n in names if LAZY.match(n)}
            # `sources` reads the state: SQLite, and nothing else.
            assert lazy == ({"libsqlite3.so.0"} if args == ["sources"] else set()), (args, sorted(names))
            if lazy:
                assert by_dlopen(r.stderr, "libsqlite3.so.0"), "libsqlite3: by dlopen, not DT_NEEDED"


def test_a_feed_poll_opens_libcurl_and_libxml2_and_not_the_desktop_stack(tidings):
    with FakeServer(FeedServer, {"body": atom(entry(1), entry(2))}) as srv:
        feed_source(tidings, srv.url)
        r = tidings.check(env=LD_DEBUG)
        assert r.code == 0, r
        # libcurl brings libssl and libcrypto with it (DT_NEEDED of libcurl, not of tidings).
        names = {n for n in opened(r) if LAZY.match(n)} - {"libssl.so.3", "libcrypto.so.3"}
        assert names == {"libcurl.so.4", "libxml2.so.2", "libsqlite3.so.0"}, sorted(names)
        for lib in names:
            assert by_dlopen(r.stderr, lib), f"{lib}: by dlopen, not DT_NEEDED"


def urlwatch_file(tmp_path):
    urls = tmp_path / "urls.yaml"
    urls.write_text("url: http://127.0.0.1:9/a\n---\nurl: http://127.0.0.1:9/b\n")
    return urls


def test_import_urlwatch_opens_libyaml_and_opml_does_not(tidings, tmp_path):
    r = tidings.run("import", "urlwatch", str(urlwatch_file(tmp_path)), "--dry-run", env=LD_DEBUG)
    assert r.code == 0 and "2 would be created" in r.stdout, r
    assert by_dlopen(r.stderr, "libyaml-0.so.2"), sorted(opened(r))
    opml = tmp_path / "feeds.opml"
    opml.write_text('<opml version="2.0"><body><outline type="rss" text="a" xmlUrl="http://127.0.0.1:9/a.xml"/></body></opml>')
    r = tidings.run("import", "opml", str(opml), "--dry-run", env=LD_DEBUG)
    assert r.code == 0, r
    assert "libyaml-0.so.2" not in opened(r), sorted(opened(r))


def signed_webhook(t):
    secret = t.write_secret("hook.secret", SECRET)
    t.write_config(f"""
        [sinks.hook]
        type = "webhook"
        url = "http://127.0.0.1:9/hook"
        secret_file = "{secret}"
    """)


def test_a_webhook_secret_opens_libcrypto(tidings):
    signed_webhook(tidings)
    r = tidings.run("config", "check", env=LD_DEBUG)
    assert r.code == 0, r
    assert by_dlopen(r.stderr, "libcrypto.so.3"), sorted(opened(r))


def test_the_status_page_opens_libcrypto_at_its_first_form_not_at_start(tidings):
    port = free_port()
    tidings.write_config(f"""
        [http]
        listen = "127.0.0.1:{port}"
    """)
    d = tidings.start_daemon(env=LD_DEBUG)

    def get(path):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
                return r.read().decode()
        except OSError:
            return None
    wait_for(lambda: get("/-/ready") is not None, timeout=30, what="the daemon to be ready on [http]")
    assert d.poll() is None, read_log(d)
    assert "libcrypto.so.3" not in opened_in(read_log(d)), "not before a page needs it"
    page = get("/silences")
    assert page and 'name="csrf"' in page, page
    wait_for(lambda: by_dlopen(read_log(d), "libcrypto.so.3"), timeout=10, what="libcrypto opened by the page")


def test_a_daemon_without_a_system_bus_socket_does_not_load_gio(tidings, tmp_path):
    # The fixture's DBUS_SYSTEM_BUS_ADDRESS names a path where no socket is.
    Feed(tidings).set([item("a", "Disk full")])
    d = tidings.start_daemon(env=LD_DEBUG)
    wait_for(lambda: "no system bus (" in read_log(d), timeout=30, what="the watcher to give up")
    wait_for(lambda: "scheduled" in read_log(d), timeout=30, what="the scheduler to start")
    assert d.poll() is None, read_log(d)
    assert "No such file or directory" in read_log(d), read_log(d)
    assert not {n for n in opened_in(read_log(d)) if n.startswith(("libgio", "libglib", "libgobject"))}, sorted(opened_in(read_log(d)))


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


def test_without_libsqlite3_a_state_cannot_open_naming_the_package(tidings):
    prefix = hidden("libsqlite3.so.0")
    if prefix is None:
        pytest.skip("needs `unshare -m` and mount (root) to hide libsqlite3")
    Feed(tidings).set([item("a", "Disk full")])
    for args in (["--version"], ["config", "check"]):
        p = run_hidden(prefix, tidings, *args)
        assert p.returncode == 0, (args, p.returncode, p.stdout, p.stderr)
    p = run_hidden(prefix, tidings, "check")
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)  # Exit.failure, as for an unwritable state directory
    assert "cannot open the state database" in p.stderr and "libsqlite3.so.0 could not be loaded" in p.stderr, p.stderr
    assert "install the Debian package libsqlite3-0" in p.stderr, p.stderr


def test_without_libyaml_import_urlwatch_fails_naming_the_package(tidings, tmp_path):
    prefix = hidden("libyaml-0.so.2")
    if prefix is None:
        pytest.skip("needs `unshare -m` and mount (root) to hide libyaml")
    p = run_hidden(prefix, tidings, "import", "urlwatch", str(urlwatch_file(tmp_path)))
    assert p.returncode == 69, (p.returncode, p.stdout, p.stderr)
    assert "libyaml-0.so.2 could not be loaded" in p.stderr and "install the Debian package libyaml-0-2" in p.stderr, p.stderr
    assert os.listdir(tidings.plugins) == [], "nothing written"
    p = run_hidden(prefix, tidings, "config", "check")
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)


def test_without_libcrypto_a_signed_webhook_is_a_config_error_naming_the_package(tidings):
    prefix = hidden("libcrypto.so.3")
    if prefix is None:
        pytest.skip("needs `unshare -m` and mount (root) to hide libcrypto")
    tidings.write_config("""
        [sinks.hook]
        type = "webhook"
        url = "http://127.0.0.1:9/hook"
    """)
    for args in (["--version"], ["config", "check"], ["sources"]):
        p = run_hidden(prefix, tidings, *args)
        assert p.returncode == 0, (args, p.returncode, p.stdout, p.stderr)
    signed_webhook(tidings)
    p = run_hidden(prefix, tidings, "config", "check")
    assert p.returncode == 78, (p.returncode, p.stdout, p.stderr)
    assert re.search(rf"{re.escape(str(tidings.config))}:\d+", p.stdout + p.stderr), (p.stdout, p.stderr)
    assert "libcrypto.so.3 could not be loaded" in p.stdout + p.stderr, (p.stdout, p.stderr)
    assert "install the Debian package libssl3" in p.stdout + p.stderr, (p.stdout, p.stderr)
