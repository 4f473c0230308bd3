#!/usr/bin/python3
"""`make soak`: reliability under injected faults, on loopback, bounded (~10 minutes).

Phases (each bounded; all of them run unless SOAK_ONLY names some):
  provider  healthy feeds plus one source per fault (hang, reset mid-body, malformed JSON,
            10 x max_body with and without Content-Length, 500 storm, slow-loris) and one
            that fails for a while and recovers. Healthy feeds must be polled on time;
            each broken source must be reported once (one warning, one error event).
  sink      the webhook receiver flaps (accepts, refuses connections, answers 500) and the
            desktop notification server hangs; nothing lost, no duplicate 2xx delivery.
  crash     kill -9 the daemon SOAK_KILLS times at random moments while events flow;
            then every event delivered, integrity_check ok, no change recorded twice.
  disk      state dir on a small tmpfs: filled up while the daemon runs, then freed; then
            remounted read-only for a restart. Clear errors, no corruption, nothing lost.
  shared    three daemons on one PostgreSQL database (DESIGN §11) share SOAK_SHARED_SOURCES
            feeds at 2 s; every SOAK_SHARED_KILL_EVERY seconds a random instance is killed
            (-9) and restarted. Lost events (stored, never delivered) must be 0; no change
            recorded twice; duplicate deliveries at most one per kill (the one in flight);
            the killed instance's sources polled again within two intervals.

Knobs (environment): SOAK_ONLY="provider sink crash disk shared", SOAK_PROVIDER_SECONDS=120,
SOAK_SINK_SECONDS=120, SOAK_KILLS=50, SOAK_DISK_SECONDS=15, SOAK_SHARED_SECONDS=120,
SOAK_SHARED_KILL_EVERY=10, SOAK_SHARED_SOURCES=300, SOAK_SEED, SOAK_KEEP=1 (keep the work
dir). `--postgres` runs the shared phase only. Exit status 0 when every check passed, 1
otherwise. Needs root for the disk phase (it is skipped, and says so, without) and Debian's
postgresql for the shared one (`make test-deps`). Python standard library only, plus the e2e
suite's fakes and its PostgreSQL server (Tests/e2e/postgres.py).
"""
from __future__ import annotations

import argparse
import base64
import collections
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "e2e"))

from conftest import Tidings, read_log, wait_for  # noqa: E402
from fakes.churn import ChurnWorld, source_name  # noqa: E402
from fakes.faults import FaultWorld, feed_items, fill_disk, write_sources  # noqa: E402
from fakes.server import FakeServer  # noqa: E402
from fakes.session_bus import SessionBus, available  # noqa: E402
from fakes.webhook_receiver import WebhookReceiver, receiver_state  # noqa: E402
import ledger  # noqa: E402
import postgres  # noqa: E402

SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()
HEALTHY = [f"feed{i}" for i in range(1, 5)]
BROKEN = ["hang", "reset", "malformed", "huge", "stream", "storm", "slowloris"]
INTERVAL, JITTER = 1.0, 0.1


def env_float(name, default):
    return float(os.environ.get(name) or default)


def log(msg):
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class SlowReceiver(WebhookReceiver):
    """The verifying receiver, optionally taking `delay` seconds per request (widens the
    window between a sink's success and the outbox recording it)."""

    def route(self, req):
        with self.server.lock:
            self.state["requests"] = self.state.get("requests", 0) + 1
        if self.state.get("delay"):
            time.sleep(self.state["delay"])
        status, headers, body = super().route(req)
        if not 200 <= status < 300:
            with self.server.lock:
                self.state["errors"] = self.state.get("errors", 0) + 1
        return status, headers, body


class Receiver:
    """A webhook receiver that can go away (connections refused) and come back on its port."""

    def __init__(self):
        self.state = receiver_state(SECRET)
        self.srv = FakeServer(SlowReceiver, state=self.state).start()
        self.port = self.srv.port
        self.url = self.srv.url
        self.up = True

    def down(self):
        if self.up:
            self.srv.stop()
            self.up = False

    def back(self):
        if not self.up:
            self.srv = FakeServer(SlowReceiver, state=self.state, port=self.port).start()
            self.up = True

    def stop(self):
        self.down()


class Phase:
    """One phase's figures and verdict."""

    def __init__(self, name):
        self.name = name
        self.faults = ""
        self.ledger = None
        self.notes = []
        self.problems = []
        self.lateness = ""
        self.late = "-"
        self.started = time.monotonic()
        self.seconds = 0.0

    def check(self, ok, problem):
        if not ok:
            self.problems.append(problem)
            log(f"{self.name}: PROBLEM: {problem}")


# ---------------------------------------------------------------------------------------
def write_config(t: Tidings, rx: Receiver, extra_sinks="", defaults=""):
    secret = t.write_secret("hook.secret", SECRET)
    t.write_config(f"""
        [defaults]
        interval = "1s"
        jitter = {JITTER}
        timeout = "2s"
        max_backoff = "4s"
        error_threshold = 2
        {defaults}

        [sinks.hook]
        type = "webhook"
        url = "{rx.url}/hook"
        secret_file = "{secret}"
        timeout = "3s"
        {extra_sinks}
        """)


def db_path(t: Tidings) -> Path:
    return t.state / "tidings.sqlite"


def stop_daemon(d, phase: Phase, timeout=30):
    if d.poll() is None:
        d.send_signal(signal.SIGTERM)
        try:
            code = d.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            d.kill()
            d.wait(timeout=10)
            code = "killed"
        phase.check(code == 0, f"SIGTERM: exit {code}, expected 0")


def drain(t: Tidings, world: FaultWorld, phase: Phase, d, timeout=150):
    """Freeze the feeds, let the daemon poll once more and deliver everything."""
    world.freeze()
    time.sleep(3 * INTERVAL * (1 + JITTER))
    try:
        wait_for(lambda: ledger.queued(db_path(t)) == 0, timeout=timeout, interval=0.5, what="an empty outbox")
    except AssertionError as e:
        phase.check(False, f"{e} ({ledger.queued(db_path(t))} deliveries left)")
    phase.check(d.poll() is None, f"daemon exited early with {d.poll()}")


def finish(t: Tidings, rx: Receiver, phase: Phase, allow_dup_deliveries=False):
    """After the daemon stopped: the ledger and integrity checks."""
    db = db_path(t)
    phase.ledger = ledger.Ledger(db, rx.state["ids"])
    for p in phase.ledger.problems(allow_duplicate_deliveries=allow_dup_deliveries):
        phase.check(False, p)
    ic = ledger.integrity(db)
    phase.check(ic == "ok", f"integrity_check: {ic}")
    phase.check(not rx.state["bad_signatures"], f"{len(rx.state['bad_signatures'])} deliveries with a bad signature")
    phase.notes.append(f"integrity_check {ic}")


def healthy_lateness(world: FaultWorld, phase: Phase, since: float, until: float):
    """Per healthy feed: gaps between polls beyond the longest allowed wait (interval × 1.1)."""
    allowed = INTERVAL * (1 + JITTER)
    late, counts = [], []
    for name in HEALTHY:
        times = [x for x in world.poll_times("feed", name) if since <= x <= until]
        counts.append(len(times))
        late += [max(0.0, x - allowed) for x in ledger.gaps(times)]
    expected = (until - since) / INTERVAL
    starved = [n for n, c in zip(HEALTHY, counts) if c < 0.8 * expected / (1 + JITTER)]
    max_late = max(late, default=0.0)
    phase.late = f"{ledger.percentile(late, .99):.2f} / {max_late:.2f}s"
    phase.lateness = (f"healthy feeds: {sum(counts)} polls of {len(HEALTHY)} feeds; lateness p50 {ledger.percentile(late, .5):.2f}s "
                      f"p99 {ledger.percentile(late, .99):.2f}s max {max_late:.2f}s")
    phase.check(not starved, f"healthy sources polled too rarely: {starved} ({counts} polls, ~{expected:.0f} expected)")
    phase.check(max_late <= 2.0, f"a healthy source was polled {max_late:.1f}s late")


# ---------------------------------------------------------------------------------------
def phase_provider(work: Path, seconds: float) -> Phase:
    phase = Phase("provider faults")
    with ExitStack() as stack:
        world = stack.enter_context(FaultWorld(period=2.0, max_body=64 * 1024, hang_seconds=30, drip_seconds=30))
        rx = Receiver()
        stack.callback(rx.stop)
        t = Tidings(work / "provider")
        stack.callback(t.stop_all)
        write_config(t, rx)
        write_sources(t, world, {**{n: "feed" for n in HEALTHY}, **{b: b for b in BROKEN}, "flaky": "flaky"})
        d = t.start_daemon("-v")  # (-v: every failed poll and delivery attempt is a debug line)
        start = time.monotonic()
        # The flaky source is down from 20 % to 50 % of the phase, then recovers.
        down_at, up_at = start + 0.2 * seconds, start + 0.5 * seconds
        while time.monotonic() < start + seconds and d.poll() is None:
            now = time.monotonic()
            world.state["flaky_down"] = down_at <= now < up_at
            time.sleep(0.2)
        world.state["flaky_down"] = False
        end = time.monotonic()
        healthy_lateness(world, phase, start + 5, end)
        drain(t, world, phase, d)
        sources = {s["name"]: s for s in t.run("sources", "--json").events}
        stop_daemon(d, phase)
        finish(t, rx, phase)
        text = read_log(d)
        served = {b: len(world.poll_times(b, b)) for b in BROKEN}
        phase.faults = f"{sum(served.values())} broken responses ({len(BROKEN)} kinds) + 1 outage"
        for b in BROKEN:
            lines = ledger.complaints(text, b)
            phase.check(len(lines) == 1, f"source {b} reported {len(lines)} times in the log (want 1): {lines[:3]}")
            phase.check(phase.ledger.health(b, "error") == 1, f"source {b}: {phase.ledger.health(b, 'error')} error events (want 1)")
            phase.check(served[b] >= 3, f"source {b} polled only {served[b]} times")
            phase.check(sources.get(b, {}).get("failures", 0) >= 3, f"source {b} not failing in `tidings sources`: {sources.get(b)}")
        flaky = ledger.complaints(text, "flaky")
        phase.check(len(flaky) == 1, f"flaky source reported {len(flaky)} times (want 1): {flaky[:3]}")
        phase.check(phase.ledger.health("flaky", "error") == 1 and phase.ledger.health("flaky", "recovered") == 1,
                    "flaky source: want one error and one recovered event")
        for n in HEALTHY:
            phase.check(sources[n]["failures"] == 0 and not ledger.complaints(text, n), f"healthy {n} failed: {sources[n]}")
        phase.notes.append(f"{text.count('poll failed (')} failed polls; each broken source reported once (one warning, one "
                           f"error event): " + ", ".join(f"{b} {served[b]} polls/{len(ledger.complaints(text, b))} warning"
                                                         for b in BROKEN))
    return phase


def phase_sink(work: Path, seconds: float) -> Phase:
    phase = Phase("sink faults")
    why_not = available()
    with ExitStack() as stack:
        world = stack.enter_context(FaultWorld(period=2.0))
        rx = Receiver()
        stack.callback(rx.stop)
        t = Tidings(work / "sink")
        stack.callback(t.stop_all)
        bus = None
        if why_not is None:
            bus = stack.enter_context(SessionBus())
            stack.callback(lambda: bus.mock and bus.thaw())
        write_config(t, rx, extra_sinks='[sinks.desktop]\ntype = "desktop"\ntimeout = "1s"\n' if bus else "")
        write_sources(t, world, {n: "feed" for n in HEALTHY})
        d = t.start_daemon("-v", env=bus.env if bus else None)
        start = time.monotonic()
        # Receiver: up 4 s, refusing 3 s, 500s for 3 s, … Desktop: hung over 25–50 % and 70–80 %.
        cycle = [("up", 4.0), ("refuse", 3.0), ("500", 3.0)]
        hung = [(0.25, 0.50), (0.70, 0.80)]
        refusals, errors, hung_seconds, frozen, step, step_end = 0, 0, 0.0, False, 0, start
        while time.monotonic() < start + seconds and d.poll() is None:
            now = time.monotonic()
            if now >= step_end:
                mode, length = cycle[step % len(cycle)]
                step += 1
                step_end = now + length
                if mode == "up":
                    rx.back()
                    rx.state["default"] = 200
                elif mode == "refuse":
                    rx.down()
                    refusals += 1
                else:
                    rx.back()
                    rx.state["default"] = 500
                    errors += 1
            if bus:
                should = any(a <= (now - start) / seconds < b for a, b in hung)
                if should and not frozen:
                    bus.freeze()
                    frozen, frozen_at = True, now
                elif frozen and not should:
                    bus.thaw()
                    frozen = False
                    hung_seconds += now - frozen_at
            time.sleep(0.1)
        if frozen:
            bus.thaw()
            hung_seconds += time.monotonic() - frozen_at
        rx.back()
        rx.state["default"] = 200
        end = time.monotonic()
        healthy_lateness(world, phase, start + 5, end)
        drain(t, world, phase, d, timeout=180)
        stop_daemon(d, phase)
        finish(t, rx, phase)
        text = read_log(d)
        hook_failed = text.count("delivery to sink hook failed")
        phase.faults = f"webhook refusing {refusals}x, answering 500 {errors}x ({hook_failed} failed attempts)"
        if bus:
            desk_failed = text.count("delivery to sink desktop failed")
            phase.faults += f"; desktop hung {hung_seconds:.0f}s ({desk_failed} failed)"
            phase.notes.append(f"desktop: {desk_failed} failed attempts retried; "
                               f"{len(bus.notifications())} Notify calls for {phase.ledger.produced} events (bursts become one "
                               f"summary; calls that timed out while the server hung are shown when it wakes, and retried)")
        else:
            phase.notes.append(f"desktop part skipped: {why_not}")
        phase.notes.append(f"webhook: {rx.state.get('requests', 0)} requests, {len(rx.state['ids'])} accepted, "
                           f"{rx.state.get('errors', 0)} answered 500, {hook_failed} failed attempts retried")
    return phase


def phase_crash(work: Path, kills: int, rng: random.Random) -> Phase:
    phase = Phase("crash loop")
    with ExitStack() as stack:
        world = stack.enter_context(FaultWorld(period=0.5))
        rx = Receiver()
        rx.state["delay"] = 0.01
        stack.callback(rx.stop)
        t = Tidings(work / "crash")
        stack.callback(t.stop_all)
        write_config(t, rx)
        write_sources(t, world, {n: "feed" for n in HEALTHY})
        lived = []
        for i in range(kills):
            d = t.start_daemon(log=t.root / f"daemon-run{i}.log")
            life = rng.uniform(0.2, 3.0)
            time.sleep(life)
            if d.poll() is not None:
                phase.check(False, f"run {i}: the daemon exited by itself with {d.returncode}: {read_log(d)[-500:]}")
            d.send_signal(signal.SIGKILL)
            d.wait(timeout=10)
            lived.append(life)
            t.daemons.remove(d)
            if (i + 1) % 10 == 0:
                log(f"crash loop: {i + 1}/{kills} kills, {len(rx.state['ids'])} deliveries so far")
        d = t.start_daemon()
        time.sleep(3)
        drain(t, world, phase, d, timeout=120)
        # The stored items equal what the feeds serve now (nothing half-applied).
        items = {(e["source"], e["key"], e["title"]) for e in t.run("items", "--json").events}
        want = {(n, i["id"], i["name"]) for n in HEALTHY for i in feed_items(world.generation())}
        phase.check(items == want, f"stored items differ from the feeds: {sorted(items ^ want)[:6]}")
        stop_daemon(d, phase)
        finish(t, rx, phase, allow_dup_deliveries=True)
        phase.faults = f"{kills} x kill -9 (after {min(lived):.1f}-{max(lived):.1f}s, total {sum(lived):.0f}s)"
        phase.notes.append("duplicate deliveries are allowed here (a delivery in flight when killed)")
    return phase


def phase_disk(work: Path, hold: float) -> Phase:
    phase = Phase("disk full / read-only")
    if os.geteuid() != 0:
        phase.notes.append("skipped: needs root (mount -t tmpfs)")
        return phase
    with ExitStack() as stack:
        world = stack.enter_context(FaultWorld(period=1.0))
        rx = Receiver()
        stack.callback(rx.stop)
        t = Tidings(work / "disk")
        t.state.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", str(t.state)], check=True)
        stack.callback(lambda: subprocess.run(["umount", "-l", str(t.state)]))
        stack.callback(t.stop_all)  # (callbacks run last-first: daemons die before the unmount)
        write_config(t, rx)
        write_sources(t, world, {n: "feed" for n in HEALTHY[:2]})
        d = t.start_daemon()
        wait_for(lambda: len(rx.state["ids"]) >= 10, timeout=30, what="the first deliveries")

        # 1. Disk full while running. The receiver is away first, so deliveries are queued;
        #    it comes back while the disk is full: they succeed but cannot be marked done.
        rx.down()
        time.sleep(3)
        filler = fill_disk(t.state)
        full_at = time.monotonic()
        before = len(rx.state["ids"])
        rx.back()
        time.sleep(hold)
        during = len(rx.state["ids"]) - before
        text = read_log(d)
        phase.check(d.poll() is None, f"daemon died on a full disk: exit {d.poll()}")
        full_lines = [l for l in text.splitlines() if "disk is full" in l and l.split(" ")[1] in ("error", "critical")]
        phase.check(full_lines and str(db_path(t)) in full_lines[0], f"no clear error naming the state file: {full_lines[:2]}")
        phase.check(len(full_lines) <= 4, f"{len(full_lines)} error lines in {hold:.0f}s of disk full (a flood)")
        phase.notes.append(f"disk full {hold:.0f}s: {len(full_lines)} error lines, e.g. `{full_lines[0].split(' ', 2)[2][:110] if full_lines else ''}…`")
        phase.notes.append(f"deliveries while full: {during}")
        filler.unlink()
        freed_at = time.monotonic()
        wait_for(lambda: len(rx.state["ids"]) > before + during + 6, timeout=30, what="events again after space returned")
        phase.notes.append(f"events flow again {time.monotonic() - freed_at:.1f}s after space returned "
                           f"(full for {freed_at - full_at:.0f}s)")

        # 2. Read-only state dir at start-up.
        stop_daemon(d, phase)
        subprocess.run(["mount", "-o", "remount,ro", str(t.state)], check=True)
        try:
            r = t.run("run", timeout=20)
        except subprocess.TimeoutExpired:
            r = None
        phase.check(r is not None, "the daemon kept running on a read-only state dir")
        r = r or t.run("sources")
        first = next((l for l in r.stderr.splitlines() if "state" in l), r.stderr.strip()[:200])
        phase.check(r.code == 2 and str(t.state) in r.stderr, f"read-only start: exit {r.code}, {r.stderr[-400:]}")
        phase.notes.append(f"read-only start: exit {r.code}: `{first[:140]}`")
        subprocess.run(["mount", "-o", "remount,rw", str(t.state)], check=True)

        # 3. Back to normal: everything committed is delivered.
        world.thaw()
        d = t.start_daemon()
        time.sleep(3)
        drain(t, world, phase, d)
        stop_daemon(d, phase)
        finish(t, rx, phase)
        phase.faults = f"ENOSPC for {freed_at - full_at:.0f}s, read-only restart"
    return phase


SHARED_INTERVAL = 2.0
# Feeds change every 8 s, more than the longest gap between two polls of a source across a
# kill (interval + two intervals of lease + a margin), so a generation is seldom skipped.
SHARED_PERIOD = 8.0
# One feed in 5 changes (~15 events a second with 300 feeds): what one webhook sink delivers
# with room to spare, so the phase measures losses and duplicates, not a growing backlog.
SHARED_CHANGING = 5
# On top of the two intervals a lease outlives a killed holder: a survivor's next lease round
# and starting the poll (see Tests/e2e/test_postgres_failover.py).
SHARED_TAKEOVER_MARGIN = 1.5


def phase_shared(work: Path, seconds: float, kill_every: float, sources: int, rng: random.Random) -> Phase:
    phase = Phase("shared state, kill -9")
    why = postgres.missing()
    if why:
        phase.check(False, why)
        return phase
    with ExitStack() as stack:
        pg = stack.enter_context(postgres.PostgresServer())
        db = pg.create_database("soak")
        world = stack.enter_context(ChurnWorld(sources, SHARED_PERIOD, SHARED_CHANGING))
        rx = Receiver()
        stack.callback(rx.stop)
        nodes = [Tidings(work / "shared" / f"node{n}") for n in range(3)]
        for t in nodes:
            stack.callback(t.stop_all)
            secret = t.write_secret("hook.secret", SECRET)
            t.write_config(world.daemon_config(rx.url, db.state_toml(), SHARED_INTERVAL, secret))
        runs = [0, 0, 0]
        live = [t.start_daemon(log=t.root / "daemon-run0.log") for t in nodes]
        wait_for(lambda: all(world.served(i) for i in range(sources)), timeout=120, interval=0.5,
                 what="every source polled once")
        start = time.monotonic()
        kills, takeovers, died = [], [], []
        while time.monotonic() < start + seconds:
            time.sleep(rng.uniform(0.5, 1.5) * kill_every)
            for n, d in enumerate(live):
                if d.poll() is not None:
                    died.append(f"node{n} run {runs[n]} exited by itself with {d.returncode}: {read_log(d)[-300:]}")
            n = rng.randrange(3)
            victim = live[n]
            owned = [int(name[1:]) for name, pid in db.source_owners().items() if pid == victim.pid]
            os.killpg(victim.pid, signal.SIGKILL)
            t_kill = time.monotonic()
            victim.wait(timeout=10)
            nodes[n].daemons.remove(victim)
            kills.append(len(owned))
            runs[n] += 1
            live[n] = nodes[n].start_daemon(log=nodes[n].root / f"daemon-run{runs[n]}.log")
            # How long until each of its sources was polled again (by anyone).
            deadline = t_kill + 2 * SHARED_INTERVAL + SHARED_TAKEOVER_MARGIN + 5
            while time.monotonic() < deadline and not all(any(x > t_kill for x in world.request_times(i)) for i in owned):
                time.sleep(0.2)
            for i in owned:
                after = [x for x in world.request_times(i) if x > t_kill]
                takeovers.append(after[0] - t_kill if after else float("inf"))
            log(f"shared: kill {len(kills)}: node{n} ({len(owned)} sources), {len(rx.state['ids'])} deliveries so far")
        for p in died:
            phase.check(False, p)
        end = time.monotonic()
        # Drain: feeds frozen, every source polled once more, the outbox empty.
        t_freeze = world.freeze()
        try:
            wait_for(lambda: all(any(x > t_freeze + 0.5 for x in world.request_times(i)) for i in range(sources)),
                     timeout=60, interval=0.5, what="every source polled after the freeze")
            wait_for(lambda: db.queued() == 0, timeout=150, interval=0.5, what="an empty outbox")
        except AssertionError as e:
            phase.check(False, f"{e} ({db.queued()} deliveries left)")
        owners = collections.Counter(db.source_owners().values())
        for d in live:
            stop_daemon(d, phase)
        phase.ledger = ledger.Ledger(None, rx.state["ids"], events=db.events())
        for p in phase.ledger.problems(allow_duplicate_deliveries=True):
            phase.check(False, p)
        phase.check(not rx.state["bad_signatures"], f"{len(rx.state['bad_signatures'])} deliveries with a bad signature")
        dup = phase.ledger.duplicate_deliveries
        phase.check(dup <= len(kills), f"{dup} duplicate deliveries for {len(kills)} kills (at most one in flight per kill)")
        limit = 2 * SHARED_INTERVAL + SHARED_TAKEOVER_MARGIN
        late = [x for x in takeovers if x > limit]
        phase.check(not late, f"{len(late)} of {len(takeovers)} orphaned sources polled again after more than {limit:.1f}s "
                              f"(worst {max(late, default=0):.1f}s)")
        skipped = sum(len(world.expected(i, world.generation(i)) - {(e["event"], e["key"]) for e in phase.ledger.events
                                                                   if e["source"] == source_name(i)})
                      for i in range(sources))
        phase.faults = f"{len(kills)} x kill -9 of 1 of 3 instances (every ~{kill_every:.0f}s, {end - start:.0f}s)"
        phase.late = f"{ledger.percentile(takeovers, .99):.2f} / {max(takeovers, default=0):.2f}s"
        phase.lateness = (f"takeover of a killed instance's sources: {len(takeovers)} sources, p50 "
                          f"{ledger.percentile(takeovers, .5):.2f}s p99 {ledger.percentile(takeovers, .99):.2f}s max "
                          f"{max(takeovers, default=0):.2f}s (limit {limit:.1f}s)")
        phase.notes.append(f"{sources} sources at {SHARED_INTERVAL:.0f}s on PostgreSQL {pg.bin.parent.name}; sources per "
                           f"instance at the end: {sorted(owners.values())}; {dup} duplicate deliveries for {len(kills)} kills")
        phase.notes.append(f"feed changes no instance saw (a generation skipped across a kill, not a loss): {skipped}")
    return phase


# ---------------------------------------------------------------------------------------
def table(phases) -> str:
    head = ("phase", "faults injected", "produced", "delivered", "lost", "dup events", "dup deliveries",
            "healthy late p99/max")
    rows = [head]
    for p in phases:
        L = p.ledger
        if L is None:
            rows.append((p.name, p.faults or "-", "-", "-", "-", "-", "-", p.late))
            continue
        rows.append((p.name, p.faults, str(L.produced), str(L.delivered), str(len(L.lost)),
                     str(len(L.duplicate_events)), str(L.duplicate_deliveries), p.late))
    done = [p.ledger for p in phases if p.ledger]
    if done:
        rows.append(("total", "", str(sum(L.produced for L in done)), str(sum(L.delivered for L in done)),
                     str(sum(len(L.lost) for L in done)), str(sum(len(L.duplicate_events) for L in done)),
                     str(sum(L.duplicate_deliveries for L in done)), ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = []
    for n, r in enumerate(rows):
        lines.append("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(ROOT / ".build" / "release" / "tidings"))
    ap.add_argument("--postgres", action="store_true", help="only the shared-state phase (SOAK_ONLY=shared)")
    args = ap.parse_args()
    os.environ["TIDINGS_BIN"] = str(Path(args.bin).resolve())
    only = (os.environ.get("SOAK_ONLY") or ("shared" if args.postgres else "provider sink crash disk shared")).split()
    seed = int(os.environ.get("SOAK_SEED") or random.randrange(1 << 30))
    rng = random.Random(seed)
    keep = os.environ.get("SOAK_KEEP") == "1"
    work = Path(tempfile.mkdtemp(prefix="tidings-soak-"))
    log(f"work dir {work}, seed {seed}, phases {' '.join(only)}")
    runs = {
        "provider": lambda: phase_provider(work, env_float("SOAK_PROVIDER_SECONDS", 120)),
        "sink": lambda: phase_sink(work, env_float("SOAK_SINK_SECONDS", 120)),
        "crash": lambda: phase_crash(work, int(env_float("SOAK_KILLS", 50)), rng),
        "disk": lambda: phase_disk(work, env_float("SOAK_DISK_SECONDS", 15)),
        "shared": lambda: phase_shared(work, env_float("SOAK_SHARED_SECONDS", 120), env_float("SOAK_SHARED_KILL_EVERY", 10),
                                       int(env_float("SOAK_SHARED_SOURCES", 300)), rng),
    }
    phases = []
    t0 = time.monotonic()
    try:
        for name in only:
            log(f"phase {name}…")
            started = time.monotonic()
            try:
                p = runs[name]()
            except Exception as e:  # a phase that blew up is a failed phase, and the rest still run
                p = Phase(name)
                p.check(False, f"aborted: {e!r}")
                traceback.print_exc()
            p.seconds = time.monotonic() - started
            phases.append(p)
            log(f"phase {name} done in {p.seconds:.0f}s, {len(p.problems)} problems")
    finally:
        if keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    print(f"\ntidings soak: {time.monotonic() - t0:.0f}s, seed {seed}, {os.cpu_count()} cores, binary {args.bin}\n")
    print(table(phases))
    print()
    for p in phases:
        extra = [p.lateness] if p.lateness else []
        print(f"{p.name} ({p.seconds:.0f}s):")
        for n in extra + p.notes:
            print(f"  - {n}")
        for pr in p.problems:
            print(f"  ! {pr}")
    failed = [p.name for p in phases if p.problems]
    print(f"\nresult: {'FAIL (' + ', '.join(failed) + ')' if failed else 'PASS'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
