"""A Slack incoming-webhook endpoint for end-to-end tests (Python standard library only), as
reference/channels.md and Slack's webhook docs describe it:

    POST /services/T…/B…/{secret}  JSON {"text", "blocks"?}

Answers are plain-text codes: 200 `ok`; 404 `no_service` for an unknown webhook path; 400
`invalid_payload` for a body that is not JSON, 400 `no_text` without text or blocks, 400
`invalid_blocks` for a section text over 3000 characters. Failure modes, one per request, from
`state["script"]`:

    500 / 503 …           that status, body `internal_error`
    ("429", N)            429 `rate_limited` with `Retry-After: N`
    "action_prohibited"   403
    "channel_is_archived" 410
    "channel_not_found"   404
    "invalid_payload"     400
    "echo"                403 whose body echoes the request path (the secret)

`state["messages"]` records each accepted payload.
"""
from __future__ import annotations

import json

from fakes.server import FakeHandler

SECTION_LIMIT = 3000
STATUS = {"action_prohibited": 403, "channel_is_archived": 410, "channel_not_found": 404, "invalid_payload": 400}


def slack_state(path: str, script=None) -> dict:
    return {"path": path, "script": list(script or []), "messages": []}


def text(status, code, headers=None):
    return status, {"Content-Type": "text/plain; charset=utf-8", **(headers or {})}, code


class SlackWebhook(FakeHandler):
    def route(self, req):
        st = self.state
        with self.server.lock:
            mode = st["script"].pop(0) if st["script"] else None
        if mode == "echo":
            return text(403, f"invalid_token for {req.path}")
        if req.method != "POST" or req.path != st["path"]:
            return text(404, "no_service")
        if isinstance(mode, int):
            return text(mode, "internal_error")
        if isinstance(mode, tuple) and mode[0] == "429":
            return text(429, "rate_limited", {"Retry-After": str(mode[1])})
        if mode in STATUS:
            return text(STATUS[mode], mode)
        try:
            payload = json.loads(req.body)
        except ValueError:
            return text(400, "invalid_payload")
        if not isinstance(payload, dict) or not (payload.get("text") or payload.get("blocks")):
            return text(400, "no_text")
        for block in payload.get("blocks") or []:
            if block.get("type") == "section" and len((block.get("text") or {}).get("text", "")) > SECTION_LIMIT:
                return text(400, "invalid_blocks")
        with self.server.lock:
            st["messages"].append(payload)
        return text(200, "ok")
