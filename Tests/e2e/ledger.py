"""What the state database and a webhook receiver say about reliability: events produced,
delivered, lost, duplicated; integrity; how often the daemon complained about a source.
Shared by Tests/e2e/test_faults.py and soak/soak.py.

Definitions (used in the README's soak table):
- produced: rows in the `event` table.
- delivered: produced event ids the receiver accepted (2xx) at least once.
- lost: produced event ids the receiver never accepted.
- duplicate events: two item events with the same (source, event, key, title). The fault
  server's feeds never reuse a key, so each such change must exist once.
- duplicate deliveries: extra 2xx acceptances of an id already accepted.
"""
from __future__ import annotations

import collections
import json
import re
import sqlite3
from pathlib import Path


def connect(db) -> sqlite3.Connection:
    return sqlite3.connect(str(db), timeout=20)


def state_events(db) -> list:
    with connect(db) as c:
        rows = c.execute("SELECT id, source, kind, type, key, payload FROM event ORDER BY seq").fetchall()
    return [{"id": r[0], "source": r[1], "kind": r[2], "event": r[3], "key": r[4],
             "title": json.loads(r[5]).get("title")} for r in rows]


def queued(db) -> int | None:
    """Outbox rows not yet delivered (pending, retrying or dead); None before the daemon
    created the database (connecting first would create an empty file)."""
    if not Path(db).exists():
        return None
    with connect(db) as c:
        try:
            return c.execute("SELECT count(*) FROM delivery").fetchone()[0]
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):
                return None
            raise


def integrity(db) -> str:
    with connect(db) as c:
        return "; ".join(r[0] for r in c.execute("PRAGMA integrity_check").fetchall())


class Ledger:
    def __init__(self, db, accepted_ids, events=None):
        """`db`: the SQLite state file; or `events` as state_events() gives them (a
        PostgreSQL state: postgres.Database.events())."""
        self.events = state_events(db) if events is None else events
        ids = [e["id"] for e in self.events]
        self.accepted = collections.Counter(accepted_ids)
        self.produced = len(ids)
        self.delivered = sum(1 for i in ids if self.accepted[i] > 0)
        self.lost = [i for i in ids if self.accepted[i] == 0]
        self.duplicate_deliveries = sum(n - 1 for n in self.accepted.values() if n > 1)
        changes = collections.Counter((e["source"], e["event"], e["key"], e["title"])
                                      for e in self.events if e["kind"] != "source")
        self.duplicate_events = {k: n for k, n in changes.items() if n > 1}
        self.foreign = [i for i in self.accepted if i not in set(ids)]

    def health(self, source: str, event: str) -> int:
        """How many `error` / `recovered` events a source got."""
        return sum(1 for e in self.events if e["kind"] == "source" and e["source"] == source and e["event"] == event)

    def problems(self, allow_duplicate_deliveries=False) -> list:
        out = []
        if self.lost:
            out.append(f"{len(self.lost)} events never delivered, e.g. {self.lost[:3]}")
        if self.duplicate_events:
            out.append(f"{len(self.duplicate_events)} changes recorded twice, e.g. {list(self.duplicate_events)[:3]}")
        if self.duplicate_deliveries and not allow_duplicate_deliveries:
            out.append(f"{self.duplicate_deliveries} duplicate 2xx deliveries without a crash")
        if self.foreign:
            out.append(f"{len(self.foreign)} delivered ids not in the state database, e.g. {self.foreign[:3]}")
        return out


_LEVELS = ("warning", "error", "critical")


def complaints(log_text: str, source: str) -> list:
    """Log lines at warning or above about `source` (`… warning source=NAME …`)."""
    pat = re.compile(rf"^\S+ ({'|'.join(_LEVELS)}) .*\bsource={re.escape(source)}\b")
    return [l for l in log_text.splitlines() if pat.match(l)]


def gaps(times: list) -> list:
    return [b - a for a, b in zip(times, times[1:])]


def percentile(values: list, p: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, int((len(s) - 1) * p))]


def read_text(path) -> str:
    return Path(path).read_text(errors="replace")
