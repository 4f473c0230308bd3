"""Three `tidings run` on one PostgreSQL database share 300 sources (DESIGN §11, issue 13):
kill -9 one, its sources are polled again by the others within two intervals; every change
is one event (created once), every event delivered at least once, twice only for what the
killed instance had in flight; a clean SIGTERM releases the leases at once."""
from __future__ import annotations

import collections
import os
import signal
import time

from conftest import Tidings, read_log, wait_for
from fakes.churn import ChurnWorld, source_name
from fakes.server import FakeServer
from fakes.webhook_receiver import WebhookReceiver, receiver_state

SOURCES = 300
INTERVAL = 2.0
# Each feed changes every PERIOD seconds. Longer than the longest gap between two committed
# polls of a source (interval, or up to interval + takeover after the kill: ~2 + 4 + margin),
# so that no generation is skipped and the expected history is exact (fakes/churn.py).
PERIOD = 8.0
# One feed in CHANGING changes (30 of 300: ~7.5 events a second); the debug build delivers
# some 20 webhooks a second on 2 shared cores, so the outbox keeps up and drains in seconds.
CHANGING = 10
# A takeover is due within two intervals of the kill (the lease outlives its holder by at
# most that). The margin covers what comes on top on this machine: the next lease round of a
# surviving instance (it looks for expired leases at least once per interval), then the
# scheduler starting the poll and the fake recording the request; with 3 debug builds,
# PostgreSQL and 300 feeds on 2 shared cores a round can be a second late. Measured values
# are printed (-s) to show how much of it is used.
TAKEOVER_MARGIN = 1.5
# The webhook sink sends one event per request (no batches), and one sink is configured: at
# most one delivery per sink is in flight in an instance when it is killed.
SINKS, BATCH = 1, 1
RUN_BEFORE_KILL = RUN_AFTER_KILL = 15.0


def accepted(hook: FakeServer) -> list:
    """(monotonic time, event id) of each POST to the hook (the receiver answers them all 200)."""
    out = []
    for req, t in zip(hook.requests, hook.request_times):
        if req.method == "POST" and req.path == "/hook":
            out.append((t, req.json()["id"]))
    return out


def first_after(times: list, t: float) -> float | None:
    return next((x for x in times if x > t), None)


def test_three_daemons_share_sources_and_survive_kill_9(tmp_path, pg_db):
    with ChurnWorld(SOURCES, PERIOD, CHANGING) as world, FakeServer(WebhookReceiver, state=receiver_state()) as hook:
        nodes = [Tidings(tmp_path / f"node{n}") for n in range(3)]
        try:
            for t in nodes:
                t.write_config(world.daemon_config(hook.url, pg_db.state_toml(), INTERVAL))
            daemons = [t.start_daemon() for t in nodes]
            wait_for(lambda: all(world.served(i) for i in range(SOURCES)), timeout=90, interval=0.5,
                     what="every source polled once (the three daemons started on an empty database)")
            for d in daemons:
                assert d.poll() is None, read_log(d)[-3000:]
            # (From here on: the first rounds, where the first instance up takes every lease and
            # hands two thirds back as the others come, are over.)
            t_settled = time.monotonic() + 5
            time.sleep(RUN_BEFORE_KILL)

            # Who polls what, from the lease table and from `tidings sources --json`.
            owners = pg_db.source_owners()
            by_pid = collections.Counter(owners.values())
            print(f"sources per instance before the kill: {dict(by_pid)} ({len(owners)} leased)")
            assert len(owners) == SOURCES, f"{SOURCES - len(owners)} sources without a live lease: {sorted(set(source_name(i) for i in range(SOURCES)) - set(owners))[:5]}"
            assert set(by_pid) <= {d.pid for d in daemons}, f"leases held by unknown pids: {by_pid}"
            listed = {s["name"]: s.get("owner") for s in nodes[0].run("sources", "--json").events}
            assert len(listed) == SOURCES
            # The lease table is read again: a lease may pass on between the two reads (a round
            # that came late on a loaded machine lets it lapse), and `sources` then rightly names
            # the new holder. Every source whose lease stayed put must be named as its holder.
            again = pg_db.source_owners()
            steady = {name: pid for name, pid in owners.items() if again.get(name) == pid}
            assert len(steady) >= SOURCES * 0.9, f"{SOURCES - len(steady)} leases changed hands within a second"
            assert all(listed[name] and listed[name].endswith(f":{pid}") for name, pid in steady.items()), \
                [(n, listed[n], steady[n]) for n in steady if not (listed[n] or "").endswith(f":{steady[n]}")][:5]

            victim = max(daemons, key=lambda d: by_pid[d.pid])
            orphans = sorted(int(name[1:]) for name, pid in owners.items() if pid == victim.pid)
            assert orphans, "the killed instance must own sources for the test to mean anything"
            os.killpg(victim.pid, signal.SIGKILL)
            t_kill = time.monotonic()
            victim.wait(timeout=10)
            survivors = [d for d in daemons if d is not victim]
            time.sleep(RUN_AFTER_KILL)
            for d in survivors:
                assert d.poll() is None, read_log(d)[-3000:]

            # 1. Every source of the killed instance polled again within two intervals.
            delays = {i: (first_after(world.request_times(i), t_kill) or float("inf")) - t_kill for i in orphans}
            worst = max(delays.values())
            print(f"takeover of {len(orphans)} sources: worst {worst:.2f}s after the kill "
                  f"(limit {2 * INTERVAL:.0f}s + {TAKEOVER_MARGIN}s)")
            late = {source_name(i): round(x, 2) for i, x in delays.items() if x > 2 * INTERVAL + TAKEOVER_MARGIN}
            assert not late, f"{len(late)} sources of the killed instance polled late or never: {dict(list(late.items())[:8])}"
            after = pg_db.source_owners()
            assert set(after.values()) <= {d.pid for d in survivors} and len(after) == SOURCES, collections.Counter(after.values())

            # 2. One instance at a time: no source polled twice within half an interval (two
            #    owners would poll it at twice the rate).
            doubled = {}
            for i in range(SOURCES):
                times = [x for x in world.request_times(i) if x >= t_settled]
                close = [b - a for a, b in zip(times, times[1:]) if b - a < INTERVAL / 2]
                if close:
                    doubled[source_name(i)] = [round(x, 2) for x in close]
            assert not doubled, f"{len(doubled)} sources polled by two instances at once: {dict(list(doubled.items())[:5])}"

            # 3. A clean stop releases the leases at once; the last instance takes over
            #    without waiting for them to expire (within one interval).
            stopping, last = survivors
            stopping_owned = [int(name[1:]) for name, pid in pg_db.source_owners().items() if pid == stopping.pid]
            stopping.send_signal(signal.SIGTERM)
            assert stopping.wait(timeout=30) == 0, read_log(stopping)[-3000:]
            t_stop = time.monotonic()
            held = pg_db.scalar(f"SELECT count(*) FROM lease l JOIN instance i ON i.id = l.owner WHERE i.pid = {stopping.pid} "
                                "AND l.expires_at > extract(epoch FROM clock_timestamp())")
            assert held == "0", f"{held} leases still held by the instance that stopped cleanly"
            wait_for(lambda: all(first_after(world.request_times(i), t_stop) for i in stopping_owned),
                     timeout=2 * INTERVAL + TAKEOVER_MARGIN + 5, what="the last instance polling the stopped one's sources")
            handover = max(first_after(world.request_times(i), t_stop) - t_stop for i in stopping_owned) if stopping_owned else 0
            print(f"clean stop: {len(stopping_owned)} sources taken over within {handover:.2f}s")
            assert handover <= INTERVAL + TAKEOVER_MARGIN, f"handover after a clean stop took {handover:.2f}s: waited for expiry?"

            # Drain: feeds frozen, every source polled once more, the outbox empty.
            t_freeze = world.freeze()
            wait_for(lambda: all(first_after(world.request_times(i), t_freeze + 0.5) for i in range(SOURCES)),
                     timeout=30, interval=0.5, what="every source polled after the freeze")
            # A poll can be made and not recorded: its instance's lease lapsed meanwhile (a
            # round delayed on a loaded machine), so the poll's transaction refuses it (fencing)
            # and the next poll, two seconds later, records the change. Wait for the state to
            # hold the final generation of every feed (bounded), then check it exactly below.
            missing: dict = {}

            def recorded() -> bool:
                have = collections.defaultdict(set)
                for e in pg_db.events():
                    have[e["source"]].add((e["event"], e["key"]))
                missing.clear()
                def complete(i):
                    h = have[source_name(i)]
                    if world.expected(i, world.generation(i)) <= h:
                        return True
                    # During the start-up lease churn a first poll may be fenced; the baseline
                    # is then a later generation (silent, by design), and the chain starts there.
                    first = world.first_served_at(i)
                    return first is not None and first < t_settled and world.expected(i, world.generation(i), baseline_after_first=True) <= h
                missing.update({source_name(i): sorted(world.expected(i, world.generation(i)) - have[source_name(i)])
                                for i in range(SOURCES) if not complete(i)})
                return not missing
            try:
                # One instance is left polling all 300 feeds every 2 s while other test files
                # load the same 2 cores: convergence is bounded generously (the takeover bounds
                # above are what the test measures).
                t_drain = time.monotonic()
                wait_for(recorded, timeout=90, interval=1, what="every feed's last change recorded")
                print(f"drain: every feed's last change recorded {time.monotonic() - t_drain:.1f}s after every source was polled")
            except AssertionError:
                raise AssertionError(f"{len(missing)} feeds lack events, e.g. {dict(list(missing.items())[:5])}; "
                                     f"the last instance's log: {read_log(last)[-2000:]}")
            wait_for(lambda: pg_db.queued() == 0, timeout=60, interval=0.5, what="an empty outbox")
            last.send_signal(signal.SIGTERM)
            assert last.wait(timeout=30) == 0, read_log(last)[-3000:]
        finally:
            for t in nodes:
                t.stop_all()

        # 4. Events: ids unique; each change of the feeds exactly one event.
        events = pg_db.events()
        ids = [e["id"] for e in events]
        assert len(ids) == len(set(ids)), "an event id stored twice"
        assert not [e for e in events if e["kind"] == "source"], [e for e in events if e["kind"] == "source"][:3]
        got = collections.defaultdict(list)
        for e in events:
            got[e["source"]].append((e["event"], e["key"]))
        wrong = {}
        for i in range(SOURCES):
            have = got[source_name(i)]
            want = world.expected(i, world.generation(i))
            first = world.first_served_at(i)
            if set(have) != want and first is not None and first < t_settled:
                want = world.expected(i, world.generation(i), baseline_after_first=True)  # a fenced first poll (above)
            dup = [x for x, n in collections.Counter(have).items() if n > 1]
            if dup or set(have) != want:
                wrong[source_name(i)] = {"twice": dup, "missing": sorted(want - set(have))[:3], "extra": sorted(set(have) - want)[:3]}
        assert not wrong, f"{len(wrong)} sources with a wrong history: {dict(list(wrong.items())[:5])}"

        # 5. Deliveries: every routed event accepted at least once; extra copies only for what
        #    the killed instance had in flight (same id, first accepted before the kill).
        acc = accepted(hook)
        counts = collections.Counter(i for _, i in acc)
        routed = [e["id"] for e in events if e["silenced_by"] is None]
        lost = [i for i in routed if counts[i] == 0]
        foreign = set(counts) - set(ids)
        dups = {i: n - 1 for i, n in counts.items() if n > 1}
        print(f"{len(events)} events, {len(acc)} deliveries accepted, {sum(dups.values())} duplicate(s): {dups}")
        assert not lost, f"{len(lost)} events never delivered, e.g. {lost[:3]}"
        assert not foreign, f"deliveries of ids not in the event table: {list(foreign)[:3]}"
        assert sum(dups.values()) <= SINKS * BATCH, f"{sum(dups.values())} duplicate deliveries, more than one kill's in-flight bound {SINKS * BATCH}: {dups}"
        for i in dups:
            first = min(t for t, x in acc if x == i)
            assert first <= t_kill, f"event {i} delivered twice, first after the kill: not an in-flight delivery"
