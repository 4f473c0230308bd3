"""Sleep and network (README "Sleep and network"): the real daemon on a private system bus with
python3-dbusmock's logind and networkmanager templates, polling a JSON API every second.
NetworkManager offline → no polls, and a poll that fails meanwhile raises no error event
(error_threshold = 1); online → a poll at once. logind's PrepareForSleep(true) → no polls;
(false) → the overdue source is polled at once, with no clock jump involved. No system bus →
polling as before."""
from __future__ import annotations

import signal
import time

import pytest

from conftest import read_log, wait_for
from fakes.json_api import JSONAPI
from fakes.server import FakeServer
from fakes.system_bus import SystemBus, available
from test_systemd_notify import NotifySocket

pytestmark = pytest.mark.skipif(available() is not None, reason=available() or "")

DISCONNECTED, CONNECTED_GLOBAL = 20, 70


@pytest.fixture(scope="module")
def bus():
    with SystemBus() as b:
        yield b


@pytest.fixture
def api():
    with FakeServer(JSONAPI, state={"items": [{"id": 1, "name": "one"}]}) as srv:
        yield srv


@pytest.fixture
def network_manager(bus):
    """NetworkManager on the bus for one test (connected), gone afterwards."""
    bus.start_network_manager(CONNECTED_GLOBAL)
    yield bus
    bus.stop_network_manager()


def configure(t, api):
    t.write_config(f"""
        [sources.api]
        provider = "http-json"
        url = "{api.url}/items"
        items = "/items"
        key = "/id"
        title = "/name"
        interval = "1s"
        jitter = 0
        max_backoff = "1s"
        error_threshold = 1
        """)


def log_has(d, text):
    return text in read_log(d)


def wait_log(d, text, timeout=10):
    wait_for(lambda: log_has(d, text), timeout=timeout, what=repr(text))


def events(t):
    r = t.run("history", "--json")
    assert r.code == 0, r
    return [e["event"] for e in r.events]


def polled_soon_after(api, action, what):
    """After `action`, the source is polled within 2.5 s (the spread window is one interval, 1 s)."""
    api.clear()
    start = time.monotonic()
    action()
    wait_for(lambda: api.request_times, timeout=5, what=what)
    assert api.request_times[0] - start < 2.5, what


def quiet_for(api, seconds):
    """No request reaches the source for `seconds` (it would be polled every second)."""
    api.clear()
    time.sleep(seconds)
    return api.requests == []


def test_offline_pauses_polls_a_failure_meanwhile_is_not_counted_online_polls_at_once(tidings, api, network_manager):
    bus = network_manager
    configure(tidings, api)
    d = tidings.start_daemon(env=bus.env)
    wait_log(d, "NetworkManager says state 70 (connected, global), connectivity 4 (full): network online")
    wait_for(lambda: len(api.requests) >= 2, what="polls every second")

    # A poll in flight when the network goes: the server answers 500 after 2 s, by then offline.
    api.state.update(delay=2, status=500)
    api.clear()
    wait_for(lambda: api.requests, what="a poll in flight")
    bus.network_state(DISCONNECTED)
    wait_log(d, "network offline: polls paused")
    wait_log(d, "poll failed while polls are paused (network offline)")
    api.state["delay"] = 0
    assert quiet_for(api, 2.5), "no poll starts while offline"
    assert "error" not in events(tidings), "the failure while offline counted toward error_threshold = 1"

    # A reload while offline: the new scheduler stays paused.
    d.send_signal(signal.SIGHUP)
    wait_log(d, "reloaded configuration")
    assert quiet_for(api, 2), "polls started after a reload while offline"

    # Online: the source (due meanwhile) is polled at once; the server still fails, and now it counts.
    polled_soon_after(api, lambda: bus.network_state(CONNECTED_GLOBAL), "a poll once online")
    wait_log(d, "network online: polling 1 overdue source")
    wait_for(lambda: "error" in events(tidings), what="the error event once online (failures count again)")


def test_network_manager_offline_at_start_leaving_and_appearing(tidings, api, bus):
    bus.start_network_manager(DISCONNECTED)
    configure(tidings, api)
    systemd = NotifySocket(str(tidings.root / "notify.sock"))
    d = tidings.start_daemon(env={**bus.env, "NOTIFY_SOCKET": systemd.address})
    try:
        wait_log(d, "network offline")
        wait_log(d, "scheduler: 1 source scheduled; polls paused (network offline)")
        assert quiet_for(api, 2.5), "polled while NetworkManager said disconnected at start"
        ready = wait_for(lambda: systemd.seen("READY"), what="READY=1")
        assert ready[0][1]["STATUS"] == "paused (network offline): 1 source (0 failing), 0 sinks, 0 queued"

        # NetworkManager leaves the bus: the network state is unknown again, polling as before.
        bus.stop_network_manager()
        wait_log(d, "NetworkManager left the system bus")
        wait_for(lambda: len(api.requests) >= 2, timeout=5, what="polls once NetworkManager is gone")
        wait_for(lambda: systemd.seen("STATUS")[-1][1]["STATUS"].startswith("polling 1 source"), what="STATUS polling again")

        # It comes back, disconnected: read on arrival, polls pause again.
        bus.start_network_manager(DISCONNECTED)
        wait_log(d, "NetworkManager appeared on the system bus")
        wait_log(d, "network offline: polls paused")
        time.sleep(0.5)
        assert quiet_for(api, 2), "polled while NetworkManager said disconnected"
    finally:
        systemd.close()
        bus.stop_network_manager()


def test_prepare_for_sleep_pauses_and_resume_polls_the_overdue_source_at_once(tidings, api, bus):
    configure(tidings, api)
    d = tidings.start_daemon(env=bus.env)
    wait_log(d, "system bus: following logind's sleep signals; NetworkManager is not on it")
    wait_for(lambda: len(api.requests) >= 2, what="polls every second")

    bus.prepare_for_sleep(True)
    wait_log(d, "going to sleep: polls paused")
    assert quiet_for(api, 3), "polled after PrepareForSleep(true)"

    # The source came due 2 s ago; the wall clock did not jump (no clock-jump catch-up).
    polled_soon_after(api, lambda: bus.prepare_for_sleep(False), "a poll after resume")
    wait_log(d, "resumed from sleep: polling 1 overdue source")
    assert not log_has(d, "clock jumped")


def test_without_a_system_bus_the_daemon_polls_as_before(tidings, api, tmp_path):
    configure(tidings, api)
    d = tidings.start_daemon(env={"DBUS_SYSTEM_BUS_ADDRESS": f"unix:path={tmp_path}/no-bus"})
    wait_log(d, "no system bus")
    wait_for(lambda: len(api.requests) >= 3, timeout=6, what="polls every second")
    assert d.poll() is None


def test_the_system_bus_going_away_resumes_polling_and_the_daemon_keeps_running(tidings, api):
    with SystemBus() as own:
        configure(tidings, api)
        d = tidings.start_daemon(env=own.env)
        wait_log(d, "system bus: following logind's sleep signals")
        own.prepare_for_sleep(True)  # and no resume signal will come
        wait_log(d, "going to sleep: polls paused")
        assert quiet_for(api, 1.5)
        # dbus-daemon stops (a restart of dbus): GIO's default would SIGTERM the daemon.
        own.daemon.terminate()
        own.daemon.wait(timeout=10)
        wait_log(d, "the system bus closed")
        wait_for(lambda: len(api.requests) >= 2, timeout=5, what="polls once the bus is gone")
        assert d.poll() is None, read_log(d)


def test_back_online_a_delivery_waiting_out_its_retry_backoff_goes_at_once(tidings, api, network_manager):
    """A sink that failed while the network was down waits out a growing backoff (2 s, 4 s,
    8 s …); when the network comes back the delivery goes at once, as polls do."""
    from fakes.webhook_receiver import WebhookReceiver, receiver_state
    bus = network_manager
    with FakeServer(WebhookReceiver, state=receiver_state(default=503)) as hook:
        configure(tidings, api)
        with open(tidings.config, "a") as f:
            f.write(f'\n[sinks.hook]\ntype = "webhook"\nurl = "{hook.url}/in"\n')
        d = tidings.start_daemon(env=bus.env)
        wait_log(d, "network online")
        wait_for(lambda: api.requests, what="the baseline poll")
        api.state["items"].append({"id": 2, "name": "two"})
        wait_for(lambda: len(hook.requests) >= 3, timeout=20, what="three failed attempts (at about 0, 2 and 6 s)")
        third = time.monotonic()
        bus.network_state(DISCONNECTED)
        wait_log(d, "network offline: polls paused")
        hook.state["default"] = 200
        bus.network_state(CONNECTED_GLOBAL)
        wait_for(lambda: hook.state["accepted"], timeout=6, what="the delivery once online")
        # The fourth attempt was due 8 s (± 20 %) after the third: it came well before.
        assert time.monotonic() - third < 6, "the delivery waited out its backoff"
        assert [e["key"] for e in hook.state["accepted"]] == ["2"]
