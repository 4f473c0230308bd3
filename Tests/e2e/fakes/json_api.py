"""A generic JSON API for http-json tests: serves state["items"] at /items with ETag
support, and can be told to misbehave (status, Retry-After, delay, malformed or huge body)."""
import hashlib
import json
import time

from .server import FakeHandler


class JSONAPI(FakeHandler):
    def route(self, req):
        s = self.state
        if s.get("delay"):
            time.sleep(s["delay"])
        if s.get("status"):
            headers = {}
            if s.get("retry_after") is not None:
                headers["Retry-After"] = str(s["retry_after"])
            return s["status"], headers, s.get("error_body", {"error": "nope"})
        if s.get("malformed"):
            return 200, {"Content-Type": "application/json"}, b'{"items": [ {"id": 1, '
        if s.get("huge"):
            return 200, {"Content-Type": "application/json"}, b'{"items": [' + b'{"id": 1},' * (s["huge"] // 10) + b'{"id": 2}]}'
        body = json.dumps({"items": s.get("items", [])}).encode()
        etag = '"' + hashlib.sha1(body).hexdigest()[:16] + '"'
        if req.headers.get("if-none-match") == etag:
            return 304, {"ETag": etag}, b""
        return 200, {"ETag": etag}, body
