"""A real Matrix homeserver (Synapse from the test venv) for end-to-end tests.

    with Synapse(tmp_dir) as hs:            # SQLite, client API on 127.0.0.1:<free port>
        bot = hs.register("bot")            # shared-secret registration: a user with a token
        room = bot.create_room(alias="alerts")
        bot.messages(room.id)               # m.room.message contents, oldest first

Federation is off (no federation listener, no key servers); registration is closed except
through the shared secret. The server's message rate limit is strict (`MESSAGES_PER_SECOND`,
burst 1: a second message within 5 s is a real 429 `M_LIMIT_EXCEEDED`); users registered with
`limited=False` (the default) are exempted through the admin API.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from processes import stop_process

SERVER_NAME = "localhost"
# The server-wide message rate (burst 1): users registered `limited` wait 1/this between messages.
MESSAGES_PER_SECOND = 0.2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def quote(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


class MatrixError(Exception):
    def __init__(self, status, body):
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


def call(base: str, method: str, path: str, token: str | None = None, body=None, timeout=30):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        raise MatrixError(e.code, e.read().decode(errors="replace")) from None


@dataclass
class Room:
    id: str
    alias: str | None


class User:
    def __init__(self, hs: "Synapse", user_id: str, token: str, device_id: str | None):
        self.hs, self.user_id, self.token, self.device_id = hs, user_id, token, device_id

    def call(self, method, path, body=None):
        return call(self.hs.url, method, path, self.token, body)

    def create_room(self, alias: str | None = None, invite: list[User] = ()) -> Room:
        body = {"preset": "private_chat", "invite": [u.user_id for u in invite]}
        if alias:
            body["room_alias_name"] = alias
        room_id = self.call("POST", "/_matrix/client/v3/createRoom", body)["room_id"]
        return Room(room_id, f"#{alias}:{SERVER_NAME}" if alias else None)

    def join(self, room: Room):
        self.call("POST", f"/_matrix/client/v3/join/{quote(room.id)}", {})

    def messages(self, room_id: str) -> list[dict]:
        """The room's m.room.message events (type, sender, content, event_id), oldest first."""
        page = self.call("GET", f"/_matrix/client/v3/rooms/{quote(room_id)}/messages?dir=b&limit=1000")
        return [e for e in reversed(page["chunk"]) if e["type"] == "m.room.message"]

    def unlimit_messages(self, admin: "User"):
        """No message rate limit for this user (Synapse's admin API: 0 and 0 mean none)."""
        admin.call("POST", f"/_synapse/admin/v1/users/{quote(self.user_id)}/override_ratelimit",
                   {"messages_per_second": 0, "burst_count": 0})


class Synapse:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.shared_secret = secrets.token_hex(16)
        self.proc = None
        self.log = self.root / "synapse.log"
        self.admin: User | None = None

    # setup --------------------------------------------------------------
    def _configure(self) -> list[str]:
        base = self.root / "homeserver.yaml"
        subprocess.run(
            [sys.executable, "-m", "synapse.app.homeserver", "--server-name", SERVER_NAME,
             "--config-path", str(base), "--data-directory", str(self.root),
             "--generate-config", "--report-stats=no"],
            check=True, capture_output=True, cwd=self.root, timeout=120)
        log_config = self.root / "log.yaml"
        log_config.write_text(json.dumps({
            "version": 1,
            "formatters": {"plain": {"format": "%(asctime)s %(name)s %(levelname)s %(message)s"}},
            "handlers": {"file": {"class": "logging.FileHandler", "filename": str(self.log), "formatter": "plain"}},
            "root": {"level": "WARNING", "handlers": ["file"]},
            "disable_existing_loggers": False,
        }))
        relaxed = {"per_second": 1000, "burst_count": 1000}
        override = self.root / "tidings-test.yaml"
        # JSON is YAML: top-level keys here replace the generated ones.
        override.write_text(json.dumps({
            "server_name": SERVER_NAME,
            "pid_file": str(self.root / "homeserver.pid"),
            "listeners": [{"port": self.port, "bind_addresses": ["127.0.0.1"], "type": "http", "tls": False,
                           "x_forwarded": False, "resources": [{"names": ["client"], "compress": False}]}],
            "database": {"name": "sqlite3", "args": {"database": str(self.root / "homeserver.db")}},
            "log_config": str(log_config),
            "media_store_path": str(self.root / "media"),
            "enable_registration": False,
            "registration_shared_secret": self.shared_secret,
            "report_stats": False,
            "trusted_key_servers": [],
            "suppress_key_server_warning": True,
            "presence": {"enabled": False},
            "enable_metrics": False,
            "rc_message": {"per_second": MESSAGES_PER_SECOND, "burst_count": 1},
            "rc_registration": relaxed,
            "rc_login": {"address": relaxed, "account": relaxed, "failed_attempts": relaxed},
            "rc_joins": {"local": relaxed, "remote": relaxed},
            "rc_invites": {"per_room": relaxed, "per_user": relaxed},
            "rc_room_creation": relaxed,
        }))
        return ["--config-path", str(base), "--config-path", str(override)]

    def start(self):
        args = self._configure()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "synapse.app.homeserver", *args],
            stdout=open(self.root / "synapse.out", "w"), stderr=subprocess.STDOUT, cwd=self.root,
            start_new_session=True)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"synapse exited with {self.proc.returncode}:\n"
                                   + (self.root / "synapse.out").read_text()[-3000:])
            try:
                call(self.url, "GET", "/_matrix/client/versions", timeout=2)
                break
            except (OSError, MatrixError):
                time.sleep(0.2)
        else:
            raise RuntimeError("synapse did not start within 90 s")
        self.admin = self.register("admin", admin=True)
        return self

    def stop(self):
        stop_process(self.proc, grace=15)

    __enter__ = start

    def __exit__(self, *exc):
        self.stop()

    # users --------------------------------------------------------------
    def register(self, username: str, admin: bool = False, limited: bool = False) -> User:
        """A user through the shared-secret registration API (HMAC-SHA1 over nonce, user,
        password and admin flag, as `register_new_matrix_user` does); exempt from the message
        rate limit unless `limited`."""
        nonce = call(self.url, "GET", "/_synapse/admin/v1/register")["nonce"]
        password = secrets.token_hex(12)
        digest = hmac.new(self.shared_secret.encode(),
                          b"\x00".join(p.encode() for p in (nonce, username, password, "admin" if admin else "notadmin")),
                          hashlib.sha1).hexdigest()
        answer = call(self.url, "POST", "/_synapse/admin/v1/register",
                      body={"nonce": nonce, "username": username, "password": password, "admin": admin, "mac": digest})
        user = User(self, answer["user_id"], answer["access_token"], answer.get("device_id"))
        if not limited:
            user.unlimit_messages(self.admin or user)
        return user
