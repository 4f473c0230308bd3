"""A real PostgreSQL server for end-to-end tests (DESIGN §11): Debian's binaries, a temp dir,
a free loopback port, password (SCRAM) authentication. Python standard library only; shared
by the e2e fixtures (conftest.py: `postgres`, `pg_db`), soak/soak.py and bench/bench.py.

    with PostgresServer() as pg:          # initdb + pg_ctl start (fsync off: tests only)
        db = pg.create_database()         # a fresh database owned by the role `tidings`
        db.url            -> "postgres://tidings@127.0.0.1:PORT/NAME?sslmode=disable"
        db.password_file  -> a 0600 file holding the role's password (generated)
        db.state_toml()   -> the `[state]` table for tidings.toml
        db.query("SELECT count(*) FROM event")  -> [("12",)]  (psql, as the superuser)

initdb refuses to run as root: as root, the server's files belong to an unprivileged user
(`nobody`) and initdb, pg_ctl and postgres run as that user (runuser). The superuser
(`postgres`) has its own generated password, used only by the tests' psql.
"""
from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

ROLE = "tidings"
SUPERUSER = "postgres"


def bin_dir() -> Path | None:
    """The newest /usr/lib/postgresql/N/bin holding initdb, or None."""
    found = [Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")]
    found.sort(key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    return found[-1] if found else None


def missing() -> str | None:
    """Why no server can be started here, or None."""
    if bin_dir() is None:
        return "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): `make test-deps` installs Debian's postgresql"
    if shutil.which("psql") is None:
        return "psql is not installed (Debian's postgresql-client, pulled in by postgresql)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Database:
    """One database on the server, owned by the role `tidings`."""

    def __init__(self, server: "PostgresServer", name: str):
        self.server = server
        self.name = name
        self.port = server.port
        self.password = server.password
        self.password_file = server.password_file
        self.url = f"postgres://{ROLE}@127.0.0.1:{server.port}/{name}?sslmode=disable"
        # Same URL without ?sslmode: the default on loopback must be `disable`.
        self.bare_url = f"postgres://{ROLE}@127.0.0.1:{server.port}/{name}"

    def state_toml(self, url: str | None = None, extra: str = "") -> str:
        """The `[state]` table (no indentation, for textwrap.dedent'ed configs: append it last
        or put it before other tables)."""
        return f'\n[state]\nurl = "{url or self.url}"\npassword_file = "{self.password_file}"\n{extra}\n'

    def query(self, sql: str) -> list[tuple]:
        return self.server.query(sql, self.name)

    def scalar(self, sql: str):
        rows = self.query(sql)
        return rows[0][0] if rows else None

    def tables(self) -> set:
        return {r[0] for r in self.query("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}

    def events(self) -> list[dict]:
        """The event table in order: id, source, kind, event (type), key, title, silenced_by."""
        rows = self.query("SELECT id, source, kind, type, key, payload::json->>'title', silenced_by FROM event ORDER BY seq")
        return [dict(zip(("id", "source", "kind", "event", "key", "title", "silenced_by"), r)) for r in rows]

    def queued(self) -> int | None:
        """Rows in the outbox (pending, retrying, dead); None before the schema exists."""
        if "delivery" not in self.tables():
            return None
        return int(self.scalar("SELECT count(*) FROM delivery"))

    def source_owners(self) -> dict:
        """source name -> pid of the instance holding its lease (unexpired), from the lease
        and instance tables."""
        rows = self.query("SELECT substr(l.name, 8), i.pid FROM lease l JOIN instance i ON i.id = l.owner "
                          "WHERE l.name LIKE 'source:%' AND l.expires_at > extract(epoch FROM clock_timestamp())")
        return {name: int(pid) for name, pid in rows}

    def drop(self):
        self.server.query(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)', "postgres")


class PostgresServer:
    def __init__(self, max_connections: int = 200):
        why = missing()
        if why:
            raise RuntimeError(why)
        self.bin = bin_dir()
        self.max_connections = max_connections
        # root/ belongs to whoever runs the tests (tidings refuses a password file below a
        # directory someone else owns); root/run/ (socket, log) and root/data/ to the server's
        # owner, who can traverse root/ (0711) but not list it.
        self.root = Path(tempfile.mkdtemp(prefix="tidings-e2e-pg-"))
        self.data = self.root / "data"
        self.sockets = self.root / "run"
        self.logfile = self.sockets / "postgres.log"
        self.port = 0
        self.password = "pg-" + secrets.token_urlsafe(24)        # the role tidings
        self.admin_password = "pg-admin-" + secrets.token_urlsafe(24)
        # The tests' copy, owned by whoever runs them: what tidings' password_file reads.
        self.password_file = self.root / "tidings.password"
        self.password_file.write_text(self.password + "\n")
        os.chmod(self.password_file, 0o600)
        self.user = None
        if os.geteuid() == 0:
            self.user = "nobody"
            pw = pwd.getpwnam(self.user)
            self.uid, self.gid = pw.pw_uid, pw.pw_gid
        self.count = 0
        self.started = False

    # -- processes run as the server's owner ----------------------------------------------
    def _as_owner(self, cmd: list) -> list:
        return ["runuser", "-u", self.user, "--", *cmd] if self.user else cmd

    def _run(self, cmd: list, timeout=120):
        p = subprocess.run(self._as_owner(cmd), capture_output=True, text=True, timeout=timeout,
                           cwd=self.sockets, env={**os.environ, "LC_ALL": "C"})
        if p.returncode != 0:
            log = self.logfile.read_text(errors="replace")[-3000:] if self.logfile.exists() else ""
            raise RuntimeError(f"{Path(cmd[0]).name} failed (exit {p.returncode}): {p.stdout[-2000:]}{p.stderr[-2000:]}\n{log}")
        return p

    def _chown(self, path: Path):
        if self.user:
            os.chown(path, self.uid, self.gid)

    def start(self):
        os.chmod(self.root, 0o711)
        for d in (self.sockets, self.data):
            d.mkdir(mode=0o700)
            self._chown(d)
        # The superuser's password for initdb, readable by the server's owner only; removed after.
        pwfile = self.sockets / "admin.pw"
        pwfile.write_text(self.admin_password + "\n")
        os.chmod(pwfile, 0o600)
        self._chown(pwfile)
        self._run([str(self.bin / "initdb"), "-D", str(self.data), "-U", SUPERUSER, f"--pwfile={pwfile}",
                   "--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-locale", "--no-sync"])
        pwfile.unlink()
        # A free port can be taken between free_port() and the server's bind: try a few.
        for attempt in range(5):
            self.port = free_port()
            opts = (f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 -c fsync=off "
                    f"-c synchronous_commit=off -c full_page_writes=off -c max_connections={self.max_connections} "
                    f"-c shared_buffers=32MB")
            p = subprocess.run(self._as_owner([str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.logfile),
                                               "-w", "-t", "60", "-o", opts, "start"]),
                               capture_output=True, text=True, cwd=self.sockets, env={**os.environ, "LC_ALL": "C"})
            if p.returncode == 0:
                break
            log = self.logfile.read_text(errors="replace") if self.logfile.exists() else ""
            if "Address already in use" not in log or attempt == 4:
                raise RuntimeError(f"pg_ctl start failed (exit {p.returncode}): {p.stdout}{p.stderr}\n{log[-3000:]}")
        self.started = True
        self.query(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{self.password}'", "postgres")
        return self

    def stop(self):
        if self.started:
            try:
                self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "-t", "30", "stop"], timeout=60)
            except (RuntimeError, subprocess.TimeoutExpired):
                self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"], timeout=30)
            self.started = False
        shutil.rmtree(self.root, ignore_errors=True)

    __enter__ = start

    def __exit__(self, *exc):
        self.stop()

    # -- SQL as the superuser ---------------------------------------------------------------
    def query(self, sql: str, database: str = "postgres") -> list[tuple]:
        """Runs `sql` with psql over TCP as the superuser; rows as tuples of strings (NULL: None)."""
        p = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-A", "-t", "-F", "\x1f", "-P", "null=<NULL>",
                            "-h", "127.0.0.1", "-p", str(self.port), "-U", SUPERUSER, "-d", database, "-c", sql],
                           capture_output=True, text=True, timeout=60,
                           env={**os.environ, "PGPASSWORD": self.admin_password, "PGCONNECT_TIMEOUT": "10"})
        if p.returncode != 0:
            raise RuntimeError(f"psql {sql[:200]!r} on {database}: exit {p.returncode}: {p.stderr.strip()}")
        return [tuple(None if c == "<NULL>" else c for c in line.split("\x1f"))
                for line in p.stdout.splitlines() if line != ""]

    def create_database(self, name: str | None = None) -> Database:
        self.count += 1
        name = name or f"t{os.getpid()}_{self.count}"
        self.query(f'CREATE DATABASE "{name}" OWNER {ROLE}', "postgres")
        return Database(self, name)

    def backend_pids(self) -> list[int]:
        """Pids of the server's processes (postmaster and its children), for CPU accounting."""
        pidfile = self.data / "postmaster.pid"
        try:
            master = int(pidfile.read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return []
        pids = [master]
        try:
            children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
            pids += [int(c) for c in children]
        except OSError:
            pass
        return pids

    def cpu_seconds(self) -> float:
        """utime + stime (own, plus reaped children's cutime + cstime) of the server's processes:
        the live ones now, plus what exited backends left in the postmaster's cumulative times."""
        tck = os.sysconf("SC_CLK_TCK")
        total = 0
        for pid in self.backend_pids():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
        return total / tck


def hook_and_api_toml(hook_url: str, api_url: str, sources: dict, state: str = "") -> str:
    """A tidings.toml for the state tests: a webhook sink `hook` at HOOK/hook and, for each
    name -> title template in `sources`, an http-json source polling API/items
    (fakes/json_api.py); then `state` (a `[state]` table or nothing)."""
    text = f'\n[sinks.hook]\ntype = "webhook"\nurl = "{hook_url}/hook"\ntimeout = "5s"\n'
    for name, title in sources.items():
        text += (f'\n[sources.{name}]\nprovider = "http-json"\nurl = "{api_url}/items"\nitems = "/items"\n'
                 f'key = "/id"\ntitle = "{title}"\ninterval = "1s"\njitter = 0.0\n')
    return text + state
