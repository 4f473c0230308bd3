"""Issue 4 acceptance: desktop, webhook and exec sinks together under the daemon."""
from __future__ import annotations

import base64
import json
import os

import pytest

from conftest import wait_for
from fakes.server import FakeServer
from fakes.session_bus import SessionBus, available
from fakes.webhook_receiver import WebhookReceiver, receiver_state, verify
from feed import Feed, item

pytestmark = pytest.mark.skipif(available() is not None, reason=available() or "")

SECRET = "whsec_" + base64.b64encode(os.urandom(24)).decode()


def test_new_events_reach_desktop_webhook_and_exec(tidings):
    out = tidings.root / "exec-out"
    out.mkdir()
    feed = Feed(tidings)
    with SessionBus() as bus, FakeServer(WebhookReceiver, state=receiver_state(SECRET, script=[503, 500])) as srv:
        secret = tidings.write_secret("hook.secret", SECRET)
        tidings.write_config(f"""
            [sinks.desktop]
            type = "desktop"
            [sinks.hook]
            type = "webhook"
            url = "{srv.url}/in"
            secret_file = "{secret}"
            [sinks.cmd]
            type = "exec"
            command = ["/bin/sh", "-c", "cat > {out}/$TIDINGS_EVENT_ID.json"]
            """)
        tidings.start_daemon(env=bus.env)
        feed.set([item("a", "First <thing>", url="https://example.org/a"), item("b", "Second", severity="critical")])

        wait_for(lambda: len(srv.state["accepted"]) == 2, timeout=40, what="both webhooks (after two failures)")
        wait_for(lambda: len(list(out.glob("*.json"))) == 2, what="both exec invocations")
        wait_for(lambda: len(bus.notifications()) == 2, what="both Notify calls")

        events = {e["key"]: e for e in srv.state["accepted"]}
        assert len(srv.requests) == 4, "the first delivery failed twice, then both went through"
        assert all(verify(SECRET, r.headers, r.body) is None for r in srv.requests)
        first = srv.requests[0].headers["webhook-id"]
        assert [r.headers["webhook-id"] for r in srv.requests[:3]] == [first] * 3, "same id on every retry"
        assert {r.headers["webhook-id"] for r in srv.requests} == {e["id"] for e in events.values()}
        for e in events.values():
            assert json.loads((out / f"{e['id']}.json").read_text()) == e
        notes = {n["summary"]: n for n in bus.notifications()}
        assert notes["First <thing>"]["app_name"] == "tidings" and notes["First <thing>"]["actions"][1] == "Open"
        assert notes["Second"]["hints"]["urgency"] == 2
        wait_for(lambda: tidings.run("outbox", "--json").events == [], what="an empty outbox")
