"""The crash test for each chat channel: receiver down → kill -9 of the daemon → receiver up
→ restart: each event is shown exactly once."""
from __future__ import annotations

import os
import signal
import socket

import pytest

from chat import CHANNELS
from conftest import wait_for
from fakes.server import FakeServer
from feed import Feed, item


def outbox(t):
    r = t.run("outbox", "--json")
    assert r.code == 0, r
    return r.events


@pytest.mark.parametrize("name", sorted(CHANNELS))
def test_receiver_down_daemon_killed_each_event_shown_once(tidings, name):
    ch = CHANNELS[name]()
    Feed(tidings).set([item("a", "first"), item("b", "second")])
    # Hold the port without listening: connections are refused, and nobody else can take it.
    hold = socket.socket()
    hold.bind(("127.0.0.1", 0))
    port = hold.getsockname()[1]
    ch.configure(tidings, f"http://127.0.0.1:{port}")
    d = tidings.start_daemon()
    wait_for(lambda: [r["status"] for r in outbox(tidings)] == ["retrying", "pending"], timeout=30,
             what="both events queued, the first failing")
    os.killpg(d.pid, signal.SIGKILL)
    d.wait(timeout=10)

    hold.close()
    with FakeServer(ch.handler, state=ch.state(), port=port) as srv:
        tidings.start_daemon()
        wait_for(lambda: len(ch.messages(srv)) == 2, timeout=30, what="the queued events after restart")
        wait_for(lambda: outbox(tidings) == [], what="the outbox to empty")
        titles = [ch.title_of(m) for m in ch.messages(srv)]
        assert sum("first" in t for t in titles) == 1 and sum("second" in t for t in titles) == 1, titles
        assert len(srv.requests) == 2, "each queued event once, no duplicates"
