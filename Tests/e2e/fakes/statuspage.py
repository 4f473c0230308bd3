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
from datetime import datetime, timedelta, timezone

from fakes.server import FakeHandler, FakeServer


def ago(**delta) -> str:
    """A moment relative to now, as Statuspage writes it: `ago(days=1)`, `ago(hours=-2)` (ahead).
    No date in this fake is absolute: a fixed one turns into a test failure the day it passes."""
    t = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(**delta)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def ahead(**delta) -> str:
    """A moment `delta` from now (`ahead(days=1)`)."""
    return ago(**{k: -v for k, v in delta.items()})


PAGE = {"id": "kctbh9vrtdwd", "name": "GitHub", "url": "https://www.githubstatus.com",
        "time_zone": "Etc/UTC", "updated_at": ago(days=6)}


def update(uid, status, body, created):
    return {"id": uid, "status": status, "body": body, "created_at": created, "updated_at": created,
            "display_at": created, "affected_components": []}


def incident(iid, name, impact="minor", status="investigating", updates=None):
    updates = updates or [update(f"{iid}-u1", status, f"We are investigating {name}.", ago(hours=2))]
    return {"id": iid, "name": name, "status": status, "impact": impact, "shortlink": f"https://stspg.io/{iid}",
            "created_at": updates[-1]["created_at"], "updated_at": updates[0]["created_at"],
            "monitoring_at": None, "resolved_at": None, "page_id": PAGE["id"],
            "incident_updates": sorted(updates, key=lambda u: u["created_at"], reverse=True), "components": []}


def maintenance(mid, name, start=None, until=None, status="scheduled"):
    """A maintenance window; by default it starts a day from now and lasts two hours."""
    start = start or ahead(days=1)
    until = until or (datetime.strptime(start, "%Y-%m-%dT%H:%M:%SZ") + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    created = ago(days=6)
    return {"id": mid, "name": name, "status": status, "impact": "maintenance", "shortlink": f"https://stspg.io/{mid}",
            "scheduled_for": start, "scheduled_until": until, "created_at": created,
            "updated_at": created, "page_id": PAGE["id"],
            "incident_updates": [update(f"{mid}-u1", "scheduled", f"We will be performing {name}.", created)],
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
