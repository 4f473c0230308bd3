"""TLS on loopback for the certificate provider's tests: certificates made by the `openssl`
command with dates relative to now, and a small TLS server (Python's `ssl`) per certificate.

- `PrivateCA(directory)`: a private CA; `ca.leaf(name, not_before=…, not_after=…, san=…)` signs a
  leaf with `openssl ca -startdate/-enddate` (OpenSSL 3.0's `openssl x509` has no
  `-not_before/-not_after`, and `-days` cannot make an expired certificate). Offsets are
  `datetime.timedelta`s from now. `self_signed(...)` makes a certificate signed by its own key.
- `TLSServer(cert, key)`: accepts on 127.0.0.1, completes the handshake, reads until the client
  hangs up. `server.use(cert, key)` serves another certificate from the next connection on (a
  renewal). `mode="slow"` accepts and never answers; `mode="garbage"` answers with bytes that
  are not TLS, without end.
"""
from __future__ import annotations

import datetime
import os
import socket
import ssl
import subprocess
import threading
from pathlib import Path


def _when(offset: datetime.timedelta) -> str:
    t = datetime.datetime.now(datetime.timezone.utc) + offset
    return t.strftime("%Y%m%d%H%M%SZ")


def _openssl(*args, cwd=None):
    r = subprocess.run(["openssl", *args], capture_output=True, text=True, cwd=cwd)
    if r.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)}: {r.stderr}")
    return r.stdout


def _key(path: Path):
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-out", str(path))


LOOPBACK_SAN = "DNS:localhost,IP:127.0.0.1"


class PrivateCA:
    def __init__(self, directory: Path, name: str = "Tidings Test CA"):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "newcerts").mkdir(exist_ok=True)
        (self.dir / "index.txt").write_text("")
        (self.dir / "serial").write_text("1000\n")
        self.key = self.dir / "ca-key.pem"
        self.cert = self.dir / "ca.pem"
        _key(self.key)
        _openssl("req", "-x509", "-new", "-key", str(self.key), "-out", str(self.cert), "-days", "30",
                 "-subj", f"/O=Tidings Tests/CN={name}",
                 "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        self.config = self.dir / "ca.cnf"
        self.config.write_text(f"""
[ ca ]
default_ca = tests
[ tests ]
dir = {self.dir}
database = {self.dir}/index.txt
new_certs_dir = {self.dir}/newcerts
serial = {self.dir}/serial
default_md = sha256
policy = anything
unique_subject = no
copy_extensions = none
[ anything ]
commonName = supplied
""")
        self.count = 0

    def leaf(self, name: str, not_after: datetime.timedelta, not_before: datetime.timedelta | None = None,
             san: str = LOOPBACK_SAN) -> tuple[Path, Path]:
        """A leaf certificate for `san`, valid from `not_before` (default: a day ago) to
        `not_after` (offsets from now): (cert.pem, key.pem)."""
        self.count += 1
        base = self.dir / f"{name}-{self.count}"
        key, csr, cert, ext = (Path(f"{base}-key.pem"), Path(f"{base}.csr"), Path(f"{base}.pem"), Path(f"{base}.ext"))
        _key(key)
        _openssl("req", "-new", "-key", str(key), "-out", str(csr), "-subj", f"/CN={name}")
        ext.write_text(f"[ leaf ]\nsubjectAltName = {san}\nbasicConstraints = CA:FALSE\n"
                       "extendedKeyUsage = serverAuth\n")
        start = not_before if not_before is not None else -datetime.timedelta(days=1)
        _openssl("ca", "-batch", "-config", str(self.config), "-cert", str(self.cert), "-keyfile", str(self.key),
                 "-in", str(csr), "-out", str(cert), "-notext", "-startdate", _when(start), "-enddate", _when(not_after),
                 "-extfile", str(ext), "-extensions", "leaf")
        return cert, key


def self_signed(directory: Path, name: str, days: int = 60, san: str = LOOPBACK_SAN) -> tuple[Path, Path]:
    cert, key = Path(directory) / f"{name}.pem", Path(directory) / f"{name}-key.pem"
    _key(key)
    _openssl("req", "-x509", "-new", "-key", str(key), "-out", str(cert), "-days", str(days),
             "-subj", f"/CN={name}", "-addext", f"subjectAltName={san}")
    return cert, key


def der_sha256(cert: Path) -> str:
    """The SHA-256 of the certificate's DER bytes, as `openssl x509 -fingerprint` computes it."""
    out = _openssl("x509", "-in", str(cert), "-noout", "-fingerprint", "-sha256")
    return out.strip().split("=", 1)[1].replace(":", "").lower()


def serial_hex(cert: Path) -> str:
    out = _openssl("x509", "-in", str(cert), "-noout", "-serial")
    return out.strip().split("=", 1)[1].lower()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TLSServer:
    def __init__(self, cert: Path | None = None, key: Path | None = None, mode: str = "tls", port: int = 0):
        self.mode = mode
        self.context = None
        if cert:
            self.use(cert, key)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.handshakes = 0
        self.connections = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def use(self, cert: Path, key: Path):
        """Serve this certificate (a file may hold the leaf and then its chain) from now on."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(cert), str(key))
        self.context = context

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _serve(self):
        self.sock.settimeout(0.2)
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket):
        try:
            conn.settimeout(30)
            if self.mode == "slow":
                self.stopping.wait(60)
                return
            if self.mode == "garbage":
                chunk = os.urandom(512)
                while not self.stopping.is_set():
                    conn.sendall(b"HTTP/1.1 200 OK\r\n\r\n" + chunk)
                return
            with self.context.wrap_socket(conn, server_side=True) as tls:
                self.handshakes += 1
                while tls.recv(4096):
                    pass
        except (OSError, ssl.SSLError):
            pass
        finally:
            try:
                conn.close()
            except OSError:
                pass

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stopping.set()
        self.sock.close()
        self.thread.join(timeout=5)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
