"""Every command on a PostgreSQL state (DESIGN §11): `[state] url` + `password_file` make
`check`, `sources`, `history`, `items`, `outbox`, `silence` and `state forget` use the
database (no SQLite file appears); the password is never shown; a wrong password or an
unreachable server is a clear error naming the URL; a bad `[state]` is FILE:LINE."""
from __future__ import annotations

import re
import signal
import socket
import struct
import subprocess
import threading
import time

from conftest import read_log, wait_for
from fakes.json_api import JSONAPI
from fakes.server import FakeServer
from fakes.webhook_receiver import WebhookReceiver, receiver_state
from postgres import free_port, hook_and_api_toml

# Distinctive, so that a grep over every output finds it if it leaks anywhere.
WRONG = "Wr0ng-pg-Passw0rd-7c1e9b"


def configure(t, pg_db, api, hook, state=None):
    t.write_config(hook_and_api_toml(hook.url, api.url, {"api": "{/name} is {/status}"},
                                     state if state is not None else pg_db.state_toml()))


def src_owner(run):
    return run("sources", "--json").events[0].get("owner") or ""


def test_every_command_works_on_postgres_and_the_password_never_shows(tidings, pg_db):
    outputs = []

    def run(*args, code=0):
        r = tidings.run(*args)
        outputs.append(r.stdout + r.stderr)
        assert code is None or r.code == code, r
        return r

    with FakeServer(JSONAPI, {"items": [{"id": 1, "name": "db1", "status": "up"},
                                        {"id": 2, "name": "db2", "status": "up"}]}) as api, \
            FakeServer(WebhookReceiver, state=receiver_state(script=[503])) as hook:
        configure(tidings, pg_db, api, hook)
        assert "OK: 1 source" in run("config", "check").stdout

        # check: the baseline goes to PostgreSQL, not to a SQLite file in the state dir.
        r = run("check", "--json")
        assert "baseline: stored 2 existing items" in r.stderr
        assert not (tidings.state / "tidings.sqlite").exists(), "a SQLite state was created beside [state] url"
        assert {"event", "delivery", "item", "source_state", "lease", "instance"} <= pg_db.tables()
        assert pg_db.scalar("SELECT count(*) FROM item WHERE source = 'api'") == "2"

        # check --deliver: the receiver answers 503, the delivery stays in the outbox.
        api.state["items"] = [{"id": 1, "name": "db1", "status": "down"}, {"id": 3, "name": "db3", "status": "up"}]
        r = run("check", "--deliver", code=2)
        assert "HTTP 503" in r.stderr, r
        stored = {(e["event"], e["key"]): e["id"] for e in pg_db.events()}
        assert set(stored) == {("changed", "1"), ("new", "3"), ("removed", "2")}, stored
        rows = run("outbox", "--json").events
        assert {x["event_id"] for x in rows} == set(stored.values()), rows
        assert "db1 is down" in run("outbox").stdout
        assert pg_db.scalar("SELECT count(*) FROM delivery") == str(len(stored))

        # Later checks deliver what is queued (once its retry is due): same ids, outbox empty.
        wait_for(lambda: run("check", "--deliver", code=None) and run("outbox", "--json").events == [],
                 timeout=40, interval=1, what="the queued deliveries sent by a later check --deliver")
        assert sorted(e["id"] for e in hook.state["accepted"]) == sorted(stored.values())
        assert run("outbox", "--json").events == []
        assert pg_db.scalar("SELECT count(*) FROM delivery") == "0"

        # history, items, sources read PostgreSQL.
        hist = run("history", "--json").events
        assert sorted(e["id"] for e in hist) == sorted(stored.values())
        assert "db3 is up" in run("history").stdout
        items = run("items", "api", "--json").events
        assert sorted((i["key"], i["title"]) for i in items) == [("1", "db1 is down"), ("3", "db3 is up")]
        [src] = run("sources", "--json").events
        assert src["name"] == "api" and "owner" in src and src["owner"] is None, src
        assert "no instance polls it now" in run("sources").stdout

        # silence add / list.
        sid = run("silence", "add", "source=api", "--for", "1h", "--comment", "on postgres").stdout.strip()
        listed = run("silence", "list", "--json").events
        assert [s["id"] for s in listed] == [sid], listed
        assert "on postgres" in run("silence", "list").stdout
        api.state["items"] = [{"id": 3, "name": "db3", "status": "up"}]
        run("check", "--deliver", code=None)
        [removed] = [e for e in pg_db.events() if e["key"] == "1" and e["event"] == "removed"]
        assert removed["silenced_by"] == sid, removed
        assert sorted(e["id"] for e in hook.state["accepted"]) == sorted(stored.values()), "silenced: not delivered"

        # A daemon on the same state: `sources` names it as the owner ("HOST:PID").
        d = tidings.start_daemon()
        wait_for(lambda: (run("sources", "--json").events[0].get("owner") or "").endswith(f":{d.pid}"), timeout=30,
                 what="the daemon shown as the source's owner")
        assert f"polled by {src_owner(run)}" in run("sources").stdout and src_owner(run).endswith(f":{d.pid}")
        d.send_signal(signal.SIGTERM)
        assert d.wait(timeout=30) == 0, read_log(d)
        outputs.append(read_log(d))
        assert run("sources", "--json").events[0]["owner"] is None, "a clean stop releases the lease"

        # state forget: the next poll is a baseline again.
        held = int(pg_db.scalar("SELECT count(*) FROM item WHERE source = 'api'"))
        assert held > 0 and f"forgot {held} item" in run("state", "forget", "api").stdout
        assert pg_db.scalar("SELECT count(*) FROM item WHERE source = 'api'") == "0"
        api.state["items"].append({"id": 4, "name": "db4", "status": "up"})
        r = run("check", "--json")
        assert r.stdout == "" and "baseline" in r.stderr, r

        # Nothing ever showed the password: not stdout, stderr, the daemon's log, config check.
        run("config", "check", "-v", code=None)
        leaked = [o for o in outputs if pg_db.password in o]
        assert not leaked, f"the PostgreSQL password appears in {len(leaked)} outputs: {leaked[0][:300]}"


def test_wrong_password_is_a_clear_error_without_the_password(tidings, pg_db):
    with FakeServer(JSONAPI, {"items": []}) as api, FakeServer(WebhookReceiver, state=receiver_state()) as hook:
        bad = tidings.write_secret("pg.password", WRONG)
        configure(tidings, pg_db, api, hook, state=f'\n[state]\nurl = "{pg_db.url}"\npassword_file = "{bad}"\n')
        where = f"127.0.0.1:{pg_db.port}/{pg_db.name}"
        for args in (["check"], ["sources"], ["history"], ["outbox"]):
            r = tidings.run(*args, timeout=60)
            assert r.code != 0, r
            assert where in r.stderr, f"{args}: the error does not name the database: {r.stderr}"
            assert "password" in r.stderr.lower() or "authentication" in r.stderr.lower(), r.stderr
            assert WRONG not in r.stdout + r.stderr and pg_db.password not in r.stdout + r.stderr

        # The daemon: the same error in its log (whether it exits or waits for the database).
        d = tidings.start_daemon()
        try:
            code = d.wait(timeout=20)
        except subprocess.TimeoutExpired:
            code = None
            d.send_signal(signal.SIGTERM)
            d.wait(timeout=30)
        log = read_log(d)
        assert code != 0, f"the daemon exited 0 with a wrong password: {log[-2000:]}"
        assert where in log and WRONG not in log, log[-2000:]

        # A password inline in the URL is redacted the same way.
        configure(tidings, pg_db, api, hook, state=f'\n[state]\nurl = "postgres://tidings:{WRONG}@{where}?sslmode=disable"\n')
        r = tidings.run("check")
        assert r.code != 0 and where in r.stderr, r
        assert WRONG not in r.stdout + r.stderr, r.stderr


def test_unreachable_server_is_a_clear_error(tidings, pg_db):
    with FakeServer(JSONAPI, {"items": []}) as api, FakeServer(WebhookReceiver, state=receiver_state()) as hook:
        port = free_port()  # nothing listens there
        url = f"postgres://tidings@127.0.0.1:{port}/tidings?sslmode=disable"
        configure(tidings, pg_db, api, hook, state=pg_db.state_toml(url=url, extra='connect_timeout = "3s"'))
        r = tidings.run("check", timeout=60)
        assert r.code != 0, r
        assert f"127.0.0.1:{port}" in r.stderr, r.stderr
        assert pg_db.password not in r.stdout + r.stderr


class HostileServer:
    """A "PostgreSQL server" on loopback that accepts connections and then either says nothing
    (`silent`: hung, or a network dropping packets) or refuses the startup with a FATAL error
    whose message carries terminal escapes (`escapes`)."""

    MESSAGE = "no such role \x1b]0;owned\x07\x1b[2J\x1b[31mred\u202e"

    def __init__(self, mode, message=None):
        self.mode = mode
        self.message = message or self.MESSAGE
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.held = []
        self.accepted = 0
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            if self.mode == "silent":
                self.held.append(c)
                continue
            try:
                c.settimeout(5)
                n = struct.unpack("!I", c.recv(4, socket.MSG_WAITALL))[0]
                c.recv(n - 4, socket.MSG_WAITALL)  # the StartupMessage (sslmode=disable: no SSLRequest first)
                fields = b"SFATAL\0VFATAL\0C28000\0M" + self.message.encode() + b"\0\0"
                c.sendall(b"E" + struct.pack("!I", 4 + len(fields)) + fields)
            except OSError:
                pass
            finally:
                c.close()

    def close(self):
        self.sock.close()
        for c in self.held:
            c.close()


def test_a_server_that_says_nothing_or_sends_escapes_is_a_clear_error(tidings, pg_db):
    """Hostile input from the database's side: a server that accepts and then says nothing is
    a timeout within `connect_timeout` (set-up and authentication included), not a hang; a
    server error carrying terminal escapes is shown escaped."""
    with FakeServer(JSONAPI, {"items": []}) as api, FakeServer(WebhookReceiver, state=receiver_state()) as hook:
        silent = HostileServer("silent")
        try:
            url = f"postgres://tidings@127.0.0.1:{silent.port}/tidings?sslmode=disable"
            configure(tidings, pg_db, api, hook, state=pg_db.state_toml(url=url, extra='connect_timeout = "2s"'))
            t0 = time.monotonic()
            r = tidings.run("check", timeout=60)
            took = time.monotonic() - t0
            assert r.code != 0, r
            assert silent.accepted >= 1, "the client never connected"
            # libpq's connect_timeout bounds the whole set-up ("no answer within 2 s").
            assert f"127.0.0.1:{silent.port}" in r.stderr and re.search(r"no answer within 2 s", r.stderr), r.stderr
            assert took < 30, f"`check` took {took:.1f} s against a silent server (connect_timeout 2 s)"
        finally:
            silent.close()

        evil = HostileServer("escapes")
        try:
            url = f"postgres://tidings@127.0.0.1:{evil.port}/tidings?sslmode=disable"
            configure(tidings, pg_db, api, hook, state=pg_db.state_toml(url=url, extra='connect_timeout = "5s"'))
            for args in (["check"], ["sources"]):
                r = tidings.run(*args, timeout=60)
                assert r.code != 0, r
                assert "no such role" in r.stderr, r.stderr
                for raw in ("\x1b", "\x07", "\u202e"):
                    assert raw not in r.stdout + r.stderr, f"{args}: a raw {raw!r} from the server reached the terminal: {r.stderr!r}"
                assert "\\u{1B}" in r.stderr, r.stderr
                assert pg_db.password not in r.stdout + r.stderr
        finally:
            evil.close()


def test_a_100_kb_server_error_is_cut(tidings, pg_db):
    """A server's error is remote text: shown cut, on one line, like every other (issue 20,
    item 15: a 100 KB message was copied whole to stderr). 20 KB here: libpq reads no error
    message over 30,000 bytes during the start-up at all (its MAX_ERRLEN)."""
    with FakeServer(JSONAPI, {"items": []}) as api, FakeServer(WebhookReceiver, state=receiver_state()) as hook:
        evil = HostileServer("escapes", message="no such role " + "x" * 20_000 + " END")
        try:
            url = f"postgres://tidings@127.0.0.1:{evil.port}/tidings?sslmode=disable"
            configure(tidings, pg_db, api, hook, state=pg_db.state_toml(url=url, extra='connect_timeout = "5s"'))
            r = tidings.run("check", timeout=60)
            assert r.code != 0, r
            assert "no such role xxx" in r.stderr and "END" not in r.stderr, r.stderr[:500]
            assert len(r.stderr) < 4000, f"{len(r.stderr)} bytes on stderr"
        finally:
            evil.close()


def test_sslmode_prefer_and_allow_are_refused_saying_why_and_nothing_else_is_reported(tidings, pg_db):
    """A refused sslmode is one clear error at its line; the documented keys after it are
    still read (issue 20, item 15: "unknown key 'connect_timeout'" followed), and several
    mistakes in [state] are all reported."""
    def state_errors(sslmode, rest):
        """config check on a [state] table: url, password_file, sslmode (line 5), then `rest`."""
        tidings.write_config(f"""
            [state]
            url = "{pg_db.url.split('?')[0]}"
            password_file = "{pg_db.password_file}"
            sslmode = "{sslmode}"
            """ + rest)
        r = tidings.run("config", "check")
        assert r.code == 78, r
        assert "unknown key" not in r.stderr
        return [l.removeprefix("tidings: ") for l in r.stderr.splitlines() if str(tidings.config) in l and "warning:" not in l]

    for mode in ("prefer", "allow"):
        errors = state_errors(mode, 'ca_file = "/etc/ssl/certs/ca-certificates.crt"\npool_size = 2\nconnect_timeout = "5s"\n')
        assert len(errors) == 1, errors
        assert f"{tidings.config}:5:" in errors[0] and f'"{mode}" is not offered' in errors[0] and "plain text" in errors[0], errors
    errors = state_errors("prefer", 'pool_size = 0\nconnect_timeout = "soon"\n')
    for line, key in [(5, "sslmode"), (6, "pool_size"), (7, "connect_timeout")]:
        assert any(l.startswith(f"{tidings.config}:{line}:") and key in l for l in errors), (key, errors)


def test_config_check_names_a_bad_state_table_by_file_and_line(tidings, pg_db):
    tidings.write_config(f"""
        [sinks.console]
        type = "stdout"

        [state]
        url = "{pg_db.url.split('?')[0]}"
        password_file = "{pg_db.password_file}"
        sslmode = "prefer"
        """)
    r = tidings.run("config", "check")
    assert r.code == 78, r
    assert f"{tidings.config}:8:" in r.stderr and "sslmode" in r.stderr and "prefer" in r.stderr, r.stderr
    assert pg_db.password not in r.stdout + r.stderr

    tidings.write_config(f"""
        [state]
        password_file = "{pg_db.password_file}"
        """)
    r = tidings.run("config", "check")
    assert r.code == 78 and f"{tidings.config}:3:" in r.stderr and "needs 'url'" in r.stderr, r

    tidings.write_config("""
        [state]
        url = "mysql://tidings@127.0.0.1/tidings"
        """)
    r = tidings.run("config", "check")
    assert r.code == 78 and f"{tidings.config}:3:" in r.stderr and "postgres://" in r.stderr, r


def test_the_fixture_is_a_real_server_with_password_authentication(postgres, pg_db):
    """The fixture itself (Tests/e2e/postgres.py): SCRAM authentication over TCP on loopback,
    a wrong password refused, the password file private, each test's database empty."""
    import os
    import stat
    assert pg_db.tables() == set()
    assert stat.S_IMODE(os.stat(pg_db.password_file).st_mode) == 0o600
    assert postgres.query("SHOW password_encryption") == [("scram-sha-256",)]
    assert postgres.query("SHOW listen_addresses") == [("127.0.0.1",)]

    def login(password):
        return subprocess.run(["psql", "-X", "-At", "-h", "127.0.0.1", "-p", str(pg_db.port), "-U", "tidings", "-d", pg_db.name,
                               "-c", "CREATE TABLE probe(a int); SELECT current_user"],
                              capture_output=True, text=True, env={**os.environ, "PGPASSWORD": password}, timeout=30)
    assert "password authentication failed" in login(WRONG).stderr
    ok = login(pg_db.password)
    assert ok.returncode == 0 and ok.stdout.strip().splitlines()[-1] == "tidings", ok.stderr
    assert pg_db.tables() == {"probe"}


def test_the_url_is_libpqs_options_and_service_files_work_as_in_psql(tidings, pg_db, tmp_path):
    """`[state] url` goes to libpq as it is (issue 31 item 4): `options` reaches the server (a
    read-only default makes the first write fail with the server's SQLSTATE 25006), and a
    pg_service.conf service supplies host, port and database as it does for psql."""
    with FakeServer(JSONAPI, {"items": [{"id": 1, "name": "db1", "status": "up"}]}) as api, \
            FakeServer(WebhookReceiver, state=receiver_state()) as hook:
        # A parameter libpq does not know: libpq's words, at the config line of `url`.
        configure(tidings, pg_db, api, hook, state=pg_db.state_toml(url=pg_db.url + "&application_nam=x"))
        r = tidings.run("check")
        assert r.code != 0 and 'invalid URI query parameter: "application_nam"' in r.stderr, r
        assert re.search(rf"{re.escape(str(tidings.config))}:\d+", r.stderr), r.stderr

        read_only = pg_db.url + "&options=-c%20default_transaction_read_only%3Don"
        configure(tidings, pg_db, api, hook, state=pg_db.state_toml(url=read_only))
        r = tidings.run("check")
        assert r.code != 0 and "25006" in r.stderr and "read-only transaction" in r.stderr, r
        assert pg_db.password not in r.stdout + r.stderr

        service = tmp_path / "pg_service.conf"
        service.write_text(f"[tidings_e2e]\nhost=127.0.0.1\nport={pg_db.port}\ndbname={pg_db.name}\nsslmode=disable\n")
        env = {"PGSERVICEFILE": str(service)}
        # The URL names no host, so tidings cannot tell it is loopback: sslmode is verify-full
        # (the service's own sslmode does not lower it), and this server has no TLS.
        configure(tidings, pg_db, api, hook, state=pg_db.state_toml(url="postgres://tidings@/?service=tidings_e2e"))
        r = tidings.run("check", env=env)
        assert r.code != 0 and "does not offer TLS" in r.stderr, r
        configure(tidings, pg_db, api, hook, state=pg_db.state_toml(url="postgres://tidings@/?service=tidings_e2e&sslmode=disable"))
        r = tidings.run("check", env=env)
        assert r.code == 0, r
        assert pg_db.scalar("SELECT count(*) FROM item WHERE source = 'api'") == "1"
