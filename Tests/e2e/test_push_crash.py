"""The crash test for the phone-push channels (ntfy, Gotify, Pushover): the service is down,
the daemon is killed with SIGKILL while events wait in the outbox, the service comes back, the
daemon restarts: each event is shown exactly once."""
from __future__ import annotations


import pytest

from conftest import kill_while_queued, wait_for
from fakes.server import FakeServer
from feed import Feed, item
from push_util import CHANNELS, assert_no_secret, outbox


@pytest.mark.parametrize("name", sorted(CHANNELS))
def test_service_down_daemon_killed_each_event_shown_once(tidings, name):
    channel = CHANNELS[name]()
    feed = Feed(tidings)
    feed.set([item("a", "First"), item("b", "Second")])
    port, _ = kill_while_queued(tidings, lambda port: tidings.write_config(channel.config(tidings, f"http://127.0.0.1:{port}")))
    with FakeServer(channel.handler, state=channel.make_state(), port=port) as srv:
        tidings.start_daemon()
        wait_for(lambda: len(srv.state["accepted"]) == 2, timeout=30, what="the queued events after restart")
        wait_for(lambda: outbox(tidings) == [], what="the outbox to empty")
        assert sorted(channel.messages(srv.state)) == ["First", "Second"]
        assert len(srv.requests) == 2, "each queued event once, no duplicates"
        assert_no_secret(tidings, channel.secrets)
