"""A fault server for reliability tests and `make soak` (Python standard library only).

One handler, per-path behaviours (the last path segment names the source, for counting):

    /feed/NAME       healthy: a window of items that moves on every `period` seconds
                     (new key, removed key, one item whose title changes), with ETags
    /hang/NAME       never answers (until `hang_seconds`): the client's timeout fires
    /reset/NAME      headers and part of the body, then a TCP reset (SO_LINGER 0)
    /malformed/NAME  200 with truncated JSON
    /huge/NAME       a body of 10 x `max_body` bytes, with Content-Length
    /stream/NAME     the same without Content-Length (close-delimited, streamed)
    /storm/NAME      HTTP 500, every time
    /slowloris/NAME  headers, then one byte of body per second (for `drip_seconds`)
    /flaky/NAME      a feed while state["flaky_down"] is false, HTTP 500 while it is true

    world = FaultWorld(period=1.0, max_body=65536)   # two listeners, one state
    world.healthy.url  -> http://127.0.0.1:PORT  (feeds)
    world.broken.url   -> http://127.0.0.2:PORT  (the rest: another host, so the
                          per-host limit of broken sources is not the healthy ones')
    world.freeze()     -> feeds stop moving (to drain and compare at the end)
    world.poll_times("feed", "NAME") -> monotonic times of each request to that path

Feeds never reuse a key, so "the same change produced two events" is checkable:
(source, event, key, title) is unique in a correct event history.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import struct
import time
from pathlib import Path

from .server import FakeHandler, FakeServer

BEHAVIOURS = ("feed", "flaky", "hang", "reset", "malformed", "huge", "stream", "storm", "slowloris")


def feed_items(generation: int, window: int = 3) -> list:
    items = [{"id": f"k{g}", "name": f"item {g}"} for g in range(max(0, generation - window + 1), generation + 1)]
    return items + [{"id": "status", "name": f"status {generation}"}]


class FaultHandler(FakeHandler):
    def route(self, req):
        parts = req.path.strip("/").split("/")
        behaviour = parts[0]
        s = self.state
        if behaviour == "flaky" and s.get("flaky_down"):
            behaviour = "storm"
        if behaviour in ("feed", "flaky"):
            body = json.dumps({"items": feed_items(self.server.world.generation())}).encode()
            etag = '"' + hashlib.sha1(body).hexdigest()[:16] + '"'
            if req.headers.get("if-none-match") == etag:
                return 304, {"ETag": etag}, b""
            return 200, {"ETag": etag, "Content-Type": "application/json"}, body
        if behaviour == "hang":
            self._sleep(s.get("hang_seconds", 30))
            self.close_connection = True
            return None
        if behaviour == "reset":
            self._head(200, 5000)
            self._write(b'{"items": [{"id": "partial", "na')
            self._reset()
            return None
        if behaviour == "malformed":
            return 200, {"Content-Type": "application/json"}, b'{"items": [ {"id": 1, '
        if behaviour in ("huge", "stream"):
            size = 10 * s.get("max_body", 65536)
            self._head(200, size if behaviour == "huge" else None)
            chunk = b"[" + b" " * 65534 + b"]"
            sent = 0
            while sent < size and self._write(chunk[: size - sent]):
                sent += len(chunk)
            self.close_connection = True
            return None
        if behaviour == "storm":
            return 500, {}, {"error": "internal server error"}
        if behaviour == "slowloris":
            self._head(200, 100_000)
            deadline = time.monotonic() + s.get("drip_seconds", 30)
            while time.monotonic() < deadline and self._write(b" "):
                time.sleep(1)
            self.close_connection = True
            return None
        return 404, {}, {"error": f"no behaviour {behaviour!r}"}

    # raw replies ------------------------------------------------------------
    def _head(self, status, length):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if length is None:
            self.send_header("Connection", "close")
        else:
            self.send_header("Content-Length", str(length))
        self.end_headers()
        self.wfile.flush()

    def _write(self, data) -> bool:
        try:
            self.wfile.write(data)
            self.wfile.flush()
            return True
        except OSError:
            return False

    def _sleep(self, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not self.server.world.stopping:
            time.sleep(0.2)

    def _reset(self):
        """Close with RST, not FIN: SO_LINGER 0, then close the descriptor itself."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        os.close(self.connection.detach())
        self.close_connection = True


class FaultWorld:
    def __init__(self, period: float = 1.0, max_body: int = 65536, hang_seconds: float = 30, drip_seconds: float = 30):
        self.state = {"max_body": max_body, "hang_seconds": hang_seconds, "drip_seconds": drip_seconds}
        self.period = period
        self.t0 = time.monotonic()
        self.frozen: int | None = None
        self.stopping = False
        self.healthy = FakeServer(FaultHandler, state=self.state)
        self.broken = FakeServer(FaultHandler, state=self.state, host="127.0.0.2")
        for srv in (self.healthy, self.broken):
            srv.httpd.world = self

    def generation(self) -> int:
        if self.frozen is not None:
            return self.frozen
        return int((time.monotonic() - self.t0) / self.period)

    def freeze(self):
        self.frozen = self.generation()

    def thaw(self):
        """Move again, from where the feeds stopped."""
        if self.frozen is not None:
            self.t0 = time.monotonic() - self.frozen * self.period
            self.frozen = None

    def url(self, behaviour: str, name: str) -> str:
        return f"{self.server_for(behaviour).url}/{behaviour}/{name}"

    def server_for(self, behaviour: str) -> FakeServer:
        return self.healthy if behaviour in ("feed", "flaky") else self.broken

    def poll_times(self, behaviour: str, name: str) -> list:
        srv = self.server_for(behaviour)
        path = f"/{behaviour}/{name}"
        with srv.httpd.lock:
            return [t for r, t in zip(srv.httpd.requests, srv.httpd.request_times) if r.path == path]

    def __enter__(self):
        self.healthy.start()
        self.broken.start()
        return self

    def __exit__(self, *exc):
        self.stopping = True
        self.healthy.stop()
        self.broken.stop()

    start = __enter__
    stop = __exit__


def source_toml(world: FaultWorld, behaviour: str, name: str, extra: str = "") -> str:
    """An http-json source polling `behaviour`/`name` on the fault server."""
    return (f'provider = "http-json"\nurl = "{world.url(behaviour, name)}"\nitems = "/items"\n'
            f'key = "/id"\ntitle = "/name"\n{extra}\n')


def write_sources(t, world: FaultWorld, names: dict):
    """plugins.d/NAME.toml for each NAME -> behaviour (a conftest `Tidings`); oversized
    bodies are tested against max_body = 64 KiB."""
    for name, behaviour in names.items():
        extra = 'max_body = "64KiB"' if behaviour in ("huge", "stream") else ""
        t.write_plugin(f"{name}.toml", source_toml(world, behaviour, name, extra))


def fill_disk(directory: Path) -> Path:
    """Writes `directory`/filler until the file system is full; returns its path."""
    filler = directory / "filler"
    # Unbuffered: a buffered file would keep the bytes that did not fit and fail again (ENOSPC)
    # when closed, depending on how much space happened to be left.
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:
            pass
    return filler
