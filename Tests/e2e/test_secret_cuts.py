"""Nothing is cut before it is scrubbed (issue 30, item 2).

A server's text in a message is cut to a few hundred characters; a secret straddling the cut
would leave its first part, which no scrub recognises. An IMAP server's refusal and a refused
redirect's `Location` are scrubbed first, then cut.
"""
from __future__ import annotations

import socketserver
import threading

import pytest

from fakes.hostile import HostilePair

SECRET = "straddling-secret-0123456789"
FIRST_HALF = SECRET[:6]  # what a cut at 300 leaves of it, at least


class RefusingIMAP(socketserver.StreamRequestHandler):
    """Greets, answers CAPABILITY, and refuses any login with a long text that ends with the
    password (as a server that quotes what it received might)."""

    def handle(self):
        self.wfile.write(b"* OK [CAPABILITY IMAP4rev1 AUTH=PLAIN] fake ready\r\n")
        while line := self.rfile.readline():
            words = line.decode(errors="replace").split()
            if not words:
                continue
            tag, cmd = words[0], (words[1].upper() if len(words) > 1 else "")
            if cmd == "CAPABILITY":
                self.wfile.write(b"* CAPABILITY IMAP4rev1 AUTH=PLAIN\r\n" + tag.encode() + b" OK done\r\n")
            elif cmd in ("LOGIN", "AUTHENTICATE"):
                if cmd == "AUTHENTICATE" and len(words) == 3:  # no initial response: ask for it
                    self.wfile.write(b"+ \r\n")
                    self.rfile.readline()
                text = "[AUTHENTICATIONFAILED] " + "x" * 255 + " you sent " + SECRET
                self.wfile.write(f"{tag} NO {text}\r\n".encode())
            elif cmd == "LOGOUT":
                self.wfile.write(b"* BYE\r\n" + tag.encode() + b" OK bye\r\n")
                return
            else:
                self.wfile.write(tag.encode() + b" BAD what\r\n")


@pytest.fixture
def imap():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), RefusingIMAP)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def outputs(t, *runs):
    out = {f"run {i}": r.stdout + r.stderr for i, r in enumerate(runs)}
    for args in [("sources",), ("sources", "--json"), ("history", "--json")]:
        r = t.run(*args)
        assert r.code == 0, r
        out[" ".join(args)] = r.stdout
    return out


def test_an_imap_refusal_is_scrubbed_before_it_is_cut(tidings, imap):
    secret = tidings.write_secret("imap.pass", SECRET)
    tidings.write_plugin("mail.toml", f"""
        provider = "imap"
        url = "imap://127.0.0.1:{imap}/INBOX"
        username = "alice"
        password_file = "{secret}"
        starttls = false
        timeout = "5s"
        """)
    r = tidings.check()
    assert r.code == 2 and "login refused" in r.stderr and "you sent" in r.stderr, r
    for name, text in outputs(tidings, r).items():
        assert FIRST_HALF not in text, f"{FIRST_HALF!r} leaked in {name}:\n{text}"


def test_a_refused_redirect_location_is_scrubbed_before_it_is_cut(tidings):
    with HostilePair() as pair:
        key = tidings.write_secret("key", SECRET)
        # The secret straddles the 300th character of the Location shown.
        location = f"{pair.other.url}/" + "y" * (290 - len(pair.other.url)) + SECRET
        pair.script("/items", redirect=location, status=302)
        tidings.write_plugin("api.toml", f"""
            provider = "http-json"
            url = "{pair.main.url}/items"
            headers = {{ X-Api-Key_file = "{key}" }}
            """)
        r = tidings.check()
        assert r.code == 2 and "refused: the request carries credentials" in r.stderr and "yyyy" in r.stderr, r
        assert not pair.other.requests
        for name, text in outputs(tidings, r).items():
            assert FIRST_HALF not in text, f"{FIRST_HALF!r} leaked in {name}:\n{text}"
