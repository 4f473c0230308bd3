"""The alertmanager provider against the real prometheus-alertmanager on loopback."""
from __future__ import annotations

import time

import pytest

from alertmanager import Alertmanager
from providers_util import assert_no_secrets, by_key, items_events

DISK = {"alertname": "DiskFull", "severity": "critical", "instance": "db1:9100", "team": "helpdesk"}
LOAD = {"alertname": "HighLoad", "severity": "warning", "instance": "web1:9100", "team": "helpdesk"}
CERT = {"alertname": "CertExpiry", "instance": "www:443", "team": "web"}
TOKEN = "am-bearer-token-8d1c2f"


@pytest.fixture
def am(tmp_path):
    a = Alertmanager(tmp_path).start()
    yield a
    a.stop()


def configure(t, am, extra=""):
    t.write_secret("am.token", TOKEN)
    t.write_plugin("helpdesk.toml", f"""
        provider = "alertmanager"
        base_url = "{am.url}"
        bearer_token_file = "{t.root / 'secrets' / 'am.token'}"
        {extra}
        """)


def fingerprints(am):
    return {a["labels"]["alertname"]: a["fingerprint"] for a in am.alerts()}


def test_firing_resolved_and_details(tidings, am):
    am.fire(DISK, summary="Disk almost full on db1", description="/var is 97% full, 2.1 GiB left")
    configure(tidings, am, 'flap_window = "1s"')
    base = tidings.check()
    assert base.code == 0 and base.stdout == "", base

    am.fire(LOAD, description="load15 is 31 on 8 cores")
    am.fire(CERT, summary="Certificate for www expires in 5 days")
    r = tidings.check()
    assert r.code == 1, r
    evs = by_key(items_events(r))
    fp = fingerprints(am)
    load, cert = evs[("new", fp["HighLoad"])], evs[("new", fp["CertExpiry"])]
    assert len(evs) == 2
    assert load["kind"] == "alert" and load["severity"] == "warning"
    assert load["title"] == "HighLoad on web1:9100"       # no summary: alertname + instance
    assert load["body"] == "load15 is 31 on 8 cores"
    assert load["url"].startswith("http://prometheus:9090/graph")
    assert cert["severity"] == "info" and cert["title"] == "Certificate for www expires in 5 days"

    am.resolve(DISK)
    r = tidings.check()  # gone, but within flap_window: nothing yet
    assert r.code == 0 and r.stdout == "", r
    time.sleep(1.2)
    r = tidings.check()
    assert r.code == 1, r
    [rm] = items_events(r)
    assert (rm["event"], rm["key"]) == ("removed", fp["DiskFull"])
    assert rm["title"] == "Resolved: Disk almost full on db1"
    assert rm["body"].startswith("resolved after 12m")
    assert_no_secrets(tidings, [base, r], [TOKEN])


def test_flapping_alert_is_one_changed_event(tidings, am):
    am.fire(DISK, summary="Disk almost full on db1")
    configure(tidings, am)  # default flap_window = 5m
    assert tidings.check().code == 0
    am.resolve(DISK)
    r = tidings.check()
    assert r.code == 0 and r.stdout == "", r
    am.fire(DISK, summary="Disk almost full on db1")
    r = tidings.check()
    assert r.code == 1, r
    [ev] = items_events(r)
    assert ev["event"] == "changed" and ev["data"].get("flapped") is True
    assert ev["title"].startswith("Firing again")


def test_filter_matchers_and_items_view(tidings, am):
    am.fire(DISK, summary="Disk almost full on db1", description="/var is 97% full")
    am.fire(CERT, summary="Certificate for www expires in 5 days")
    configure(tidings, am, 'filter = [\'team="helpdesk"\', \'severity=~"critical|warning"\']')
    assert tidings.check().code == 0
    req_ok = tidings.run("items", "helpdesk", "--json")
    assert req_ok.code == 0, req_ok
    items = req_ok.events
    assert [i["title"] for i in items] == ["Disk almost full on db1"]   # CERT is filtered out
    assert items[0]["body"] == "/var is 97% full" and items[0]["severity"] == "critical"
    am.fire(LOAD, description="load")
    assert tidings.check().code == 1
    text = tidings.run("items", "helpdesk")
    assert text.code == 0 and "Disk almost full on db1" in text.stdout and "HighLoad on web1:9100" in text.stdout


def test_unreachable_and_malformed(tidings, am, tmp_path):
    configure(tidings, am)
    assert tidings.check().code == 0
    am.stop()
    r = tidings.check()
    assert r.code == 2 and r.stdout == "", r
    assert "helpdesk" in r.stderr
    # Something that is not Alertmanager answering on the configured URL: malformed body.
    from fakes.server import FakeHandler, FakeServer

    class NotAM(FakeHandler):
        def route(self, req):
            return 200, {"Content-Type": "application/json"}, '{"status": "success", "data": '

    with FakeServer(NotAM) as srv:
        configure(tidings, type("A", (), {"url": srv.url})())
        r = tidings.check()
        assert r.code == 2 and "malformed" in r.stderr.lower(), r
        assert srv.requests[0].headers["authorization"] == f"Bearer {TOKEN}"
    assert_no_secrets(tidings, [r], [TOKEN])


def test_rate_limited(tidings):
    from fakes.server import FakeHandler, FakeServer

    class Busy(FakeHandler):
        def route(self, req):
            return 429, {"Retry-After": "30"}, "slow down"

    with FakeServer(Busy) as srv:
        configure(tidings, type("A", (), {"url": srv.url})())
        r = tidings.check()
        assert r.code == 2 and "429" in r.stderr, r
