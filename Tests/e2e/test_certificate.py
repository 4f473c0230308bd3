"""provider = "certificate" (DESIGN §12): real TLS servers on loopback (Python's ssl), certificates
made by `openssl` with dates relative to now (a private CA, expired, expiring in 3 / 10 / 60
days, a wrong name, self-signed), STARTTLS on a real SMTP server (aiosmtpd), and servers that
hang or answer with garbage."""
import datetime
import time

import pytest

import dovecot
from fakes.smtp import SMTPServer
from fakes.tls import PrivateCA, TLSServer, der_sha256, self_signed, serial_hex

DAY = datetime.timedelta(days=1)
HOUR = datetime.timedelta(hours=1)


@pytest.fixture
def ca(tmp_path):
    return PrivateCA(tmp_path / "ca")


def cert_source(t, targets, ca_file=None, extra=""):
    listed = ", ".join(f'"{x}"' for x in targets)
    ca_line = f'ca_file = "{ca_file}"' if ca_file else ""
    return t.write_plugin("certs.toml", f"""
        provider = "certificate"
        targets = [{listed}]
        timeout = "5s"
        {ca_line}
        {extra}
    """)


def by_key(events):
    return {e["key"]: e for e in events}


def test_bands_severity_and_data(tidings, ca):
    # One hour past N days: days_left is N (whole days, rounded down) however long the test takes.
    certs = {n: ca.leaf(f"in{n}", not_after=n * DAY + HOUR) for n in (3, 10, 60)}
    servers = {n: TLSServer(*certs[n]).start() for n in certs}
    try:
        cert_source(tidings, [servers[n].target for n in (3, 10, 60)], ca_file=ca.cert, extra="notify_existing = true")
        r = tidings.check()
        assert r.code == 1, r
        events = by_key(r.events)
        assert set(events) == {servers[n].target for n in certs}, r
        expected = {3: "critical", 10: "warning", 60: "info"}
        for n, severity in expected.items():
            e = events[servers[n].target]
            assert (e["event"], e["kind"], e["provider"]) == ("new", "certificate", "certificate"), e
            assert e["severity"] == severity, e
            d = e["data"]
            assert d["days_left"] == n, e
            assert d["verified"] is True and "reason" not in d, e
            assert d["sha256"] == der_sha256(certs[n][0]), e
            assert d["serial"] == serial_hex(certs[n][0]), e
            assert d["subject"] == f"CN = in{n}", e
            assert d["issuer"] == "O = Tidings Tests, CN = Tidings Test CA", e
            not_after = datetime.datetime.strptime(d["not_after"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
            left = not_after - datetime.datetime.now(datetime.timezone.utc)
            assert n * DAY < left < n * DAY + HOUR, e
            assert f"expires in {n} days" in e["title"], e

        # Days ticking down inside a band change nothing; a second poll is quiet.
        r = tidings.check()
        assert (r.code, r.events) == (0, []), r
    finally:
        for s in servers.values():
            s.stop()


def test_custom_bands(tidings, ca):
    cert = ca.leaf("in10", not_after=10 * DAY + HOUR)
    with TLSServer(*cert) as srv:
        cert_source(tidings, [srv.target], ca_file=ca.cert,
                    extra='notify_existing = true\nwarn_before = "30d"\ncritical_before = "11d"')
        r = tidings.check()
        assert [e["severity"] for e in r.events] == ["critical"], r


def test_verification_failures_are_critical_with_the_reason(tidings, ca, tmp_path):
    expired = ca.leaf("expired", not_before=-30 * DAY, not_after=-2 * DAY - HOUR)
    wrong = ca.leaf("wrong", not_after=60 * DAY, san="DNS:elsewhere.localhost")
    own = self_signed(tmp_path, "selfsigned", days=60)
    with TLSServer(*expired) as a, TLSServer(*wrong) as b, TLSServer(*own) as c:
        cert_source(tidings, [a.target, b.target, c.target], ca_file=ca.cert, extra="notify_existing = true")
        r = tidings.check()
        assert r.code == 1, r
        events = by_key(r.events)
        reasons = {a.target: "expired", b.target: "wrong name", c.target: "self-signed"}
        for target, reason in reasons.items():
            e = events[target]
            assert e["severity"] == "critical", e
            assert e["data"]["verified"] is False, e
            assert e["data"]["reason"] == reason, e
            assert e["data"]["verify_error"], e
            assert f"does not verify ({reason})" in e["title"], e
        # The dates are still read (verification off for the second look).
        # Rounded down: 2 days and an hour ago is -3 days left.
        assert events[a.target]["data"]["days_left"] == -3, events[a.target]
        assert "expired 2 days ago" in events[a.target]["title"]
        assert events[b.target]["data"]["days_left"] == 59
        assert events[b.target]["data"]["sha256"] == der_sha256(wrong[0])
        assert events[c.target]["data"]["sha256"] == der_sha256(own[0])


def test_ca_file_decides_trust(tidings, ca):
    cert = ca.leaf("private", not_after=60 * DAY + HOUR)
    with TLSServer(*cert) as srv:
        # Without ca_file the system's CAs do not know the private CA.
        cert_source(tidings, [srv.target], extra="notify_existing = true")
        r = tidings.check()
        assert r.code == 1, r
        (e,) = r.events
        assert (e["severity"], e["data"]["reason"]) == ("critical", "untrusted"), e

        # With it, the certificate verifies: a verification failure that ends is `changed`.
        cert_source(tidings, [srv.target], ca_file=ca.cert, extra="notify_existing = true")
        r = tidings.check()
        assert r.code == 1, r
        (e,) = r.events
        assert (e["event"], e["severity"], e["data"]["verified"]) == ("changed", "info", True), e

        r = tidings.run("config", "check", "--poll")
        assert r.code == 0, r
        assert "source certs: polled, 1 item" in r.stdout + r.stderr, r


def test_renewal_and_new_band_are_changed(tidings, ca):
    old = ca.leaf("svc", not_after=60 * DAY + HOUR)
    with TLSServer(*old) as srv:
        cert_source(tidings, [srv.target], ca_file=ca.cert)
        r = tidings.check()
        assert (r.code, r.stdout) == (0, ""), "the baseline is silent"

        # The same certificate, polled again: nothing.
        r = tidings.check()
        assert (r.code, r.events) == (0, []), r

        # Renewed (a new certificate, still in the info band): changed.
        new = ca.leaf("svc", not_after=90 * DAY + HOUR)
        srv.use(*new)
        r = tidings.check()
        assert r.code == 1, r
        (e,) = r.events
        assert (e["event"], e["severity"], e["data"]["days_left"]) == ("changed", "info", 90), e
        assert e["data"]["sha256"] == der_sha256(new[0]) != der_sha256(old[0])

        # The band moves (the same certificate, judged against a longer warn_before): changed.
        cert_source(tidings, [srv.target], ca_file=ca.cert, extra='warn_before = "100d"')
        r = tidings.check()
        assert r.code == 1, r
        (e,) = r.events
        assert (e["event"], e["severity"], e["data"]["sha256"]) == ("changed", "warning", der_sha256(new[0])), e


def test_unreachable_target_fails_the_poll_and_removes_nothing(tidings, ca):
    cert_a = ca.leaf("a", not_after=60 * DAY + HOUR)
    cert_b = ca.leaf("b", not_after=60 * DAY + HOUR)
    a = TLSServer(*cert_a).start()
    b = TLSServer(*cert_b).start()
    try:
        cert_source(tidings, [a.target, b.target], ca_file=ca.cert)
        r = tidings.check()
        assert r.code == 0, r

        b.stop()  # connection refused from now on
        r = tidings.check()
        assert r.code == 2, r
        assert r.events == [], "no item is removed because one target is down"
        assert f"{b.target}: " in r.stderr, r
        assert a.target + ":" not in r.stderr, "only the target that failed is named"

        # Back on the same port: nothing was lost, nothing is new.
        with TLSServer(*cert_b, port=b.port):
            r = tidings.check()
            assert (r.code, r.events) == (0, []), r
    finally:
        a.stop()


def test_hung_and_garbage_servers_fail_in_bounded_time(tidings):
    with TLSServer(mode="slow") as slow, TLSServer(mode="garbage") as junk:
        tidings.write_plugin("certs.toml", f"""
            provider = "certificate"
            targets = ["{slow.target}", "{junk.target}"]
            timeout = "2s"
        """)
        started = time.monotonic()
        r = tidings.check(timeout=30)
        took = time.monotonic() - started
        assert r.code == 2, r
        assert took < 10, f"took {took:.1f}s"
        assert "2 of 2 targets failed" in r.stderr, r
        assert f"{slow.target}: no TLS handshake within 2s" in r.stderr, r
        assert junk.target in r.stderr, r


def test_a_chain_of_fifty_certificates(tidings, ca, tmp_path):
    leaf, key = ca.leaf("chained", not_after=60 * DAY + HOUR)
    extra = [self_signed(tmp_path, f"extra{i}")[0] for i in range(49)]
    bundle = tmp_path / "bundle.pem"
    bundle.write_text(leaf.read_text() + "".join(p.read_text() for p in extra))
    with TLSServer(bundle, key) as srv:
        cert_source(tidings, [srv.target], ca_file=ca.cert, extra="notify_existing = true")
        started = time.monotonic()
        r = tidings.check()
        assert time.monotonic() - started < 10
        assert r.code == 1, r
        (e,) = r.events
        assert e["data"]["chain_length"] == 50, e
        assert e["data"]["sha256"] == der_sha256(leaf), "the leaf is the first certificate"
        assert e["severity"] == "info", e


def test_smtp_starttls_target(tidings, ca):
    cert = ca.leaf("mail", not_after=10 * DAY + HOUR)
    with SMTPServer(tls=cert) as smtp:
        target = f"smtp://127.0.0.1:{smtp.port}"
        cert_source(tidings, [target], ca_file=ca.cert, extra="notify_existing = true")
        r = tidings.check()
        assert r.code == 1, r
        (e,) = r.events
        assert e["key"] == target, e
        assert (e["severity"], e["data"]["days_left"], e["data"]["verified"]) == ("warning", 10, True), e
        assert e["data"]["sha256"] == der_sha256(cert[0]), e
        assert smtp.state["attempts"] == [], "no mail is sent"


def test_smtp_without_starttls_fails_the_poll(tidings):
    with SMTPServer() as smtp:
        cert_source(tidings, [f"smtp://127.0.0.1:{smtp.port}"])
        r = tidings.check()
        assert r.code == 2, r
        assert "STARTTLS" in r.stderr, r


def test_config_errors_name_each_bad_entry(tidings, tmp_path):
    p = tidings.write_plugin("certs.toml", """
        provider = "certificate"
        targets = [
          "good.localhost:443",
          "ftp://127.0.0.1:21",
          "127.0.0.1:99999",
          "127.0.0.1/path",
        ]
        warn_before = "3 weeks"
        critical_before = "7d"
        ca_file = "missing-ca.pem"
    """)
    r = tidings.run("config", "check")
    assert r.code == 78, r
    err = r.stderr
    assert f"{p}:5: " in err and "unknown scheme \"ftp\"" in err, err
    assert f"{p}:6: " in err and "invalid port" in err, err
    assert f"{p}:7: " in err and "not a host and port" in err, err
    assert f"{p}:9: " in err and "'warn_before'" in err, err
    assert f"{p}:11: " in err and "cannot read ca_file" in err, err


def test_example_in_plugins_d_loads_disabled(tidings):
    import pathlib
    example = pathlib.Path(__file__).resolve().parents[2] / "plugins.d" / "examples" / "certificate.toml"
    tidings.write_config("""
        [sinks.console]
        type = "stdout"
    """)
    tidings.write_plugin("certificate.toml", example.read_text())
    r = tidings.run("config", "check")
    assert r.code == 0, r
    assert "1 source (0 enabled" in r.stdout, r
    assert r.stderr == "", "loads disabled, without a warning"


@pytest.mark.skipif(not dovecot.available(), reason="dovecot-imapd is not installed")
def test_imap_starttls_target_against_a_real_dovecot(tidings, ca, tmp_path):
    # imap://host:143 is STARTTLS: the certificate Dovecot shows after STARTTLS is the one judged.
    cert, key = ca.leaf("127.0.0.1", not_after=10 * DAY + HOUR)
    with dovecot.Dovecot(tmp_path / "dovecot", users={"alice": "pw-0123456789"}, cert=cert, key=key) as d:
        target = f"imap://127.0.0.1:{d.imap_port}"
        cert_source(tidings, [target], ca_file=ca.cert, extra="notify_existing = true")
        r = tidings.check("--json")
        assert r.code == 1, r
        (e,) = r.events
        assert e["key"] == target and e["severity"] == "warning", e
        assert e["data"]["verified"] is True and e["data"]["days_left"] == 10, e
        assert e["data"]["sha256"] == der_sha256(cert), e
        # Without the private CA the same certificate does not verify: critical, with the reason.
        cert_source(tidings, [target])
        r = tidings.check("--json")
        assert r.code == 1, r
        (e,) = r.events
        assert e["event"] == "changed" and e["severity"] == "critical" and e["data"]["verified"] is False, e
