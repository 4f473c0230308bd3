"""`tidings run`: scheduled polling and delivery, SIGHUP reload, SIGTERM, crash safety."""
import json
import os
import signal
import sqlite3
import time

from conftest import read_log, wait_for


def json_events(daemon):
    out = []
    for line in read_log(daemon).splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def lister(tidings, name="lister", interval="1s"):
    data = tidings.root / f"{name}.jsonl"
    data.write_text("")
    tidings.write_plugin(name, f"#!/bin/sh\ncat {data}\n", mode=0o755)
    tidings.write_plugin(f"{name}.toml", f'interval = "{interval}"\njitter = 0.0\n')
    return data


CONSOLE = """
    [sinks.console]
    type = "stdout"
    format = "json"
"""


def test_daemon_delivers_on_schedule_survives_bad_reload_and_stops_cleanly(tidings):
    tidings.write_config(CONSOLE)
    data = lister(tidings)
    d = tidings.start_daemon()
    wait_for(lambda: "baseline" in read_log(d), what="the baseline poll")
    data.write_text('{"key": "a", "title": "Alpha"}\n')
    wait_for(lambda: [e["key"] for e in json_events(d)] == ["a"], what="event a delivered")

    # A broken config on SIGHUP: reported, the old config keeps running.
    good = tidings.config.read_text()
    tidings.config.write_text(good + "\n[sinks.broken]\ntype = 'nope'\n")
    d.send_signal(signal.SIGHUP)
    wait_for(lambda: "reload failed, keeping the running configuration" in read_log(d), what="reload error")
    assert "unknown sink type 'nope'" in read_log(d)
    assert d.poll() is None
    data.write_text('{"key": "a", "title": "Alpha"}\n{"key": "b", "title": "Bravo"}\n')
    wait_for(lambda: "b" in [e["key"] for e in json_events(d)], what="event b after the bad reload")

    # A good config on SIGHUP is applied: a new source starts polling.
    tidings.config.write_text(good)
    second = lister(tidings, "second")
    d.send_signal(signal.SIGHUP)
    wait_for(lambda: "reloaded configuration: 2 sources" in read_log(d), what="reload")
    wait_for(lambda: "source=second baseline" in read_log(d), what="the new source's baseline")
    second.write_text('{"key": "z", "title": "Zulu"}\n')
    wait_for(lambda: ("second", "z") in [(e["source"], e["key"]) for e in json_events(d)], what="new source's event")

    d.send_signal(signal.SIGTERM)
    assert d.wait(timeout=20) == 0
    assert "stopped" in read_log(d)
    ids = [e["id"] for e in json_events(d)]
    assert len(ids) == len(set(ids)) == 3, "each event delivered once"


def test_sigint_also_stops_with_exit_0(tidings):
    tidings.write_config(CONSOLE)
    lister(tidings)
    d = tidings.start_daemon()
    wait_for(lambda: "scheduler:" in read_log(d), what="start")
    d.send_signal(signal.SIGINT)
    assert d.wait(timeout=20) == 0


def test_a_stop_while_the_daemon_waits_for_the_state_is_a_clean_exit(tidings):
    """SIGTERM/SIGINT are trapped before anything is logged or opened (issue 20, item 2): a stop
    while the daemon waits for a `tidings check` to finish with the state ends it with exit 0,
    not by the signal (the handlers used to come only with the service group, much later)."""
    import fcntl
    tidings.write_config(CONSOLE)
    lister(tidings)
    tidings.state.mkdir(mode=0o700, exist_ok=True)
    for sig in (signal.SIGTERM, signal.SIGINT):
        # What a running `tidings check` holds: the state lock, shared.
        with open(tidings.state / "tidings.lock", "a+") as held:
            fcntl.flock(held, fcntl.LOCK_SH)
            d = tidings.start_daemon()
            wait_for(lambda: "waiting for `tidings check`" in read_log(d), what="the daemon waiting for the state")
            d.send_signal(sig)
            assert d.wait(timeout=20) == 0, read_log(d)
        assert "stopped before starting" in read_log(d)
        assert not (tidings.state / "tidings.sock").exists()


def test_a_stop_as_soon_as_the_daemon_says_anything_is_a_clean_exit(tidings):
    """The first line a daemon logs (here the warning that no sink is configured, written while
    the configuration loads) comes after its stop signals are trapped: a SIGTERM sent the
    moment it appears is a clean stop, whatever step of the start it meets."""
    tidings.write_config("")
    lister(tidings)
    for attempt in range(5):
        d = tidings.start_daemon()
        wait_for(lambda: read_log(d).strip(), interval=0.002, what="the daemon's first line")
        d.send_signal(signal.SIGTERM)
        assert d.wait(timeout=20) == 0, f"attempt {attempt}: {d.returncode}\n{read_log(d)}"


def test_restart_keeps_schedule_and_does_not_repoll_everything_at_once(tidings):
    tidings.write_config(CONSOLE)
    lister(tidings, interval="1h")
    d = tidings.start_daemon()
    wait_for(lambda: "baseline" in read_log(d), what="first poll")
    d.send_signal(signal.SIGTERM)
    assert d.wait(timeout=20) == 0
    before = tidings.run("sources", "--json").events[0]
    d2 = tidings.start_daemon()
    wait_for(lambda: "scheduler:" in read_log(d2), what="restart")
    time.sleep(2)
    after = tidings.run("sources", "--json").events[0]
    assert after["last_success"] == before["last_success"], "not polled again before its next due time"
    assert after["next_due"] == before["next_due"]


def test_crash_between_commit_and_delivery_loses_nothing(tidings):
    """kill -9 while an event sits in the outbox; after restart it is delivered once, same id."""
    received = tidings.root / "received.jsonl"
    gate = tidings.root / "gate-closed"
    gate.write_text("")
    sink = tidings.root / "sink.sh"
    sink.write_text(f"#!/bin/sh\n[ -e {gate} ] && exit 1\ncat >> {received}\necho >> {received}\n")
    os.chmod(sink, 0o755)
    tidings.write_config(f"""
        [sinks.recorder]
        type = "exec"
        command = ["{sink}"]
    """)
    data = lister(tidings)
    d = tidings.start_daemon()
    wait_for(lambda: "baseline" in read_log(d), what="baseline")
    data.write_text('{"key": "a", "title": "Alpha"}\n')
    db = tidings.state / "tidings.sqlite"

    def queued():
        with sqlite3.connect(db) as c:
            return c.execute("SELECT count(*) FROM delivery WHERE attempts > 0").fetchone()[0]

    wait_for(lambda: queued() == 1, what="a failed, queued delivery")
    with sqlite3.connect(db) as c:
        (event_id,) = c.execute("SELECT id FROM event").fetchone()
    os.kill(d.pid, signal.SIGKILL)
    d.wait(timeout=10)

    gate.unlink()
    d2 = tidings.start_daemon()
    wait_for(lambda: received.exists() and received.read_text().strip(), what="delivery after restart")
    time.sleep(2)  # would a second copy arrive?
    lines = [json.loads(l) for l in received.read_text().splitlines() if l.strip()]
    assert [e["id"] for e in lines] == [event_id]
    d2.send_signal(signal.SIGTERM)
    assert d2.wait(timeout=20) == 0


def test_daemon_releases_code_pages_and_goes_on_polling_reloading_and_answering(tidings):
    """Issue 31: once a generation is ready (start, each reload) the daemon unmaps its clean
    code and read-only data pages (FreeMemory.dropStartupPages); what runs next maps back."""
    import re
    tidings.write_config(CONSOLE)
    data = lister(tidings)
    d = tidings.start_daemon("-v")
    released = re.compile(r"released code pages \(loaded\): (\d+) KiB of code and read-only data advised, resident (\d+) → (\d+) KiB")
    wait_for(lambda: released.search(read_log(d)), what="the code pages released once loaded")
    advised, before, after = map(int, released.search(read_log(d)).groups())
    assert advised > 1024 and after < before, read_log(d)
    wait_for(lambda: "baseline" in read_log(d), what="the baseline poll")
    data.write_text('{"key": "a", "title": "Alpha"}\n')
    wait_for(lambda: [e["key"] for e in json_events(d)] == ["a"], what="event a delivered on schedule")

    # The control socket answers: `check` asks the running daemon to poll now.
    data.write_text('{"key": "a", "title": "Alpha"}\n{"key": "b", "title": "Bravo"}\n')
    r = tidings.run("check", "lister")
    assert "owns the state" in r.stderr + r.stdout, r
    wait_for(lambda: "b" in [e["key"] for e in json_events(d)], what="event b")

    # A reload releases them again, and the new generation polls.
    d.send_signal(signal.SIGHUP)
    wait_for(lambda: len(released.findall(read_log(d))) == 2, what="the code pages released after the reload")
    data.write_text('{"key": "a", "title": "Alpha"}\n{"key": "b", "title": "Bravo"}\n{"key": "c", "title": "Charlie"}\n')
    wait_for(lambda: "c" in [e["key"] for e in json_events(d)], what="event c after the reload")

    d.send_signal(signal.SIGTERM)
    assert d.wait(timeout=20) == 0
    assert sorted(e["key"] for e in json_events(d)) == ["a", "b", "c"]
