"""Small versions of `make soak` (soak/soak.py): provider faults, sink faults, a crash loop,
disk full and a read-only state dir, each a few seconds, against the daemon.

Related cases live elsewhere and are not repeated here: one kill -9 between commit and
delivery (test_daemon.py), a receiver down across a kill (test_webhook_sink.py), a hung
desktop server beside a webhook (test_desktop_sink.py), malformed/huge/slow bodies in a
one-shot `check` (test_check.py).
"""
from __future__ import annotations

import base64
import os
import random
import signal
import subprocess
import time

import pytest

import ledger
from conftest import read_log, wait_for
from fakes.faults import FaultWorld, feed_items, fill_disk, write_sources
from fakes.server import FakeServer
from fakes.session_bus import SessionBus, available
from fakes.webhook_receiver import WebhookReceiver, receiver_state

SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()
BROKEN = ["hang", "reset", "malformed", "huge", "stream", "storm", "slowloris"]


def hook_config(t, url, defaults="", sinks=""):
    secret = t.write_secret("hook.secret", SECRET)
    t.write_config(f"""
        [defaults]
        interval = "1s"
        jitter = 0.1
        timeout = "1s"
        max_backoff = "2s"
        error_threshold = 2
        {defaults}
        [sinks.hook]
        type = "webhook"
        url = "{url}/hook"
        secret_file = "{secret}"
        timeout = "2s"
        {sinks}
        """)


def drain(t, world, d, timeout=30):
    world.freeze()
    time.sleep(1.5)
    wait_for(lambda: ledger.queued(t.state / "tidings.sqlite") == 0, timeout=timeout, what="an empty outbox")
    d.send_signal(signal.SIGTERM)
    assert d.wait(timeout=20) == 0


def check_ledger(t, srv_state, allow_dup_deliveries=False):
    db = t.state / "tidings.sqlite"
    led = ledger.Ledger(db, srv_state["ids"])
    assert led.problems(allow_duplicate_deliveries=allow_dup_deliveries) == []
    assert ledger.integrity(db) == "ok"
    assert srv_state["bad_signatures"] == []
    return led


def test_broken_sources_are_reported_once_and_healthy_ones_stay_on_time(tidings):
    with FaultWorld(period=1.0, hang_seconds=10, drip_seconds=10) as world, \
         FakeServer(WebhookReceiver, state=receiver_state(SECRET)) as srv:
        hook_config(tidings, srv.url)
        write_sources(tidings, world, {"good": "feed", "flaky": "flaky", **{b: b for b in BROKEN}})
        d = tidings.start_daemon()
        start = time.monotonic()
        time.sleep(2)
        world.state["flaky_down"] = True
        time.sleep(4)
        world.state["flaky_down"] = False
        time.sleep(3)
        end = time.monotonic()
        drain(tidings, world, d)
        led = check_ledger(tidings, srv.state)

        text = read_log(d)
        for b in BROKEN:
            assert len(world.poll_times(b, b)) >= 3, f"{b} polled again and again"
            assert len(ledger.complaints(text, b)) == 1, (b, ledger.complaints(text, b))
            assert led.health(b, "error") == 1, b
        assert len(ledger.complaints(text, "flaky")) == 1, ledger.complaints(text, "flaky")
        assert "source=flaky poll succeeded again after" in text
        assert (led.health("flaky", "error"), led.health("flaky", "recovered")) == (1, 1)
        assert ledger.complaints(text, "good") == []
        # The healthy feed: polled every 0.9–1.1 s, never held up by the broken ones.
        times = [x for x in world.poll_times("feed", "good") if start + 2 <= x <= end]
        assert len(times) >= 0.8 * (end - start - 2) / 1.1, len(times)
        assert max(ledger.gaps(times)) < 1.1 + 1.0, ledger.gaps(times)


@pytest.mark.skipif(available() is not None, reason=available() or "")
def test_flapping_receiver_and_hung_desktop_lose_and_duplicate_nothing(tidings):
    with FaultWorld(period=0.5) as world, SessionBus() as bus, \
         FakeServer(WebhookReceiver, state=receiver_state(SECRET)) as srv:
        port = srv.port
        hook_config(tidings, srv.url, sinks='[sinks.desktop]\ntype = "desktop"\ntimeout = "1s"')
        write_sources(tidings, world, {"a": "feed", "b": "feed"})
        d = tidings.start_daemon(env=bus.env)
        time.sleep(2)
        bus.freeze()
        current = srv
        try:
            for cycle in range(2):  # refuse connections, answer 500, accept
                current.stop()
                time.sleep(1)
                current = FakeServer(WebhookReceiver, state=srv.state, port=port).start()
                srv.state["default"] = 500
                time.sleep(1)
                srv.state["default"] = 200
                if cycle == 0:
                    bus.thaw()
                time.sleep(1)
        finally:
            bus.thaw()
        drain(tidings, world, d, timeout=45)
        current.stop()
        led = check_ledger(tidings, srv.state)
        assert led.produced >= 20
        assert "did not answer within 1s" in read_log(d)


def test_crash_loop_loses_nothing_and_records_each_change_once(tidings):
    rng = random.Random(5)
    with FaultWorld(period=0.3) as world, FakeServer(WebhookReceiver, state=receiver_state(SECRET)) as srv:
        hook_config(tidings, srv.url)
        write_sources(tidings, world, {"a": "feed", "b": "feed"})
        for _ in range(6):
            d = tidings.start_daemon()
            time.sleep(rng.uniform(0.3, 1.5))
            d.send_signal(signal.SIGKILL)
            d.wait(timeout=10)
        d = tidings.start_daemon()
        time.sleep(1)
        drain(tidings, world, d)
        led = check_ledger(tidings, srv.state, allow_dup_deliveries=True)
        assert led.produced >= 10
        items = {(e["source"], e["key"], e["title"]) for e in tidings.run("items", "--json").events}
        assert items == {(s, i["id"], i["name"]) for s in "ab" for i in feed_items(world.generation())}


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs (root only)")


@pytest.fixture
def small_state_dir(tidings):
    tidings.state.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(tidings.state)], check=True)
    yield tidings.state
    tidings.stop_all()
    subprocess.run(["umount", "-l", str(tidings.state)], check=True)


@needs_root
def test_disk_full_is_one_clear_error_no_redelivery_no_corruption(tidings, small_state_dir):
    with FaultWorld(period=0.5) as world:
        receiver = FakeServer(WebhookReceiver, state=receiver_state(SECRET))
        hook_config(tidings, receiver.url)
        write_sources(tidings, world, {"a": "feed"})
        d = tidings.start_daemon()
        # Events queue while the receiver is away; the disk fills; the receiver comes back:
        # deliveries succeed but cannot be marked done. They must not be sent again and again.
        wait_for(lambda: (ledger.queued(tidings.state / "tidings.sqlite") or 0) >= 4, what="queued deliveries")
        filler = fill_disk(small_state_dir)
        receiver.start()
        time.sleep(4)
        text = read_log(d)
        assert d.poll() is None, text
        errors = [l for l in text.splitlines() if "disk is full" in l and " error " in l]
        assert errors and str(tidings.state / "tidings.sqlite") in errors[0], text[-2000:]
        assert len(errors) <= 3, errors
        ids = receiver.state["ids"]
        assert len(ids) == len(set(ids)), "a delivery the disk could not record was sent again"
        filler.unlink()
        world.thaw()
        time.sleep(2)
        drain(tidings, world, d)
        receiver.stop()
        check_ledger(tidings, receiver.state)


@needs_root
def test_read_only_state_dir_exits_2_naming_it_then_recovers(tidings, small_state_dir):
    with FaultWorld(period=0.5) as world, FakeServer(WebhookReceiver, state=receiver_state(SECRET)) as srv:
        hook_config(tidings, srv.url)
        write_sources(tidings, world, {"a": "feed"})
        d = tidings.start_daemon()
        wait_for(lambda: srv.state["ids"], what="the first delivery")
        d.kill()  # leaves -wal and -shm behind: SQLite could open the file read-only
        d.wait(timeout=10)
        subprocess.run(["mount", "-o", "remount,ro", str(small_state_dir)], check=True)
        try:
            r = tidings.run("run", timeout=20)
            assert r.code == 2, r
            assert f"cannot write the state directory {small_state_dir}: Read-only file system" in r.stderr, r
        finally:
            subprocess.run(["mount", "-o", "remount,rw", str(small_state_dir)], check=True)
        delivered = len(srv.state["ids"])
        d = tidings.start_daemon()
        wait_for(lambda: len(srv.state["ids"]) > delivered, what="events after the state dir is writable again")
        drain(tidings, world, d)
        check_ledger(tidings, srv.state, allow_dup_deliveries=True)  # (the kill -9)
