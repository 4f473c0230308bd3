"""Scriptable failures for the phone-push fakes (ntfy.py, gotify.py, pushover.py).

Each fake answers as its service documents. Tests make it fail on purpose:

    srv.state["script"] = [503, 429, 200]   # the next answers, in order (200: behave normally)
    srv.state["default"] = 500              # after the script; None (the default): behave normally

A status becomes that service's own error answer (its body shape, its rate-limit headers), so a
test exercises what the real service would send. "Down" is a stopped server (FakeServer.stop or
a port held without listening).
"""
from __future__ import annotations

from fakes.server import FakeHandler


def scripted_state(script=None, default=None, **extra) -> dict:
    return {"script": list(script or []), "default": default, "accepted": [], **extra}


class ScriptedHandler(FakeHandler):
    def scripted(self):
        """The scripted status for this request, or None to behave normally."""
        with self.server.lock:
            st = self.state
            status = st["script"].pop(0) if st["script"] else st["default"]
        return None if status in (None, 200) else status

    def accept(self, message: dict):
        with self.server.lock:
            self.state["accepted"].append(message)
