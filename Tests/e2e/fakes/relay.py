"""An HTTP relay between tidings and a real server, for faults the server will not make.

    with FakeServer(Relay, state=relay_state("http://127.0.0.1:8008")) as relay:
        relay.state["lose_answers"] = 1      # forward the next PUT, then drop its answer
        ...
        relay.state["exchanges"]             # [Exchange(method, path, status, body, at)]

Each request is forwarded to `upstream` as it came (method, path and query, headers, body)
and the upstream's answer is passed back, except that while `lose_answers` > 0 the answer to
a request whose method is in `lose_methods` is thrown away after the upstream has acted on it
and the connection is closed: the client sees a broken connection, the server has done the
work. `exchanges` records what went through, including the status of lost answers.
"""
from __future__ import annotations

import http.client
import socket
import time
from typing import NamedTuple
from urllib.parse import urlsplit

from fakes.server import FakeHandler

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "host", "content-length", "proxy-connection"}


class Exchange(NamedTuple):
    method: str
    path: str       # with the query, as the client sent it
    status: int     # the upstream's answer, also when it was lost on the way back
    body: bytes     # the upstream's answer body
    at: float       # time.monotonic() when the request arrived
    lost: bool


def relay_state(upstream: str) -> dict:
    return {"upstream": upstream, "lose_answers": 0, "lose_methods": {"PUT"}, "exchanges": []}


class Relay(FakeHandler):
    def route(self, req):
        st = self.state
        target = urlsplit(st["upstream"])
        path = self.path  # with the query, exactly as the client wrote it
        at = time.monotonic()
        conn = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
        try:
            headers = {k: v for k, v in req.headers.items() if k not in HOP_BY_HOP}
            conn.request(req.method, path, body=req.body or None, headers=headers)
            answer = conn.getresponse()
            body = answer.read()
            status = answer.status
            answer_headers = {k: v for k, v in answer.getheaders() if k.lower() not in HOP_BY_HOP}
        finally:
            conn.close()
        with self.server.lock:
            lose = st["lose_answers"] > 0 and req.method in st["lose_methods"]
            if lose:
                st["lose_answers"] -= 1
            st["exchanges"].append(Exchange(req.method, path, status, body, at, lose))
        if lose:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return None
        return status, answer_headers, body
