"""Shared pieces of the phone-push e2e tests (test_ntfy.py, test_gotify.py, test_pushover.py,
test_push_crash.py): each service's fake and a sink config for it, and the secret check."""
from __future__ import annotations

import secrets
import string
from dataclasses import dataclass
from typing import Callable

from conftest import outbox, read_log, wait_for
from fakes.gotify import GotifyServer, gotify_state
from fakes.ntfy import NtfyServer, ntfy_state
from fakes.pushover import PushoverServer, pushover_state
from feed import item


def token(n=30, prefix=""):
    return prefix + "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(n))


def disabled_once(t, feed):
    """Runs the daemon (feed has item "a") until the sink is disabled, queues a second event
    behind it, checks the sink was reported dead once and both deliveries are kept, and returns
    the line that said so."""
    d = t.start_daemon()
    wait_for(lambda: "DISABLED" in read_log(d), what="the sink to be disabled")
    feed.set([item("a"), item("b")])
    wait_for(lambda: len(outbox(t)) == 2, what="the second event to queue behind the dead sink")
    log = read_log(d)
    assert log.count("DISABLED") == 1, log
    assert all(r["status"] in ("retrying", "pending") for r in outbox(t))
    return next(l for l in log.splitlines() if "DISABLED" in l)


def assert_no_secret(t, values, *texts):
    """None of `values` in `texts`, in the daemon logs, or in `tidings outbox` (text and JSON)."""
    seen = list(texts) + [p.log_path.read_text(errors="replace") for p in t.daemons]
    seen += [t.run("outbox").stdout, t.run("outbox", "--json").stdout]
    for v in values:
        for text in seen:
            assert v not in text, f"secret {v[:4]}… printed:\n{text[-3000:]}"


@dataclass
class Channel:
    """One phone-push service: its fake, the secrets a sink for it holds, and its config."""
    name: str
    handler: type
    make_state: Callable[[], dict]
    config: Callable[[object, str], str]   # (tidings, fake url) -> [sinks.NAME] table
    secrets: list

    def messages(self, state):
        """The text each accepted message shows, in order."""
        return [m["message"] for m in state["accepted"]]


def ntfy_channel(tok=None):
    tok = tok or token(29, "tk_")
    return Channel(
        "ntfy", NtfyServer, lambda: ntfy_state(tokens={tok}, protected={"alerts"}),
        lambda t, url: f"""
            [sinks.phone]
            type = "ntfy"
            url = "{url}"
            topic = "alerts"
            token_file = "{t.write_secret('ntfy.token', tok)}"
            """, [tok])


def gotify_channel(tok=None):
    tok = tok or token(15)
    return Channel(
        "gotify", GotifyServer, lambda: gotify_state(tokens={tok: "tidings"}),
        lambda t, url: f"""
            [sinks.phone]
            type = "gotify"
            url = "{url}"
            token_file = "{t.write_secret('gotify.token', tok)}"
            """, [tok])


def pushover_channel(app=None, user=None):
    app, user = app or token(), user or token()
    return Channel(
        "pushover", PushoverServer, lambda: pushover_state(tokens={app}, users={user}),
        lambda t, url: f"""
            [sinks.phone]
            type = "pushover"
            api_url = "{url}/1/messages.json"
            api_token_file = "{t.write_secret('pushover.app', app)}"
            user_key_file = "{t.write_secret('pushover.user', user)}"
            """, [app, user])


CHANNELS = {"ntfy": ntfy_channel, "gotify": gotify_channel, "pushover": pushover_channel}
