"""A real Dovecot IMAP server for end-to-end tests (Debian's `dovecot-imapd`).

Started unprivileged on loopback ports from a private config in a temporary directory: its own
base_dir and state, a passwd-file for passwords, maildir mailboxes. As root (a container),
Dovecot runs as `nobody`; otherwise as the current user. Usage:

    from dovecot import Dovecot, make_cert
    cert, key = make_cert(tmp_path / "tls")             # self-signed for localhost and 127.0.0.1
    with Dovecot(tmp_path / "dovecot", users={"alice": "s3cret"}, cert=cert, key=key) as d:
        d.imap_port, d.imaps_port                       # STARTTLS (143-style) and implicit TLS
        d.deliver("alice", subject="Hi", body="Hello")  # writes a maildir file into new/
        d.flags("alice")                                # {maildir base name: "S"/"" …}
        d.mark_seen("alice", base)                      # as another client reading it would
        d.renumber("alice", 4242)                       # a new UIDVALIDITY, as after a rebuild

Without `cert`, only plain IMAP on loopback is served (`imap_port`); `imaps_port` is None.
"""
from __future__ import annotations

import email.utils
import os
import pwd
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from processes import stop_process

DOVECOT = shutil.which("dovecot") or "/usr/sbin/dovecot"


def available() -> bool:
    return os.path.exists(DOVECOT)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_cert(directory: Path, names=("localhost",), ips=("127.0.0.1",), days: int = 30):
    """A self-signed certificate (also its own CA: give it as `ca_file`) and its key, as paths."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "cert.pem", directory / "key.pem"
    san = ",".join([f"DNS:{n}" for n in names] + [f"IP:{i}" for i in ips])
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", str(days), "-subj", f"/CN={names[0]}", "-addext", f"subjectAltName={san}",
         "-addext", "basicConstraints=critical,CA:TRUE"],
        check=True, capture_output=True)
    return cert, key


class Dovecot:
    def __init__(self, root: Path, users: dict[str, str], cert: Path | None = None, key: Path | None = None,
                 extra_config: str = ""):
        self.root = Path(root)
        self.private_root = os.geteuid() == 0
        if self.private_root:
            # pytest's temporary directories are root's own (0700): `nobody` could not reach them.
            self.root = Path(tempfile.mkdtemp(prefix="tidings-dovecot-"))
            os.chmod(self.root, 0o755)
        self.users = dict(users)
        self.cert, self.key = cert, key
        self.extra_config = extra_config
        self.imap_port = free_port()
        self.imaps_port = free_port() if cert else None
        self.proc: subprocess.Popen | None = None
        self.log = self.root / "dovecot.log"
        if os.geteuid() == 0:
            pw = pwd.getpwnam("nobody")
        else:
            pw = pwd.getpwuid(os.getuid())
        self.user, self.uid, self.gid = pw.pw_name, pw.pw_uid, pw.pw_gid

    # lifecycle ---------------------------------------------------------------
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def maildir(self, user: str, folder: str = "INBOX") -> Path:
        base = self.root / "mail" / user
        return base if folder == "INBOX" else base / f".{folder}"

    def start(self):
        self.root.mkdir(parents=True, exist_ok=True)
        for d in ("run", "state", "mail"):
            (self.root / d).mkdir(exist_ok=True)
        passwd = self.root / "passwd"
        passwd.write_text("".join(f"{u}:{{PLAIN}}{p}::::::\n" for u, p in self.users.items()))
        for u in self.users:
            for sub in ("new", "cur", "tmp"):
                (self.maildir(u) / sub).mkdir(parents=True, exist_ok=True)
        tls = ""
        if self.cert:
            # Dovecot reads the key as its own (unprivileged) user: private copies.
            shutil.copy(self.cert, self.root / "cert.pem")
            shutil.copy(self.key, self.root / "key.pem")
            tls = f"""
ssl = yes
ssl_cert = <{self.root}/cert.pem
ssl_key = <{self.root}/key.pem
"""
        else:
            tls = "ssl = no\n"
        imaps = f"""
  inet_listener imaps {{
    address = 127.0.0.1
    port = {self.imaps_port}
    ssl = yes
  }}""" if self.cert else ""
        conf = f"""
base_dir = {self.root}/run
state_dir = {self.root}/state
instance_name = tidings-test-{uuid.uuid4().hex[:8]}
log_path = {self.log}
protocols = imap
listen = 127.0.0.1
default_internal_user = {self.user}
default_internal_group = {self.gid_name()}
default_login_user = {self.user}
disable_plaintext_auth = no
auth_mechanisms = plain login
login_trusted_networks = 127.0.0.0/8
auth_failure_delay = 0
mail_location = maildir:{self.root}/mail/%u
first_valid_uid = 0
first_valid_gid = 0
{tls}
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {passwd}
}}
userdb {{
  driver = static
  args = uid={self.uid} gid={self.gid} home={self.root}/mail/%u
}}
service imap-login {{
  chroot =
  user = {self.user}
  inet_listener imap {{
    address = 127.0.0.1
    port = {self.imap_port}
  }}{imaps}
}}
service anvil {{
  chroot =
}}
service auth {{
  user = {self.user}
}}
service auth-worker {{
  user = {self.user}
}}
{self.extra_config}
"""
        self.conf = self.root / "dovecot.conf"
        self.conf.write_text(conf)
        if os.geteuid() == 0:
            subprocess.run(["chown", "-R", f"{self.uid}:{self.gid}", str(self.root)], check=True)
        # Unprivileged: as root, the master process too runs as `nobody`.
        as_user = {"user": self.uid, "group": self.gid, "extra_groups": []} if os.geteuid() == 0 else {}
        with open(self.root / "dovecot.stderr", "w") as err:
            self.proc = subprocess.Popen([DOVECOT, "-c", str(self.conf), "-F"], stdout=subprocess.DEVNULL, stderr=err,
                                         **as_user)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dovecot exited {self.proc.returncode}: {self.diagnostics()}")
            try:
                with socket.create_connection(("127.0.0.1", self.imap_port), timeout=1) as s:
                    if s.recv(100).startswith(b"* OK"):
                        return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"dovecot did not answer on {self.imap_port}: {self.diagnostics()}")

    def gid_name(self) -> str:
        import grp
        return grp.getgrgid(self.gid).gr_name

    def diagnostics(self) -> str:
        out = []
        for f in (self.root / "dovecot.stderr", self.log):
            if f.exists():
                out.append(f.read_text()[-3000:])
        return "\n".join(out)

    def stop(self):
        stop_process(self.proc)
        if self.private_root:
            shutil.rmtree(self.root, ignore_errors=True)

    # mail ----------------------------------------------------------------------
    def deliver(self, user: str, subject: str | None = None, body: str = "", sender: str = "Alice <alice@localhost>",
                to: str = "me@localhost", raw: bytes | None = None, seen: bool = False, folder: str = "INBOX") -> str:
        """Writes one message into the maildir (new/, or cur/ with the S flag); returns its base name.
        `raw` is the whole message as bytes (headers CRLF-separated from the body); else one is made."""
        if raw is None:
            headers = [f"From: {sender}", f"To: {to}", f"Date: {email.utils.formatdate(localtime=False)}",
                       f"Message-ID: <{uuid.uuid4().hex}@localhost>", "MIME-Version: 1.0",
                       "Content-Type: text/plain; charset=utf-8", "Content-Transfer-Encoding: 8bit"]
            if subject is not None:
                headers.insert(0, f"Subject: {subject}")
            raw = ("\r\n".join(headers) + "\r\n\r\n" + body.replace("\n", "\r\n")).encode()
        base = f"{time.time_ns()}.{uuid.uuid4().hex[:12]}.localhost"
        d = self.maildir(user, folder)
        for sub in ("new", "cur", "tmp"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        tmp = d / "tmp" / base
        tmp.write_bytes(raw)
        target = d / "cur" / f"{base}:2,S" if seen else d / "new" / base
        os.rename(tmp, target)
        if os.geteuid() == 0:
            os.chown(target, self.uid, self.gid)
        return base

    def _files(self, user: str, folder: str = "INBOX"):
        d = self.maildir(user, folder)
        for sub in ("new", "cur"):
            for f in sorted((d / sub).iterdir()):
                yield sub, f

    def flags(self, user: str, folder: str = "INBOX") -> dict[str, str]:
        """Each message's maildir flags by base name ("" for a message in new/ or without flags).
        A message Dovecot moved from new/ to cur/ unchanged keeps "" (that is not a flag)."""
        out = {}
        for sub, f in self._files(user, folder):
            base, _, info = f.name.partition(":2,")
            # Dovecot may add ,S=<size> / ,W=<vsize> to the base name when it moves a file to cur/.
            base = base.split(",")[0]
            out[base] = "".join(sorted(info)) if sub == "cur" else ""
        return out

    def mark_seen(self, user: str, base: str, folder: str = "INBOX"):
        """Marks a message read, as another mail client would (the S flag in its file name)."""
        for sub, f in self._files(user, folder):
            if f.name.split(":2,")[0].split(",")[0] == base:
                stem, _, info = f.name.partition(":2,")
                target = self.maildir(user, folder) / "cur" / f"{stem}:2,{''.join(sorted(set(info) | {'S'}))}"
                os.rename(f, target)
                return
        raise KeyError(base)

    def renumber(self, user: str, uidvalidity: int, folder: str = "INBOX"):
        """Gives the mailbox a new UIDVALIDITY (every message a new UID), as a server rebuild does:
        Dovecot's UID list and indexes are replaced."""
        d = self.maildir(user, folder)
        for f in d.iterdir():
            if f.name.startswith("dovecot.index") or f.name == "dovecot-uidlist":
                f.unlink()
        (d / "dovecot-uidlist").write_text(f"3 V{uidvalidity} N1 G{uuid.uuid4().hex}\n")
        if os.geteuid() == 0:
            os.chown(d / "dovecot-uidlist", self.uid, self.gid)

    # a plain IMAP client, to look at what the server says ------------------------
    def session(self, user: str):
        """An authenticated imaplib session (plain on loopback)."""
        import imaplib
        m = imaplib.IMAP4("127.0.0.1", self.imap_port)
        m.login(user, self.users[user])
        return m
