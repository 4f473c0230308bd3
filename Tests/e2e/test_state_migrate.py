"""`tidings state migrate --to URL` (DESIGN §11): a SQLite state (items, validators, events,
queued deliveries, a silence) copied into PostgreSQL; tidings then runs on PostgreSQL as if
nothing happened (the next poll is no baseline, nothing re-notified, the queued deliveries
still go out with their ids); a second migrate copies nothing."""
from __future__ import annotations

import re
import sqlite3

from conftest import wait_for
from fakes.json_api import JSONAPI
from fakes.server import FakeServer
from fakes.webhook_receiver import WebhookReceiver, receiver_state
from postgres import hook_and_api_toml

TABLES = ("event", "delivery", "item", "source_state", "silence")


def config(api, hook, state=""):
    return hook_and_api_toml(hook.url, api.url, {"api": "{/name} is {/status}", "other": "{/name}"}, state)


def sqlite_counts(db) -> dict:
    with sqlite3.connect(db) as c:
        have = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return {t: c.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES if t in have}


def printed_counts(text: str) -> dict:
    """table -> the first number on the line naming it, from migrate's per-table report."""
    out = {}
    for line in text.splitlines():
        for t in TABLES:
            if re.search(rf"\b{t}\b", line) and t not in out:
                m = re.search(r"\b(\d+)\b", line.split(t, 1)[1])
                if m:
                    out[t] = int(m.group(1))
    return out


def migrate(t, pg_db):
    # --password-file (never on the command line; $PGPASSWORD or [state] would also do).
    return t.run("state", "migrate", "--to", pg_db.url, "--password-file", str(pg_db.password_file), timeout=120)


def test_migrate_sqlite_state_to_postgres_and_run_on_it(tidings, pg_db):
    with FakeServer(JSONAPI, {"items": [{"id": 1, "name": "db1", "status": "up"},
                                        {"id": 2, "name": "db2", "status": "up"}]}) as api, \
            FakeServer(WebhookReceiver, state=receiver_state(default=503)) as hook:
        # A SQLite state: baselines, then changes whose deliveries are refused (queued).
        tidings.write_config(config(api, hook))
        assert tidings.check().code == 0
        api.state["items"] = [{"id": 1, "name": "db1", "status": "down"}, {"id": 3, "name": "db3", "status": "up"}]
        r = tidings.run("check", "--deliver")
        assert r.code == 2 and "HTTP 503" in r.stderr, r
        sid = tidings.run("silence", "add", "source=other", "--for", "1h", "--comment", "moved along").stdout.strip()
        sqlite_db = tidings.state / "tidings.sqlite"
        before = sqlite_counts(sqlite_db)
        old_events = {e["id"]: e for e in tidings.run("history", "--json", "--limit", "100").events}
        queued = tidings.run("outbox", "--json").events
        assert len(old_events) == 6 and len(queued) == 6 and before["silence"] == 1, (old_events, queued, before)

        # migrate: per-table counts printed, and the same counts in PostgreSQL.
        r = migrate(tidings, pg_db)
        assert r.code == 0, r
        assert pg_db.password not in r.stdout + r.stderr
        assert printed_counts(r.stdout + r.stderr) == {t: n for t, n in before.items()}, r
        for table, n in before.items():
            assert int(pg_db.scalar(f"SELECT count(*) FROM {table}")) == n, table

        # Again: nothing copied.
        r = migrate(tidings, pg_db)
        assert r.code == 0, r
        assert set(printed_counts(r.stdout + r.stderr).values()) == {0}, r
        for table, n in before.items():
            assert int(pg_db.scalar(f"SELECT count(*) FROM {table}")) == n, f"{table} changed on the second migrate"

        # Run on PostgreSQL: the same items are no news (no baseline, nothing re-notified).
        tidings.write_config(config(api, hook, pg_db.state_toml()))
        r = tidings.check()
        assert r.code == 0 and r.events == [], r
        assert "baseline" not in r.stderr, r.stderr
        hist = {e["id"] for e in tidings.run("history", "--json", "--limit", "100").events}
        assert hist == set(old_events), "history shows the migrated events"
        rows = tidings.run("outbox", "--json").events
        assert sorted((x["event_id"], x["status"]) for x in rows) == sorted((x["event_id"], x["status"]) for x in queued)
        assert [s["id"] for s in tidings.run("silence", "list", "--json").events] == [sid]
        assert sorted(i["key"] for i in tidings.run("items", "api", "--json").events) == ["1", "3"]

        # A change after the migration is an event (the state is live), and the queued
        # deliveries go out with their original ids once the receiver accepts.
        api.state["items"].append({"id": 4, "name": "db4", "status": "up"})
        hook.state["default"] = 200
        wait_for(lambda: tidings.run("check", "--deliver").code in (0, 1, 2) and tidings.run("outbox", "--json").events == [],
                 timeout=60, interval=1, what="the migrated outbox delivered")
        got = [e["id"] for e in hook.state["accepted"]]
        new = sorted((e for e in pg_db.events() if e["key"] == "4"), key=lambda e: e["source"])
        assert [(e["source"], e["event"]) for e in new] == [("api", "new"), ("other", "new")], new
        assert sorted(i for i in got if i in old_events) == sorted(x["event_id"] for x in queued), got
        assert new[0]["id"] in got and new[0]["silenced_by"] is None
        assert new[1]["id"] not in got and new[1]["silenced_by"] == sid, "the migrated silence still holds"
        assert len(got) == len(set(got)), "each delivered once"
