"""A PostgreSQL state made by the last build on postgres-nio opens with libpq and goes on
(issue 31 item 4): fixtures/state-made-by-postgres-nio.sql is `pg_dump` of a database that
main at 27940ad (postgres-nio, 2026-11-28) wrote with an exec source: a baseline of items a and b,
then a poll that changed a, added c and removed b (three events, delivered to stdout), and a
silence. It is restored as the role tidings, then today's binary reads it and polls on."""
import os
import subprocess
from pathlib import Path

from postgres import ROLE

FIXTURE = Path(__file__).parent / "fixtures" / "state-made-by-postgres-nio.sql"


def restore(pg_db):
    p = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(pg_db.port),
                        "-U", ROLE, "-d", pg_db.name, "-f", str(FIXTURE)],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "PGPASSWORD": pg_db.password})
    assert p.returncode == 0, p.stderr


def test_a_state_made_by_the_postgres_nio_build_opens_and_goes_on(tidings, pg_db):
    restore(pg_db)
    out = tidings.root / "out.jsonl"
    script = tidings.root / "lines.sh"
    script.write_text(f"#!/bin/sh\ncat {out}\n")
    os.chmod(script, 0o700)
    # history_days far out: the fixture's events keep their dates, and a test may not depend on
    # how long ago the fixture was made.
    tidings.write_config(f'''
        plugins_dir = "plugins.d"
        history_days = 36500
        [sinks.out]
        type = "stdout"
        format = "json"
        [sources.lines]
        provider = "exec"
        command = ["{script}"]
        format = "jsonl"
        interval = "1m"
        ''' + pg_db.state_toml())

    old = tidings.run("history", "--json")
    assert old.code == 0, old
    events = [(e["event"], e["key"]) for e in old.events]
    assert sorted(events) == [("changed", "a"), ("new", "c"), ("removed", "b")], old
    old_ids = {e["id"] for e in old.events}
    items = tidings.run("items", "lines", "--json")
    assert items.code == 0, items
    assert sorted(i["key"] for i in items.events) == ["a", "c"], items

    # The same items and one more: only `new d` (a baseline would be silent; a re-read state
    # that lost the items would report a and c again).
    out.write_text('{"key":"a","title":"Alpha 2"}\n{"key":"c","title":"Gamma"}\n{"key":"d","title":"Delta"}\n')
    r = tidings.check()
    assert r.code in (0, 1), r
    assert [(e["event"], e["key"]) for e in r.events] == [("new", "d")], r
    assert "baseline" not in r.stderr, r

    after = tidings.run("history", "--json")
    assert len(after.events) == 4 and old_ids < {e["id"] for e in after.events}, after
    assert pg_db.scalar("SELECT count(*) FROM silence WHERE comment = 'fixture'") == "1"
    # No migration of its own was needed: the schema the fixture carries is today's.
    assert pg_db.scalar("SELECT count(*) FROM schema_migrations") == \
        str(FIXTURE.read_text().split("COPY public.schema_migrations")[1].split("\\.")[0].strip().count("\n"))
