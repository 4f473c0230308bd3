"""Shared fixtures for the end-to-end suite: they run the real `tidings` binary.

- `tidings`: a `Tidings` runner bound to a fresh config dir, plugins.d and state dir.
- The binary is `$TIDINGS_BIN`, else `.build/debug/tidings` (built by `make test`).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))


def binary() -> str:
    b = os.environ.get("TIDINGS_BIN") or str(ROOT / ".build" / "debug" / "tidings")
    if not os.path.exists(b):
        pytest.exit(f"tidings binary not found at {b}: run `swift build` or `make test`", returncode=3)
    return b


class Result:
    def __init__(self, proc: subprocess.CompletedProcess):
        self.code = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr

    @property
    def events(self):
        """stdout parsed as JSON lines (for --json runs)."""
        return [json.loads(l) for l in self.stdout.splitlines() if l.strip()]

    def __repr__(self):
        return f"<exit {self.code}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}>"


class Tidings:
    """A config directory plus helpers to write config and run the binary against it."""

    def __init__(self, root: Path):
        self.root = root
        self.etc = root / "etc"
        self.plugins = self.etc / "plugins.d"
        self.state = root / "state"
        self.plugins.mkdir(parents=True)
        self.config = self.etc / "tidings.toml"
        self.write_config("")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
        self.env["NO_COLOR"] = "1"
        # The cache of parsed plugin files (ParsedConfigCache) in this test's folder, not the host's ~/.cache.
        self.env["XDG_CACHE_HOME"] = str(root / "cache")
        # Not the host's system bus: its NetworkManager or logind would pause the daemon's polls
        # (test_sleep_network.py gives the daemon a private one).
        self.env["DBUS_SYSTEM_BUS_ADDRESS"] = f"unix:path={root}/no-system-bus"
        self.daemons = []

    # config -----------------------------------------------------------------
    def write_config(self, text: str, mode: int = 0o600):
        self.config.write_text(textwrap.dedent(text))
        os.chmod(self.config, mode)

    def write_plugin(self, name: str, text: str, mode: int = 0o600):
        p = self.plugins / name
        p.write_text(textwrap.dedent(text))
        os.chmod(p, mode)
        return p

    def write_secret(self, name: str, value: str) -> Path:
        p = self.root / "secrets" / name
        p.parent.mkdir(exist_ok=True)
        p.write_text(value + "\n")
        os.chmod(p, 0o600)
        return p

    # running ----------------------------------------------------------------
    def args(self, *args):
        return [binary(), *args, "--config", str(self.config), "--state-dir", str(self.state)]

    def run(self, *args, timeout=60, env=None, input=None) -> Result:
        proc = subprocess.run(self.args(*args), capture_output=True, text=True, timeout=timeout,
                              env={**self.env, **(env or {})}, input=input)
        return Result(proc)

    def check(self, *args, **kw) -> Result:
        return self.run("check", "--json", *args, **kw)

    def start_daemon(self, *extra, env=None, log=None):
        log = log or (self.root / f"daemon-{len(self.daemons)}.log")
        f = open(log, "w")
        p = subprocess.Popen(self.args("run", *extra), stdout=f, stderr=subprocess.STDOUT,
                             env={**self.env, **(env or {})}, start_new_session=True)
        p.log_path = log
        self.daemons.append(p)
        return p

    def stop_all(self):
        for p in self.daemons:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait(timeout=10)


def wait_for(predicate, timeout=20.0, interval=0.1, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def outbox(t):
    """`tidings outbox --json`: the deliveries still queued or dead."""
    r = t.run("outbox", "--json")
    assert r.code == 0, r
    return r.events


def kill_while_queued(t, configure, timeout=30.0):
    """The first half of a sink's crash test: the receiver is down (its port bound but not
    listening, so connections are refused and nobody else takes it), the daemon queues both
    events of the feed (the head retrying, the second waiting behind it), then kill -9.
    `configure(port)` writes the config. Returns the port, free again for the receiver, and the
    ids of the queued events."""
    hold = socket.socket()
    hold.bind(("127.0.0.1", 0))
    port = hold.getsockname()[1]
    configure(port)
    d = t.start_daemon()
    wait_for(lambda: [r["status"] for r in outbox(t)] == ["retrying", "pending"], timeout=timeout,
             what="both events queued, the first failing")
    queued = {r["event"]["id"] for r in outbox(t)}
    os.killpg(d.pid, signal.SIGKILL)
    d.wait(timeout=10)
    hold.close()
    return port, queued


def read_log(p) -> str:
    return Path(p.log_path).read_text(errors="replace")


@pytest.fixture
def tidings(tmp_path):
    t = Tidings(tmp_path)
    yield t
    t.stop_all()


# PostgreSQL (DESIGN §11) ---------------------------------------------------------------------
@pytest.fixture(scope="session")
def postgres():
    """A PostgreSQL server for this test process (each xdist worker starts its own, on first
    use only): Tests/e2e/postgres.py. Stopped, and its temp dir removed, at the session's end."""
    import postgres as pgmod
    why = pgmod.missing()
    if why:
        pytest.fail(why, pytrace=False)
    server = pgmod.PostgresServer().start()
    yield server
    server.stop()


@pytest.fixture
def pg_db(postgres):
    """A fresh database on the session's server, owned by the role `tidings`; dropped after
    the test (WITH FORCE: a daemon the test killed may leave a connection behind)."""
    db = postgres.create_database()
    yield db
    try:
        db.drop()
    except RuntimeError:
        pass
