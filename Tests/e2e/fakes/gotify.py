"""A fake Gotify server (https://gotify.net/docs/pushmsg, gotify/server's api/message.go).

`POST /message` with an application token as the `X-Gotify-Key` header (or `?token=`), JSON
`{"title", "message" (required), "priority", "extras"}`. A blank title becomes the
application's name; a missing priority its default. Answers 200 with the stored message
`{"id", "appid", "message", "title", "priority", "extras", "date"}`; errors are
`{"error": "Unauthorized", "errorCode": 401, "errorDescription": "..."}` (401 for an unknown
token, 400 for a missing message). Gotify has no rate limiting of its own: the scripted 429 is
what a reverse proxy in front of it answers (text body, `Retry-After`).

    state = gotify_state(tokens={"AbC": "tidings"})     # token -> application name
    srv.state["accepted"] -> the stored messages, in order
"""
from __future__ import annotations

import datetime
import json
from http import HTTPStatus

from fakes.scripted import ScriptedHandler, scripted_state

DESCRIPTIONS = {
    401: "you need to provide a valid access token or user credentials to access this api",
    403: "you are not allowed to access this api",
}


def gotify_state(tokens=None, default_priority=0, retry_after="2", **kw) -> dict:
    return scripted_state(tokens=dict(tokens or {}), default_priority=default_priority, retry_after=retry_after, **kw)


def error(status, description=None):
    return status, {}, {"error": HTTPStatus(status).phrase, "errorCode": status,
                        "errorDescription": description or DESCRIPTIONS.get(status, HTTPStatus(status).phrase.lower())}


class GotifyServer(ScriptedHandler):
    def route(self, req):
        if req.path != "/message":
            return error(404, "page not found")
        if req.method != "POST":
            return error(405, "method not allowed")
        token = req.headers.get("x-gotify-key") or (req.query.get("token") or [None])[0]
        app = self.state["tokens"].get(token)
        if app is None:
            echoed = f" (got {token!r})" if self.state.get("echo") else ""  # a careless proxy
            return error(401, DESCRIPTIONS[401] + echoed)
        scripted = self.scripted()
        if scripted == 429:  # a reverse proxy's answer
            return 429, {"Retry-After": self.state["retry_after"], "Content-Type": "text/plain"}, "Too Many Requests"
        if scripted:
            return error(scripted)
        try:
            m = json.loads(req.body)
            assert isinstance(m, dict)
        except (ValueError, AssertionError):
            return error(400, "invalid character in JSON body")
        if not isinstance(m.get("message"), str) or m["message"] == "":
            return error(400, "Field 'message' is required")
        if "priority" in m and not isinstance(m["priority"], int):
            return error(400, "json: cannot unmarshal priority")
        stored = {"id": len(self.state["accepted"]) + 1, "appid": 1, "message": m["message"],
                  "title": m.get("title", "").strip() and m["title"] or app,
                  "priority": m.get("priority", self.state["default_priority"]),
                  "date": datetime.datetime.now(datetime.timezone.utc).isoformat()}
        if m.get("extras"):
            stored["extras"] = m["extras"]
        self.accept({**stored, "sent": m})
        return 200, {}, {k: v for k, v in stored.items()}
