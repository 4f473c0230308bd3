"""Fake Atlassian Statuspage v2 public API (broadcast-notices-statuspage.md), stdlib only.

state:
  incidents               unresolved incidents (list of dicts, see incident())
  scheduled_maintenances  upcoming / in-progress maintenances (see maintenance())
  malformed               if true, summary.json answers 200 with a non-JSON body
  retry_after             if set, answer 429 with this Retry-After
Serves summary.json, incidents/unresolved.json and scheduled-maintenances/upcoming.json,
with an ETag; If-None-Match with the current ETag gives 304.
"""
from __future__ import annotations

import hashlib
import json

from fakes.server import FakeHandler, FakeServer

PAGE = {"id": "kctbh9vrtdwd", "name": "GitHub", "url": "https://www.githubstatus.com",
        "time_zone": "Etc/UTC", "updated_at": "2026-11-20T10:00:00Z"}


def update(uid, status, body, created):
    return {"id": uid, "status": status, "body": body, "created_at": created, "updated_at": created,
            "display_at": created, "affected_components": []}


def incident(iid, name, impact="minor", status="investigating", updates=None):
    updates = updates or [update(f"{iid}-u1", status, f"We are investigating {name}.", "2026-11-21T08:00:00Z")]
    return {"id": iid, "name": name, "status": status, "impact": impact, "shortlink": f"https://stspg.io/{iid}",
            "created_at": "2026-11-21T08:00:00Z", "updated_at": updates[0]["created_at"],
            "monitoring_at": None, "resolved_at": None, "page_id": PAGE["id"],
            "incident_updates": sorted(updates, key=lambda u: u["created_at"], reverse=True), "components": []}


def maintenance(mid, name, start="2026-11-25T01:00:00Z", until="2026-11-25T03:00:00Z", status="scheduled"):
    return {"id": mid, "name": name, "status": status, "impact": "maintenance", "shortlink": f"https://stspg.io/{mid}",
            "scheduled_for": start, "scheduled_until": until, "created_at": "2026-11-20T10:00:00Z",
            "updated_at": "2026-11-20T10:00:00Z", "page_id": PAGE["id"],
            "incident_updates": [update(f"{mid}-u1", "scheduled", f"We will be performing {name}.", "2026-11-20T10:00:00Z")],
            "components": []}


class StatuspageHandler(FakeHandler):
    def route(self, req):
        st = self.state
        if st.get("retry_after"):
            return 429, {"Retry-After": str(st["retry_after"])}, {"error": "rate limited"}
        incidents = [i for i in st.get("incidents", []) if i["status"] not in ("resolved", "postmortem")]
        maints = [m for m in st.get("scheduled_maintenances", []) if m["status"] != "completed"]
        if req.path == "/api/v2/summary.json":
            if st.get("malformed"):
                return 200, {"Content-Type": "application/json"}, "<!DOCTYPE html><title>Oops</title>"
            body = {"page": PAGE, "components": [], "incidents": incidents, "scheduled_maintenances": maints,
                    "status": {"indicator": "minor" if incidents else "none", "description": "ok"}}
        elif req.path == "/api/v2/incidents/unresolved.json":
            body = {"page": PAGE, "incidents": incidents}
        elif req.path == "/api/v2/scheduled-maintenances/upcoming.json":
            body = {"page": PAGE, "scheduled_maintenances": [m for m in maints if m["status"] == "scheduled"]}
        else:
            return 404, {}, {"error": "Not found"}
        raw = json.dumps(body, ensure_ascii=False).encode()
        etag = '"' + hashlib.sha1(raw).hexdigest()[:16] + '"'
        if req.headers.get("if-none-match") == etag:
            st["not_modified"] = st.get("not_modified", 0) + 1
            return 304, {"ETag": etag}, b""
        return 200, {"ETag": etag, "Content-Type": "application/json; charset=utf-8"}, raw


def start(incidents=None, maintenances=None) -> FakeServer:
    srv = FakeServer(StatuspageHandler, state={"incidents": list(incidents or []),
                                               "scheduled_maintenances": list(maintenances or [])})
    return srv.start()
