"""provider = "imap" (DESIGN §12) through the real binary against a real Dovecot (Tests/e2e/dovecot.py):
the silent baseline, a new message with its decoded subject, sender and text, a message read
elsewhere is `removed`, a refused login is `auth-failed` without the password anywhere, a new
UIDVALIDITY is a new baseline, imaps:// and STARTTLS with ca_file. After EVERY poll the messages'
flags on the server are what they were: tidings never marks mail read.

A server that never finishes its answer, or sends an endless one, is a local socket that speaks
just enough IMAP to log in (no Dovecot does that)."""
import re
import socket
import threading
import time

import pytest

import dovecot
from dovecot import Dovecot, make_cert
from providers_util import assert_no_secrets, items_events

PASSWORD = "imap-e2e-Pa55word-7731"



@pytest.fixture(autouse=True)
def dovecot_installed():
    if not dovecot.available():
        pytest.fail("Dovecot is not installed: `make test-deps` installs Debian's dovecot-imapd", pytrace=False)


@pytest.fixture
def server(tmp_path):
    with Dovecot(tmp_path / "dovecot", users={"alice": PASSWORD}) as d:
        yield d


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    return make_cert(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def tls_server(tmp_path, tls):
    cert, key = tls
    with Dovecot(tmp_path / "dovecot-tls", users={"alice": PASSWORD}, cert=cert, key=key) as d:
        yield d


def source(t, url, extra="", password=PASSWORD, timeout="10s"):
    secret = t.write_secret("imap.pass", password)
    return t.write_plugin("mail.toml", f"""
        provider = "imap"
        url = "{url}"
        username = "alice"
        password_file = "{secret}"
        timeout = "{timeout}"
        {extra}
    """)


def uidvalidity(d, user="alice"):
    m = d.session(user)
    try:
        typ, data = m.select("INBOX", readonly=True)
        code = m.untagged_responses.get("UIDVALIDITY") or m.response("UIDVALIDITY")[1]
        return int(code[0])
    finally:
        m.logout()


def server_flags(d, user="alice"):
    """FLAGS of every message as the server reports them (read-only EXAMINE), by UID."""
    m = d.session(user)
    try:
        m.select("INBOX", readonly=True)
        typ, data = m.uid("FETCH", "1:*", "(UID FLAGS)")
        out = {}
        for line in data:
            if not line:
                continue
            text = line.decode() if isinstance(line, bytes) else line[0].decode()
            uid = re.search(r"UID (\d+)", text)
            flags = re.search(r"FLAGS \(([^)]*)\)", text)
            if uid and flags:
                out[int(uid.group(1))] = sorted(f for f in flags.group(1).split() if f != "\\Recent")
        return out
    finally:
        m.logout()


class FlagWatch:
    """Asserts that a poll left every flag as it was, in the maildir and as IMAP reports it."""

    def __init__(self, d):
        self.d = d
        self.take()

    def take(self):
        self.files, self.imap = self.d.flags("alice"), server_flags(self.d)

    def unchanged(self, what):
        assert self.d.flags("alice") == self.files, f"{what}: maildir flags changed"
        assert server_flags(self.d) == self.imap, f"{what}: IMAP flags changed"


def test_baseline_new_message_and_read_elsewhere(tidings, server):
    server.deliver("alice", subject="Old unread", body="first")
    server.deliver("alice", subject="Already read", body="seen", seen=True)
    source(tidings, f"imap://127.0.0.1:{server.imap_port}/INBOX")
    watch = FlagWatch(server)

    r = tidings.check()
    assert r.code == 0, r
    assert r.stdout == "", "the baseline is silent"
    watch.unchanged("baseline")

    # A new message: ISO-8859-1 Q subject, quoted-printable Latin-1 text, an RFC 2047 sender.
    raw = (b"Subject: =?iso-8859-1?q?Gr=FC=DFe_aus_K=F6ln?=\r\n"
           b"From: =?utf-8?q?J=C3=B6rg_M=C3=BCller?= <joerg@localhost>\r\n"
           b"To: alice@localhost\r\n"
           b"Date: " + time.strftime("%a, %d %b %Y %H:%M:%S +0000", time.gmtime()).encode() + b"\r\n"
           b"Message-ID: <m1@localhost>\r\n"
           b"MIME-Version: 1.0\r\n"
           b"Content-Type: text/plain; charset=iso-8859-1\r\n"
           b"Content-Transfer-Encoding: quoted-printable\r\n\r\n"
           b"Hall=F6chen Alice,\r\n\r\nwie geht's? Sch=F6ne =\r\nGr=FC=DFe.\r\n")
    fresh = server.deliver("alice", raw=raw)
    watch.take()
    r = tidings.check()
    assert r.code == 1, r
    (e,) = items_events(r)
    v = uidvalidity(server)
    assert (e["event"], e["kind"], e["provider"], e["key"]) == ("new", "mail", "imap", f"{v}/3")
    assert e["title"] == "Grüße aus Köln"
    assert e["body"] == "From: Jörg Müller <joerg@localhost>\n\nHallöchen Alice,\nwie geht's? Schöne Grüße."
    assert e["data"]["from"] == "Jörg Müller <joerg@localhost>"
    assert e["data"]["to"] == "alice@localhost"
    assert e["data"]["message_id"] == "m1@localhost"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", e["data"]["date"]), e["data"]
    watch.unchanged("new message")

    # Nothing new: nothing.
    r = tidings.check()
    assert r.code == 0 and r.stdout == "", r
    watch.unchanged("quiet poll")

    # Read in another client: removed.
    server.mark_seen("alice", fresh)
    watch.take()
    r = tidings.check()
    assert r.code == 1, r
    (e,) = items_events(r)
    assert (e["event"], e["key"], e["title"]) == ("removed", f"{v}/3", "Grüße aus Köln")
    watch.unchanged("after read elsewhere")
    assert_no_secrets(tidings, [r], [PASSWORD])


def test_hostile_messages_are_plain_bounded_text(tidings, server):
    source(tidings, f"imap://127.0.0.1:{server.imap_port}/INBOX")
    assert tidings.check().code == 0
    watch = FlagWatch(server)
    # Terminal escapes in the subject and sender; a subject folded over 200 KB and one of 100 KB on
    # one line; an HTML-only body.
    huge = "\r\n ".join(["word" * 20] * 2500)
    server.deliver("alice", subject="\x1b]0;owned\x07Invoice \x1b[31mdue\x1b[0m", sender="Eve \x1b[2J<eve@localhost>",
                   body="plain text\n\x1b[5mblink\x1b[0m")
    server.deliver("alice", subject=huge, body="x")
    server.deliver("alice", subject="one line " + "y" * 100_000, body="z")  # past libcurl's 16 KiB line buffer
    server.deliver("alice", raw=b"Subject: html\r\nContent-Type: text/html; charset=utf-8\r\n\r\n"
                                b"<html><head><style>p{color:red}</style><script>alert(1)</script></head>"
                                b"<body><p>Hello <b>there</b> &amp; welcome</p></body></html>\r\n")
    watch.take()
    r = tidings.check()
    assert r.code == 1, r
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout
    by_title = {e["title"][:20]: e for e in items_events(r)}
    assert len(by_title) == 4, r.stdout
    esc = by_title["]0;owned Invoice [31"]
    assert esc["title"] == "]0;owned Invoice [31mdue [0m"
    assert esc["body"].startswith("From: Eve [2J<eve@localhost>\n\nplain text\n"), esc
    long = by_title["word" * 5]
    assert len(long["title"]) <= 300 and long["title"].endswith("…")
    line = by_title["one line " + "y" * 11]
    assert len(line["title"]) <= 300 and line["body"].endswith("z"), line
    assert by_title["html"]["body"].endswith("Hello there & welcome"), by_title["html"]
    watch.unchanged("hostile messages")


def test_wrong_password_is_auth_failed_and_never_shown(tidings, server):
    server.deliver("alice", subject="x")
    wrong = "wrong-imap-pass-90210"
    source(tidings, f"imap://127.0.0.1:{server.imap_port}/INBOX", password=wrong)
    watch = FlagWatch(server)
    r = tidings.check()
    assert r.code == 2, r
    errors = [e for e in r.events if e["kind"] == "source"]
    assert [(e["event"], e["source"]) for e in errors] == [("error", "mail")], r
    assert errors[0]["data"].get("auth_failed") is True, errors
    assert "login refused" in r.stderr, r
    # Dovecot logs every connection's end or login with the remote address.
    time.sleep(0.5)
    logins = server.log.read_text().count("rip=127.0.0.1")
    assert logins >= 1

    r2 = tidings.check()  # no second login with rejected credentials
    assert r2.code == 2 and "rejected earlier" in r2.stderr, r2
    time.sleep(0.5)
    assert server.log.read_text().count("rip=127.0.0.1") == logins
    (s,) = tidings.run("sources", "--json").events
    assert s["state"] == "auth-failed", s
    watch.unchanged("refused login")

    source(tidings, f"imap://127.0.0.1:{server.imap_port}/INBOX")  # fixed: a config change
    r3 = tidings.check()
    assert r3.code == 1 and [(e["event"], e["kind"]) for e in r3.events] == [("recovered", "source")], r3
    assert_no_secrets(tidings, [r, r2, r3], [wrong, PASSWORD])


def test_new_uidvalidity_is_a_new_baseline_not_a_flood(tidings, server):
    for n in range(3):
        server.deliver("alice", subject=f"m{n}")
    source(tidings, f"imap://127.0.0.1:{server.imap_port}/INBOX")
    assert tidings.check().code == 0
    old = uidvalidity(server)
    server.renumber("alice", old + 1000)
    watch = FlagWatch(server)
    assert uidvalidity(server) == old + 1000

    r = tidings.check()
    assert r.code == 0, r
    assert r.stdout == "", "renumbered messages are neither removed nor new"
    assert "new baseline" in r.stderr, r.stderr
    watch.unchanged("renumbered")

    server.deliver("alice", subject="after the rebuild")
    r = tidings.check()
    assert r.code == 1, r
    (e,) = items_events(r)
    assert (e["event"], e["title"]) == ("new", "after the rebuild")
    assert e["key"].startswith(f"{old + 1000}/"), e

    # Read elsewhere after the renumbering: removed under its new key.
    for base, f in server.flags("alice").items():
        server.mark_seen("alice", base)
    r = tidings.check()
    assert r.code == 1, r
    assert sorted(e["event"] for e in items_events(r)) == ["removed"] * 4
    assert all(e["key"].startswith(f"{old + 1000}/") for e in items_events(r))


def test_imaps_and_starttls_with_ca_file(tidings, tls_server, tls):
    cert, _ = tls
    d = tls_server
    d.deliver("alice", subject="before")
    watch = FlagWatch(d)
    for url, extra in [(f"imaps://localhost:{d.imaps_port}/INBOX", ""),
                       (f"imap://localhost:{d.imap_port}/INBOX", "starttls = true")]:
        source(tidings, url, extra=f'ca_file = "{cert}"\n{extra}')
        tidings.run("state", "forget", "mail")
        r = tidings.check()
        assert r.code == 0 and r.stdout == "", (url, r)
        watch.unchanged(f"baseline over {url}")
        d.deliver("alice", subject=f"over {url.split(':')[0]}")
        watch.take()
        r = tidings.check()
        assert r.code == 1, (url, r)
        assert [e["title"] for e in items_events(r)] == [f"over {url.split(':')[0]}"], r
        watch.unchanged(f"new message over {url}")
    # Dovecot marks a login over TLS (implicit or STARTTLS) with "TLS" in its log line.
    logins = [l for l in d.log.read_text().splitlines() if "Login: user=<alice>" in l]
    assert sum(", TLS" in l for l in logins) >= 4, logins

    # Without ca_file the self-signed certificate is not trusted: a poll failure that says so.
    source(tidings, f"imaps://localhost:{d.imaps_port}/INBOX")
    r = tidings.check()
    assert r.code == 2 and "certificate" in r.stderr and "ca_file" in r.stderr, r
    watch.unchanged("TLS polls")
    assert_no_secrets(tidings, [r], [PASSWORD])


def test_starttls_required_but_not_offered_is_refused(tidings, server):
    source(tidings, f"imap://127.0.0.1:{server.imap_port}/INBOX", extra="starttls = true")
    r = tidings.check()
    assert r.code == 2, r
    assert "STARTTLS" in r.stderr, r
    assert "Login: user=<alice>" not in server.log.read_text(), "the password went out without TLS"


def test_config_errors_name_file_and_line(tidings):
    secret = tidings.write_secret("imap.pass", PASSWORD)
    tidings.write_plugin("plain.toml", f"""
        provider = "imap"
        url = "imap://mail.example.net/INBOX"
        username = "alice"
        password_file = "{secret}"
        starttls = false
    """)
    tidings.write_plugin("badurl.toml", f"""
        provider = "imap"
        url = "pop3://127.0.0.1/INBOX"
        username = "alice"
        password_file = "{secret}"
    """)
    r = tidings.run("config", "check")
    assert r.code == 78, r
    assert re.search(r"plain\.toml:6: .*allowed only to a loopback host, not mail\.example\.net", r.stderr), r.stderr
    assert re.search(r"badurl\.toml:3: .*'url' must be imaps://", r.stderr), r.stderr


def test_protocol_lines_inside_a_message_are_text_not_answers(tidings, server):
    """Lines that look like IMAP answers (any client's tagged `OK`, `* BYE`, `* 3 EXISTS`, a literal
    marker) inside a message's header fields and text are the message's text: the poll reads every
    message and none of them ends an answer early (issue 30 item 15)."""
    source(tidings, f"imap://127.0.0.1:{server.imap_port}/INBOX")
    assert tidings.check().code == 0
    tags = [f"A{n:03d} OK done" for n in range(1, 10)] + ["B005 OK done", "T1 OK done", "t4 OK done"]
    lines = tags + ["* BYE shutting down", "* 3 EXISTS", "* OK [UIDVALIDITY 1] forged", "* 1 FETCH (UID 99)",
                    "{5}", "A005 OK {5}", "A006 BAD {0}", ")"]
    for n in range(3):
        raw = (f"Subject: forged {n} {{5}}\r\n"
               f" A00{n + 3} OK folded into the subject {{5}}\r\n"
               "From: Mallory <mallory@localhost>\r\n"
               "To: alice@localhost\r\n"
               f"Message-ID: <forged{n}@localhost>\r\n"
               "Content-Type: text/plain; charset=utf-8\r\n\r\n"
               + "".join(f"{line}\r\n" for line in lines[n:] + lines[:n])).encode()
        server.deliver("alice", raw=raw)
    server.deliver("alice", subject="after the forged ones", body="plain")
    watch = FlagWatch(server)
    r = tidings.check()
    assert r.code == 1, r
    events = items_events(r)
    assert sorted(e["title"] for e in events) == ["after the forged ones"] + [
        f"forged {n} {{5}} A00{n + 3} OK folded into the subject {{5}}" for n in range(3)], r
    first = next(e for e in events if e["title"].startswith("forged 0"))
    assert first["body"].startswith("From: Mallory <mallory@localhost>\n\nA001 OK done\nA002 OK done\n"), first
    watch.unchanged("forged protocol lines")
    assert_no_secrets(tidings, [r], [PASSWORD])


class HostileIMAP:
    """Greets, takes any login, then answers the first command after it forever: slowly
    (`mode="slow"`, a line every 0.2 s) or as fast as it can (`mode="flood"`); or with
    `* BYE` and a closed connection (`mode="bye"`)."""

    BYE = "System going down for maintenance, back at 04:00 (" + "x" * 240 + " " + PASSWORD + ")"

    def __init__(self, mode):
        self.mode = mode
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.talk, args=(conn,), daemon=True).start()

    def talk(self, conn):
        f = conn.makefile("rb")
        try:
            conn.sendall(b"* OK [CAPABILITY IMAP4rev1] hostile ready\r\n")
            for line in f:
                tag, _, rest = line.decode(errors="replace").strip().partition(" ")
                verb = rest.split(" ")[0].upper()
                if verb == "CAPABILITY":
                    conn.sendall(b"* CAPABILITY IMAP4rev1\r\n" + tag.encode() + b" OK done\r\n")
                elif verb == "LOGIN":
                    conn.sendall(tag.encode() + b" OK logged in\r\n")
                elif verb == "LOGOUT":
                    conn.sendall(b"* BYE\r\n" + tag.encode() + b" OK bye\r\n")
                    return
                elif self.mode == "bye":
                    conn.sendall(b"* BYE " + self.BYE.encode() + b"\r\n")
                    return
                else:
                    chunk = b"* OK [ALERT] still thinking\r\n" * (1 if self.mode == "slow" else 2000)
                    while not self.stop.is_set():
                        conn.sendall(chunk)
                        if self.mode == "slow":
                            time.sleep(0.2)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.stop.set()
        self.sock.close()


@pytest.mark.parametrize("mode,expect", [("slow", r"source mail failed: no complete answer within 3s"),
                                         ("flood", r"the server's answer passed \d+ bytes; cut off")])
def test_a_never_ending_answer_is_a_bounded_poll_failure(tidings, mode, expect):
    srv = HostileIMAP(mode)
    try:
        source(tidings, f"imap://127.0.0.1:{srv.port}/INBOX", timeout="3s", extra='max_body = "1MB"\nstarttls = false')
        start = time.monotonic()
        r = tidings.check(timeout=30)
        took = time.monotonic() - start
        assert r.code == 2, r
        assert re.search(expect, r.stderr), r
        assert took < 8, f"the poll took {took:.1f}s"
        assert_no_secrets(tidings, [r], [PASSWORD])
    finally:
        srv.close()


def test_bye_during_a_command_quotes_the_server(tidings):
    """A `* BYE` in answer to a command, then a closed connection: the failure quotes the server's
    words, scrubbed before they are cut (issue 30 item 16), not a read error of the socket."""
    srv = HostileIMAP("bye")
    try:
        source(tidings, f"imap://127.0.0.1:{srv.port}/INBOX", extra="starttls = false")
        r = tidings.check(timeout=30)
        assert r.code == 2, r
        assert re.search(r"source mail failed: the server ended the session: System going down for maintenance, "
                         r"back at 04:00 \(x+", r.stderr), r.stderr
        assert "errno" not in r.stderr, r.stderr
        assert_no_secrets(tidings, [r], [PASSWORD, PASSWORD[:8]])
    finally:
        srv.close()
