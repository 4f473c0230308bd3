"""DESIGN §7, one state, one owner: the daemon's state lock and control socket, `tidings check`
beside a running daemon, and configuration changes on reload and restart."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import read_log, wait_for
from fakes.json_api import JSONAPI
from fakes.server import FakeServer
from test_check import api_source, counted_plugin
from test_daemon import CONSOLE, json_events, lister

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="runs a process as another user")


def recording_sink(t):
    """An exec sink that appends each delivered event to received.jsonl."""
    received = t.root / "received.jsonl"
    sink = t.root / "sink.sh"
    sink.write_text(f"#!/bin/sh\ncat >> {received}\necho >> {received}\n")
    os.chmod(sink, 0o755)
    return received, f"""
        [sinks.recorder]
        type = "exec"
        command = ["{sink}"]
    """


def received_events(received):
    if not received.exists():
        return []
    return [json.loads(l) for l in received.read_text().splitlines() if l.strip()]


def polling_lister(t, interval):
    """A plugin source that logs the time of each poll and lists data.jsonl."""
    data = t.root / "data.jsonl"
    data.write_text("")
    polls = t.root / "polls"
    polls.write_text("")
    t.write_plugin("lister", f"#!/bin/sh\ndate +%s.%N >> {polls}\ncat {data}\n", mode=0o755)
    set_interval(t, interval)
    return data, polls


def set_interval(t, interval):
    t.write_plugin("lister.toml", f'interval = "{interval}"\njitter = 0.0\n')


def poll_times(polls):
    return [float(x) for x in polls.read_text().split()]


def source_status(t, name):
    return next(s for s in t.run("sources", "--json").events if s["name"] == name)


def sock_path(t):
    return t.state / "tidings.sock"


def started(d):
    wait_for(lambda: "scheduler:" in read_log(d), what="the daemon's start")


def test_check_beside_the_daemon_prints_the_events_and_the_daemon_delivers_them_once(tidings):
    received, sinks = recording_sink(tidings)
    tidings.write_config(sinks)
    data = lister(tidings, interval="1h")
    d = tidings.start_daemon()
    wait_for(lambda: "baseline" in read_log(d), what="the baseline poll")
    before = source_status(tidings, "lister")

    data.write_text('{"key": "a", "title": "Alpha"}\n')
    r = tidings.check()
    assert r.code == 1, r
    assert [(e["event"], e["key"], e["title"]) for e in r.events] == [("new", "a", "Alpha")]
    wait_for(lambda: received_events(received), what="the daemon delivering what check printed")
    time.sleep(1.5)  # would a second copy arrive?
    assert [e["id"] for e in received_events(received)] == [r.events[0]["id"]], "delivered once, the event check printed"
    assert [e["id"] for e in tidings.run("history", "--json").events] == [r.events[0]["id"]]

    again = tidings.check()
    assert again.code == 0 and again.stdout == "", again
    after = source_status(tidings, "lister")
    assert after["next_due"] == before["next_due"], "a poll on request does not move the schedule"
    assert after["last_success"] != before["last_success"]
    assert d.poll() is None


def test_a_failing_check_beside_the_daemon_does_not_count_for_its_schedule_or_backoff(tidings):
    with FakeServer(JSONAPI, {"items": []}) as api:
        tidings.write_config(CONSOLE)
        api_source(tidings, "api", api.url, 'interval = "1h"\njitter = 0.0\nerror_threshold = 1')
        d = tidings.start_daemon()
        wait_for(lambda: source_status(tidings, "api")["last_success"], what="the baseline poll")
        before = source_status(tidings, "api")

        api.state.update(status=429, retry_after=600)
        r = tidings.check()
        assert r.code == 2 and "source api failed: HTTP 429" in r.stderr and r.stdout == "", r
        # The check's own Retry-After holds for the next one (issue 30 item 9): no request.
        asked = len(api.requests)
        r = tidings.check()
        assert r.code == 2 and "the server asked for no request before" in r.stderr and r.stdout == "", r
        assert len(api.requests) == asked, "polled again inside the server's Retry-After"
        after = source_status(tidings, "api")
        assert (after["state"], after["failures"], after["next_due"]) == ("ok", 0, before["next_due"]), after
        assert after["last_error"] is None
        assert tidings.run("history", "--json").events == [], "no error event (error_threshold = 1)"
        assert "poll on request failed: HTTP 429" in read_log(d)
        assert d.poll() is None


def test_a_check_beside_the_daemon_keeps_the_servers_retry_after(tidings):
    with FakeServer(JSONAPI, {"status": 429, "retry_after": 600}) as api:
        tidings.write_config(CONSOLE)
        api_source(tidings, "limited", api.url, 'interval = "1s"\njitter = 0.0')
        d = tidings.start_daemon()
        wait_for(lambda: source_status(tidings, "limited")["failures"] == 1, what="the rate-limited poll")
        asked = len(api.requests)
        r = tidings.check()
        assert r.code == 2, r
        assert "source limited failed: the server asked for no request before" in r.stderr, r.stderr
        assert len(api.requests) == asked, "not polled before Retry-After"
        assert d.poll() is None


def test_a_source_named_twice_beside_the_daemon_is_polled_once_in_the_order_of_first_mention(tidings):
    tidings.write_config(CONSOLE)
    polls = tidings.root / "polls"
    for name in ("a", "b"):
        counted_plugin(tidings, name, polls)
    d = tidings.start_daemon()
    wait_for(lambda: polls.exists() and sorted(polls.read_text().split()) == ["a", "b"], what="the daemon's first polls")
    wait_for(lambda: len(json_events(d)) == 2, what="the first polls delivered")
    polls.write_text("")
    for name in ("a", "b"):
        (tidings.plugins / name).write_text(f"#!/bin/sh\necho {name} >> {polls}\necho '{{\"key\": \"k\", \"title\": \"{name} again\"}}'\n")
    r = tidings.check("b", "a", "b", "a", "b")
    assert r.code == 1, r
    assert [(e["source"], e["event"]) for e in r.events] == [("b", "changed"), ("a", "changed")]
    assert Counter(polls.read_text().split()) == {"a": 1, "b": 1}
    assert d.poll() is None


def gated_plugins(t, n):
    """`n` exec sources whose polls wait until the returned gate file exists (it does now)."""
    gate = t.root / "gate"
    gate.touch()
    for i in range(n):
        t.write_plugin(f"held{i}", f"#!/bin/sh\nwhile [ ! -e {gate} ]; do sleep 0.05; done\n", mode=0o755)
        t.write_plugin(f"held{i}.toml", 'interval = "1h"\ntimeout = "2m"\n')
    return gate


def test_more_checks_at_once_than_the_daemon_serves_wait_their_turn(tidings):
    """Beyond the connections the daemon serves at once (16), a check hears that the daemon is
    busy and asks again after a pause, within its time limit: none fails, none sees a broken pipe."""
    tidings.write_config(CONSOLE)
    n = 28
    gate = gated_plugins(tidings, n)
    d = tidings.start_daemon()
    wait_for(lambda: read_log(d).count("baseline") == n, timeout=60, what="the first polls")
    gate.unlink()
    checks = [subprocess.Popen(tidings.args("check", "--json", f"held{i}"), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=tidings.env) for i in range(n)]
    try:
        wait_for(lambda: read_log(d).count("asks to poll") >= 16, timeout=60, what="16 checks served at once")
        time.sleep(2)  # the others knock meanwhile
        gate.touch()
        errors = [c.communicate(timeout=120)[1] for c in checks]
    finally:
        for c in checks:
            if c.poll() is None:
                c.kill()
    failed = [(c.returncode, err) for c, err in zip(checks, errors) if c.returncode not in (0, 1) or "Broken pipe" in err]
    assert failed == [], f"{len(failed)} of {n} checks failed: {failed[:3]}"
    assert read_log(d).count("asks to poll") == n
    assert d.poll() is None


def test_ctrl_c_on_a_check_beside_the_daemon_ends_the_check_and_the_poll_goes_on(tidings):
    """The daemon runs the plugin, under its own timeout: Ctrl-C ends only the check."""
    tidings.write_config(CONSOLE)
    gate = gated_plugins(tidings, 1)
    d = tidings.start_daemon()
    wait_for(lambda: "baseline" in read_log(d), what="the first poll")
    gate.unlink()
    check = subprocess.Popen(tidings.args("check", "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=tidings.env)
    wait_for(lambda: "asks to poll" in read_log(d), what="the check asking")
    start = time.monotonic()
    check.send_signal(signal.SIGINT)
    check.communicate(timeout=20)
    assert check.returncode == -signal.SIGINT
    assert time.monotonic() - start < 5
    gate.touch()
    wait_for(lambda: "not take the answer" in read_log(d) or "went away" in read_log(d), what="the daemon's poll ending")
    assert tidings.check().code == 0
    assert d.poll() is None


def test_a_second_daemon_on_the_same_state_exits_2_naming_the_first(tidings):
    tidings.write_config(CONSOLE)
    lister(tidings)
    d = tidings.start_daemon()
    started(d)
    start = time.monotonic()
    r = tidings.run("run", timeout=20)
    assert r.code == 2, r
    assert time.monotonic() - start < 10, "at once"
    assert f"PID {d.pid}" in r.stderr and str(tidings.state) in r.stderr, r.stderr
    assert (tidings.state / "tidings.lock").read_text().strip() == str(d.pid)
    assert d.poll() is None, "the first one runs on"


def test_a_lock_and_socket_left_by_kill_9_block_nothing(tidings):
    tidings.write_config(CONSOLE)
    data = lister(tidings, interval="1h")
    d = tidings.start_daemon()
    wait_for(lambda: "baseline" in read_log(d), what="the baseline poll")
    os.kill(d.pid, signal.SIGKILL)
    d.wait(timeout=10)
    assert sock_path(tidings).exists() and (tidings.state / "tidings.lock").exists()

    # No daemon: check works on the state itself (the stale socket answers nothing).
    data.write_text('{"key": "a", "title": "Alpha"}\n')
    r = tidings.check(timeout=30)
    assert r.code == 1 and [e["key"] for e in r.events] == ["a"], r

    # A new daemon takes the state over, and checks go through it.
    d2 = tidings.start_daemon()
    started(d2)
    data.write_text('{"key": "a", "title": "Alpha"}\n{"key": "b", "title": "Bravo"}\n')
    r = tidings.check()
    assert r.code == 1 and [e["key"] for e in r.events] == ["b"], r
    wait_for(lambda: [e["key"] for e in json_events(d2)] == ["b"], what="the new daemon delivering b")


def test_a_daemon_started_during_a_check_waits_for_it(tidings):
    received, sinks = recording_sink(tidings)
    tidings.write_config(sinks)
    data = tidings.root / "data.jsonl"
    data.write_text('{"key": "a", "title": "Alpha"}\n')
    polling = tidings.root / "polling"
    tidings.write_plugin("slow", f"#!/bin/sh\ntouch {polling}\nsleep 2\ncat {data}\n", mode=0o755)
    tidings.write_plugin("slow.toml", 'interval = "1h"\nnotify_existing = true\ntimeout = "10s"\n')
    check = subprocess.Popen(tidings.args("check", "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=tidings.env)
    wait_for(polling.exists, what="the check polling")
    d = tidings.start_daemon()
    out, err = check.communicate(timeout=30)
    assert check.returncode == 1, err
    assert [e["key"] for e in map(json.loads, out.splitlines())] == ["a"]
    started(d)
    assert "waiting for `tidings check` to finish with the state" in read_log(d)
    time.sleep(2)
    assert received_events(received) == [], "what the check recorded (without --deliver) is not delivered"


def test_a_shorter_interval_applies_on_sighup_and_on_restart(tidings):
    tidings.write_config(CONSOLE)
    data, polls = polling_lister(tidings, "30m")
    d = tidings.start_daemon()
    wait_for(lambda: len(poll_times(polls)) == 1, what="the first poll")

    set_interval(tidings, "3s")
    reload = time.time()
    d.send_signal(signal.SIGHUP)
    wait_for(lambda: len(poll_times(polls)) >= 2, timeout=15, what="a poll within the new interval after SIGHUP")
    assert poll_times(polls)[1] - reload < 6

    # Back to 30m: the due time the 3s interval set still fits, then the next is 30m away.
    set_interval(tidings, "30m")
    d.send_signal(signal.SIGHUP)
    wait_for(lambda: "reloaded configuration" in read_log(d), what="the reload")
    count = len(poll_times(polls))
    time.sleep(4.5)
    assert len(poll_times(polls)) <= count + 1
    d.send_signal(signal.SIGTERM)
    assert d.wait(timeout=20) == 0
    count = len(poll_times(polls))

    set_interval(tidings, "3s")
    restart = time.time()
    d2 = tidings.start_daemon()
    wait_for(lambda: len(poll_times(polls)) > count, timeout=15, what="a poll within the new interval after a restart")
    assert poll_times(polls)[count] - restart < 6
    assert d2.poll() is None


def test_retry_after_is_honoured_across_reload_and_restart(tidings):
    # Retry-After 2h is beyond max_backoff (1h): the server's word still holds.
    with FakeServer(JSONAPI, {"status": 429, "retry_after": 7200}) as api:
        tidings.write_config(CONSOLE)
        api_source(tidings, "limited", api.url, 'interval = "1s"\njitter = 0.0')
        d = tidings.start_daemon()
        wait_for(lambda: source_status(tidings, "limited")["failures"] == 1, what="the rate-limited poll")
        asked = len(api.requests)
        d.send_signal(signal.SIGHUP)
        wait_for(lambda: "reloaded configuration" in read_log(d), what="the reload")
        time.sleep(3)
        d.send_signal(signal.SIGTERM)
        assert d.wait(timeout=20) == 0
        d2 = tidings.start_daemon()
        started(d2)
        time.sleep(4)
        assert len(api.requests) == asked, "never polled sooner than Retry-After"
        assert d2.poll() is None


def test_history_days_of_a_reloaded_config_applies(tidings):
    tidings.write_config("history_days = 30\n" + CONSOLE)
    lister(tidings, interval="1h")
    d = tidings.start_daemon()
    wait_for(lambda: "baseline" in read_log(d), what="the baseline poll")
    db = tidings.state / "tidings.sqlite"
    with sqlite3.connect(db) as c:
        c.execute("INSERT INTO event(id, source, kind, type, key, observed_at, payload) VALUES "
                  "('old', 'lister', 'item', 'new', 'k', ?, '{}')", (time.time() - 10 * 86400,))
    d.send_signal(signal.SIGHUP)
    wait_for(lambda: "reloaded configuration" in read_log(d), what="the reload")
    time.sleep(1)
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT count(*) FROM event").fetchone()[0] == 1, "10 days old, history_days = 30: kept"
    tidings.write_config("history_days = 5\n" + CONSOLE)
    d.send_signal(signal.SIGHUP)

    def pruned():
        with sqlite3.connect(db) as c:
            return c.execute("SELECT count(*) FROM event").fetchone()[0] == 0
    wait_for(pruned, timeout=10, what="pruning with the reloaded history_days")


def test_check_exits_2_when_the_outbox_cannot_be_read(tidings):
    """An internal SQLite error on the way to the exit status: the outbox rows were written,
    but reading them back for delivery fails (here: a collation this build does not know)."""
    received, sinks = recording_sink(tidings)
    tidings.write_config(sinks)
    data = lister(tidings)
    assert tidings.check().code == 0
    with sqlite3.connect(tidings.state / "tidings.sqlite") as c:
        c.create_collation("gone_collation", lambda a, b: (a > b) - (a < b))
        c.executescript("""
            DROP INDEX delivery_by_sink;
            DROP TABLE delivery;
            CREATE TABLE delivery(
              id INTEGER PRIMARY KEY AUTOINCREMENT,
              event_seq INTEGER NOT NULL REFERENCES event(seq) ON DELETE CASCADE,
              sink TEXT NOT NULL,
              batch TEXT NOT NULL,
              status TEXT NOT NULL COLLATE gone_collation,
              attempts INTEGER NOT NULL DEFAULT 0,
              next_attempt DOUBLE NOT NULL,
              created_at DOUBLE NOT NULL,
              last_error TEXT,
              hold_until DOUBLE,
              hold TEXT
            );
        """)
    data.write_text('{"key": "a", "title": "Alpha"}\n')
    r = tidings.check("--deliver")
    assert [e["key"] for e in r.events] == ["a"]
    assert r.code == 2, r
    assert "sink recorder failed:" in r.stderr and "gone_collation" in r.stderr, r.stderr


def test_check_through_the_daemon_exits_2_when_the_daemon_cannot_record(tidings):
    tidings.write_config(CONSOLE)
    data = lister(tidings, interval="1h")
    d = tidings.start_daemon()
    wait_for(lambda: "baseline" in read_log(d), what="the baseline poll")
    with sqlite3.connect(tidings.state / "tidings.sqlite") as c:
        c.execute("CREATE TRIGGER refuse BEFORE INSERT ON item BEGIN SELECT RAISE(FAIL, 'no room for items'); END")
    data.write_text('{"key": "a", "title": "Alpha"}\n')
    r = tidings.check()
    assert r.code == 2, r
    assert "source lister failed: could not record the poll" in r.stderr and "no room for items" in r.stderr
    assert r.stdout == ""


def test_hung_flooding_and_foreign_peers_do_not_block_the_daemon(tidings):
    tidings.write_config(CONSOLE)
    data = lister(tidings, interval="1h")
    d = tidings.start_daemon()
    wait_for(lambda: "baseline" in read_log(d), what="the baseline poll")
    path = str(sock_path(tidings))
    assert (os.stat(path).st_mode & 0o777) == 0o600

    def connect():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.settimeout(15)
        return s

    silent = connect()
    flood = connect()
    flood.setblocking(False)
    try:
        flood.send(b"x" * 200_000)  # no newline, more than a request may be
    except BlockingIOError:
        pass
    flood.settimeout(15)
    wrong = connect()
    wrong.sendall(b'{"v": 2, "op": "poll"}\n')

    data.write_text('{"key": "a", "title": "Alpha"}\n')
    start = time.monotonic()
    r = tidings.check()
    assert r.code == 1 and [e["key"] for e in r.events] == ["a"], r
    assert time.monotonic() - start < 5, "served beside the others"

    reply = json.loads(wrong.makefile().readline())
    assert reply["type"] == "error" and "version 1" in reply["message"], reply
    assert b"longer than" in flood.recv(4096)
    start = time.monotonic()
    assert b"no complete line" in silent.recv(4096), "a silent peer is hung up on"
    assert time.monotonic() - start < 8
    for s in (silent, flood, wrong):
        s.close()
    assert d.poll() is None


@needs_root
def test_another_user_is_refused_on_the_socket(tidings):
    tidings.write_config(CONSOLE)
    lister(tidings, interval="1h")
    d = tidings.start_daemon()
    started(d)
    # Open the way (the state directory is 0700 and the socket 0600): the uid check remains.
    public = Path(tempfile.mkdtemp(dir="/tmp"))
    os.chmod(public, 0o755)
    path = public / "tidings.sock"
    os.link(sock_path(tidings), path)
    os.chmod(path, 0o666)
    probe = ("import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\ns.settimeout(10)\n"
             "try:\n  s.sendall(b'{\"v\":1,\"op\":\"poll\"}\\n'); got=s.recv(4096)\nexcept OSError: got=b''\n"
             "print('answered' if got else 'hung up')\n")
    r = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/python3", "-c", probe, str(path)],
                       capture_output=True, text=True, timeout=20)
    assert r.stdout.strip() == "hung up", r
    wait_for(lambda: "refused a connection from uid 65534" in read_log(d), what="the refusal in the log")
    assert "asks to poll" not in read_log(d)
    shutil.rmtree(public)


def test_check_gives_up_on_a_daemon_that_does_not_answer(tidings):
    tidings.write_config(CONSOLE)
    lister(tidings, interval="1h")
    d = tidings.start_daemon()
    started(d)
    d.send_signal(signal.SIGSTOP)
    try:
        start = time.monotonic()
        r = tidings.check(timeout=60)
        assert r.code == 2, r
        assert "no answer from the daemon" in r.stderr and "sent nothing for 15s" in r.stderr, r.stderr
        assert time.monotonic() - start < 25
    finally:
        d.send_signal(signal.SIGCONT)
