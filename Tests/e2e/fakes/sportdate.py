"""Fake Sportdate member API (sportdate-api.md), Python stdlib only.

state:
  users      {email: password}           accepted credentials
  messages   list of {"type", "messagetext", "actionURL"} returned by /api/message/check
  malformed  if true, /api/message/check answers 200 with a non-JSON body
  retry_after  if set, /api/message/check answers 429 with this Retry-After
  no_login_endpoint  if true, /api/member/get answers 404 (a deployment without it)
Counters (read by tests): logins, checks, get_bodies (bodies seen on GET /api/message/check).
"""
from __future__ import annotations

import json

from fakes.server import FakeHandler, FakeServer


def creds(req):
    try:
        body = json.loads(req.body or b"null")
    except ValueError:
        return None, None
    if not isinstance(body, dict):
        return None, None
    return body.get("epost"), body.get("losen")


class SportdateHandler(FakeHandler):
    def authorised(self, req):
        email, password = creds(req)
        return email is not None and self.state["users"].get(email) == password

    def route(self, req):
        st = self.state
        if req.path == "/api/member/get" and req.method == "POST" and not st.get("no_login_endpoint"):
            st["logins"] = st.get("logins", 0) + 1
            email, _ = creds(req)
            if not self.authorised(req):
                # The real API gives no error code or message, and still answers 200.
                return 200, {}, {"success": False}
            return 200, {}, {"epost": email, "alias": email.split("@")[0],
                             "loginURL": "https://www.sportdate.se/mobile", "success": True}
        if req.path == "/api/message/check" and req.method in ("GET", "POST"):
            st["checks"] = st.get("checks", 0) + 1
            if req.method == "GET":
                st.setdefault("get_bodies", []).append(req.body)
            if st.get("retry_after"):
                return 429, {"Retry-After": str(st["retry_after"])}, "Too Many Requests"
            if st.get("malformed"):
                return 200, {"Content-Type": "text/html"}, "<html><body>Server Error in '/' Application.</body></html>"
            if not self.authorised(req):
                return 200, {}, {"success": False}
            return 200, {}, {"messages": list(st.get("messages", [])), "success": True}
        return 404, {}, {"Message": "No HTTP resource was found that matches the request URI."}


def start(users=None, messages=None) -> FakeServer:
    srv = FakeServer(SportdateHandler, state={"users": dict(users or {}), "messages": list(messages or [])})
    return srv.start()
