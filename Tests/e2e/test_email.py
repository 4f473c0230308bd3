"""The `email` sink through the real binary against a real SMTP server (aiosmtpd, PyPI): headers
and RFC 2047 subjects parsed back with Python's `email` package, dot-stuffing, STARTTLS with a
self-signed certificate given as `ca_file`, AUTH, 4xx retried with a stable Message-ID, 5xx dead
letters, auth failure stopping the sink, plain SMTP to a remote host refused at config time, and
the crash test (server down, kill -9, server up, restart: each event once)."""
from __future__ import annotations

import email.utils
import json
import os
import signal
import socket
import time

import pytest

from conftest import outbox, read_log, wait_for
from fakes.smtp import SMTPServer, free_port, parse, self_signed
from feed import Feed, item

PASSWORD = "s3cret-Pa55-" + os.urandom(6).hex()
SUBJECT_TEXT = "Größe ✓ 日本 " + "lång rubrik " * 6


@pytest.fixture(scope="module")
def smtp():
    """One plain-SMTP aiosmtpd with AUTH for the module (loopback: STARTTLS not offered)."""
    with SMTPServer(users={"bot": PASSWORD}) as server:
        yield server


@pytest.fixture
def server(smtp):
    smtp.reset()
    return smtp


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    return self_signed(tmp_path_factory.mktemp("tls"))


def sink_config(t, url, extra="", to='"ops@example.org"'):
    """An email sink `mail` (TOML does not mind the indentation `extra` brings)."""
    t.write_config(f"""
        [sinks.mail]
        type = "email"
        smtp_url = "{url}"
        from = "Tidings <tidings@example.org>"
        to = {to}
        timeout = "5s"
        {extra}
        """)


def mail_config(t, url, extra="", password=PASSWORD, to='["Jörg Müller <joerg@example.org>", "ops@example.org"]'):
    """The sink with AUTH (the password from a file)."""
    secret = t.write_secret("smtp.password", password)
    sink_config(t, url, f'username = "bot"\npassword_file = "{secret}"\n{extra}', to)


def header_lines(content: bytes):
    return content.split(b"\r\n\r\n", 1)[0].split(b"\r\n")


def test_event_delivered_with_headers_encoding_body_and_dot_stuffing(tidings, server):
    feed = Feed(tidings)
    body = "first line\n.\n..two dots\n.hidden\nlast"
    feed.set([item("a", SUBJECT_TEXT, body=body, url="https://example.org/items/a?x=1&y=2", severity="critical")])
    mail_config(tidings, server.url)
    before = time.time()
    r = tidings.check("--deliver")
    assert r.code == 1, r  # success, new events
    [event] = r.events
    [got] = server.state["accepted"]
    assert got["mail_from"] == "tidings@example.org"
    assert got["rcpt_tos"] == ["joerg@example.org", "ops@example.org"]
    assert got["login"] == "bot" and server.state["logins"][-1][1:] == ("bot", True)
    raw = got["content"]
    assert b"\n" not in raw.replace(b"\r\n", b""), "CRLF line endings only"
    assert all(len(l) <= 78 for l in header_lines(raw)), header_lines(raw)
    assert all(len(l) <= 76 for l in raw.split(b"\r\n\r\n", 1)[1].split(b"\r\n")), "quoted-printable lines"
    assert max(raw.count(b"=?UTF-8?B?"), 0) >= 2, "a long non-ASCII subject is several encoded-words"

    m = parse(raw)
    assert m["Subject"] == "[critical] " + SUBJECT_TEXT.strip()
    assert m["Message-ID"] == f"<{event['id']}.mail@example.org>"
    assert m["X-Tidings-Event"] == event["id"] and m["X-Tidings-Source"] == "feed"
    assert m["From"].addresses[0].display_name == "Tidings" and m["From"].addresses[0].addr_spec == "tidings@example.org"
    assert [(a.display_name, a.addr_spec) for a in m["To"].addresses] == [("Jörg Müller", "joerg@example.org"), ("", "ops@example.org")]
    sent = email.utils.parsedate_to_datetime(m["Date"]).timestamp()
    assert before - 2 <= sent <= time.time() + 2 and m["Date"].endswith("+0000")
    assert m["Auto-Submitted"] == "auto-generated"
    assert m["MIME-Version"] == "1.0"
    assert m.get_content_type() == "text/plain" and m.get_content_charset() == "utf-8"
    assert m["Content-Transfer-Encoding"] == "quoted-printable"
    assert m["X-Priority"].startswith("1") and m["Importance"] == "high"
    text = m.get_content().replace("\r\n", "\n")
    # The server undid the SMTP dot-stuffing libcurl applied: lines starting with "." arrive intact.
    assert "\nfirst line\n.\n..two dots\n.hidden\nlast\n" in text, text
    assert "\nhttps://example.org/items/a?x=1&y=2\n" in text
    assert text.startswith(SUBJECT_TEXT.strip())
    assert "feed: new message, critical" in text and event["id"] in text
    for out in (r.stdout, r.stderr):
        assert PASSWORD not in out


def test_templates_and_html_alternative_through_sinks_test(tidings, server):
    mail_config(tidings, server.url, extra="""
        subject_template = "Test from {{source}}: {{title}}"
        body_template = "Plain: {{title}} & {{kind}}"
        html_template = "<p>{{title}} &amp; <a href='https://example.org'>link</a></p>"
        """, to='"ops@example.org"')
    r = tidings.run("sinks", "test", "mail")
    assert r.code == 0, r
    assert "test event" in r.stderr and "delivered" in r.stderr
    [got] = server.state["accepted"]
    m = parse(got["content"])
    assert m["Subject"] == "Test from tidings: tidings test event (sink mail)"
    assert m.get_content_type() == "multipart/alternative"
    plain, html = list(m.iter_parts())
    assert plain.get_content_type() == "text/plain" and plain.get_content().strip() == "Plain: tidings test event (sink mail) & test"
    assert html.get_content_type() == "text/html"
    assert html.get_content().strip() == "<p>tidings test event (sink mail) &amp; <a href='https://example.org'>link</a></p>"


def test_451_is_retried_and_the_retry_is_the_same_message(tidings, server):
    server.state["script"] = ["451 4.3.0 Temporary failure, try again"]
    feed = Feed(tidings)
    feed.set([item("a", "retry me")])
    mail_config(tidings, server.url)
    d = tidings.start_daemon()
    wait_for(lambda: server.state["accepted"], timeout=30, what="the retried message to be accepted")
    first, second = server.state["attempts"][:2]
    assert len(server.state["attempts"]) == 2
    m1, m2 = parse(first["content"]), parse(second["content"])
    assert m1["Message-ID"] == m2["Message-ID"] and m1["Message-ID"].startswith("<")
    assert m1.get_content() == m2.get_content()
    log = read_log(d)
    assert "451 4.3.0 Temporary failure" in log and "retrying in" in log
    assert PASSWORD not in log
    wait_for(lambda: outbox(tidings) == [], what="the outbox to empty")


def test_5xx_is_a_dead_letter_and_later_events_flow(tidings, server):
    server.state["script"] = ["554 5.7.1 Message rejected as spam"]
    feed = Feed(tidings)
    feed.set([item("a"), item("b")])
    mail_config(tidings, server.url)
    r = tidings.run("check", "--deliver")
    assert r.code == 2, r
    assert "554 5.7.1 Message rejected as spam" in r.stderr
    assert len(server.state["accepted"]) == 1
    dead = outbox(tidings)
    assert [(d["status"], d["sink"]) for d in dead] == [("dead", "mail")]
    assert "554" in dead[0]["last_error"]


def test_hostile_reply_text_is_bounded_and_escapes_nothing(tidings, server):
    server.state["script"] = ["451 4.7.1 \x1b]0;owned\x07\x1b[2J echo " + PASSWORD + " " + "A" * 3000]
    mail_config(tidings, server.url, to='"ops@example.org"')
    r = tidings.run("sinks", "test", "mail")
    assert r.code == 2, r
    assert "451 4.7.1" in r.stderr and "would retry" in r.stderr
    assert "\x1b" not in r.stderr and "\x07" not in r.stderr
    assert len(r.stderr) < 1500, len(r.stderr)
    assert PASSWORD not in r.stderr


def test_wrong_password_stops_the_sink_once_and_keeps_the_events(tidings, server):
    wrong = "wrong-" + PASSWORD
    feed = Feed(tidings)
    feed.set([item("a"), item("b")])
    mail_config(tidings, server.url, password=wrong)
    r = tidings.run("sinks", "test", "mail")
    assert r.code == 2, r
    assert "535" in r.stderr and "authentication failed" in r.stderr and "would disable this sink" in r.stderr
    d = tidings.start_daemon()
    wait_for(lambda: "DISABLED" in read_log(d), what="the sink to be disabled")
    time.sleep(3)  # a disabled sink is not retried: one AUTH from the daemon
    log = read_log(d)
    assert log.count("DISABLED") == 1
    assert "535" in log and "authentication failed" in log
    assert [ok for _, login, ok in server.state["logins"]] == [False, False], server.state["logins"]
    rows = outbox(tidings)
    assert sorted(r["status"] for r in rows) == ["pending", "retrying"]
    assert server.state["accepted"] == []
    listing = tidings.run("outbox")
    for text in (r.stdout, r.stderr, log, listing.stdout, listing.stderr, json.dumps(rows)):
        assert wrong not in text and PASSWORD not in text


def test_starttls_with_ca_file_and_a_clear_certificate_error_without(tidings, cert):
    with SMTPServer(tls=cert, require_starttls=True) as srv:
        sink_config(tidings, srv.url, f'ca_file = "{cert[0]}"')
        r = tidings.run("sinks", "test", "mail")
        assert r.code == 0, r
        [got] = srv.state["accepted"]
        assert got["tls"], "the message went over STARTTLS"

        # Without ca_file the self-signed certificate is not trusted: a clear message, retryable.
        sink_config(tidings, srv.url)
        r = tidings.run("sinks", "test", "mail")
        assert r.code == 2, r
        assert "certificate not trusted" in r.stderr and "ca_file" in r.stderr, r.stderr
        assert "would retry" in r.stderr
        assert len(srv.state["accepted"]) == 1


def test_starttls_required_but_not_offered_is_refused_clearly(tidings, server):
    sink_config(tidings, server.url, "starttls = true")
    r = tidings.run("sinks", "test", "mail")
    assert r.code == 2, r
    assert "STARTTLS" in r.stderr and "TLS failed" in r.stderr, r.stderr
    assert server.state["attempts"] == []


def test_smtps_with_ca_file(tidings, cert):
    with SMTPServer(tls=cert, implicit_tls=True) as srv:
        sink_config(tidings, srv.url, f'ca_file = "{cert[0]}"')
        r = tidings.run("sinks", "test", "mail")
        assert r.code == 0, r
        assert srv.url.startswith("smtps://") and len(srv.state["accepted"]) == 1


def test_plain_smtp_to_a_remote_host_and_injected_headers_are_config_errors(tidings):
    # config check builds the sinks and connects nowhere.
    tidings.write_config("""
        [sinks.plain]
        type = "email"
        smtp_url = "smtp://mail.example.com:587"
        starttls = false
        from = "tidings@example.org"
        to = "ops@example.org"

        [sinks.inject]
        type = "email"
        smtp_url = "smtp://mail.example.com:587"
        from = "tidings@example.org"
        to = ["ops@example.org", "x@example.org\\r\\nBcc: victim@example.org"]

        [sinks.creds]
        type = "email"
        smtp_url = "smtps://bot:hunter2@mail.example.com"
        from = "tidings@example.org"
        to = "ops@example.org"
        """)
    r = tidings.run("config", "check")
    assert r.code == 78, r
    path = str(tidings.config)
    assert f"{path}:5:" in r.stderr and "allowed only to a loopback host" in r.stderr, r.stderr
    assert f"{path}:13:" in r.stderr and "line breaks" in r.stderr, r.stderr
    assert f"{path}:17:" in r.stderr and "must not carry credentials" in r.stderr, r.stderr
    assert "hunter2" not in r.stderr
    # smtp:// to a remote host with STARTTLS (required, the default) is fine.
    sink_config(tidings, "smtp://mail.example.com:587")
    assert tidings.run("config", "check").code == 0


def test_server_down_daemon_killed_each_event_delivered_once(tidings):
    feed = Feed(tidings)
    feed.set([item("a"), item("b")])
    hold = socket.socket()  # bound, not listening: connections are refused, nobody takes the port
    hold.bind(("127.0.0.1", 0))
    port = hold.getsockname()[1]
    mail_config(tidings, f"smtp://127.0.0.1:{port}")
    d = tidings.start_daemon()
    wait_for(lambda: sorted(r["status"] for r in outbox(tidings)) == ["pending", "retrying"], timeout=30,
             what="both events queued, the first failing")
    queued = {r["event"]["id"] for r in outbox(tidings)}
    os.killpg(d.pid, signal.SIGKILL)
    d.wait(timeout=10)
    hold.close()
    with SMTPServer(port=port, users={"bot": PASSWORD}) as srv:
        tidings.start_daemon()
        wait_for(lambda: len(srv.state["accepted"]) == 2, timeout=30, what="the queued events after restart")
        wait_for(lambda: outbox(tidings) == [], what="the outbox to empty")
        time.sleep(1)
        ids = [parse(m["content"])["X-Tidings-Event"] for m in srv.state["attempts"]]
        assert sorted(ids) == sorted(queued), "each queued event once, no duplicates"
