"""The crash test for each chat channel: receiver down → kill -9 of the daemon → receiver up
→ restart: each event is shown exactly once."""
from __future__ import annotations


import pytest

from chat import CHANNELS
from conftest import kill_while_queued, outbox, wait_for
from fakes.server import FakeServer
from feed import Feed, item


@pytest.mark.parametrize("name", sorted(CHANNELS))
def test_receiver_down_daemon_killed_each_event_shown_once(tidings, name):
    ch = CHANNELS[name]()
    Feed(tidings).set([item("a", "first"), item("b", "second")])
    port, _ = kill_while_queued(tidings, lambda port: ch.configure(tidings, f"http://127.0.0.1:{port}"))
    with FakeServer(ch.handler, state=ch.state(), port=port) as srv:
        tidings.start_daemon()
        wait_for(lambda: len(ch.messages(srv)) == 2, timeout=30, what="the queued events after restart")
        wait_for(lambda: outbox(tidings) == [], what="the outbox to empty")
        titles = [ch.title_of(m) for m in ch.messages(srv)]
        assert sum("first" in t for t in titles) == 1 and sum("second" in t for t in titles) == 1, titles
        assert len(srv.requests) == 2, "each queued event once, no duplicates"
