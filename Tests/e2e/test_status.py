"""`tidings status` (DESIGN §13, issue 24 item 1): the state at a glance, in text and JSON, and
its exit status: 0 healthy, 1 needs attention, 2 no state or unreadable."""
from __future__ import annotations

import json
import os
import signal
import time

from conftest import read_log, wait_for
from fakes.json_api import JSONAPI
from fakes.server import FakeServer
from fakes.webhook_receiver import WebhookReceiver, receiver_state
from postgres import hook_and_api_toml
from test_check import api_source


def status_json(t):
    r = t.run("status", "--json")
    assert r.code in (0, 1), r
    lines = r.stdout.splitlines()
    assert len(lines) == 1, "one JSON object"
    return r.code, json.loads(lines[0])


def exec_plugin(t, name, lines, extra=""):
    """An exec source printing `lines` (dicts) as JSON lines, every poll."""
    data = t.root / f"{name}.jsonl"
    data.write_text("".join(json.dumps(l) + "\n" for l in lines))
    t.write_plugin(name, f"#!/bin/sh\ncat {data}\n", mode=0o755)
    t.write_plugin(f"{name}.toml", f'interval = "1h"\njitter = 0.0\n{extra}\n')
    return data


def quiet_hours_now():
    """Quiet hours from a minute ago until two hours from now, in UTC (they may wrap midnight)."""
    fmt = lambda at: time.strftime("%H:%M", time.gmtime(at))
    now = time.time()
    return f'quiet_hours = {{ start = "{fmt(now - 60)}", end = "{fmt(now + 7200)}", timezone = "UTC" }}'


def problems_config(t, hook_url, state=""):
    """`api` to a webhook `hook` (its events die there when the hook refuses them), `lister` to
    `console` in quiet hours (held), the rest to `console`; then `state` (a [state] table)."""
    t.write_config(f"""
        [sinks.hook]
        type = "webhook"
        url = "{hook_url}/hook"
        [sinks.console]
        type = "stdout"
        format = "json"

        [[routes]]
        match = {{ source = "api" }}
        sinks = ["hook"]
        [[routes]]
        match = {{ source = "lister" }}
        sinks = ["console"]
        {quiet_hours_now()}
        [[routes]]
        sinks = ["console"]
    """ + state)


def test_no_state_says_so_exits_2_and_creates_nothing(tidings):
    tidings.write_config('[sinks.console]\ntype = "stdout"\n')
    exec_plugin(tidings, "lister", [])
    for args in (["status"], ["status", "--json"]):
        r = tidings.run(*args)
        assert r.code == 2, r
        assert r.stdout == ""
        assert f"no state in {tidings.state}" in r.stderr, r
    assert not tidings.state.exists(), "status created the state directory"

    # A directory without a database is no state either; nothing appears in it.
    tidings.state.mkdir(mode=0o700)
    r = tidings.run("status")
    assert r.code == 2 and "no state" in r.stderr, r
    assert list(tidings.state.iterdir()) == []

    # A database that is not one: exit 2, and the file is left where it is (not moved aside).
    (tidings.state / "tidings.sqlite").write_text("this is not SQLite " * 100)
    os.chmod(tidings.state / "tidings.sqlite", 0o600)
    r = tidings.run("status")
    assert r.code == 2 and "cannot read the state database" in r.stderr, r
    assert sorted(p.name for p in tidings.state.iterdir()) == ["tidings.sqlite"]


def test_a_daemon_with_problems_needs_attention_and_every_section_shows_them(tidings):
    error_body = b"backend \x1b[2J down"
    with FakeServer(JSONAPI, {"status": 500, "error_body": error_body}) as api, \
            FakeServer(WebhookReceiver, state=receiver_state(default=400)) as hook:
        problems_config(tidings, hook.url)
        api_source(tidings, "api", api.url, 'interval = "1h"\njitter = 0.0\nerror_threshold = 1')
        exec_plugin(tidings, "lister", [{"key": "a", "title": "Alpha is held"}], "notify_existing = true")
        exec_plugin(tidings, "bulletin", [{"key": "n1", "title": "Maintenance tonight", "kind": "notice"}],
                    "notify_existing = true")
        exec_plugin(tidings, "off", [], "enabled = false")
        sid = tidings.run("silence", "add", "source=nothing", "--for", "1h", "--comment", "testing").stdout.strip()
        assert sid

        d = tidings.start_daemon()

        def ready():
            code, s = status_json(tidings)
            hook_box, console = s["outbox"].get("hook", {}), s["outbox"].get("console", {})
            return (s["sources"]["counts"]["failing"] == 1 and hook_box.get("dead") == 1
                    and console.get("held") == 1 and console.get("pending") == 0 and s["notices"]) and (code, s)
        code, s = wait_for(ready, timeout=30, what="a failing source, a dead letter, a held delivery, a notice")
        assert code == 1

        assert s["healthy"] is False
        assert "1 failing source" in s["attention"] and "1 dead letter" in s["attention"], s["attention"]
        assert s["state"] == {"backend": "sqlite", "location": str(tidings.state / "tidings.sqlite")}
        daemon = s["daemon"]
        assert (daemon["running"], daemon["pid"], daemon["version"], daemon["instances"]) == (True, d.pid, "0.1.0", []), daemon
        assert daemon["since"].endswith("Z")
        src = s["sources"]
        assert src["total"] == 4
        assert src["counts"] == {"ok": 2, "new": 0, "failing": 1, "auth-failed": 0, "paused": 1}, src
        [failing] = src["failing"]
        assert (failing["name"], failing["provider"], failing["state"], failing["failures"]) == ("api", "http-json", "failing", 1)
        assert "HTTP 500" in failing["last_error"] and failing["next_try"] and failing["last_error_at"]
        hook_box = s["outbox"]["hook"]
        assert (hook_box["type"], hook_box["pending"], hook_box["held"], hook_box["dead"]) == ("webhook", 0, 0, 1)
        assert "400" in hook_box["last_dead_error"]
        console = s["outbox"]["console"]
        assert console["held"] == 1 and console["dead"] == 0
        [hold] = console["holds"]
        assert (hold["reason"], hold["count"]) == ("quiet", 1) and "(quiet hours)" in hold["description"]
        [silence] = s["silences"]
        assert (silence["id"], silence["comment"], silence["state"]) == (sid, "testing", "active")
        [notice] = s["notices"]
        assert (notice["source"], notice["title"]) == ("bulletin", "Maintenance tonight")
        kinds = {(e["source"], e["event"]) for e in s["events"]}
        assert {("api", "error"), ("lister", "new"), ("bulletin", "new")} <= kinds, kinds

        r = tidings.run("status")
        assert r.code == 1, r
        out = r.stdout
        assert f"daemon: running, PID {d.pid}, since " in out and "version 0.1.0" in out, out
        assert "sources: 4 (2 ok, 1 failing, 1 paused)" in out, out
        assert "failing     api (http-json), 1 failure" in out and "HTTP 500" in out and "next try " in out, out
        assert "\x1b" not in out and "\\u{1B}" in out, out
        assert "hook (webhook): 1 dead" in out and "last dead letter: " in out
        assert "console (stdout): 1 held" in out and "(quiet hours)" in out, out
        assert f"{sid}  source=nothing  until " in out
        assert "notices: 1 pending" in out and "Maintenance tonight" in out
        assert "last events:" in out and "Alpha is held" in out
        assert out.rstrip().splitlines()[-1] == "status: needs attention: 1 failing source; 1 dead letter", out
        assert d.poll() is None

        # The daemon stops: its sources are not polled any more, which needs attention too.
        d.send_signal(signal.SIGTERM)
        d.wait(timeout=30)
        code, s = status_json(tidings)
        assert code == 1
        assert s["daemon"] == {"running": False, "pid": None, "since": None, "version": None, "instances": [],
                               "polls_overrunning": None, "overrunning": [], "scheduler_ran_at": None}
        assert "no daemon runs: 3 enabled sources are not polled" in s["attention"], s["attention"]
        assert "daemon: none (3 enabled sources not polled)" in tidings.run("status").stdout


def test_all_healthy_exits_0_and_the_status_of_a_stopped_daemon_is_1(tidings):
    tidings.write_config('[sinks.console]\ntype = "stdout"\nformat = "json"\n')
    exec_plugin(tidings, "lister", [{"key": "a", "title": "Alpha"}])
    d = tidings.start_daemon()
    wait_for(lambda: "baseline" in read_log(d), what="the baseline poll")

    r = tidings.run("status")
    assert r.code == 0, r
    assert "sources: 1 (1 ok)" in r.stdout and "outbox: empty" in r.stdout and "silences: none active" in r.stdout, r
    assert r.stdout.rstrip().splitlines()[-1] == "status: healthy"
    code, s = status_json(tidings)
    assert code == 0 and s["healthy"] is True and s["attention"] == []
    assert s["daemon"]["pid"] == d.pid
    assert s["outbox"] == {"console": {"type": "stdout", "pending": 0, "held": 0, "dead": 0, "holds": [], "last_dead_error": None}}
    assert s["events"] == [] and s["silences"] == [] and s["notices"] == []

    os.killpg(d.pid, signal.SIGKILL)
    d.wait(timeout=10)
    r = tidings.run("status")
    assert r.code == 1 and "daemon: none (1 enabled source not polled)" in r.stdout, r

    # No enabled source: nothing to poll, so no daemon is fine.
    tidings.write_plugin("lister.toml", 'enabled = false\n')
    r = tidings.run("status")
    assert r.code == 0 and "sources: 1 (1 paused)" in r.stdout and "daemon: none\n" in r.stdout, r


def test_overrunning_polls_and_a_stalled_scheduler_need_attention(tidings):
    """Issue 30: a stalled daemon still reported itself healthy. The daemon writes its pulse
    (polls running past their timeout, its scheduler loop's last pass) to tidings.pulse every
    5 s; `tidings status` shows it and needs attention while a poll overruns or the loop has
    not run for 30 s. A stopped (SIGSTOP) daemon cannot write: the pulse it left is replaced
    by one saying what a stalled daemon would, until it runs again and writes its own. A pulse
    of another daemon (an earlier one's, by its PID) is not used."""
    tidings.write_config('[sinks.console]\ntype = "stdout"\nformat = "json"\n')
    exec_plugin(tidings, "lister", [{"key": "a", "title": "Alpha"}])
    d = tidings.start_daemon()
    wait_for(lambda: "baseline" in read_log(d), what="the baseline poll")
    pulse = tidings.state / "tidings.pulse"
    wait_for(lambda: pulse.exists(), timeout=20, what="tidings.pulse")
    code, s = status_json(tidings)
    assert code == 0 and s["healthy"] is True, s
    assert s["daemon"]["polls_overrunning"] == 0 and s["daemon"]["overrunning"] == [], s["daemon"]
    assert s["daemon"]["scheduler_ran_at"], s["daemon"]
    r = tidings.run("status")
    assert r.code == 0 and "  polls: 0 running past their timeout; scheduler last ran " in r.stdout, r

    os.kill(d.pid, signal.SIGSTOP)
    try:
        stamp = lambda at: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
        # As written by a daemon whose status loop runs but whose scheduler loop stopped 95 s ago.
        pulse.write_text(json.dumps({"tick_at": stamp(time.time() - 95), "overrunning": ["lister", "lister"],
                                     "at": stamp(time.time()), "pid": d.pid}))
        code, s = status_json(tidings)
        assert code == 1 and s["healthy"] is False, s
        assert s["attention"][:1] == ["2 polls running past their timeout (lister)"], s["attention"]
        assert any(a.startswith("the daemon's scheduler has not run for 1m3") and a.endswith("(stalled; polls are not started)")
                   for a in s["attention"]), s["attention"]
        assert s["daemon"]["polls_overrunning"] == 2 and s["daemon"]["overrunning"] == ["lister", "lister"], s["daemon"]
        r = tidings.run("status")
        assert r.code == 1 and "  polls: 2 running past their timeout (lister); scheduler last ran 1m3" in r.stdout, r
        assert "status: needs attention: 2 polls running past their timeout (lister); the daemon's scheduler has not run for" in r.stdout, r
    finally:
        os.kill(d.pid, signal.SIGCONT)
    wait_for(lambda: status_json(tidings)[0] == 0 or None, timeout=20, what="the daemon's own pulse again")

    os.killpg(d.pid, signal.SIGKILL)
    d.wait(timeout=10)
    # The killed daemon's last pulse, written after the new daemon took the lock as far as the
    # clocks can tell (file times and the calendar run's shifted clock need not agree): its PID
    # is not the new daemon's, so it is not used.
    pulse.write_text(json.dumps({"tick_at": stamp(time.time() - 95), "overrunning": ["lister"], "at": stamp(time.time() + 5),
                                 "pid": d.pid}))
    d = tidings.start_daemon()
    wait_for(lambda: "scheduler:" in read_log(d) or None, timeout=20, what="the new daemon's scheduler")
    code, s = status_json(tidings)
    assert s["daemon"]["polls_overrunning"] in (None, 0) and not any("past their timeout" in a or "stalled" in a for a in s["attention"]), s


def test_on_postgres_the_instances_sharing_the_state_are_listed(tidings, pg_db):
    with FakeServer(JSONAPI, {"items": [{"id": 1, "name": "db1", "status": "up"}]}) as api, \
            FakeServer(WebhookReceiver, state=receiver_state()) as hook:
        tidings.write_config(hook_and_api_toml(hook.url, api.url, {"api": "{/name} is {/status}"}, pg_db.state_toml()))
        d = tidings.start_daemon()

        def leased():
            code, s = status_json(tidings)
            inst = s["daemon"]["instances"]
            return inst and inst[0]["sources"] == 1 and s["sources"]["counts"]["ok"] == 1 and (code, s)
        code, s = wait_for(leased, timeout=30, what="the instance leasing the source")
        assert code == 0, s
        assert s["state"]["backend"] == "postgres" and pg_db.password not in json.dumps(s)
        [inst] = s["daemon"]["instances"]
        assert inst["instance"].endswith(f":{d.pid}") and inst["sinks"] == 1, inst
        assert s["daemon"]["running"] is True

        r = tidings.run("status")
        assert r.code == 0, r
        assert "instances sharing the state: 1" in r.stdout and f":{d.pid}  since " in r.stdout and "polls 1 source" in r.stdout, r

        # A clean stop releases its leases and stops counting at once: no daemon, sources unpolled.
        d.send_signal(signal.SIGTERM)
        d.wait(timeout=30)
        code, s = status_json(tidings)
        assert code == 1 and s["daemon"]["running"] is False and s["daemon"]["instances"] == [], s["daemon"]
        assert "no daemon runs: 1 enabled source is not polled" in s["attention"]


def test_on_postgres_failing_held_and_dead_rows_need_attention(tidings, pg_db):
    """The same report on a PostgreSQL state: a failing source, a dead letter and a held
    delivery are counted from the shared tables, and no secret of [state] is shown."""
    with FakeServer(JSONAPI, {"status": 500}) as api, \
            FakeServer(WebhookReceiver, state=receiver_state(default=400)) as hook:
        problems_config(tidings, hook.url, pg_db.state_toml())
        api_source(tidings, "api", api.url, 'interval = "1h"\njitter = 0.0\nerror_threshold = 1')
        exec_plugin(tidings, "lister", [{"key": "a", "title": "Alpha is held"}], "notify_existing = true")
        tidings.start_daemon()

        def ready():
            code, s = status_json(tidings)
            hook_box, console = s["outbox"].get("hook", {}), s["outbox"].get("console", {})
            return (s["sources"]["counts"]["failing"] == 1 and hook_box.get("dead", 0) >= 1
                    and console.get("held") == 1) and (code, s)
        code, s = wait_for(ready, timeout=40, what="a failing source, a dead letter and a held delivery on PostgreSQL")
        assert code == 1
        assert s["state"]["backend"] == "postgres" and pg_db.password not in json.dumps(s)
        assert "1 failing source" in s["attention"], s["attention"]
        assert any(a.endswith("dead letter") or a.endswith("dead letters") for a in s["attention"]), s["attention"]
        assert s["daemon"]["running"] is True and len(s["daemon"]["instances"]) == 1
        [hold] = s["outbox"]["console"]["holds"]
        assert hold["reason"] == "quiet" and hold["count"] == 1
        assert "400" in s["outbox"]["hook"]["last_dead_error"]
        r = tidings.run("status")
        assert r.code == 1, r
        assert "console (stdout): 1 held" in r.stdout and "hook (webhook): " in r.stdout and " dead" in r.stdout, r.stdout
        assert "failing     api (http-json)" in r.stdout and pg_db.password not in r.stdout + r.stderr
