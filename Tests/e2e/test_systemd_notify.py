"""The daemon speaks sd_notify to a real AF_UNIX datagram socket given as NOTIFY_SOCKET (issue 10,
DESIGN §8): READY=1 once config and state are loaded, RELOADING=1 + MONOTONIC_USEC then READY=1
around a SIGHUP, STOPPING=1 on SIGTERM, WATCHDOG=1 from the scheduler loop at half of
WATCHDOG_USEC, and a STATUS= line. A path and an abstract-namespace address both work."""
from __future__ import annotations

import os
import re
import signal
import socket
import threading
import time

import pytest

from conftest import read_log, wait_for
from fakes.server import FakeServer
from fakes.webhook_receiver import WebhookReceiver, receiver_state


class NotifySocket:
    """What systemd listens on: every datagram received, with the time it came."""

    def __init__(self, address: str):
        self.address = address
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + address[1:] if address.startswith("@") else address)
        self.sock.settimeout(0.2)
        self.messages: list[tuple[float, dict]] = []
        self.lock = threading.Lock()
        self.running = True
        self.thread = threading.Thread(target=self._receive, daemon=True)
        self.thread.start()

    def _receive(self):
        while self.running:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            fields = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
            with self.lock:
                self.messages.append((time.monotonic(), fields))

    def seen(self, key: str) -> list[tuple[float, dict]]:
        with self.lock:
            return [(t, m) for t, m in self.messages if key in m]

    def keys(self) -> list[str]:
        with self.lock:
            return [k for _, m in self.messages for k in m if k != "STATUS" and k != "MONOTONIC_USEC" and k != "WATCHDOG"]

    def close(self):
        self.running = False
        self.sock.close()


def many_sources(tidings, n=100):
    for i in range(n):
        tidings.write_plugin(f"s{i:03}.toml", """
            provider = "exec"
            command = ["/bin/true"]
            interval = "1h"
        """)
    tidings.write_config('[sinks.console]\ntype = "stdout"\n')


@pytest.mark.parametrize("kind", ["path", "abstract"])
def test_ready_reloading_stopping_and_watchdog(tidings, kind):
    many_sources(tidings)
    address = str(tidings.root / "notify.sock") if kind == "path" else f"@tidings-test-{os.getpid()}-{time.monotonic_ns()}"
    ns = NotifySocket(address)
    try:
        start = time.monotonic()
        d = tidings.start_daemon(env={"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "400000"})
        (t_ready, m_ready), = wait_for(lambda: ns.seen("READY"), timeout=10, what="READY=1")
        assert t_ready - start < 2.0, f"READY=1 after {t_ready - start:.2f}s with 100 sources"
        assert m_ready["STATUS"] == "polling 100 sources (0 failing), 1 sink, 0 queued"

        # The watchdog: pinged at about half of WATCHDOG_USEC (200 ms) from the scheduler loop.
        time.sleep(2.0)
        pings = [t for t, _ in ns.seen("WATCHDOG")]
        assert len(pings) >= 5, pings
        gaps = [b - a for a, b in zip(pings, pings[1:])]
        assert max(gaps) < 1.2, gaps

        before = time.monotonic_ns() // 1000
        d.send_signal(signal.SIGHUP)
        wait_for(lambda: len(ns.seen("READY")) >= 2, timeout=10, what="READY=1 after the reload")
        (_, m_reload), = ns.seen("RELOADING")
        assert m_reload["RELOADING"] == "1" and int(m_reload["MONOTONIC_USEC"]) >= before
        assert ns.keys()[-2:] == ["RELOADING", "READY"], ns.keys()

        d.send_signal(signal.SIGTERM)
        assert d.wait(timeout=20) == 0, read_log(d)
        # Sent before the exit; the receiver thread may not have read it yet (a loaded machine).
        wait_for(lambda: ns.seen("STOPPING"), timeout=5, what="STOPPING=1 read from the socket")
        assert ns.keys()[-1] == "STOPPING", ns.keys()
    finally:
        ns.close()


def test_a_refused_reload_is_ready_again_on_the_old_config(tidings):
    many_sources(tidings, n=2)
    address = str(tidings.root / "notify.sock")
    ns = NotifySocket(address)
    try:
        d = tidings.start_daemon(env={"NOTIFY_SOCKET": address})
        wait_for(lambda: ns.seen("READY"), timeout=10, what="READY=1")
        tidings.write_config("this is not toml = = =\n")
        d.send_signal(signal.SIGHUP)
        wait_for(lambda: len(ns.seen("READY")) >= 2, timeout=10, what="READY=1 on the old config")
        assert ns.keys() == ["READY", "RELOADING", "READY"], ns.keys()
        assert ns.seen("READY")[-1][1]["STATUS"] == "polling 2 sources (0 failing), 1 sink, 0 queued"
        d.send_signal(signal.SIGTERM)
        assert d.wait(timeout=20) == 0
    finally:
        ns.close()


def test_status_carries_failing_sources_and_the_outbox_backlog(tidings):
    """DESIGN §8: STATUS= says sources, failing, outbox backlog; it follows the state while the
    daemon runs (a failing source, its error event queued for a webhook answering 503)."""
    with FakeServer(WebhookReceiver, state=receiver_state(default=503)) as hook:
        tidings.write_plugin("fine.toml", 'provider = "exec"\ncommand = ["/bin/true"]\ninterval = "1h"\n')
        tidings.write_plugin("broken.toml", 'provider = "exec"\ncommand = ["/bin/false"]\ninterval = "1s"\n'
                                            'error_threshold = 1\nmax_backoff = "2s"\n')
        tidings.write_config(f'[sinks.console]\ntype = "stdout"\n[sinks.hook]\ntype = "webhook"\nurl = "{hook.url}/hook"\n')
        address = str(tidings.root / "notify.sock")
        ns = NotifySocket(address)
        try:
            d = tidings.start_daemon(env={"NOTIFY_SOCKET": address})
            wait_for(lambda: ns.seen("READY"), timeout=10, what="READY=1")
            wait_for(lambda: hook.requests, timeout=20, what="the error event offered to the hook")

            def backlog_status():
                lines = [m["STATUS"] for _, m in ns.seen("STATUS")]
                return [l for l in lines if re.fullmatch(r"polling 2 sources \(1 failing\), 2 sinks, [1-9]\d* queued", l)]
            assert wait_for(backlog_status, timeout=20, what="STATUS with the failing source and the backlog")
            d.send_signal(signal.SIGTERM)
            assert d.wait(timeout=20) == 0, read_log(d)
        finally:
            ns.close()


def test_no_notify_socket_no_notifications_and_a_config_error_exits_78(tidings):
    tidings.write_config("[sinks.console]\ntype = \"nope\"\n")
    r = tidings.run("run", timeout=20, env={"NOTIFY_SOCKET": str(tidings.root / "absent.sock")})
    assert r.code == 78, r
