"""A Discord webhook endpoint for end-to-end tests (Python standard library only), as
reference/channels.md and Discord's "Execute Webhook" docs describe it:

    POST /api/webhooks/{id}/{token}[?wait=true]  JSON {"content"?, "embeds"?, "allowed_mentions"?}

Answers: 204 No Content, or 200 with the message object when `wait=true`; 404 `{"message":
"Unknown Webhook", "code": 10015}` for another id, 401 `{"message": "Invalid Webhook Token",
"code": 50027}` for another token, 400 `{"message": "Cannot send an empty message", "code":
50006}`, 400 `{"message": "Invalid Form Body", "code": 50035, "errors": …}` over a limit
(content 2000, 10 embeds, title 256, description 4096). Failure modes, one per request, from
`state["script"]`:

    500 / 502 …           that status, `{"message": "500: Internal Server Error", "code": 0}`
    ("429", S)            429 `{"message": "You are being rate limited.", "retry_after": S,
                          "global": false}` with `Retry-After` (S rounded up),
                          `X-RateLimit-Reset-After: S`, `X-RateLimit-Remaining: 0`
    "unknown"             404 Unknown Webhook
    "invalid_form"        400 Invalid Form Body (a message Discord refuses)
    "echo"                401 whose message echoes the request path (the token)

`state["messages"]` records each accepted payload; `state["waited"]` whether each asked to wait.
"""
from __future__ import annotations

import json
import math

from fakes.server import FakeHandler

LIMITS = {"content": 2000, "title": 256, "description": 4096}


def discord_state(webhook_id: str, token: str, script=None) -> dict:
    return {"id": webhook_id, "token": token, "script": list(script or []), "messages": [], "waited": []}


def invalid(field, limit):
    return 400, {}, {"message": "Invalid Form Body", "code": 50035,
                     "errors": {field: {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH",
                                                     "message": f"Must be {limit} or fewer in length."}]}}}


class DiscordWebhook(FakeHandler):
    def route(self, req):
        st = self.state
        with self.server.lock:
            mode = st["script"].pop(0) if st["script"] else None
        if mode == "echo":
            return 401, {}, {"message": f"Invalid Webhook Token for {req.path}", "code": 50027}
        parts = req.path.split("/")
        if req.method != "POST" or len(parts) != 5 or parts[1:3] != ["api", "webhooks"] or parts[3] != st["id"] or mode == "unknown":
            return 404, {}, {"message": "Unknown Webhook", "code": 10015}
        if parts[4] != st["token"]:
            return 401, {}, {"message": "Invalid Webhook Token", "code": 50027}
        if isinstance(mode, int):
            return mode, {}, {"message": f"{mode}: Internal Server Error", "code": 0}
        if isinstance(mode, tuple) and mode[0] == "429":
            s = mode[1]
            return 429, {"Retry-After": str(math.ceil(s)), "X-RateLimit-Reset-After": str(s),
                         "X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "0", "X-RateLimit-Bucket": "fake"}, \
                {"message": "You are being rate limited.", "retry_after": s, "global": False}
        if mode == "invalid_form":
            return invalid("embeds.0.url", 2048)
        try:
            payload = json.loads(req.body)
        except ValueError:
            return 400, {}, {"message": "400: Bad Request", "code": 0}
        embeds = payload.get("embeds") or []
        if not payload.get("content") and not embeds:
            return 400, {}, {"message": "Cannot send an empty message", "code": 50006}
        if len(payload.get("content") or "") > LIMITS["content"]:
            return invalid("content", LIMITS["content"])
        if len(embeds) > 10:
            return invalid("embeds", 10)
        for i, e in enumerate(embeds):
            for field in ("title", "description"):
                if len(e.get(field) or "") > LIMITS[field]:
                    return invalid(f"embeds.{i}.{field}", LIMITS[field])
        wait = req.query.get("wait") == ["true"]
        with self.server.lock:
            st["messages"].append(payload)
            st["waited"].append(wait)
            n = len(st["messages"])
        if not wait:
            return 204, {}, b""
        return 200, {}, {"id": str(1200000000000000000 + n), "type": 0, "channel_id": "1100000000000000000",
                         "webhook_id": st["id"], "content": payload.get("content", ""), "embeds": embeds}
