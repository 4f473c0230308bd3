"""The sportdate provider against a fake Sportdate member API (fakes/sportdate.py)."""
from __future__ import annotations

import pytest

from fakes import sportdate
from providers_util import assert_no_secrets, items_events

EMAIL = "me@example.com"
PASSWORD = "s3cret-Lösen-4711"
NOTIFY = {"type": "notify", "messagetext": "Du har ett nytt meddelande från Lisa",
          "actionURL": "https://www.sportdate.se/mobile/mail.aspx"}
BOX = {"type": "messagebox", "messagetext": "Se vårt nya erbjudande: æble, øl og å",
       "actionURL": "https://www.sportdate.se/mobile/nyhet.aspx"}


@pytest.fixture
def fake():
    srv = sportdate.start(users={EMAIL: PASSWORD})
    yield srv
    srv.stop()


def configure(t, fake, password=PASSWORD, extra=""):
    t.write_secret("sportdate.pass", password)
    t.write_plugin("sportdate.toml", f"""
        provider = "sportdate"
        base_url = "{fake.url}"
        email = "{EMAIL}"
        password_file = "{t.root / 'secrets' / 'sportdate.pass'}"
        {extra}
        """)


def test_baseline_then_new_removed_and_reappearing(tidings, fake):
    fake.state["messages"] = [NOTIFY]
    configure(tidings, fake)
    base = tidings.check()
    assert base.code == 0, base
    assert base.stdout == ""
    assert fake.state["logins"] == 1  # credentials checked once at start

    fake.state["messages"] = [NOTIFY, BOX, dict(NOTIFY), {"type": "poke", "messagetext": "Ødegaard vinkade", "actionURL": ""}]
    r = tidings.check()
    assert r.code == 1, r
    evs = items_events(r)
    assert [(e["event"], e["kind"]) for e in evs] == [("new", "notice"), ("new", "message"), ("new", "poke")]
    box = evs[0]
    assert box["title"] == BOX["messagetext"]  # UTF-8 passes through untouched
    assert box["url"] == BOX["actionURL"]
    assert box["provider"] == "sportdate" and box["source"] == "sportdate"
    # Two identical entries are two items: the duplicate gets an occurrence suffix.
    assert evs[1]["key"].endswith("#2") and evs[1]["title"] == NOTIFY["messagetext"]
    assert r.stderr.count("unknown Sportdate message type 'poke'") == 1

    fake.state["messages"] = [BOX]
    r = tidings.check()
    assert r.code == 1, r
    assert sorted((e["event"], e["kind"]) for e in items_events(r)) == [("removed", "message"), ("removed", "message"), ("removed", "poke")]

    fake.state["messages"] = [BOX, NOTIFY]  # presence semantics: back again means new again
    r = tidings.check()
    assert r.code == 1, r
    assert [(e["event"], e["title"]) for e in items_events(r)] == [("new", NOTIFY["messagetext"])]

    r2 = tidings.check()
    assert r2.code == 0 and r2.stdout == "", r2
    assert fake.state["logins"] == 5  # each `check` is a fresh start: one login each, never one per request
    assert_no_secrets(tidings, [base, r, r2], [PASSWORD])


def test_message_check_sends_credentials_as_json_body_with_get_per_the_spec(tidings, fake):
    configure(tidings, fake)
    assert tidings.check().code == 0
    checks = [q for q in fake.requests if q.path == "/api/message/check"]
    assert checks and all(q.method == "GET" for q in checks)
    assert checks[0].json() == {"epost": EMAIL, "losen": PASSWORD}
    assert checks[0].headers["content-type"].startswith("application/json")


def test_message_method_post_sends_the_same_body_with_post(tidings, fake):
    configure(tidings, fake, extra='message_method = "POST"')
    assert tidings.check().code == 0
    checks = [q for q in fake.requests if q.path == "/api/message/check"]
    assert checks and all(q.method == "POST" for q in checks)
    assert checks[0].json() == {"epost": EMAIL, "losen": PASSWORD}


def test_rejected_credentials_are_auth_failed_without_more_logins(tidings, fake):
    configure(tidings, fake, password="wrong-password-123")
    r = tidings.check()
    assert r.code == 2, r
    errors = [e for e in r.events if e["kind"] == "source"]
    assert [(e["event"], e["source"]) for e in errors] == [("error", "sportdate")]
    assert "credentials" in errors[0]["title"]
    assert "sportdate" in r.stderr and "rejected" in r.stderr
    logins = fake.state["logins"]
    assert logins == 1

    r2 = tidings.check()  # the same config: no further login (no account lockout)
    assert r2.code == 2, r2
    assert fake.state["logins"] == logins
    assert [e for e in r2.events if e["kind"] == "source"] == []  # one error event, not one per poll

    configure(tidings, fake)  # the password file changes: that is a config change, try again
    r3 = tidings.check()
    assert r3.code == 1, r3
    assert [(e["event"], e["kind"]) for e in r3.events] == [("recovered", "source")]
    assert fake.state["logins"] == logins + 1
    assert_no_secrets(tidings, [r, r2, r3], ["wrong-password-123", PASSWORD])


def test_success_false_on_message_check_is_auth_failed(tidings, fake):
    configure(tidings, fake)
    assert tidings.check().code == 0
    fake.state["users"][EMAIL] = "changed-on-the-website"
    r = tidings.check()
    assert r.code == 2, r
    assert [(e["event"], e["kind"]) for e in r.events] == [("error", "source")]
    checks = fake.state["checks"]
    assert tidings.check().code == 2
    assert fake.state["checks"] == checks


def test_rate_limit_and_malformed_body_fail_the_poll(tidings, fake):
    configure(tidings, fake)
    assert tidings.check().code == 0
    fake.state["retry_after"] = 120
    r = tidings.check()
    assert r.code == 2 and "429" in r.stderr, r
    assert r.stdout == ""
    fake.state["retry_after"] = None
    fake.state["malformed"] = True
    r = tidings.check()
    assert r.code == 2 and "malformed" in r.stderr.lower(), r
    fake.state["malformed"] = False
    fake.state["messages"] = [NOTIFY]
    r = tidings.check()
    assert r.code == 1 and [e["event"] for e in items_events(r)] == ["new"], r
    assert_no_secrets(tidings, [r], [PASSWORD])


def test_plain_http_is_refused_at_config_load(tidings):
    tidings.write_secret("sportdate.pass", PASSWORD)
    tidings.write_plugin("sd.toml", f"""
        provider = "sportdate"
        base_url = "http://wwww.sportdate.se"
        email = "{EMAIL}"
        password_file = "{tidings.root / 'secrets' / 'sportdate.pass'}"
        """)
    r = tidings.check()
    assert r.code == 78, r
    assert "sd.toml" in r.stderr and 'source "sd"' in r.stderr and "http" in r.stderr
    r = tidings.run("config", "check")
    assert r.code == 78, r
    tidings.write_plugin("sd.toml", (tidings.plugins / "sd.toml").read_text() + "allow_insecure_http = true\n")
    r = tidings.run("config", "check")
    assert r.code == 0, r
    assert_no_secrets(tidings, [r], [PASSWORD])


def test_other_message_methods_are_refused_with_file_and_line(tidings, fake):
    configure(tidings, fake, extra='message_method = "PUT"')
    r = tidings.run("config", "check")
    assert r.code == 78, r
    assert "message_method" in r.stderr and '"GET"' in r.stderr and ".toml:" in r.stderr


def test_daemon_logs_in_once_per_start_and_reload_and_never_hammers(tidings, fake):
    import signal
    from conftest import read_log, wait_for

    fake.state["messages"] = [NOTIFY]
    configure(tidings, fake, extra='interval = "1s"\njitter = 0.0')
    d = tidings.start_daemon()
    wait_for(lambda: fake.state.get("checks", 0) >= 3, what="three polls")
    assert fake.state["logins"] == 1   # credentials verified once, not per poll

    configure(tidings, fake, password="now-wrong-password", extra='interval = "1s"\njitter = 0.0')
    d.send_signal(signal.SIGHUP)       # reload: verify the (new) credentials again
    wait_for(lambda: fake.state["logins"] == 2, what="login after reload")
    import time
    time.sleep(3)                      # rejected: no further logins or polls (no account lockout)
    assert fake.state["logins"] == 2
    d.send_signal(signal.SIGTERM)
    assert d.wait(timeout=20) == 0
    log = read_log(d)
    assert "credentials rejected" in log
    assert "now-wrong-password" not in log and PASSWORD not in log


def test_deployment_without_login_endpoint_still_polls(tidings, fake):
    fake.state["no_login_endpoint"] = True
    configure(tidings, fake)
    r = tidings.check()
    assert r.code == 0, r
    assert "no login check" in r.stderr
    fake.state["messages"] = [NOTIFY]
    r = tidings.check()
    assert r.code == 1 and [e["kind"] for e in r.events] == ["message"], r
    fake.state["users"][EMAIL] = "changed"
    r = tidings.check()
    assert r.code == 2 and [(e["event"], e["kind"]) for e in r.events] == [("error", "source")], r
