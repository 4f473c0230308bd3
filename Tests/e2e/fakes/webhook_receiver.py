"""A Standard Webhooks receiver for end-to-end tests (Python standard library only).

    with FakeServer(WebhookReceiver, state=receiver_state(secret="whsec_...")) as srv:
        srv.state["script"] = [503, (429, {"Retry-After": "1"}), 200]   # answers, in order
        ...
        srv.state["accepted"]  -> bodies accepted with 2xx, in arrival order
        srv.state["bad_signatures"] -> requests whose signature did not verify

Every request is verified (when a secret is set) and recorded in `srv.requests` as usual.
Once the script is used up the receiver answers `default` (200).
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

from fakes.server import FakeHandler


def receiver_state(secret: str | None = None, script=None, default: int = 200) -> dict:
    return {"secret": secret, "script": list(script or []), "default": default,
            "accepted": [], "ids": [], "bad_signatures": [], "tolerance": 300}


def sign(secret: str, msg_id: str, timestamp: str, body: bytes) -> str:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    mac = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def verify(secret: str, headers: dict, body: bytes, tolerance: int = 300) -> str | None:
    """None when the request is correctly signed, else why not (like the reference libraries)."""
    msg_id, ts, sigs = (headers.get(h) for h in ("webhook-id", "webhook-timestamp", "webhook-signature"))
    if not (msg_id and ts and sigs):
        return "missing webhook-id, webhook-timestamp or webhook-signature"
    if not ts.isdigit() or abs(time.time() - int(ts)) > tolerance:
        return f"timestamp {ts!r} outside tolerance"
    expected = sign(secret, msg_id, ts, body)
    if not any(hmac.compare_digest(expected, s) for s in sigs.split(" ")):
        return "signature mismatch"
    return None


class WebhookReceiver(FakeHandler):
    def route(self, req):
        st = self.state
        with self.server.lock:
            if st.get("secret"):
                problem = verify(st["secret"], req.headers, req.body, st["tolerance"])
                if problem:
                    st["bad_signatures"].append((req, problem))
                    return 401, {}, {"error": problem}
            answer = st["script"].pop(0) if st["script"] else st["default"]
            status, headers = answer if isinstance(answer, tuple) else (answer, {})
            if 200 <= status < 300:
                st["accepted"].append(json.loads(req.body))
                st["ids"].append(req.headers.get("webhook-id"))
        return status, headers, {"status": status}
