"""Runs the real Prometheus Alertmanager (Debian's /usr/bin/prometheus-alertmanager) on loopback.

    am = Alertmanager(tmp_path).start()   # free port, temp storage, waits for /-/ready
    am.fire({"alertname": "DiskFull", "severity": "critical", "instance": "db1"}, summary=..., description=...)
    am.resolve({...same labels...})
    am.stop()
"""
from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from processes import stop_process

BINARY = os.environ.get("ALERTMANAGER_BIN") or shutil.which("prometheus-alertmanager") or "/usr/bin/prometheus-alertmanager"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def iso(t: dt.datetime) -> str:
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


class Alertmanager:
    def __init__(self, root: Path):
        self.root = Path(root) / "alertmanager"
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = None

    def start(self, timeout=30.0):
        if os.environ.get("CLOCK_SHIFT_SECONDS"):
            # `make test-calendar` moves the wall clock of the tests and of tidings a year ahead
            # (clockshift/); Alertmanager, a Go program, keeps the real one, so its alerts would
            # look a year old to tidings. Nothing a year on would see that mismatch.
            import pytest
            pytest.skip("Alertmanager keeps the real clock: not run with the clock moved (make test-calendar)")
        cfg = self.root / "am.yml"
        cfg.write_text("route:\n  receiver: 'null'\nreceivers:\n  - name: 'null'\n")
        self.log = open(self.root / "alertmanager.log", "w")
        self.proc = subprocess.Popen(
            [BINARY, f"--config.file={cfg}", f"--storage.path={self.root / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--cluster.listen-address="],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"alertmanager exited {self.proc.returncode}: {(self.root / 'alertmanager.log').read_text()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("alertmanager did not become ready")

    def stop(self):
        stop_process(self.proc)
        if getattr(self, "log", None):
            self.log.close()

    def post(self, alerts):
        req = urllib.request.Request(f"{self.url}/api/v2/alerts", data=json.dumps(alerts).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(req, timeout=5) as r:
            assert r.status == 200, r.status

    def fire(self, labels, summary=None, description=None, url="http://prometheus:9090/graph?g0.expr=up", hours=1):
        now = dt.datetime.now(dt.timezone.utc)
        annotations = {}
        if summary is not None:
            annotations["summary"] = summary
        if description is not None:
            annotations["description"] = description
        self.post([{"labels": labels, "annotations": annotations, "startsAt": iso(now - dt.timedelta(minutes=12)),
                    "endsAt": iso(now + dt.timedelta(hours=hours)), "generatorURL": url}])

    def resolve(self, labels):
        now = dt.datetime.now(dt.timezone.utc)
        self.post([{"labels": labels, "startsAt": iso(now - dt.timedelta(minutes=12)),
                    "endsAt": iso(now - dt.timedelta(seconds=1))}])

    def alerts(self):
        with urllib.request.urlopen(f"{self.url}/api/v2/alerts?active=true", timeout=5) as r:
            return json.loads(r.read())
