"""A fake ntfy server (https://docs.ntfy.sh/publish/), as tidings publishes to it.

JSON publishing: `POST /` (PUT too) with `{"topic", "message", "title", "priority" (1-5),
"tags", "click", "markdown", ...}`. Auth: `Authorization: Bearer tk_...` or Basic; protected
topics (state["protected"]) answer 403 to anonymous publishers and 401 to wrong credentials,
with ntfy's error JSON `{"code": 40101, "http": 401, "error": "unauthorized", "link": ...}`.
The answer to a publish is the message envelope `{"id", "time", "expires", "event": "message",
"topic", "message", ...}`. Limits as the server enforces them: the JSON body may be twice the
message size limit (8 KiB, else 413 code 41303); a message over 4,096 bytes would become an
attachment, which this server does not allow (400 code 40014). 429 (code 42901) has no
Retry-After, as ntfy sends it.

    state = ntfy_state(tokens={"tk_abc"}, users={"phil": "pw"}, protected={"alerts"})
    srv.state["echo"] = True      # a 401 repeats the Authorization it got (as a careless proxy might)
    srv.state["accepted"] -> the publish JSON objects accepted, in order
"""
from __future__ import annotations

import base64
import json
import re
import secrets
import time

from fakes.scripted import ScriptedHandler, scripted_state

TOPIC = re.compile(r"^[-_A-Za-z0-9]{1,64}$")
MESSAGE_LIMIT = 4096
LINK = "https://ntfy.sh/docs/publish/"

ERRORS = {
    400: (40000, "invalid request", ""),
    401: (40101, "unauthorized", LINK + "#authentication"),
    403: (40301, "forbidden", LINK + "#authentication"),
    404: (40401, "page not found", ""),
    413: (41303, "JSON body too large", ""),
    429: (42901, "limit reached: too many requests", LINK + "#limitations"),
    500: (50001, "internal server error", ""),
    502: (50201, "bad gateway", ""),
    503: (50301, "service unavailable", ""),
}


def ntfy_state(tokens=(), users=None, protected=(), **kw) -> dict:
    return scripted_state(tokens=set(tokens), users=dict(users or {}), protected=set(protected), **kw)


def error(status, code=None, message=None, link=None):
    c, m, l = ERRORS.get(status, (status * 100 + 1, "error", ""))
    body = {"code": code or c, "http": status, "error": message or m}
    if link or l:
        body["link"] = link or l
    return status, {}, body


class NtfyServer(ScriptedHandler):
    def identity(self, req):
        """None (anonymous), a user/token name, or False for credentials that do not verify."""
        auth = req.headers.get("authorization")
        if not auth:
            return None
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer":
            return value if value in self.state["tokens"] else False
        if scheme.lower() == "basic":
            try:
                user, _, password = base64.b64decode(value).decode().partition(":")
            except ValueError:
                return False
            return user if self.state["users"].get(user) == password else False
        return False

    def route(self, req):
        if req.method not in ("POST", "PUT") or req.path != "/":
            return error(404)
        who = self.identity(req)
        if who is False:
            status, headers, body = error(401)
            if self.state.get("echo"):  # a careless proxy or server that repeats what it got
                body["received"] = req.headers.get("authorization")
            return status, headers, body
        scripted = self.scripted()
        if scripted:
            return error(scripted)
        if len(req.body) > 2 * MESSAGE_LIMIT:
            return error(413)
        try:
            m = json.loads(req.body)
            assert isinstance(m, dict)
        except (ValueError, AssertionError):
            return error(400, 40017, "invalid request: request body must be message JSON", LINK + "#publish-as-json")
        topic = m.get("topic")
        if not isinstance(topic, str) or not TOPIC.match(topic):
            return error(400, 40009, "invalid request: topic invalid")
        if topic in self.state["protected"] and who is None:
            return error(403)
        if "priority" in m and m["priority"] not in (0, 1, 2, 3, 4, 5):
            return error(400, 40007, "invalid priority parameter", LINK + "#message-priority")
        message = m.get("message") or "triggered"
        if len(message.encode()) > MESSAGE_LIMIT:
            return error(400, 40014, "invalid request: attachments not allowed", "https://ntfy.sh/docs/config/#attachments")
        self.accept(m)
        now = int(time.time())
        envelope = {"id": secrets.token_hex(6), "time": now, "expires": now + 43200, "event": "message",
                    "topic": topic, "message": message}
        for k in ("title", "priority", "tags", "click"):
            if m.get(k):
                envelope[k] = m[k]
        return 200, {}, envelope
