"""Issue 3 acceptance: all four seed providers configured together."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from alertmanager import Alertmanager
from conftest import ROOT, binary
from fakes import economic, sportdate, statuspage
from fakes.economic import draft
from fakes.statuspage import incident, maintenance
from providers_util import assert_no_secrets, items_events

EMAIL, PASSWORD = "me@example.com", "acceptance-pw-1234"
APP, GRANT = "accept-app-secret-token", "accept-agreement-grant"
DISK = {"alertname": "DiskFull", "severity": "critical", "instance": "db1:9100"}
LOAD = {"alertname": "HighLoad", "severity": "warning", "instance": "web1:9100"}
NOTIFY = {"type": "notify", "messagetext": "Du har ett nytt meddelande från Lisa", "actionURL": "https://www.sportdate.se/mobile/mail.aspx"}
BOX = {"type": "messagebox", "messagetext": "Underhåll på lördag", "actionURL": "https://www.sportdate.se/mobile/nyhet.aspx"}


@pytest.fixture
def world(tmp_path):
    sd = sportdate.start(users={EMAIL: PASSWORD})
    ec = economic.start(APP, GRANT, drafts=[draft(n, name=f"Kunde {n} ApS") for n in range(1, 6)])
    sp = statuspage.start(incidents=[incident("inc1", "Webhooks delayed")])
    am = Alertmanager(tmp_path).start()
    yield sd, ec, sp, am
    am.stop()
    for s in (sd, ec, sp):
        s.stop()


def configure(t, sd, ec, sp, am):
    pw, app, grant = t.write_secret("pw", PASSWORD), t.write_secret("app", APP), t.write_secret("grant", GRANT)
    t.write_plugin("sportdate.toml", f"""
        provider = "sportdate"
        base_url = "{sd.url}"
        email = "{EMAIL}"
        password_file = "{pw}"
        """)
    t.write_plugin("books.toml", f"""
        provider = "economic"
        base_url = "{ec.url}"
        app_secret_token_file = "{app}"
        agreement_grant_token_file = "{grant}"
        page_size = 2
        """)
    t.write_plugin("status.toml", f"""
        provider = "messagebox"
        base_url = "{sp.url}"
        """)
    t.write_plugin("helpdesk.toml", f"""
        provider = "alertmanager"
        base_url = "{am.url}"
        flap_window = "0s"
        """)


def test_all_four_sources(tidings, world):
    sd, ec, sp, am = world
    sd.state["messages"] = [NOTIFY]
    am.fire(DISK, summary="Disk almost full on db1", description="/var is 97% full")
    configure(tidings, sd, ec, sp, am)

    base = tidings.check()
    assert base.code == 0 and base.stdout == "", base

    sd.state["messages"] = [NOTIFY, BOX]
    ec.state["drafts"][3] = draft(4, name="Kunde 4 ApS", net=2000.0)      # page 2 changes
    ec.state["drafts"].append(draft(6, name="Kunde 106 ApS", net=3360.0))  # page 3 appears
    sp.state["scheduled_maintenances"].append(maintenance("mnt1", "Database maintenance"))
    am.resolve(DISK)
    am.fire(LOAD, description="load15 is 31")
    r = tidings.check()
    assert r.code == 1, r
    got = sorted((e["source"], e["event"], e["kind"], e["title"]) for e in r.events)
    assert got == sorted([
        ("books", "changed", "draft-invoice", "Draft #4 · Kunde 4 ApS · 2,500.00 DKK"),
        ("books", "new", "draft-invoice", "Draft #6 · Kunde 106 ApS · 4,200.00 DKK"),
        ("helpdesk", "new", "alert", "HighLoad on web1:9100"),
        ("helpdesk", "removed", "alert", "Resolved: Disk almost full on db1"),
        ("sportdate", "new", "notice", "Underhåll på lördag"),
        ("status", "new", "notice", "GitHub: Database maintenance (scheduled)"),
    ]), r.stdout
    assert [e for e in r.events if e["kind"] == "draft-invoice" and e["event"] == "changed"][0]["body"].startswith("gross 1,250.00 → 2,500.00 DKK")

    pending = tidings.run("notices", "--json").events
    assert sorted(n["title"] for n in pending) == ["GitHub: Database maintenance (scheduled)", "Underhåll på lördag"]
    assert tidings.run("notices", "dismiss", pending[0]["id"]).code == 0
    assert [n["id"] for n in tidings.run("notices", "--json").events] == [pending[1]["id"]]
    assert tidings.run("notices", "dismiss", "--all").code == 0
    assert tidings.run("notices", "--json").stdout == ""

    quiet = tidings.check()
    assert quiet.code == 0 and quiet.stdout == "", quiet

    # Rejected Sportdate credentials, a revoked e-conomic grant, a 429: exit 2 with clear reasons.
    sd.state["users"][EMAIL] = "changed-elsewhere"
    ec.state["revoked"] = True
    sp.state["retry_after"] = 300
    bad = tidings.check()
    assert bad.code == 2, bad
    assert "source sportdate failed" in bad.stderr and "rejected" in bad.stderr
    assert "source books failed" in bad.stderr and "E04010" in bad.stderr and "logId 0HN8TEST" in bad.stderr
    assert "source status failed" in bad.stderr and "429" in bad.stderr
    assert sorted((e["source"], e["event"]) for e in bad.events) == [("books", "error"), ("sportdate", "error")]
    assert_no_secrets(tidings, [base, r, quiet, bad], [PASSWORD, APP, GRANT])


def test_insecure_sportdate_url_is_refused(tidings, world):
    sd, ec, sp, am = world
    configure(tidings, sd, ec, sp, am)
    tidings.write_plugin("sportdate.toml", (tidings.plugins / "sportdate.toml").read_text()
                         .replace(sd.url, "http://www.sportdate.se"))
    r = tidings.check()
    assert r.code == 78 and 'source "sportdate"' in r.stderr, r
    assert_no_secrets(tidings, [r], [PASSWORD])


def test_shipped_provider_examples_load(tidings):
    """plugins.d/ ships one disabled example per provider; the shipped config must still load."""
    cfg = str(ROOT / "etc" / "tidings.toml")
    check = subprocess.run([binary(), "config", "check", "--config", cfg, "--state-dir", str(tidings.state)],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    # The placeholders are private (`make build` makes them so: git keeps no modes). Their
    # sources are disabled, so that they are still placeholders is no news at every start.
    for secret in (ROOT / "plugins.d" / "secrets").glob("*"):
        if secret.name != "README":
            assert os.stat(secret).st_mode & 0o077 == 0, f"{secret} is readable by group or others"
    assert "CHANGE-ME" not in check.stderr, check.stderr
    p = subprocess.run([binary(), "sources", "--json", "--config", cfg, "--state-dir", str(tidings.state)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    sources = {s["name"]: s for s in map(json.loads, p.stdout.splitlines())}
    for name, provider in [("sportdate", "sportdate"), ("economic", "economic"), ("helpdesk", "alertmanager"), ("status", "messagebox")]:
        assert sources[name]["provider"] == provider and sources[name]["state"] == "disabled"
