"""A deliberately hostile HTTP server for end-to-end tests (issue 9, "hostile input is normal input").

Each path is scripted through `state["routes"][PATH]`, a dict with one behaviour:

- `{"redirect": URL, "status": 302}`: answer with a redirect (301/302/303/307/308) to URL,
  typically the second server's port, where credentials must never arrive.
- `{"echo": True, "status": 200}`: answer with everything the request carried (headers,
  body, query) as JSON, in the error body when `status` is not 2xx; JSON-escaped and
  percent-encoded copies of every header value are included, so a redactor that only knows
  the raw value is caught. `"only": [NAMES]` echoes just those headers (lower-case names), so
  they come first in an error excerpt.
- `{"deep": N, "key": K}`: a JSON array with one item whose `data` nests N levels deep
  (written as text: Python's json module cannot nest that deep).
- `{"escapes": True}`: items whose titles and bodies carry terminal escapes (clear screen,
  OSC 8 hyperlinks, title setting), C1 controls and bidi overrides.
- `{"json": VALUE, "status": 200, "headers": {...}}`: a plain JSON answer (for items with
  duplicate keys, pass `raw` bytes instead).
- `{"raw": BYTES, "status": 200, "headers": {...}}`: exactly these bytes.
- `{"hang": True}`: read the request, never answer (the client's timeout must fire).
- `{"endless": True}`: a 200 whose chunked body never ends.

Anything not scripted is a 404. Every request is recorded (`srv.requests`), as in `server.py`.
"""
from __future__ import annotations

import json
import time
from urllib.parse import quote

from .server import FakeHandler, FakeServer

ESC = "\x1b"
# Text a terminal would act on: clear screen + home, a fake prompt, an OSC 8 link, a window title,
# a C1 CSI, and a right-to-left override that makes "txt.exe" read as "exe.txt".
HOSTILE_TITLE = f"{ESC}[2J{ESC}[Hpwned {ESC}]8;;http://evil.example/{ESC}\\click{ESC}]8;;{ESC}\\ {ESC}]0;owned\x07\x9b31m red \u202eexe.txt"
HOSTILE_BODY = f"line1\r{ESC}[1A{ESC}[Kforged log line\n\u2066isolate\u2069 \u200f"


def deep_json(depth: int, leaf: str = "1") -> bytes:
    """`{"a":{"a":…1…}}` nested `depth` objects deep, as text."""
    return ('{"a":' * depth + leaf + "}" * depth).encode()


class HostileHandler(FakeHandler):
    def route(self, req):
        spec = (self.state.get("routes") or {}).get(req.path)
        if spec is None:
            return 404, {}, {"error": "no such path"}
        if spec.get("delay"):
            time.sleep(spec["delay"])
        status = spec.get("status", 200)
        headers = dict(spec.get("headers", {}))
        if "redirect" in spec:
            return spec.get("status", 302), {"Location": spec["redirect"], **headers}, b""
        if spec.get("echo"):
            echoed = {}
            for k, v in req.headers.items():
                if "only" in spec and k not in spec["only"]:
                    continue
                echoed[k] = {"raw": v, "json": json.dumps(v)[1:-1], "percent": quote(v, safe=""),
                             "parts": v.split()}
            payload = {"error": "echo", "headers": echoed, "body": req.body.decode(errors="replace"),
                       "query": req.query, "items": spec.get("items", [])}
            return status, headers, payload
        if "deep" in spec:
            key = spec.get("key", "deep")
            body = b'[{"id":"' + key.encode() + b'","name":"deep item","nested":' + deep_json(spec["deep"]) + b"}]"
            return status, {"Content-Type": "application/json", **headers}, body
        if spec.get("escapes"):
            items = [{"id": "esc-1", "name": HOSTILE_TITLE, "text": HOSTILE_BODY, "link": f"http://x/{ESC}[2J"}]
            return status, headers, items
        if spec.get("hang"):
            time.sleep(spec.get("hang_seconds", 3600))
            return None
        if spec.get("endless"):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                self.wfile.write(b"1\r\n[\r\n")
                deadline = time.monotonic() + spec.get("endless_seconds", 600)
                while time.monotonic() < deadline:
                    chunk = b'{"id":"x","name":"more"},' * 64
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                    time.sleep(0.01)
            except OSError:
                pass
            self.close_connection = True
            return None
        if "raw" in spec:
            return status, headers, spec["raw"]
        return status, headers, spec.get("json", [])


class HostilePair:
    """Two hostile servers on two ports: `main` is configured in tidings, `other` is where its
    redirects point. A test asserts what `other` received (no credentials, ever)."""

    def __init__(self):
        self.main = FakeServer(HostileHandler, state={"routes": {}})
        self.other = FakeServer(HostileHandler, state={"routes": {}})

    def __enter__(self):
        self.main.start()
        self.other.start()
        return self

    def __exit__(self, *exc):
        self.main.stop()
        self.other.stop()

    def script(self, path, server="main", **spec):
        srv = self.main if server == "main" else self.other
        srv.state["routes"][path] = spec
        return f"{srv.url}{path}"
