"""`[http] listen` (issue 10, DESIGN §8): /metrics scraped by the real Prometheus (Debian's
`prometheus` package) and checked by `promtool`, /-/healthy, /-/ready (503 before the state is
open and while stopping), 404/405, bounded connections, label cardinality with 2,000 sources,
and the README's alert rules proven valid by `promtool check rules` and loaded by Prometheus."""
from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT, Tidings, binary, outbox, read_log, wait_for
from fakes.json_api import JSONAPI
from fakes.server import FakeServer
from fakes.webhook_receiver import WebhookReceiver, receiver_state

RULES = ROOT / "etc" / "prometheus" / "tidings-alerts.yml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, method: str = "GET", timeout: float = 5) -> tuple[int, str]:
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def series(text: str) -> list[str]:
    return [l for l in text.splitlines() if l and not l.startswith("#")]


def http_json(name: str, url: str, interval: str = "1s", extra: str = "") -> str:
    return f"""
        [sources.{name}]
        provider = "http-json"
        url = "{url}/items"
        items = "/items"
        key = "/id"
        title = "/name"
        interval = "{interval}"
        max_backoff = "2s"
        error_threshold = 1
        {extra}
        """


def webhook(name: str, url: str) -> str:
    return f"""
        [sinks.{name}]
        type = "webhook"
        url = "{url}/hook"
        timeout = "5s"
        """


# ---------------------------------------------------------------------------------------------
# One daemon and one Prometheus for the module: sources that succeed and one that fails, a sink
# that accepts, one that keeps answering 503 (pending) and one that refuses (dead letters).

class Prometheus:
    def __init__(self, root: Path, target: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = root / "prometheus.yml"
        config.write_text(f"""
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - {RULES}
scrape_configs:
  - job_name: tidings
    static_configs:
      - targets: ["{target}"]
""")
        self.log = open(root / "prometheus.log", "w")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={root / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_for(lambda: self.ready(), timeout=60, what="Prometheus ready")
        except BaseException:
            self.stop()
            raise

    def ready(self) -> bool:
        assert self.proc.poll() is None, Path(self.log.name).read_text()
        try:
            return get(self.url + "/-/ready", timeout=1)[0] == 200
        except OSError:
            return False

    def query(self, promql: str) -> list[dict]:
        status, body = get(self.url + "/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
        assert status == 200, body
        return json.loads(body)["data"]["result"]

    def value(self, promql: str) -> float | None:
        result = self.query(promql)
        return float(result[0]["value"][1]) if result else None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)
        self.log.close()


@pytest.fixture(scope="module")
def observed(tmp_path_factory):
    root = tmp_path_factory.mktemp("monitoring")
    t = Tidings(root / "daemon")
    port = free_port()
    with FakeServer(JSONAPI, state={"items": [{"id": 1, "name": "one"}]}) as api, \
            FakeServer(JSONAPI, state={"status": 500}) as broken, \
            FakeServer(WebhookReceiver, state=receiver_state()) as hook, \
            FakeServer(WebhookReceiver, state=receiver_state(default=503)) as stuck, \
            FakeServer(WebhookReceiver, state=receiver_state(default=400)) as refusing:
        t.write_config(f"""
            [http]
            listen = "127.0.0.1:{port}"
            """ + http_json("api", api.url) + http_json("api2", api.url + "/two") + http_json("broken", broken.url)
                       + webhook("hook", hook.url) + webhook("stuck", stuck.url) + webhook("refusing", refusing.url))
        prometheus = Prometheus(root, f"127.0.0.1:{port}")
        try:
            d = t.start_daemon()
            base = f"http://127.0.0.1:{port}"
            wait_for(lambda: ready(base), timeout=20, what="/-/ready 200")
            yield {"t": t, "d": d, "base": base, "api": api, "hook": hook, "prometheus": prometheus}
        finally:
            prometheus.stop()
            t.stop_all()


def ready(base: str) -> bool:
    try:
        return get(base + "/-/ready", timeout=1)[0] == 200
    except OSError:
        return False


def test_prometheus_scrapes_polls_and_deliveries_rising(observed):
    p, api, hook = observed["prometheus"], observed["api"], observed["hook"]
    wait_for(lambda: p.value('up{job="tidings"}') == 1, timeout=30, what="Prometheus scraping tidings")
    polls = wait_for(lambda: p.value('sum(tidings_polls_total{source="api"})'), timeout=20, what="polls in Prometheus")
    delivered = p.value('sum(tidings_deliveries_total{sink="hook",outcome="delivered"})') or 0

    # New items: events, delivered to the hook; Prometheus sees both counters rise.
    api.state["items"] = api.state["items"] + [{"id": 2, "name": "two"}, {"id": 3, "name": "three"}]
    wait_for(lambda: len(hook.state["accepted"]) >= 2, timeout=20, what="deliveries to the hook")
    wait_for(lambda: (p.value('sum(tidings_polls_total{source="api"})') or 0) > polls, timeout=20, what="polls rising")
    wait_for(lambda: (p.value('sum(tidings_deliveries_total{sink="hook",outcome="delivered"})') or 0) >= delivered + 2,
             timeout=20, what="deliveries rising in Prometheus")
    wait_for(lambda: (p.value('tidings_events_total{source="api",type="new"}') or 0) >= 2, timeout=10, what="events in Prometheus")
    # The failing source is down, the others up; the rules from the README loaded and evaluate.
    assert p.value('tidings_source_up{source="broken"}') == 0
    assert p.value('tidings_source_up{source="api"}') == 1
    status, body = get(p.url + "/api/v1/rules")
    groups = json.loads(body)["data"]["groups"]
    rules = {r["name"]: r for g in groups for r in g["rules"]}
    assert {"TidingsSourceDown", "TidingsOutboxBacklog", "TidingsDeadLetters"} <= set(rules), rules.keys()
    assert all(r["health"] == "ok" for r in rules.values()), rules
    # Dead letters fire at once (no `for`); the 15m/30m ones are pending, not firing yet.
    wait_for(lambda: get(p.url + "/api/v1/rules")[1].count('"state":"firing"') >= 1, timeout=20, what="TidingsDeadLetters firing")
    alerts = json.loads(get(p.url + "/api/v1/alerts")[1])["data"]["alerts"]
    assert {(a["labels"]["alertname"], a["state"]) for a in alerts} >= {("TidingsDeadLetters", "firing"), ("TidingsSourceDown", "pending")}, alerts


def test_promtool_check_metrics_is_clean_on_a_real_scrape(observed):
    base, hook = observed["base"], observed["hook"]
    wait_for(lambda: len(hook.state["accepted"]) >= 1 or None, timeout=30, what="a delivery")

    def scrape_has_everything():
        status, text = get(base + "/metrics")
        assert status == 200
        return text if ('tidings_outbox_pending{sink="stuck"}' in text and 'tidings_outbox_dead{sink="refusing"}' in text
                        and 'outcome="dead"' in text and 'outcome="retry"' in text
                        and "tidings_polls_overrunning " in text) else None
    text = wait_for(scrape_has_everything, timeout=30, what="pending and dead deliveries in /metrics")
    check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert check.returncode == 0 and check.stdout.strip() == "" and check.stderr.strip() == "", (check, text)

    names = {l.split("{")[0].split(" ")[0] for l in series(text)}
    for family in ["tidings_polls_total", "tidings_poll_duration_seconds_bucket", "tidings_source_up",
                   "tidings_source_last_success_timestamp_seconds", "tidings_events_total", "tidings_deliveries_total",
                   "tidings_outbox_pending", "tidings_outbox_dead", "tidings_scheduler_lateness_seconds_bucket", "tidings_build_info",
                   "tidings_polls_overrunning"]:
        assert family in names, (family, names)
    for line in ["# HELP tidings_polls_total ", "# TYPE tidings_polls_total counter", "# TYPE tidings_poll_duration_seconds histogram",
                 'tidings_source_up{source="broken"} 0.0', 'tidings_source_up{source="api"} 1.0', 'tidings_outbox_pending{sink="hook"} 0.0',
                 "# TYPE tidings_polls_overrunning gauge", "tidings_polls_overrunning 0.0"]:
        assert line in text, line
    assert re.search(r'^tidings_outbox_pending\{sink="stuck"\} [1-9]', text, re.M), text
    assert re.search(r'^tidings_outbox_dead\{sink="refusing"\} [1-9]', text, re.M), text
    assert re.search(r'^tidings_build_info\{version="[^"]+"\} 1\.0$', text, re.M), text


def test_healthy_and_everything_else_404_or_405(observed):
    base = observed["base"]
    assert get(base + "/-/healthy") == (200, "healthy\n")
    assert get(base + "/-/ready") == (200, "ready\n")
    assert get(base + "/")[0] == 200  # the status page (test_status_page.py), on with [http]
    assert get(base + "/metrics/x")[0] == 404
    assert get(base + "/metrics?x=1")[0] == 200  # a query string is not another path
    for method in ["POST", "PUT", "DELETE", "HEAD"]:
        assert get(base + "/metrics", method=method)[0] == 405, method
    status, body = get(base + "/nope", method="POST")
    assert status == 403  # the status page refuses a POST without its CSRF token before routing it


def test_hostile_clients_cannot_hold_the_endpoint(observed):
    """Huge request heads are refused, connections that send nothing (or trickle bytes) are
    closed, and /-/healthy keeps answering throughout."""
    base, d = observed["base"], observed["d"]
    host, port = base.removeprefix("http://").split(":")
    # A request head past the 16 KiB limit: an error status or a closed connection, never served.
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Long: " + b"a" * 64 * 1024 + b"\r\n\r\n")
        reply = s.recv(100)
        assert not reply.startswith(b"HTTP/1.1 200"), reply
    # Idle connections and half request lines are closed after the idle timeout (10 s).
    idle = [socket.create_connection((host, int(port)), timeout=10) for _ in range(20)]
    try:
        for s in idle[:10]:
            s.sendall(b"GET /met")  # half a request line, then nothing
        assert get(base + "/-/healthy", timeout=5)[0] == 200
        closed = 0
        for s in idle:
            s.settimeout(20)
            try:
                closed += s.recv(1) == b""
            except (ConnectionResetError, socket.timeout):
                closed += 1
        assert closed == 20, closed
    finally:
        for s in idle:
            s.close()
    assert d.poll() is None, read_log(d)
    assert get(base + "/-/healthy")[0] == 200


def head(base: str, path: str) -> tuple[int, bytes, dict]:
    host, port = base.removeprefix("http://").split(":")
    c = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        c.request("HEAD", path)
        r = c.getresponse()
        return r.status, r.read(), {k.lower(): v for k, v in r.getheaders()}
    finally:
        c.close()


def test_health_checks_are_answered_ahead_of_slow_connections(observed):
    """issue 30 item 10: 40 connections that never finish a request held the 16 places, and a
    /-/healthy made behind them waited for the idle timeout (one in 30 timed out). The health
    checks are answered at once, and HEAD on them is their status without a body."""
    base, d = observed["base"], observed["d"]
    host, port = base.removeprefix("http://").split(":")
    slow = [socket.create_connection((host, int(port)), timeout=10) for _ in range(40)]
    try:
        for s in slow[::2]:
            s.sendall(b"GET /metr")  # half a request line, then nothing
        start = time.monotonic()
        for _ in range(10):
            assert get(base + "/-/healthy", timeout=3) == (200, "healthy\n")
        assert get(base + "/-/ready", timeout=3) == (200, "ready\n")
        for path, body in [("/-/healthy", b""), ("/-/ready", b"")]:
            status, got, headers = head(base, path)
            assert (status, got) == (200, body), (path, status, got)
        # The other routes are answered too: the connections idle longest made room.
        assert get(base + "/metrics", timeout=3)[0] == 200
        assert time.monotonic() - start < 10  # before: the idle timeout (10 s) and more, per check
        # At most 32 idle connections are kept: of the 40, those idle longest were closed.
        def closed():
            n = 0
            for s in slow:
                s.setblocking(False)
                try:
                    n += s.recv(1) == b""
                except ConnectionResetError:
                    n += 1
                except BlockingIOError:
                    pass
            return n
        assert wait_for(lambda: closed() >= 8 or None, timeout=5, what="8 idle connections closed")
    finally:
        for s in slow:
            s.close()
    # HEAD elsewhere is still 405; a HEAD probe while not ready says 503 (test_ready_is_503_…).
    assert get(base + "/metrics", method="HEAD")[0] == 405
    assert d.poll() is None, read_log(d)


def test_sixteen_requests_are_served_at_once_sixteen_wait_and_probes_pass(observed):
    """The bound is on requests in flight: 16 served (here: POSTs whose body never comes), 16
    more wait their turn, a further one gets 503 at once; the health checks are answered."""
    base, d = observed["base"], observed["d"]
    host, port = base.removeprefix("http://").split(":")
    head_only = (f"POST /silences HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                 "Content-Length: 100\r\n\r\n").encode()
    held = []
    try:
        for _ in range(32):
            s = socket.create_connection((host, int(port)), timeout=10)
            s.sendall(head_only)
            held.append(s)
        time.sleep(0.5)
        status, body = get(base + "/metrics", timeout=5)
        assert status == 503 and "busy" in body, (status, body)
        assert get(base + "/-/healthy", timeout=3) == (200, "healthy\n")
        # The first 16 go away: the 16 waiting take their places; a new request now waits its
        # turn (not refused) and is answered once those go too.
        for s in held[:16]:
            s.close()
        time.sleep(0.5)
        answer = {}
        waiter = threading.Thread(target=lambda: answer.update(r=get(base + "/metrics", timeout=20)))
        waiter.start()
        time.sleep(0.5)
        for s in held[16:]:
            s.close()
        waiter.join(timeout=30)
        assert answer.get("r", (0,))[0] == 200, answer
    finally:
        for s in held:
            s.close()
    assert wait_for(lambda: get(base + "/metrics", timeout=5)[0] == 200 or None, timeout=10, what="/metrics once they are gone")
    assert d.poll() is None, read_log(d)


def test_cardinality_is_linear_in_sources_and_histograms_have_no_source_label(tidings):
    """2,000 sources: per-source series are counters and gauges only (at most 9 per source);
    the two histograms keep the same number of buckets whatever the number of sources."""
    n = 2000
    port = free_port()
    with FakeServer(JSONAPI, state={"items": []}) as api:
        tidings.write_config(f'max_per_host = 32\n[http]\nlisten = "127.0.0.1:{port}"\n'
                             + "".join(http_json(f"s{i:04}", api.url, interval="1h") for i in range(n)))
        d = tidings.start_daemon()
        base = f"http://127.0.0.1:{port}"

        def all_polled():
            status, text = answer(base + "/metrics", timeout=10) or (None, "")
            return text if text.count("tidings_polls_total{") >= n else None
        text = wait_for(all_polled, timeout=90, interval=1, what=f"{n} sources polled")
        lines = series(text)
        per_source = [l for l in lines if 'source="' in l]
        buckets = [l for l in lines if "_bucket{" in l]
        assert n * 3 <= len(per_source) <= n * 9, len(per_source)
        assert not [l for l in buckets if "source=" in l]
        # 10 + 1 poll-duration buckets and 9 + 1 lateness buckets, whatever n is.
        assert len(buckets) == 21, buckets
        assert len(lines) - len(per_source) < 60, [l for l in lines if 'source="' not in l]
        check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
        assert check.returncode == 0, check.stderr[:2000]
        d.send_signal(signal.SIGTERM)
        assert d.wait(timeout=30) == 0, read_log(d)


# ---------------------------------------------------------------------------------------------
# Readiness: 503 while the daemon waits for the state (a `tidings check` holds it), 200 once it
# polls, 503 while it stops (finishing a poll in flight) while /-/healthy stays 200.

def test_ready_is_503_before_the_state_is_open_and_while_stopping(tidings):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with FakeServer(JSONAPI, state={"items": [], "delay": 3}) as api:
        tidings.write_config(f'[http]\nlisten = "127.0.0.1:{port}"\n' + http_json("slow", api.url, interval="1s",
                                                                                  extra='timeout = "10s"'))
        # `tidings check` works on the state (lock held shared) for the 3 s its poll takes.
        check = subprocess.Popen(tidings.args("check", "--json"), env=tidings.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_for(lambda: api.requests, timeout=10, what="the check's poll")
        d = tidings.start_daemon()
        status, body = wait_for(lambda: answer(base + "/-/ready"), timeout=10, what="/-/ready answering")
        assert (status, body) == (503, "starting: the state is not open yet\n"), (status, body)
        assert get(base + "/-/healthy")[0] == 200
        assert head(base, "/-/ready")[:2] == (503, b"") and head(base, "/-/healthy")[:2] == (200, b"")
        assert "waiting for `tidings check`" in wait_for(lambda: "waiting" in read_log(d) and read_log(d), timeout=5, what="log")
        assert check.wait(timeout=20) == 0, check.stderr.read()
        wait_for(lambda: ready(base), timeout=10, what="/-/ready 200 once the state is open")

        # A poll in flight (3 s) when SIGTERM comes: the daemon finishes it, not ready meanwhile.
        n = len(api.requests)
        wait_for(lambda: len(api.requests) > n, timeout=10, what="a poll in flight")
        d.send_signal(signal.SIGTERM)
        assert wait_for(lambda: get(base + "/-/ready")[0] == 503 or None, timeout=3, interval=0.05, what="503 while stopping")
        assert get(base + "/-/ready") == (503, "stopping\n")
        assert get(base + "/-/healthy")[0] == 200
        assert d.wait(timeout=20) == 0, read_log(d)
        with pytest.raises(OSError):
            get(base + "/-/healthy", timeout=2)


def answer(url: str, timeout: float = 1):
    try:
        return get(url, timeout=timeout)
    except OSError:
        return None


def test_reload_keeps_an_unchanged_listen_and_moves_a_changed_one(tidings):
    port, moved = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    with FakeServer(JSONAPI, state={"items": []}) as api:
        source = http_json("api", api.url, interval="1h")
        tidings.write_config(f'[http]\nlisten = "127.0.0.1:{port}"\n' + source)
        d = tidings.start_daemon()
        wait_for(lambda: ready(base), timeout=20, what="ready")
        wait_for(lambda: 'tidings_polls_total{source="api"' in get(base + "/metrics")[1], timeout=10, what="the first poll")
        # A keep-alive connection survives a reload that leaves [http] as it was.
        conn = socket.create_connection(("127.0.0.1", port), timeout=5)
        conn.sendall(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")
        assert conn.recv(1000).startswith(b"HTTP/1.1 200")
        d.send_signal(signal.SIGHUP)
        wait_for(lambda: "reloaded configuration" in read_log(d), timeout=10, what="reload")
        wait_for(lambda: ready(base), timeout=10, what="ready after the reload")
        conn.sendall(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")
        assert conn.recv(1000).startswith(b"HTTP/1.1 200")
        conn.close()

        # A changed listen moves; one that cannot be served is reported and the old one kept.
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            busy = taken.getsockname()[1]
            tidings.write_config(f'[http]\nlisten = "127.0.0.1:{busy}"\n' + source)
            d.send_signal(signal.SIGHUP)
            wait_for(lambda: "[http] stays as it was" in read_log(d), timeout=10, what="refused move")
            assert f"cannot serve [http] on 127.0.0.1:{busy}" in read_log(d)
            wait_for(lambda: ready(base), timeout=10, what="still ready on the old address")
        tidings.write_config(f'[http]\nlisten = "[::1]:{moved}"\n' + source)
        d.send_signal(signal.SIGHUP)
        wait_for(lambda: f"[http] moved from 127.0.0.1:{port} to [::1]:{moved}" in read_log(d), timeout=10, what="move")
        wait_for(lambda: ready(f"http://[::1]:{moved}"), timeout=10, what="ready on the new address")
        with pytest.raises(OSError):
            get(base + "/-/healthy", timeout=2)
        # A new generation exports the stored health at once; a source a reload removed goes.
        assert 'tidings_source_up{source="api"} 1.0' in get(f"http://[::1]:{moved}/metrics")[1]
        tidings.write_config(f'[http]\nlisten = "[::1]:{moved}"\n' + http_json("other", api.url, interval="1h"))
        d.send_signal(signal.SIGHUP)
        wait_for(lambda: 'source="other"' in get(f"http://[::1]:{moved}/metrics")[1], timeout=15, what="the new source exported")
        assert 'source="api"' not in get(f"http://[::1]:{moved}/metrics")[1]
        d.send_signal(signal.SIGTERM)
        assert d.wait(timeout=20) == 0, read_log(d)


# ---------------------------------------------------------------------------------------------
# The shipped alert rules: valid for promtool, and the docs (operations, "Monitoring") show exactly them.

def test_alert_rules_are_valid_and_the_docs_show_them():
    check = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS: 4 rules found" in check.stdout, check.stdout
    doc = (ROOT / "docs" / "operations.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", doc, re.S)
    assert RULES.read_text() in blocks, "docs/operations.md's alert rules differ from etc/prometheus/tidings-alerts.yml"


def test_config_check_refuses_a_non_loopback_listen_without_auth(tidings):
    # DESIGN §13: off loopback, [http] needs [http.auth]; without it the daemon does not start.
    for extra in ("", "status_page = false\n"):
        tidings.write_config('[http]\nlisten = "0.0.0.0:9464"\n' + extra + '[sinks.out]\ntype = "stdout"\n')
        r = tidings.run("config", "check")
        assert r.code == 78, r
        assert "tidings.toml:2: [http] listen = \"0.0.0.0:9464\" is not a loopback address" in r.stderr, r
        assert "needs [http.auth]" in r.stderr, r
    tidings.write_config('[http]\nlisten = "localhost:9464"\nlisen = 1\n')
    r = tidings.run("config", "check")
    assert r.code == 78, r
    assert "tidings.toml:2:" in r.stderr and "must be IP:PORT" in r.stderr, r
    assert "tidings.toml:3:" in r.stderr and "unknown key 'lisen'" in r.stderr, r


def test_a_clean_stop_with_http_logs_nothing_at_error_priority(tidings):
    """Stopping the [http] endpoint is a graceful shutdown of its server (issue 20, item 11):
    cancelling it made Hummingbird log `error Waiting on child channel: CancellationError()`
    on every clean stop, which a journal watcher reads as a failure. Also with a client
    connected (keep-alive), and on a reload that moves the endpoint."""
    port, moved = free_port(), free_port()
    with FakeServer(JSONAPI, state={"items": []}) as api:
        source = http_json("api", api.url, interval="1h")
        tidings.write_config(f'[http]\nlisten = "127.0.0.1:{port}"\n' + source)
        d = tidings.start_daemon()
        wait_for(lambda: ready(f"http://127.0.0.1:{port}"), timeout=20, what="ready")
        conn = socket.create_connection(("127.0.0.1", port), timeout=5)
        conn.sendall(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")
        assert conn.recv(1000).startswith(b"HTTP/1.1 200")
        tidings.write_config(f'[http]\nlisten = "127.0.0.1:{moved}"\n' + source)
        d.send_signal(signal.SIGHUP)
        wait_for(lambda: ready(f"http://127.0.0.1:{moved}"), timeout=20, what="moved")
        conn.close()
        conn = socket.create_connection(("127.0.0.1", moved), timeout=5)
        conn.sendall(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")
        assert conn.recv(1000).startswith(b"HTTP/1.1 200")
        started = time.monotonic()
        d.send_signal(signal.SIGTERM)
        assert d.wait(timeout=20) == 0, read_log(d)
        conn.close()
        assert time.monotonic() - started < 8, "an idle keep-alive client does not hold up the stop"
        bad = [line for line in read_log(d).splitlines() if re.match(r"^\S+ (error|critical) ", line)]
        assert bad == [], read_log(d)
        assert "stopped" in read_log(d)


def test_old_dead_letters_are_pruned_logged_and_counted(tidings):
    """Dead letters used to be kept for ever with their events (issue 20, item 17): the daemon's
    housekeeping prunes those older than `dead_letter_days`, logs it per sink and counts it in
    `tidings_dead_letters_pruned_total`; a younger dead letter stays for `outbox retry`."""
    port = free_port()
    with FakeServer(JSONAPI, state={"items": []}) as api, \
            FakeServer(WebhookReceiver, state=receiver_state(default=400)) as refusing:
        tidings.write_config(f'dead_letter_days = 7\n[http]\nlisten = "127.0.0.1:{port}"\n'
                             + http_json("api", api.url, interval="1h") + webhook("refusing", refusing.url))
        assert tidings.check().code == 0, "baseline"
        api.state["items"] = [{"id": 1, "name": "one"}, {"id": 2, "name": "two"}]
        r = tidings.check("--deliver")
        assert r.code == 2, r
        dead = [row for row in outbox(tidings) if row["status"] == "dead"]
        assert len(dead) == 2, outbox(tidings)
        # One of them died 10 days ago, its event as old (history_days is 30: it stays).
        old = dead[0]["event"]["id"]
        with sqlite3.connect(tidings.state / "tidings.sqlite") as db:
            ten_days = time.time() - 10 * 86400
            db.execute("UPDATE delivery SET created_at = ? WHERE event_seq = (SELECT seq FROM event WHERE id = ?)", (ten_days, old))
            db.execute("UPDATE event SET observed_at = ? WHERE id = ?", (ten_days, old))
        d = tidings.start_daemon()
        wait_for(lambda: "pruned 1 dead letter of sink refusing older than 7 days" in read_log(d), timeout=20, what="the prune")
        assert [row["event"]["id"] for row in outbox(tidings)] == [dead[1]["event"]["id"]]
        wait_for(lambda: ready(f"http://127.0.0.1:{port}"), timeout=20, what="ready")
        assert re.search(r'^tidings_dead_letters_pruned_total\{sink="refusing"\} 1', get(f"http://127.0.0.1:{port}/metrics")[1], re.M)
        assert old in [e["id"] for e in tidings.run("history", "--json").events], "history keeps it until history_days"
        d.send_signal(signal.SIGTERM)
        assert d.wait(timeout=20) == 0
