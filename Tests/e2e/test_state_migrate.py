"""`tidings state migrate --to URL`: a SQLite state copied into a real PostgreSQL (Debian's
postgresql package, started here with initdb and pg_ctl in a temp dir on a loopback port),
then used as the state: history is the same, and the next poll continues from it."""
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile

import pytest

from fakes.json_api import JSONAPI
from fakes.server import FakeServer


def _bin():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if not found:
        pytest.skip("no PostgreSQL server binaries (make test-deps installs postgresql)")
    return os.path.dirname(found[-1])


@pytest.fixture
def postgres():
    """A PostgreSQL with SCRAM auth: (port, password)."""
    bindir = _bin()
    # As root, initdb and postgres run as nobody, who must be able to reach the directory.
    as_user = ["runuser", "-u", "nobody", "--"] if os.geteuid() == 0 else []
    d = tempfile.mkdtemp(prefix="tidings-e2e-pg-", dir="/tmp")
    password = os.urandom(12).hex()
    with open(f"{d}/pw", "w") as f:
        f.write(password)
    if as_user:
        nobody = pwd.getpwnam("nobody")
        for p in (d, f"{d}/pw"):
            os.chown(p, nobody.pw_uid, nobody.pw_gid)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    run = lambda *a: subprocess.run([*as_user, *a], check=True, capture_output=True, stdin=subprocess.DEVNULL)
    try:
        run(f"{bindir}/initdb", "-D", f"{d}/data", "-U", "tidings", "-A", "scram-sha-256", f"--pwfile={d}/pw",
            "-E", "UTF8", "--locale=C", "--no-sync")
        run(f"{bindir}/pg_ctl", "-D", f"{d}/data", "-l", f"{d}/log", "-w", "-o",
            f"-p {port} -k {d} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
        yield port, password
    finally:
        subprocess.run([*as_user, f"{bindir}/pg_ctl", "-D", f"{d}/data", "-m", "immediate", "-w", "stop"],
                       capture_output=True, stdin=subprocess.DEVNULL)
        shutil.rmtree(d, ignore_errors=True)


def api_source(t, url):
    t.write_plugin("api.toml", f"""
        provider = "http-json"
        url = "{url}/items"
        items = "/items"
        key = "/id"
        title = "{{/name}} is {{/status}}"
        timeout = "2s"
    """)


def test_migrate_copies_once_and_the_state_goes_on_in_postgres(tidings, postgres):
    port, password = postgres
    url = f"postgres://tidings@127.0.0.1:{port}/postgres"
    secret = tidings.write_secret("pg", password)
    with FakeServer(JSONAPI, {"items": [{"id": 1, "name": "db1", "status": "up"},
                                        {"id": 2, "name": "db2", "status": "up"}]}) as api:
        api_source(tidings, api.url)
        assert tidings.check().code == 0
        api.state["items"] = [{"id": 1, "name": "db1", "status": "down"}, {"id": 3, "name": "db3", "status": "up"}]
        r = tidings.check()
        assert r.code == 1, r
        before = tidings.run("history", "--json")
        assert before.code == 0, before
        assert len(before.events) == 3

        # The password never on the command line; a wrong one fails without showing it.
        r = tidings.run("state", "migrate", "--to", url, env={"PGPASSWORD": "not-" + password})
        assert r.code == 2, r
        assert "password authentication failed" in r.stderr and password not in r.stderr + r.stdout

        r = tidings.run("state", "migrate", "--to", url, "--password-file", str(secret))
        assert r.code == 0, r
        assert "source_state: 1 copied, 0 already there" in r.stdout
        assert "item: 3 copied, 0 already there" in r.stdout
        assert "event: 3 copied, 0 already there" in r.stdout
        r = tidings.run("state", "migrate", "--to", url, "--password-file", str(secret))
        assert r.code == 0, r
        assert "event: 0 copied, 3 already there" in r.stdout
        assert "nothing to copy" in r.stdout

        # The same state, now in PostgreSQL.
        tidings.write_config(f"""
            [state]
            url = "{url}"
            password_file = "{secret}"
        """)
        after = tidings.run("history", "--json")
        assert after.code == 0, after
        assert sorted(e["id"] for e in after.events) == sorted(e["id"] for e in before.events)

        # The next poll continues from the copied items: no baseline, one change.
        api.state["items"] = [{"id": 1, "name": "db1", "status": "up"}, {"id": 3, "name": "db3", "status": "up"}]
        r = tidings.check()
        assert r.code == 1, r
        assert [(e["event"], e["key"]) for e in r.events] == [("changed", "1")]
        assert "baseline" not in r.stderr
