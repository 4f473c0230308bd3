"""A real SMTP server for the e-mail sink's tests: aiosmtpd (PyPI, pinned in requirements.txt),
run in its own thread by aiosmtpd's Controller, with a handler that records every message.

- `SMTPServer(port=…, users={"bot": "pw"}, tls=cert_pair, require_starttls=…, implicit_tls=…)`:
  AUTH (PLAIN, LOGIN) checked against `users` by aiosmtpd's authenticator hook (allowed
  without TLS: the tests run on loopback), STARTTLS or SMTPS with a certificate made by
  `self_signed()` (the `openssl` command).
- `state["script"]`: replies for the next DATA commands, e.g. ["451 4.3.0 try later"]; a
  scripted reply refuses that message (after reading it), an empty script accepts.
- `state["attempts"]`: every message the server read (accepted or not), `state["accepted"]`:
  the accepted ones, each a dict with mail_from, rcpt_tos, content (bytes), login, tls.
- `state["logins"]`: (mechanism, login, ok) per AUTH attempt.
"""
from __future__ import annotations

import email
import email.policy
import logging
import socket
import ssl
import subprocess
import threading
import warnings
from pathlib import Path

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult

# aiosmtpd itself still sets the deprecated Session.login_data after AUTH, and logs that.
warnings.filterwarnings("ignore", message="Session.login_data is deprecated")
logging.getLogger("mail.log").setLevel(logging.ERROR)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def self_signed(directory: Path, name: str = "127.0.0.1") -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost: (cert.pem, key.pem)."""
    cert, key = directory / "smtp-cert.pem", directory / "smtp-key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-keyout", str(key), "-out", str(cert), "-subj", f"/CN={name}",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True)
    return cert, key


class Recorder:
    """aiosmtpd handler: records each message, answers from the script."""

    def __init__(self, state):
        self.state = state

    async def handle_DATA(self, server, session, envelope):
        with self.state["lock"]:
            record = {"mail_from": envelope.mail_from, "rcpt_tos": list(envelope.rcpt_tos),
                      "content": bytes(envelope.original_content or envelope.content),
                      "login": session.auth_data if session.authenticated else None,
                      "tls": server.transport.get_extra_info("ssl_object") is not None,
                      "helo": session.host_name}
            self.state["attempts"].append(record)
            if self.state["script"]:
                return self.state["script"].pop(0)
            self.state["accepted"].append(record)
            return f"250 2.0.0 OK queued as Q{len(self.state['accepted'])}"


def new_state():
    return {"lock": threading.Lock(), "script": [], "attempts": [], "accepted": [], "logins": []}


class SMTPServer:
    def __init__(self, port: int | None = None, users: dict[str, str] | None = None,
                 tls: tuple[Path, Path] | None = None, require_starttls: bool = False,
                 implicit_tls: bool = False, state=None):
        self.port = port or free_port()
        self.state = state or new_state()
        self.users = users or {}
        kwargs = {}
        context = None
        if tls:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(str(tls[0]), str(tls[1]))
        if implicit_tls:
            kwargs["ssl_context"] = context
        elif context:
            kwargs["tls_context"] = context
            kwargs["require_starttls"] = require_starttls
        if users:
            kwargs["authenticator"] = self.authenticate
            kwargs["auth_require_tls"] = False
        self.scheme = "smtps" if implicit_tls else "smtp"
        self.controller = Controller(Recorder(self.state), hostname="127.0.0.1", port=self.port, **kwargs)

    def authenticate(self, server, session, envelope, mechanism, auth_data):
        login = auth_data.login.decode(errors="replace")
        ok = self.users.get(login) is not None and self.users[login].encode() == auth_data.password
        with self.state["lock"]:
            self.state["logins"].append((mechanism, login, ok))
        return AuthResult(success=ok, handled=False, auth_data=login if ok else None)

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def reset(self):
        with self.state["lock"]:
            for k in ("script", "attempts", "accepted", "logins"):
                self.state[k].clear()

    def start(self):
        self.controller.start()
        return self

    def stop(self):
        self.controller.stop()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def parse(content: bytes) -> email.message.EmailMessage:
    return email.message_from_bytes(content, policy=email.policy.default)
