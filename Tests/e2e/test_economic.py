"""The economic provider against a fake e-conomic REST API (fakes/economic.py)."""
from __future__ import annotations

import pytest

from fakes import economic
from fakes.economic import draft
from providers_util import assert_no_secrets, by_key, items_events

APP = "appSecret-DEMO-7f3a9c"
GRANT = "grantToken-DEMO-51e2b0"


@pytest.fixture
def fake():
    srv = economic.start(APP, GRANT, drafts=[draft(n, customer=100 + n, name=f"Kunde {100 + n} ApS") for n in range(1, 6)])
    yield srv
    srv.stop()


def configure(t, fake, app=APP, grant=GRANT, page_size=2, extra=""):
    t.write_secret("app", app)
    t.write_secret("grant", grant)
    t.write_plugin("books.toml", f"""
        provider = "economic"
        base_url = "{fake.url}"
        app_secret_token_file = "{t.root / 'secrets' / 'app'}"
        agreement_grant_token_file = "{t.root / 'secrets' / 'grant'}"
        page_size = {page_size}
        {extra}
        """)


def test_pages_then_exact_new_changed_removed(tidings, fake):
    configure(tidings, fake)
    base = tidings.check()
    assert base.code == 0 and base.stdout == "", base
    pages = [q for q in fake.requests if q.path == "/invoices/drafts"]
    assert [q.query["skippages"][0] for q in pages] == ["0", "1", "2"]
    assert all(q.query["pagesize"] == ["2"] for q in pages)
    assert all(q.headers["x-appsecrettoken"] == APP and q.headers["x-agreementgranttoken"] == GRANT for q in pages)

    drafts = fake.state["drafts"]
    drafts[2] = draft(3, customer=103, name="Kunde 103 ApS", net=500.0)  # gross 1,250.00 -> 625.00
    del drafts[0]                                                         # #1 booked
    drafts.append(draft(6, customer=106, name="Kunde 106 ApS", net=3360.0))  # lands on the last page
    r = tidings.check()
    assert r.code == 1, r
    evs = by_key(items_events(r))
    assert set(evs) == {("changed", "3"), ("new", "6"), ("removed", "1")}

    new = evs[("new", "6")]
    assert new["kind"] == "draft-invoice"
    assert new["title"] == "Draft #6 · Kunde 106 ApS · 4,200.00 DKK"

    ch = evs[("changed", "3")]
    assert "gross 1,250.00 → 625.00 DKK" in ch["body"]
    assert ch["data"]["changes"]["grossAmount"] == {"old": 1250, "new": 625}
    assert ch["data"]["changes"]["netAmount"] == {"old": 1000, "new": 500}

    rm = evs[("removed", "1")]
    assert "booked or deleted" in rm["body"] and "booked or deleted" in rm["title"]

    again = tidings.check()
    assert again.code == 0 and again.stdout == "", again
    assert_no_secrets(tidings, [base, r, again], [APP, GRANT])


def test_irrelevant_field_changes_are_silent(tidings, fake):
    configure(tidings, fake)
    assert tidings.check().code == 0
    fake.state["drafts"][0]["lastUpdated"] = "2026-11-21T10:00:00Z"
    fake.state["drafts"][0]["exchangeRate"] = 99.0
    r = tidings.check()
    assert r.code == 0 and r.stdout == "", r


def test_a_failed_page_fails_the_poll_and_leaves_state_untouched(tidings, fake):
    configure(tidings, fake)
    assert tidings.check().code == 0
    del fake.state["drafts"][4]          # #5 (page 3) is booked ...
    fake.state["fail_page"] = 1          # ... but page 2 fails this time
    r = tidings.check()
    assert r.code == 2 and r.stdout == "", r
    assert "E00500" in r.stderr and "logId" in r.stderr
    fake.state["fail_page"] = None
    fake.state["malformed_page"] = 1
    r = tidings.check()
    assert r.code == 2 and r.stdout == "", r
    assert "malformed" in r.stderr.lower()
    fake.state["malformed_page"] = None
    r = tidings.check()
    assert r.code == 1, r
    assert [(e["event"], e["key"]) for e in items_events(r)] == [("removed", "5")]


def test_revoked_grant_is_auth_failed_with_code_and_log_id(tidings, fake):
    configure(tidings, fake)
    assert tidings.check().code == 0
    fake.state["revoked"] = True
    r = tidings.check()
    assert r.code == 2, r
    assert "E04010" in r.stderr and "0HN8TEST" in r.stderr and "revoked" in r.stderr
    errors = [e for e in r.events if e["kind"] == "source"]
    assert [e["event"] for e in errors] == ["error"] and errors[0]["data"]["auth_failed"] is True
    assert "E04010" in errors[0]["body"]
    served = len(fake.requests)
    r2 = tidings.check()
    assert r2.code == 2 and r2.stdout == "", r2
    assert len(fake.requests) == served  # no retry in a loop: waits for a config change
    assert_no_secrets(tidings, [r, r2], [APP, GRANT])


def test_wrong_tokens_are_rejected(tidings, fake):
    configure(tidings, fake, grant="grantToken-WRONG-000000")
    r = tidings.check()
    assert r.code == 2, r
    assert "Authorization not valid." in r.stderr and "E04010" in r.stderr
    assert_no_secrets(tidings, [r], [APP, "grantToken-WRONG-000000"])


def test_rate_limit_honours_retry_after(tidings, fake):
    configure(tidings, fake)
    assert tidings.check().code == 0
    fake.state["retry_after"] = 120
    r = tidings.check()
    assert r.code == 2 and r.stdout == "", r
    assert "429" in r.stderr and "retry after 2m" in r.stderr and "E07000" in r.stderr
    fake.state["retry_after"] = None
    assert tidings.check().code == 0


def test_config_limits_and_fair_use_warning(tidings, fake):
    configure(tidings, fake, page_size=1001)
    r = tidings.run("config", "check")
    assert r.code == 78 and "page_size" in r.stderr, r
    configure(tidings, fake, page_size=1000, extra='interval = "1s"')
    r = tidings.run("config", "check")
    assert r.code == 0, r
    assert "fair-use" in r.stderr and "50000" in r.stderr
    configure(tidings, fake, page_size=1000, extra='interval = "1m"')
    r = tidings.run("config", "check")
    assert r.code == 0 and "fair-use" not in r.stderr, r
