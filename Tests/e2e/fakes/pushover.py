"""A fake Pushover message API (https://pushover.net/api).

`POST /1/messages.json`, form-encoded or JSON, with `token` (the application's API token),
`user` (a user or group key), `message` (required, at most 1,024 characters), `title` (250),
`url` (512), `url_title` (100), `priority` (-2..2; 2 needs `retry` and `expire`), `html`,
`timestamp`. Answers 200 `{"status": 1, "request": "<uuid>"}`; an invalid request is a 4xx
`{"status": 0, "errors": [...], "request": ...}` naming the bad parameter (an unknown token is
400 with `"token": "invalid"`, an unknown user 400 with `"user": "invalid"`). Every answer to a
known application carries `X-Limit-App-Limit`, `X-Limit-App-Remaining` and `X-Limit-App-Reset`
(Unix time); over the monthly limit the answer is 429.

    state = pushover_state(tokens={"a" * 30}, users={"u" * 30})
    srv.state["reset_in"] = 3     # the scripted 429's X-Limit-App-Reset, seconds from now
    srv.state["accepted"] -> the accepted parameters, in order
"""
from __future__ import annotations

import json
import time
import uuid
from urllib.parse import parse_qs

from fakes.scripted import ScriptedHandler, scripted_state

API = "see https://pushover.net/api"
LIMITS = {"message": 1024, "title": 250, "url": 512, "url_title": 100}


def pushover_state(tokens=(), users=(), limit=10000, reset_in=3, **kw) -> dict:
    return scripted_state(tokens=set(tokens), users=set(users), limit=limit, reset_in=reset_in, **kw)


class PushoverServer(ScriptedHandler):
    def answer(self, status, errors=(), headers=None, **fields):
        body = {**fields, "status": 0 if errors else 1, "request": str(uuid.uuid4())}
        if errors:
            body["errors"] = list(errors)
        return status, headers or {}, body

    def limit_headers(self, remaining):
        st = self.state
        return {"X-Limit-App-Limit": str(st["limit"]), "X-Limit-App-Remaining": str(remaining),
                "X-Limit-App-Reset": str(int(time.time() + st["reset_in"]))}

    def params(self, req):
        if req.headers.get("content-type", "").startswith("application/json"):
            p = json.loads(req.body)
            return {k: v if isinstance(v, str) else json.dumps(v) for k, v in p.items()} if isinstance(p, dict) else {}
        return {k: v[0] for k, v in parse_qs(req.body.decode()).items()}

    def route(self, req):
        if req.path != "/1/messages.json" or req.method != "POST":
            return 404, {}, self.answer(404, ["resource not found"])[2]
        try:
            p = self.params(req)
        except ValueError:
            return self.answer(400, ["invalid JSON"])
        if p.get("token") not in self.state["tokens"]:
            echoed = f" (got {p.get('token')!r}, user {p.get('user')!r})" if self.state.get("echo") else ""
            return self.answer(400, [f"application token is invalid, {API}" + echoed], token="invalid")
        remaining = self.state["limit"] - len(self.state["accepted"])
        scripted = self.scripted()
        if scripted == 429:
            return self.answer(429, ["application is over its message limit, " + API], self.limit_headers(0))
        if scripted and scripted >= 500:
            return scripted, {"Content-Type": "text/html"}, "<html><body>Internal Server Error</body></html>"
        if scripted:
            return self.answer(scripted, ["scripted failure"], self.limit_headers(remaining))
        if p.get("user") not in self.state["users"]:
            return self.answer(400, [f"user identifier is not a valid user, group, or subscribed user key, {API}"],
                               self.limit_headers(remaining), user="invalid")
        if not p.get("message", "").strip():
            return self.answer(400, ["message cannot be blank"], self.limit_headers(remaining), message="cannot be blank")
        for name, limit in LIMITS.items():
            if len(p.get(name, "")) > limit:
                return self.answer(400, [f"{name} is too long, {API}"], self.limit_headers(remaining), **{name: "invalid"})
        priority = int(p.get("priority", "0"))
        if priority not in range(-2, 3) or (priority == 2 and not (p.get("retry") and p.get("expire"))):
            return self.answer(400, ["priority is invalid, or retry and expire are missing for priority 2"],
                               self.limit_headers(remaining), priority="invalid")
        self.accept(p)
        return self.answer(200, (), self.limit_headers(remaining - 1))
