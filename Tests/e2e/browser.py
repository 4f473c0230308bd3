"""Debian's headless Chromium driven over its DevTools protocol (websocket-client), for the
status page's browser tests. Loopback only: every host name resolves to nothing (no DNS), and
the background services that would call out (updates, sync, safe browsing) are off.

    with Chromium(tmp_path) as b:
        b.go("http://127.0.0.1:PORT/")
        b.eval("document.title")
        b.screenshot(tmp_path / "page.png", width=390)
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

# Collects Content-Security-Policy violations of every page (run before the page's scripts).
CSP_LISTENER = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__csp.push(e.violatedDirective + " " + e.blockedURI);
});
"""


def require_chromium():
    if not CHROMIUM:
        pytest.skip("chromium is not installed (apt-get install chromium): the status page's browser tests need it")


class Chromium:
    def __init__(self, tmp: Path, timeout: float = 30.0):
        import websocket  # websocket-client (Tests/e2e/requirements.txt)

        require_chromium()
        self.timeout = timeout
        self.profile = Path(tempfile.mkdtemp(prefix="chromium-", dir=tmp))
        self.log = open(self.profile.parent / "chromium.log", "w")
        args = [
            CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            f"--user-data-dir={self.profile}", "--remote-debugging-port=0", "--remote-allow-origins=*",
            "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-default-apps", "--disable-extensions",
            "--disable-domain-reliability", "--disable-client-side-phishing-detection", "--metrics-recording-only",
            "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication,DialMediaRouteProvider",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            "--window-size=1280,900", "about:blank",
        ]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            port_file = self.profile / "DevToolsActivePort"
            deadline = time.monotonic() + timeout
            while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("chromium did not start: " + Path(self.log.name).read_text()[-2000:])
                time.sleep(0.1)
            port = int(port_file.read_text().splitlines()[0])
            req = urllib.request.Request(f"http://127.0.0.1:{port}/json/new?about:blank", method="PUT")
            with urllib.request.urlopen(req, timeout=timeout) as r:
                target = json.load(r)
            self.ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=timeout, suppress_origin=True)
            self.next_id = 0
            self.events: list[dict] = []
            self.send("Page.enable")
            self.send("Runtime.enable")
            self.send("Page.addScriptToEvaluateOnNewDocument", source=CSP_LISTENER)
        except BaseException:
            self.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            if getattr(self, "ws", None):
                self.ws.close()
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
            self.log.close()
            shutil.rmtree(self.profile, ignore_errors=True)

    # protocol ---------------------------------------------------------------------------------
    def send(self, method: str, **params):
        self.next_id += 1
        mine = self.next_id
        self.ws.send(json.dumps({"id": mine, "method": method, "params": params}))
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mine:
                if "error" in msg:
                    raise AssertionError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)
        raise AssertionError(f"{method}: no answer in {self.timeout}s")

    def wait_event(self, method: str):
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            for i, e in enumerate(self.events):
                if e["method"] == method:
                    return self.events.pop(i)
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)
        raise AssertionError(f"no {method} in {self.timeout}s")

    # pages --------------------------------------------------------------------------------------
    def go(self, url: str):
        self.events.clear()
        self.send("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")

    def eval(self, expression: str):
        r = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise AssertionError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def submit(self, button_selector: str):
        """Clicks a form's button and waits for the page it leads to."""
        self.events.clear()
        self.eval(f"document.querySelector({json.dumps(button_selector)}).click()")
        self.wait_event("Page.loadEventFired")

    def screenshot(self, path: Path, width: int = 1280, height: int = 900, mobile: bool = False):
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=mobile)
        try:
            data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=False)["data"]
        finally:
            self.send("Emulation.clearDeviceMetricsOverride")
        path.write_bytes(base64.b64decode(data))
        return path
