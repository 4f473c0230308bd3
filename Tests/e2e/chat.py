"""The chat channels (telegram, slack, discord) as the e2e tests drive them: each knows its fake
server, how a sink named `chat` is configured against it, which strings are its secrets, and
how to read what the fake accepted. test_telegram.py, test_slack.py, test_discord.py and the
shared crash test (test_chat_crash.py) use them."""
from __future__ import annotations

import re
import secrets
import string
import time

from conftest import read_log, wait_for
from fakes.discord import DiscordWebhook, discord_state
from fakes.slack import SlackWebhook, slack_state
from fakes.server import FakeServer
from fakes.telegram import TelegramBotAPI, telegram_state
from feed import Feed, item

HOSTILE = "<b>x</b> @everyone <!channel> ](http://evil)"
SHORT = '''
[defaults]
interval = "1s"
jitter = 0
'''


def random_text(n, alphabet=string.ascii_letters + string.digits):
    return "".join(secrets.choice(alphabet) for _ in range(n))


def outputs_of(t, *runs, daemons=()):
    """Everything tidings showed: the given runs, `outbox` (text and JSON) and daemon logs."""
    texts = [r.stdout + r.stderr for r in runs]
    for args in (("outbox",), ("outbox", "--json"), ("outbox", "list")):
        r = t.run(*args)
        texts.append(r.stdout + r.stderr)
    texts += [open(d.log_path, errors="replace").read() for d in daemons]
    return "\n".join(texts)


class Channel:
    name = ""
    handler = None

    def state(self, script=None) -> dict:
        raise NotImplementedError

    def sink(self, t, url) -> str:
        """The `[sinks.chat]` table for a fake at `url`."""
        raise NotImplementedError

    def configure(self, t, url, extra=""):
        t.write_config(SHORT + self.sink(t, url) + extra)

    @property
    def secrets(self) -> list[str]:
        raise NotImplementedError

    def messages(self, srv) -> list:
        return srv.state["messages"]

    def title_of(self, message) -> str:
        """The visible title line of one accepted message (for identifying events)."""
        raise NotImplementedError


class Telegram(Channel):
    name = "telegram"
    handler = TelegramBotAPI

    def __init__(self):
        self.token = f"{secrets.randbelow(10**9) + 10**9}:AA{random_text(33, string.ascii_letters + string.digits + '_-')}"

    def state(self, script=None):
        return telegram_state(self.token, script=script)

    def sink(self, t, url):
        token = t.write_secret("telegram.token", self.token)
        return f'''
[sinks.chat]
type = "telegram"
bot_token_file = "{token}"
chat_id = 4242
api_url = "{url}"
'''

    @property
    def secrets(self):
        return [self.token, self.token.split(":")[1]]

    def title_of(self, message):
        return message["plain"].split("\n")[0]


class Slack(Channel):
    name = "slack"
    handler = SlackWebhook

    def __init__(self):
        self.path = f"/services/T{random_text(8).upper()}/B{random_text(10).upper()}/{random_text(24)}"

    def state(self, script=None):
        return slack_state(self.path, script=script)

    def sink(self, t, url):
        hook = t.write_secret("slack.url", url + self.path)
        return f'''
[sinks.chat]
type = "slack"
url_file = "{hook}"
'''

    @property
    def secrets(self):
        return [self.path, self.path.rsplit("/", 1)[1]]

    def title_of(self, message):
        return message["text"].split("\n")[0]


class Discord(Channel):
    name = "discord"
    handler = DiscordWebhook

    def __init__(self):
        self.id = str(10**18 + secrets.randbelow(10**18))
        self.token = random_text(68, string.ascii_letters + string.digits + "_-")

    def state(self, script=None):
        return discord_state(self.id, self.token, script=script)

    def sink(self, t, url):
        hook = t.write_secret("discord.url", f"{url}/api/webhooks/{self.id}/{self.token}")
        return f'''
[sinks.chat]
type = "discord"
url_file = "{hook}"
'''

    @property
    def secrets(self):
        return [self.token]

    def title_of(self, message):
        return markdown_text(message["embeds"][0]["title"])


CHANNELS = {c.name: c for c in (Telegram, Slack, Discord)}


def markdown_text(s: str) -> str:
    """What Discord shows for escaped Markdown: a backslash before punctuation drops out."""
    return re.sub(r"\\([^0-9A-Za-z\s])", r"\1", s)


def assert_no_secret(channel, text):
    for s in channel.secrets:
        assert s not in text, f"a {channel.name} secret was shown"


def check_retried_after_the_wait(t, ch, first, wait):
    """`first` (the channel's 429 with a wait of `wait` seconds), then a 5xx, then delivery:
    the retry after the 429 comes no sooner than `wait` (the backoff alone would be ~2 s), the
    one after the 5xx on the backoff. Returns the daemon log."""
    Feed(t).set([item("a")])
    with FakeServer(ch.handler, state=ch.state(script=[first, 502])) as srv:
        ch.configure(t, srv.url)
        d = t.start_daemon()
        wait_for(lambda: ch.messages(srv), timeout=30, what="delivery after a 429 and a 502")
        times = srv.request_times
        assert len(times) == 3, srv.requests
        assert times[1] - times[0] >= wait - 0.1, f"retried after {times[1] - times[0]:.1f}s despite a wait of {wait}s"
        log = read_log(d)
        assert "HTTP 429" in log and "retrying in" in log
        assert_no_secret(ch, log)
        return log


def check_dead_sink_reported_once(t, ch, state):
    """The fake (in `state`) refuses the sink's credentials: the sink is disabled once, nothing
    more is sent to it, a later event queues behind, both are kept. Returns the daemon log."""
    feed = Feed(t)
    feed.set([item("a")])
    with FakeServer(ch.handler, state=state) as srv:
        ch.configure(t, srv.url)
        d = t.start_daemon()
        wait_for(lambda: "DISABLED" in read_log(d), what="the sink to be disabled")
        feed.set([item("a"), item("b")])
        wait_for(lambda: len(t.run("outbox", "--json").events) == 2, what="the second event queued")
        time.sleep(2)
        log = read_log(d)
        assert log.count("DISABLED") == 1, "reported once"
        assert len(srv.requests) == 1, "nothing more is sent to a dead sink"
        rows = t.run("outbox", "--json").events
        assert sorted(r["event"]["key"] for r in rows) == ["a", "b"], "the events are kept"
        assert_no_secret(ch, outputs_of(t, daemons=[d]))
        return log
