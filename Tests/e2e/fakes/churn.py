"""Many http-json feeds whose items change on a known schedule (the failover e2e test and the
soak's shared-state phase). Python standard library only.

    with ChurnWorld(sources=300, period=8.0, every=10) as world:
        world.url(i)          -> http://127.0.0.1:PORT/s/i
        world.toml(i)         -> a `[sources.sNNN]` table polling it
        world.freeze()        -> the feeds stop changing (to drain and compare)
        world.served(i)       -> [(monotonic time, generation, status)] of each request to feed i
        world.expected(i)     -> the (event, key) pairs a correct history has for feed i

Feed i serves ONE item whose key names its generation, `s{i}-g{g}`, where
g = floor((t - t0) / period + i / sources): the feeds change one after another, spread
evenly over the period, not all at once. Only every `every`-th feed changes (i % every == 0);
the others keep generation 0 (polled, never news), so that the event rate stays what a sink
can take on a small machine while every feed is still polled. A key is never served again once its generation
is over, so each change is one `new` and, when the next generation is seen, one `removed`
event; (source, event, key) is unique in a correct history, and with polls more frequent than
the period (and no gap longer than one period) no generation is skipped, so the history is
exactly: the baseline's key removed, then for each later generation one `new` and (but the
last) one `removed`. Responses carry an ETag; an unchanged feed answers 304.
"""
from __future__ import annotations

import hashlib
import json
import math
import time

from .server import FakeHandler, FakeServer


def source_name(i: int) -> str:
    return f"s{i:05d}"


def item_key(i: int, g: int) -> str:
    return f"s{i}-g{g}"


class ChurnHandler(FakeHandler):
    def route(self, req):
        world = self.server.world
        parts = req.path.strip("/").split("/")
        if len(parts) != 2 or parts[0] != "s" or not parts[1].isdigit() or int(parts[1]) >= world.sources:
            return 404, {}, {"error": f"no feed {req.path}"}
        i = int(parts[1])
        now = time.monotonic()
        g = world.generation(i, now)
        body = json.dumps({"items": [{"id": item_key(i, g), "name": f"item {g} of feed {i}"}]}).encode()
        etag = '"' + hashlib.sha1(body).hexdigest()[:16] + '"'
        status = 304 if req.headers.get("if-none-match") == etag else 200
        with self.server.lock:
            world.log[i].append((now, g, status))
        if status == 304:
            return 304, {"ETag": etag}, b""
        return 200, {"ETag": etag, "Content-Type": "application/json"}, body


class ChurnWorld:
    def __init__(self, sources: int, period: float, every: int = 1):
        self.sources = sources
        self.every = every
        self.period = period
        self.t0 = time.monotonic()
        self.frozen_at: float | None = None
        self.log: list[list] = [[] for _ in range(sources)]
        self.server = FakeServer(ChurnHandler)
        self.server.httpd.world = self

    def generation(self, i: int, at: float | None = None) -> int:
        if i % self.every:
            return 0
        t = time.monotonic() if at is None else at
        if self.frozen_at is not None:
            t = min(t, self.frozen_at)
        return math.floor((t - self.t0) / self.period + i / self.sources)

    def freeze(self) -> float:
        self.frozen_at = time.monotonic()
        return self.frozen_at

    def url(self, i: int) -> str:
        return f"{self.server.url}/s/{i}"

    def toml(self, i: int, extra: str = "") -> str:
        return (f'\n[sources.{source_name(i)}]\nprovider = "http-json"\nurl = "{self.url(i)}"\n'
                f'items = "/items"\nkey = "/id"\ntitle = "/name"\n{extra}\n')

    def all_toml(self, extra: str = "") -> str:
        return "".join(self.toml(i, extra) for i in range(self.sources))

    def daemon_config(self, hook_url: str, state_toml: str, interval: float, secret_file=None) -> str:
        """A tidings.toml polling every feed every `interval` s (no jitter), delivering to a
        webhook at HOOK/hook (signed when `secret_file`), state as `state_toml` says. All the
        feeds are one host here, standing for as many servers: max_per_host 16, not 4, so that
        an instance's polls do not queue behind each other on a loaded machine."""
        secret = f'secret_file = "{secret_file}"\n' if secret_file else ""
        return (f'max_per_host = 16\n\n[defaults]\ninterval = "{interval:g}s"\njitter = 0.0\ntimeout = "5s"\n'
                f'\n[sinks.hook]\ntype = "webhook"\nurl = "{hook_url}/hook"\ntimeout = "5s"\n{secret}'
                + state_toml + self.all_toml())

    def first_served_at(self, i: int) -> float | None:
        ok = [t for t, _, status in self.served(i) if status == 200]
        return ok[0] if ok else None

    def served(self, i: int) -> list:
        with self.server.httpd.lock:
            return list(self.log[i])

    def request_times(self, i: int) -> list:
        return [t for t, _, _ in self.served(i)]

    def expected(self, i: int, final_generation: int | None = None, baseline_after_first: bool = False) -> set:
        """(event, key) of a correct history of feed i: the first 200 answer is the silent
        baseline; every later generation up to `final_generation` (default: the last one
        served) is `new`, and every generation before the last is `removed`."""
        ok = [g for _, g, status in self.served(i) if status == 200]
        if not ok:
            return set()
        first, last = ok[0], final_generation if final_generation is not None else max(ok)
        if baseline_after_first:
            # The first poll answered but was not recorded (its lease lapsed: fencing), and the
            # feed had moved on by the poll that made the baseline.
            first = next((g for g in ok if g > ok[0]), ok[0])
        return ({("new", item_key(i, g)) for g in range(first + 1, last + 1)}
                | {("removed", item_key(i, g)) for g in range(first, last)})

    def __enter__(self):
        self.server.start()
        return self

    def __exit__(self, *exc):
        self.server.stop()

    start = __enter__
    stop = __exit__
