"""A tiny threaded HTTP server for end-to-end tests (Python standard library only).

Every fake in this folder subclasses `FakeHandler` and is started with `FakeServer`.
The server records each request (method, path, query, headers, body) so tests can
assert what tidings sent, and exposes mutable `state` that tests change between polls.
"""
from __future__ import annotations

import json
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


class Request:
    def __init__(self, method, path, query, headers, body):
        self.method = method
        self.path = path
        self.query = query          # dict: name -> list of values
        self.headers = headers      # dict with lower-cased names
        self.body = body            # bytes

    def json(self):
        return json.loads(self.body or b"null")

    def __repr__(self):
        return f"<{self.method} {self.path} {self.query}>"


class FakeHandler(BaseHTTPRequestHandler):
    """Subclass and implement `route(self, req) -> (status, headers, body)`."""

    protocol_version = "HTTP/1.1"
    server_version = "fake"

    def log_message(self, *args):  # keep test output clean
        pass

    # Open connections are tracked so that `FakeServer.stop()` really takes the server away:
    # a client's kept-alive connection would otherwise still be served. A request being
    # handled gets its answer first (a graceful stop), then the connection closes.
    busy = False

    def setup(self):
        super().setup()
        with self.server.lock:
            self.server.connections.add(self)

    def finish(self):
        with self.server.lock:
            self.server.connections.discard(self)
        super().finish()

    def handle_one_request(self):
        try:
            super().handle_one_request()
        finally:
            with self.server.lock:
                self.busy = False
                if self.server.stopping:
                    self.close_connection = True

    def parse_request(self):
        with self.server.lock:
            self.busy = True
        return super().parse_request()

    def _handle(self):
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.server.stopping:  # stopped while this request arrived: never handled, no answer
            self.close_connection = True
            return
        req = Request(self.command, parts.path, parse_qs(parts.query),
                      {k.lower(): v for k, v in self.headers.items()}, body)
        with self.server.lock:
            self.server.requests.append(req)
            self.server.request_times.append(time.monotonic())
        result = self.route(req)
        if result is None:  # the handler wrote the response itself (slow or broken replies)
            return
        status, headers, payload = result
        if isinstance(payload, (dict, list)):
            payload = json.dumps(payload, ensure_ascii=False).encode()
            headers = {"Content-Type": "application/json; charset=utf-8", **headers}
        elif isinstance(payload, str):
            payload = payload.encode()
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _handle

    @property
    def state(self):
        return self.server.state

    def route(self, req: Request):
        raise NotImplementedError


class QuietServer(ThreadingHTTPServer):
    """No traceback on stderr when a client goes away mid-request (killed daemons do)."""

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeServer:
    """Runs a handler on 127.0.0.1:<free port> (or `host`) in a background thread.

    with FakeServer(MyHandler, state={...}) as srv:
        srv.url        -> "http://127.0.0.1:PORT"
        srv.requests   -> list of Request
        srv.state      -> the dict the handler reads
    """

    def __init__(self, handler, state=None, port=0, host="127.0.0.1", tls=None):
        """`port`: 0 for a free one; a fixed port lets a test bring a receiver back where it was.
        `host`: another loopback address (127.0.0.2) is another host to tidings' per-host limits.
        `tls`: (cert.pem, key.pem) to serve https (e.g. from fakes.tls.PrivateCA)."""
        self.httpd = QuietServer((host, port), handler)
        self.scheme = "https" if tls else "http"
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*map(str, tls))
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.httpd.daemon_threads = True
        self.httpd.state = state if state is not None else {}
        self.httpd.requests = []
        self.httpd.request_times = []  # time.monotonic() of each request, same order
        self.httpd.lock = threading.Lock()
        self.httpd.connections = set()
        self.httpd.stopping = False
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        with self.httpd.lock:
            self.httpd.stopping = True
            idle = [h.connection for h in self.httpd.connections if not h.busy]
        for conn in idle:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    start = __enter__

    def stop(self):
        self.__exit__()

    @property
    def url(self):
        host, port = self.httpd.server_address[:2]
        return f"{self.scheme}://{host}:{port}"

    @property
    def port(self):
        return self.httpd.server_address[1]

    @property
    def state(self):
        return self.httpd.state

    @property
    def request_times(self):
        with self.httpd.lock:
            return list(self.httpd.request_times)

    @property
    def requests(self):
        with self.httpd.lock:
            return list(self.httpd.requests)

    def clear(self):
        with self.httpd.lock:
            self.httpd.requests.clear()
            self.httpd.request_times.clear()
