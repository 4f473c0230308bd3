"""The messagebox provider (Statuspage v2) against fakes/statuspage.py, and the notice lifecycle."""
from __future__ import annotations

import pytest

from fakes import statuspage
from fakes.statuspage import ago, incident, maintenance, update
from providers_util import by_key, items_events


@pytest.fixture
def fake():
    srv = statuspage.start(incidents=[incident("inc1", "Webhooks delayed", impact="minor")])
    yield srv
    srv.stop()


def configure(t, fake, extra=""):
    t.write_plugin("status.toml", f"""
        provider = "messagebox"
        base_url = "{fake.url}"
        {extra}
        """)


def notices(t):
    r = t.run("notices", "--json")
    assert r.code == 0, r
    return r.events


def test_incidents_and_maintenance_as_notices(tidings, fake):
    configure(tidings, fake)
    base = tidings.check()
    assert base.code == 0 and base.stdout == "", base

    mnt = maintenance("mnt1", "Database maintenance")
    fake.state["scheduled_maintenances"].append(mnt)
    fake.state["incidents"].append(incident("inc2", "Actions outage", impact="critical"))
    r = tidings.check()
    assert r.code == 1, r
    evs = by_key(items_events(r))
    assert set(evs) == {("new", "mnt1"), ("new", "inc2")}
    m, i = evs[("new", "mnt1")], evs[("new", "inc2")]
    assert m["kind"] == i["kind"] == "notice"
    assert m["severity"] == "info" and i["severity"] == "critical"
    assert m["body"] == "We will be performing Database maintenance."
    assert m["url"] == "https://stspg.io/mnt1"
    assert m["data"]["scheduled_until"] == mnt["scheduled_until"]

    # A new incident update is a changed event carrying the latest update's body.
    inc = fake.state["incidents"][1]
    inc["status"] = "identified"
    inc["incident_updates"].insert(0, update("inc2-u2", "identified", "A bad deploy; rolling back.", ago(hours=1)))
    r = tidings.check()
    assert r.code == 1, r
    [ch] = items_events(r)
    assert (ch["event"], ch["key"], ch["body"]) == ("changed", "inc2", "A bad deploy; rolling back.")
    assert "identified" in ch["title"]

    # Nothing changed: a conditional request, answered 304.
    r = tidings.check()
    assert r.code == 0 and r.stdout == "", r
    assert fake.state.get("not_modified", 0) >= 1

    # Resolved: removed (and its notice ends).
    inc["status"] = "resolved"
    r = tidings.check()
    assert r.code == 1, r
    assert [(e["event"], e["key"]) for e in items_events(r)] == [("removed", "inc2")]
    assert [n["key"] for n in notices(tidings)] == ["mnt1"]


def test_notices_list_and_dismiss(tidings, fake):
    notices_list_and_dismiss(tidings, fake)


def test_notices_list_and_dismiss_on_postgres(tidings, fake, pg_db):
    """The same lifecycle with the state in PostgreSQL (DESIGN §11): the notice book is there."""
    tidings.write_config(pg_db.state_toml())
    notices_list_and_dismiss(tidings, fake)
    assert not (tidings.state / "tidings.sqlite").exists()
    assert sorted(k for (k,) in pg_db.query("SELECT key FROM notice WHERE dismissed_at IS NOT NULL")) == ["m1", "m2"]


def notices_list_and_dismiss(tidings, fake):
    configure(tidings, fake)
    assert tidings.check().code == 0
    storage, network = maintenance("m1", "Storage upgrade"), maintenance("m2", "Network work")
    fake.state["scheduled_maintenances"] += [storage, network]
    assert tidings.check().code == 1
    pending = notices(tidings)
    assert sorted(n["key"] for n in pending) == ["m1", "m2"]
    assert all(n["expires_at"] == storage["scheduled_until"] for n in pending)  # scheduled_until

    text = tidings.run("notices")
    assert text.code == 0 and "Storage upgrade" in text.stdout and "Network work" in text.stdout

    m1 = next(n for n in pending if n["key"] == "m1")
    r = tidings.run("notices", "dismiss", m1["id"])
    assert r.code == 0, r
    assert [n["key"] for n in notices(tidings)] == ["m2"]
    r = tidings.run("notices", "dismiss", "01NOSUCHNOTICE")
    assert r.code == 64 and "no pending notice" in r.stderr, r
    r = tidings.run("notices", "dismiss", "--all")
    assert r.code == 0, r
    assert notices(tidings) == []
    assert tidings.run("notices", "dismiss").code == 64


def test_notice_ttl_expires_notices(tidings, fake):
    configure(tidings, fake, 'notice_ttl = "1s"')
    assert tidings.check().code == 0
    fake.state["incidents"].append(incident("inc9", "Slow pages"))
    assert tidings.check().code == 1
    assert [n["key"] for n in notices(tidings)] == ["inc9"]
    import time
    time.sleep(1.2)
    assert notices(tidings) == []


def test_rate_limit_and_malformed(tidings, fake):
    configure(tidings, fake)
    assert tidings.check().code == 0
    fake.state["retry_after"] = 60
    r = tidings.check()
    assert r.code == 2 and "429" in r.stderr and r.stdout == "", r
    fake.state["retry_after"] = None
    fake.state["malformed"] = True
    r = tidings.check()
    assert r.code == 2 and "malformed" in r.stderr.lower(), r
