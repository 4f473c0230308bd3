#!/usr/bin/env python3
"""`make bench`: tidings benchmarks, all on loopback, self-contained (issue 5).

1. one-shot `tidings check` vs urlwatch 2.29, N http-json sources served by nginx (ETag);
2. the daemon at scale: 10,000 sources at 60 s ± 10 %: CPU, peak RSS, scheduling lateness;
3. dedupe + one-transaction commit throughput (the `tidings-bench` target);
4. cold start: `tidings sources` on a state with 10,000 sources;
5. shared state (DESIGN §11): 30,000 sources at 60 s ± 10 % across three daemons on one
   PostgreSQL (a private server, Tests/e2e/postgres.py): CPU and peak RSS per instance,
   PostgreSQL's CPU (all its processes), scheduling lateness per instance;
6. sources people watch (DESIGN §12): one `check` of 100 feeds and 100 pages vs urlwatch 2.29
   on the same nginx (wall, CPU, peak RSS), and one 10,000-entry feed and one 2 MB page
   (entries/s, MiB/s, peak RSS);
7. footprint (issues 23, 31): the idle daemon after BENCH_IDLE_SECONDS on the shipped etc/ and
   plugins.d/, and again with a desktop sink (under dbus-run-session), a feed and a page source
   (RSS, threads, libraries loaded, RSS by mapping from /proc/PID/smaps), `tidings --version`'s
   RSS (the floor every command pays), and the installed binary's size (`make release`:
   stripped, debug symbols apart).

8. five machines (issue 33): BENCH_BIG_INSTANCES=5 daemons share BENCH_BIG_SOURCES=100000
   sources at BENCH_BIG_INTERVAL=300 s on one PostgreSQL for BENCH_BIG_SECONDS=600, routed to a
   webhook on loopback; about 1 % of the sources gain an item per minute; instances 1 and 2 are
   killed with SIGKILL at 1/6 and 1/3 of the run (not restarted). Per instance RSS and CPU,
   PostgreSQL's CPU, lateness, each takeover in intervals, duplicates in the state and at the hook;
9. memory per configured source (issue 33): an idle daemon with BENCH_PER_SOURCE="1000 10000
   100000" sources held (after a baseline check) minus one with none, and the slope between sizes.

Then a summary: each figure of issue 31's and issue 33's tables beside its goal, met or missed
by how much.

Prints one short table; the raw figures go to bench-results/latest.json (not committed).
Knobs (environment): BENCH_N="200 1000", BENCH_RUNS=7, BENCH_DAEMON_SOURCES=10000,
BENCH_DAEMON_SECONDS=135, BENCH_SHARED_SOURCES=30000, BENCH_SHARED_SECONDS=180,
BENCH_IDLE_SECONDS=40, BENCH_ONLY="1 2 3 4 5 6 7 8 9", BENCH_KEEP=1 (keep the work directory).
"""
import argparse
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "Tests", "e2e"))
import postgres  # noqa: E402  (the e2e suite's PostgreSQL server, standard library only)


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def env_list(name, default):
    return [int(x) for x in os.environ.get(name, default).split()]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(cmd, cwd=None, ok=(0,)):
    """Runs cmd under GNU time: (wall s, cpu s, peak RSS KiB, exit status). GNU time gives the
    CPU and the peak RSS (its small process forks the command, so the figure is the command's);
    the wall is measured here around it (GNU time's %e counts in 10 ms steps, a quarter of a
    40 ms check), GNU time's own start included: the same few hundred microseconds for every
    command compared."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        started = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-f", "%e %U %S %M", "-o", tf.name] + cmd, cwd=cwd,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - started
        if p.returncode not in ok:
            raise RuntimeError(f"{' '.join(cmd[:3])}… exited {p.returncode}: {p.stderr[-2000:]}")
        _, user, sys_, rss = tf.read().strip().splitlines()[-1].split()
        return wall, float(user) + float(sys_), int(rss), p.returncode


# ---------------------------------------------------------------- nginx

class Nginx:
    """A private nginx (no daemon, own prefix) on 127.0.0.1:free port serving static JSON with ETags."""

    def __init__(self, work, count):
        self.prefix = os.path.join(work, "nginx")
        self.www = os.path.join(self.prefix, "www")
        os.makedirs(os.path.join(self.www, "s"), exist_ok=True)
        os.makedirs(os.path.join(self.prefix, "tmp"), exist_ok=True)
        for i in range(count):
            items = [{"id": f"{i}-{k}", "title": f"Item {k} of source {i}", "status": "ok" if k % 3 else "warning",
                      "url": f"http://example.invalid/{i}/{k}"} for k in range(5)]
            with open(os.path.join(self.www, "s", f"{i}.json"), "w") as f:
                json.dump({"items": items}, f)
        # The worker must be able to read the files (mkdtemp is 0700).
        for d, _, _ in os.walk(work):
            os.chmod(d, 0o755)
        self.port = free_port()
        user = "user root root;" if os.geteuid() == 0 else ""
        t = os.path.join(self.prefix, "tmp")
        self.conf = os.path.join(self.prefix, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(f"""{user}
worker_processes 1;
daemon off;
pid {self.prefix}/nginx.pid;
error_log {self.prefix}/error.log warn;
events {{ worker_connections 8192; }}
http {{
  access_log off;
  default_type application/json;
  types {{ application/json json; application/atom+xml xml; text/html html; }}
  keepalive_requests 1000000;
  keepalive_timeout 120s;
  client_body_temp_path {t}/body;
  proxy_temp_path {t}/proxy;
  fastcgi_temp_path {t}/fastcgi;
  server {{
    listen 127.0.0.1:{self.port};
    root {self.www};
    etag on;
  }}
}}
""")
        self.proc = None

    def url(self, i):
        return f"http://127.0.0.1:{self.port}/s/{i}.json"

    def start(self):
        self.proc = subprocess.Popen(["nginx", "-p", self.prefix, "-c", self.conf, "-e", os.path.join(self.prefix, "error.log")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 10
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("nginx did not start: " + self.proc.stderr.read().decode())
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("nginx did not listen")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# ---------------------------------------------------------------- configs

def tidings_config(path, nginx, n, interval="5m"):
    os.makedirs(os.path.join(path, "plugins.d"), exist_ok=True)
    with open(os.path.join(path, "tidings.toml"), "w") as f:
        f.write(f'plugins_dir = "plugins.d"\n\n[defaults]\ninterval = "{interval}"\njitter = 0.1\n')
    for i in range(n):
        with open(os.path.join(path, "plugins.d", f"s{i:05d}.toml"), "w") as f:
            f.write(f'provider = "http-json"\nurl = "{nginx.url(i)}"\nitems = "/items"\nkey = "/id"\n'
                    f'title = "{{/title}} is {{/status}}"\nlink = "/url"\n')
    return ["--config", os.path.join(path, "tidings.toml"), "--state-dir", os.path.join(path, "state")]


def urlwatch_config(path, nginx, n):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "urls.yaml"), "w") as f:
        f.write("---\n".join(f"name: s{i}\nurl: {nginx.url(i)}\n" for i in range(n)))
    with open(os.path.join(path, "urlwatch.yaml"), "w") as f:
        f.write("display:\n  new: true\n  error: true\n  unchanged: false\n"
                "report:\n  text:\n    details: true\n    footer: false\n  stdout:\n    enabled: true\n    color: false\n"
                "  email:\n    enabled: false\n  html:\n    diff: unified\n")
    return ["--urls", os.path.join(path, "urls.yaml"), "--config", os.path.join(path, "urlwatch.yaml"),
            "--cache", os.path.join(path, "cache.db"), "--hooks", os.path.join(path, "hooks.py")]


def make_venv(work):
    venv = os.path.join(work, "venv")
    log("creating a throwaway venv with urlwatch 2.29 (PyPI)")
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    p = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", "--disable-pip-version-check", "urlwatch==2.29"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("pip install urlwatch==2.29 failed: " + p.stderr[-2000:])
    return os.path.join(venv, "bin", "urlwatch")


# ---------------------------------------------------------------- benchmarks

def side_by_side(tag, tcmd, ucmd, runs):
    """tidings and urlwatch, warmed up (state and cache filled), then `runs` runs each, interleaved:
    {"tidings": medians, "urlwatch": medians}."""
    log(f"{tag}: warming up (state and cache filled)")
    for _ in range(2):
        timed(tcmd, ok=(0, 1))
        timed(ucmd)
    _, _, _, rc = timed(tcmd, ok=(0, 1))
    if rc != 0:
        log(f"{tag} warning: a warm tidings check still reported events (exit {rc})")
    t, u = [], []
    for r in range(runs):
        t.append(timed(tcmd)[:3])
        u.append(timed(ucmd)[:3])
        log(f"{tag} run {r + 1}/{runs}: tidings {t[-1][0]:.2f}s {t[-1][2] // 1024}MiB, urlwatch {u[-1][0]:.2f}s {u[-1][2] // 1024}MiB")
    med = lambda xs, k: statistics.median(x[k] for x in xs)
    return {name: {"wall_s": med(xs, 0), "cpu_s": med(xs, 1), "rss_kib": med(xs, 2), "rss_kib_max": max(x[2] for x in xs)}
            for name, xs in (("tidings", t), ("urlwatch", u))}


def bench_check_vs_urlwatch(args, work, nginx, urlwatch, n, runs):
    d = os.path.join(work, f"check{n}")
    targs = tidings_config(os.path.join(d, "tidings"), nginx, n)
    uargs = urlwatch_config(os.path.join(d, "urlwatch"), nginx, n)
    tcmd = [args.bin, "check", "-q"] + targs
    ucmd = [urlwatch] + uargs
    res = {"n": n, "runs": runs}
    res.update(side_by_side(f"[1] N={n}", tcmd, ucmd, runs))
    res["wall_ratio"] = res["urlwatch"]["wall_s"] / max(res["tidings"]["wall_s"], 1e-3)
    res["cpu_ratio"] = res["urlwatch"]["cpu_s"] / max(res["tidings"]["cpu_s"], 1e-3)
    res["rss_ratio"] = res["urlwatch"]["rss_kib"] / res["tidings"]["rss_kib"]
    return res


def stop(p):
    """SIGTERM, then SIGKILL after 30 s; reaped."""
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


LATE = re.compile(r"scheduler: polls=(\d+) in (\d+)s, lateness p50=([\d.]+)ms p99=([\d.]+)ms max=([\d.]+)ms; "
                  r"since start: polls=(\d+) p50=([\d.]+)ms p99=([\d.]+)ms max=([\d.]+)ms")


def bench_daemon(args, work, nginx, n, seconds):
    d = os.path.join(work, "daemon")
    targs = tidings_config(d, nginx, n, interval="60s")
    log(f"[2] {n} sources: first `tidings check` over all of them (baseline state)")
    first = timed([args.bin, "check", "-q"] + targs, ok=(0, 1))
    warm = timed([args.bin, "check", "-q"] + targs, ok=(0, 1))
    log(f"[2] check of {n} sources: baseline {first[0]:.1f}s, warm {warm[0]:.1f}s {warm[2] // 1024}MiB")
    logfile = os.path.join(d, "daemon.log")
    settle = min(20.0, seconds / 4)
    log(f"[2] running the daemon for {seconds:.0f}s (CPU counted after the first {settle:.0f}s)")
    with open(logfile, "w") as lf:
        p = subprocess.Popen([args.bin, "run"] + targs, stdout=subprocess.DEVNULL, stderr=lf)
    try:
        t0 = time.time()
        time.sleep(settle)
        c1, w1 = proc_cpu(p.pid), time.time()
        rss_settled = proc_status(p.pid, "VmRSS")
        while time.time() - t0 < seconds:
            if p.poll() is not None:
                raise RuntimeError("the daemon exited early; see " + logfile)
            time.sleep(1)
        c2, w2 = proc_cpu(p.pid), time.time()
        hwm = proc_status(p.pid, "VmHWM")
        rss = proc_status(p.pid, "VmRSS")
        total_cpu = c2
    finally:
        stop(p)
    with open(logfile) as f:
        text = f.read()
    reports = [tuple(float(x) for x in m.groups()) for m in LATE.finditer(text)]
    warnings = sum(1 for line in text.splitlines() if " warning " in line or " error " in line)
    res = {"sources": n, "seconds": seconds, "cpu_pct": 100 * (c2 - c1) / (w2 - w1), "cpu_pct_incl_start": 100 * total_cpu / (w2 - t0),
           "peak_rss_kib": hwm, "rss_kib_settled": rss_settled, "rss_kib_end": rss, "warnings_or_errors": warnings,
           "check_baseline_s": first[0], "check_warm_s": warm[0], "check_warm_rss_kib": warm[2], "state_dir": os.path.join(d, "state")}
    if reports:
        last = reports[-1]
        res.update(polls=int(last[5]), p50_ms=last[6], p99_ms=last[7], max_ms=last[8],
                   windows=[{"polls": int(r[0]), "p50_ms": r[2], "p99_ms": r[3], "max_ms": r[4]} for r in reports])
    else:
        log("[2] warning: no `scheduler: polls=` line in the daemon log (run longer than 60 s)")
    return res, targs


def bench_shared(args, work, nginx, n, seconds):
    """Three daemons, one PostgreSQL database, n sources at 60 s: each polls about a third."""
    d = os.path.join(work, "shared")
    base = tidings_config(os.path.join(d, "node0"), nginx, n, interval="60s")
    plugins = os.path.join(d, "node0", "plugins.d")
    with postgres.PostgresServer() as pg:
        db = pg.create_database("bench")
        nodes = []
        for k in range(3):
            node = os.path.join(d, f"node{k}")
            os.makedirs(node, exist_ok=True)
            with open(os.path.join(node, "tidings.toml"), "w") as f:
                f.write(f'plugins_dir = "{plugins}"\n\n[defaults]\ninterval = "60s"\njitter = 0.1\n' + db.state_toml())
            nodes.append(["--config", os.path.join(node, "tidings.toml"), "--state-dir", os.path.join(node, "state")])
        log(f"[5] {n} sources on PostgreSQL: first `tidings check` over all of them (baseline state)")
        first = timed([args.bin, "check", "-q"] + nodes[0], ok=(0, 1))
        log(f"[5] baseline check {first[0]:.1f}s, {first[2] // 1024}MiB; running 3 daemons for {seconds:.0f}s")
        settle = min(20.0, seconds / 4)
        procs, logs = [], []
        for k, targs in enumerate(nodes):
            logs.append(os.path.join(d, f"node{k}", "daemon.log"))
            with open(logs[-1], "w") as lf:
                procs.append(subprocess.Popen([args.bin, "run"] + targs, stdout=subprocess.DEVNULL, stderr=lf))
        try:
            t0 = time.time()
            time.sleep(settle)
            c1 = [proc_cpu(p.pid) for p in procs]
            pg1, w1 = pg.cpu_seconds(), time.time()
            while time.time() - t0 < seconds:
                for k, p in enumerate(procs):
                    if p.poll() is not None:
                        raise RuntimeError(f"daemon {k} exited early; see {logs[k]}")
                time.sleep(1)
            c2 = [proc_cpu(p.pid) for p in procs]
            pg2, w2 = pg.cpu_seconds(), time.time()
            hwm = [proc_status(p.pid, "VmHWM") for p in procs]
            owners = {int(pid): int(c) for pid, c in db.query(
                "SELECT i.pid, count(*) FROM lease l JOIN instance i ON i.id = l.owner WHERE l.name LIKE 'source:%' "
                "AND l.expires_at > extract(epoch FROM clock_timestamp()) GROUP BY i.pid")}
        finally:
            for p in procs:
                p.send_signal(signal.SIGTERM)
            for p in procs:
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        instances = []
        for k, p in enumerate(procs):
            with open(logs[k]) as f:
                text = f.read()
            reports = [tuple(float(x) for x in m.groups()) for m in LATE.finditer(text)]
            inst = {"cpu_pct": 100 * (c2[k] - c1[k]) / (w2 - w1), "peak_rss_kib": hwm[k], "sources": owners.get(p.pid, 0),
                    "warnings_or_errors": sum(1 for line in text.splitlines() if " warning " in line or " error " in line)}
            if reports:
                last = reports[-1]
                inst.update(polls=int(last[5]), p50_ms=last[6], p99_ms=last[7], max_ms=last[8])
            else:
                log(f"[5] warning: no `scheduler: polls=` line in {logs[k]} (run longer than 60 s)")
            instances.append(inst)
        return {"sources": n, "seconds": seconds, "instances": instances, "postgres_cpu_pct": 100 * (pg2 - pg1) / (w2 - w1),
                "check_baseline_s": first[0], "postgres_version": pg.bin.parent.name}



class HookCounter:
    """A webhook receiver on loopback that counts deliveries by event id and by
    (source, key, event): a repeat of either is a duplicate the user would see."""

    def __init__(self):
        import http.server
        import threading
        counter = self
        self.lock = threading.Lock()
        self.by_id, self.by_item, self.bad = {}, {}, 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                try:
                    events = json.loads(body)
                    events = events if isinstance(events, list) else [events]
                except ValueError:
                    events = None
                with counter.lock:
                    if events is None:
                        counter.bad += 1
                    for e in events or []:
                        counter.by_id[e.get("id")] = counter.by_id.get(e.get("id"), 0) + 1
                        item = (e.get("source"), e.get("key"), e.get("event"))
                        counter.by_item[item] = counter.by_item.get(item, 0) + 1
                self.send_response(204)
                self.end_headers()

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def figures(self):
        with self.lock:
            return {"deliveries": sum(self.by_id.values()), "events_delivered": len(self.by_id),
                    "duplicate_ids": sum(c - 1 for c in self.by_id.values() if c > 1),
                    "duplicate_items": sum(c - 1 for c in self.by_item.values() if c > 1), "unreadable": self.bad}

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def add_item(nginx, i, tag):
    """Source i's JSON gains one item (new id): its next poll has one `new` event. Written
    beside and renamed, so nginx never serves half a file."""
    path = os.path.join(nginx.www, "s", f"{i}.json")
    with open(path) as f:
        doc = json.load(f)
    doc["items"].insert(0, {"id": f"{i}-{tag}", "title": f"Item {tag} of source {i}", "status": "ok",
                            "url": f"http://example.invalid/{i}/{tag}"})
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def bench_big(args, work, nginx, n, instances, seconds, interval):
    """Benchmark 8 (issue 33): `instances` daemons share n sources at `interval` on one
    PostgreSQL, routed to one webhook; sources gain items while they run (events flow); two
    instances are killed with SIGKILL (at 1/6 and 1/3 of the run, not restarted: the survivors
    take over their sources and carry the load, the harder case). Per instance: peak and
    final RSS, CPU, sources held, lateness; PostgreSQL's CPU; each takeover (how long until
    every source the killed instance held was polled again, in intervals since its last
    poll); duplicates (in the state and at the webhook)."""
    import random
    d = os.path.join(work, "big")
    tidings_config(os.path.join(d, "node0"), nginx, n, interval=f"{interval}s")
    plugins = os.path.join(d, "node0", "plugins.d")
    hook = HookCounter()
    rng = random.Random(8)
    with postgres.PostgresServer(max_connections=100 + 10 * instances) as pg:
        db = pg.create_database("big")
        nodes = []
        for k in range(instances):
            node = os.path.join(d, f"node{k}")
            os.makedirs(node, exist_ok=True)
            with open(os.path.join(node, "tidings.toml"), "w") as f:
                f.write(f'plugins_dir = "{plugins}"\n\n[defaults]\ninterval = "{interval}s"\njitter = 0.1\n'
                        f'\n[sinks.hook]\ntype = "webhook"\nurl = "{hook.url}/hook"\ntimeout = "5s"\n' + db.state_toml())
            nodes.append(["--config", os.path.join(node, "tidings.toml"), "--state-dir", os.path.join(node, "state")])
        log(f"[8] {n} sources on PostgreSQL: first `tidings check` over all of them (baseline state)")
        first = timed([args.bin, "check", "-q"] + nodes[0], ok=(0, 1))
        # After one check every source would be due one interval later, all at once; a deployment
        # that has run for a while has them spread over the interval, so polls (and events) flow
        # from the start and the kills below hit instances in the middle of their work.
        db.query(f"UPDATE source_state SET next_due = extract(epoch FROM clock_timestamp()) + random() * {interval}")
        log(f"[8] baseline check {first[0]:.1f}s, {first[2] // 1024}MiB; next polls spread over the interval; "
            f"{instances} daemons for {seconds:.0f}s, interval {interval}s")
        procs, logs = [], []
        for k, targs in enumerate(nodes):
            logs.append(os.path.join(d, f"node{k}", "daemon.log"))
            with open(logs[-1], "w") as lf:
                procs.append(subprocess.Popen([args.bin, "run"] + targs, stdout=subprocess.DEVNULL, stderr=lf))
        kills = [(seconds / 6, 1 % instances), (seconds / 3, 2 % instances)] if instances >= 3 else []
        takeovers, added = [], 0
        cpu0 = [None] * instances
        final_rss, hwm, cpu = [0] * instances, [0] * instances, [0.0] * instances
        settle = min(30.0, seconds / 10)
        t0 = time.time()
        pg1 = w1 = None
        pending = []  # takeovers not yet complete: dict with the killed sources' last polls
        killed, polled, watermark, next_scan = set(), {}, 0.0, t0
        try:
            next_change = t0 + settle
            while True:
                now = time.time() - t0
                if pg1 is None and now >= settle:
                    pg1, w1 = pg.cpu_seconds(), time.time()
                    cpu0 = [proc_cpu(p.pid) for p in procs]
                for k, p in enumerate(procs):
                    if p.poll() is not None and k not in killed:
                        raise RuntimeError(f"daemon {k} exited early; see {logs[k]}")
                    if p.poll() is None:
                        hwm[k] = proc_status(p.pid, "VmHWM")
                        final_rss[k] = proc_status(p.pid, "VmRSS")
                        cpu[k] = proc_cpu(p.pid)
                if kills and now >= kills[0][0]:
                    at, k = kills.pop(0)
                    pid = procs[k].pid
                    held = {src: float(lp) if lp else None for src, lp in db.query(
                        "SELECT s.source, s.last_poll FROM lease l JOIN instance i ON i.id = l.owner "
                        f"JOIN source_state s ON 'source:' || s.source = l.name WHERE i.pid = {pid}")}
                    procs[k].kill()
                    procs[k].wait()
                    killed.add(k)
                    killed_at = time.time()
                    watermark = watermark or killed_at - 60
                    log(f"[8] kill -9 instance {k} (pid {pid}) holding {len(held)} sources at {killed_at - t0:.0f}s")
                    pending.append({"instance": k, "at_s": killed_at - t0, "killed_at": killed_at, "held": held, "again": {}})
                # Takeovers: the first poll of each killed source after its kill. Every 10 s, the
                # rows polled since the last scan (a minute of overlap: a poll commits after it starts).
                if pending and time.time() >= next_scan:
                    scanned_at = time.time()
                    for src, lp in db.query(f"SELECT source, last_poll FROM source_state WHERE last_poll > {watermark}"):
                        polled.setdefault(src, []).append(float(lp))
                    watermark, next_scan = scanned_at - 60, scanned_at + 10
                    for tk in pending:
                        for src in tk["held"]:
                            if src not in tk["again"]:
                                after = [x for x in polled.get(src, ()) if x > tk["killed_at"]]
                                if after:
                                    tk["again"][src] = min(after)
                done = [tk for tk in pending if len(tk["again"]) == len(tk["held"])]
                for tk in done:
                    pending.remove(tk)
                    takeovers.append(tk)
                if now >= seconds and (not pending or now >= max(tk["at_s"] for tk in pending) + 2 * interval + 30):
                    break
                if time.time() >= next_change:
                    # About 1 % of the sources per minute gain an item.
                    for i in rng.sample(range(n), max(1, n // 600)):
                        add_item(nginx, i, f"x{added}")
                        added += 1
                    next_change += 10
                time.sleep(2)
            pg2, w2 = pg.cpu_seconds(), time.time()
            owners = {int(pid): int(c) for pid, c in db.query(
                "SELECT i.pid, count(*) FROM lease l JOIN instance i ON i.id = l.owner WHERE l.name LIKE 'source:%' "
                "AND l.expires_at > extract(epoch FROM clock_timestamp()) GROUP BY i.pid")}
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in procs:
                try:
                    p.wait(60)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        # Deliveries still queued at the end are not duplicates; what reached the hook twice is.
        dup_state = db.scalar("SELECT count(*) FROM (SELECT source, key, type FROM event WHERE type = 'new' "
                              "GROUP BY source, key, type HAVING count(*) > 1) d")
        events = db.scalar("SELECT count(*) FROM event")
        hooks = hook.figures()
        hook.close()
        out = []
        for tk in pending + takeovers:
            gaps = sorted((tk["again"][s] - (tk["held"][s] or tk["killed_at"])) / interval for s in tk["again"])
            out.append({"instance": tk["instance"], "at_s": tk["at_s"], "sources": len(tk["held"]),
                        "polled_again": len(tk["again"]), "complete": tk not in pending,
                        "all_polled_after_s": (max(tk["again"].values()) - tk["killed_at"]) if tk["again"] else None,
                        "gap_intervals_p50": gaps[len(gaps) // 2] if gaps else None,
                        "gap_intervals_p99": gaps[min(len(gaps) - 1, int(len(gaps) * 0.99))] if gaps else None,
                        "gap_intervals_max": gaps[-1] if gaps else None})
        res_instances = []
        for k, p in enumerate(procs):
            with open(logs[k]) as f:
                text = f.read()
            reports = [tuple(float(x) for x in m.groups()) for m in LATE.finditer(text)]
            alive = p.returncode != -signal.SIGKILL
            inst = {"killed": not alive, "peak_rss_kib": hwm[k], "rss_kib_end": final_rss[k],
                    "cpu_pct": 100 * (cpu[k] - (cpu0[k] or 0)) / max(w2 - w1, 1e-9) if alive else None,
                    "sources": owners.get(p.pid, 0),
                    "warnings_or_errors": sum(1 for line in text.splitlines() if " warning " in line or " error " in line)}
            if reports:
                last = reports[-1]
                inst.update(polls=int(last[5]), p50_ms=last[6], p99_ms=last[7], max_ms=last[8])
            res_instances.append(inst)
        return {"sources": n, "instances_n": instances, "seconds": time.time() - t0, "interval_s": interval,
                "instances": res_instances, "postgres_cpu_pct": 100 * (pg2 - pg1) / max(w2 - w1, 1e-9),
                "postgres_version": pg.bin.parent.name, "check_baseline_s": first[0], "items_added": added,
                "events": events, "duplicate_new_events_in_state": dup_state, "hook": hooks, "takeovers": out}


def bench_per_source(args, work, nginx, sizes, seconds):
    """Memory per configured source, held (one daemon on SQLite after a baseline `check`, so
    nothing is due): RSS after `seconds` with N sources minus with none, over N, for each N:
    the slope between sizes says whether a source costs a constant amount."""
    rows = []
    base = None
    for n in [0] + sizes:
        d = os.path.join(work, f"per{n}")
        targs = tidings_config(d, nginx, n, interval="1d")
        if n:
            timed([args.bin, "check", "-q"] + targs, ok=(0, 1))
        with open(os.path.join(d, "daemon.log"), "w") as lf:
            p = subprocess.Popen([args.bin, "run"] + targs, stdout=subprocess.DEVNULL, stderr=lf)
        try:
            time.sleep(seconds)
            if p.poll() is not None:
                raise RuntimeError(f"daemon with {n} sources exited; see {d}/daemon.log")
            rss, peak = proc_status(p.pid, "VmRSS"), proc_status(p.pid, "VmHWM")
        finally:
            stop(p)
        if n == 0:
            base = rss
            rows.append({"sources": 0, "rss_kib": rss, "peak_rss_kib": peak})
        else:
            rows.append({"sources": n, "rss_kib": rss, "peak_rss_kib": peak, "kib_per_source": (rss - base) / n})
        log(f"[8] idle daemon with {n} sources: {rss / 1024:.1f} MiB" + (f", {(rss - base) / n:.2f} KiB per source" if n else ""))
        shutil.rmtree(d, ignore_errors=True)
    for a, b in zip(rows[1:], rows[2:]):
        b["slope_kib_per_source"] = (b["rss_kib"] - a["rss_kib"]) / (b["sources"] - a["sources"])
    return rows


def bench_dedupe(args, work):
    log("[3] dedupe + commit: 1,000-item snapshots, 1,000,000 items")
    p = subprocess.run([args.bench_bin, "dedupe", "--dir", os.path.join(work, "dedupe"), "--snapshot", "1000",
                        "--total", "1000000", "--sources", "10"], check=True, capture_output=True, text=True)
    return json.loads(p.stdout)


def bench_cold_start(args, work, targs):
    log("[4] cold start: `tidings sources` on the 10,000-source state")
    cmd = [args.bin, "sources"] + targs
    if shutil.which("hyperfine"):
        out = os.path.join(work, "hyperfine.json")
        subprocess.run(["hyperfine", "-N", "--warmup", "3", "--runs", "20", "--export-json", out, "--style", "none",
                        " ".join(cmd)], check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            r = json.load(f)["results"][0]
        times = r["times"]
    else:
        times = [timed(cmd)[0] for _ in range(20)]
    rss = timed(cmd)[2]
    return {"median_ms": 1000 * statistics.median(times), "min_ms": 1000 * min(times), "rss_kib": rss}


WATCH_N = 100  # feeds and pages each in benchmark 6's check


def watch_files(nginx):
    """Benchmark 6's documents under nginx's root: w/feedI.xml (20 Atom entries), w/pageI.html
    (a 30 KB page whose #content the sources watch), w/big.xml (10,000 entries), w/big.html (2 MB)."""
    w = os.path.join(nginx.www, "w")
    os.makedirs(w, exist_ok=True)

    def atom(i, n):
        entries = "".join(
            f'<entry><id>urn:bench:{i}:{k}</id><title>Entry {k} of feed {i} &amp; more</title>'
            f'<link href="/posts/{i}/{k}"/><updated>2026-01-01T00:00:00Z</updated>'
            f'<summary type="html">&lt;p&gt;Summary &lt;b&gt;{k}&lt;/b&gt; of feed {i}&lt;/p&gt;</summary></entry>'
            for k in range(n))
        return f'<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom"><id>urn:bench:{i}</id><title>Feed {i}</title>{entries}</feed>'

    def page(i, rows):
        filler = "".join(f'<div class="ad"><p>Filler paragraph {k} with <a href="/x/{k}">a link</a>.</p></div>' for k in range(rows))
        jobs = "".join(f'<li class="job" data-id="{k}"><h3>Job {k} at site {i}</h3><p>Details of job {k}</p></li>' for k in range(20))
        return (f'<!doctype html><html><head><meta charset="utf-8"><title>Site {i}</title>'
                f'<script>var x = {i};</script></head><body><nav>menu</nav>{filler}'
                f'<div id="content"><ul>{jobs}</ul></div>{filler}</body></html>')

    for i in range(WATCH_N):
        with open(os.path.join(w, f"feed{i}.xml"), "w") as f:
            f.write(atom(i, 20))
        with open(os.path.join(w, f"page{i}.html"), "w") as f:
            f.write(page(i, 200))
    with open(os.path.join(w, "big.xml"), "w") as f:
        f.write(atom("big", 10000))
    with open(os.path.join(w, "big.html"), "w") as f:
        f.write(page("big", 12000))  # about 2 MB
    for d, _, fs in os.walk(w):
        os.chmod(d, 0o755)
        for x in fs:
            os.chmod(os.path.join(d, x), 0o644)
    return {"big_xml": os.path.getsize(os.path.join(w, "big.xml")), "big_html": os.path.getsize(os.path.join(w, "big.html"))}


def watch_tidings_config(path, nginx, feeds, pages, extra=""):
    """feeds / pages: lists of (name, path under w/)."""
    os.makedirs(os.path.join(path, "plugins.d"), exist_ok=True)
    with open(os.path.join(path, "tidings.toml"), "w") as f:
        f.write('plugins_dir = "plugins.d"\n\n[defaults]\ninterval = "5m"\njitter = 0.1\n')
    base = f"http://127.0.0.1:{nginx.port}/w/"
    for name, doc in feeds:
        with open(os.path.join(path, "plugins.d", f"{name}.toml"), "w") as f:
            f.write(f'provider = "feed"\nurl = "{base}{doc}"\nmax_entries = 20000\n{extra}')
    for name, doc in pages:
        with open(os.path.join(path, "plugins.d", f"{name}.toml"), "w") as f:
            f.write(f'provider = "page"\nurl = "{base}{doc}"\nselect = "css:#content li.job"\neach = true\nkey = "@data-id"\n{extra}')
    return ["--config", os.path.join(path, "tidings.toml"), "--state-dir", os.path.join(path, "state")]


def bench_watch(args, work, nginx, urlwatch, runs):
    sizes = watch_files(nginx)
    d = os.path.join(work, "watch")
    base = f"http://127.0.0.1:{nginx.port}/w/"
    feeds = [(f"feed{i:03d}", f"feed{i}.xml") for i in range(WATCH_N)]
    pages = [(f"page{i:03d}", f"page{i}.html") for i in range(WATCH_N)]
    targs = watch_tidings_config(os.path.join(d, "tidings"), nginx, feeds, pages)
    u = os.path.join(d, "urlwatch")
    uargs = urlwatch_config(u, nginx, 0)
    with open(os.path.join(u, "urls.yaml"), "w") as f:
        jobs = [f"name: {n}\nurl: {base}{doc}\n" for n, doc in feeds]
        jobs += [f"name: {n}\nurl: {base}{doc}\nfilter:\n  - css: '#content li.job'\n  - html2text: re\n" for n, doc in pages]
        f.write("---\n".join(jobs))
    res = {"feeds": WATCH_N, "pages": WATCH_N, "runs": runs}
    tcmd, ucmd = [args.bin, "check", "-q"] + targs, [urlwatch] + uargs
    res.update(side_by_side(f"[6] {WATCH_N} feeds + {WATCH_N} pages", tcmd, ucmd, runs))
    # One big document at a time, from an empty state each run (every entry parsed, deduplicated
    # and stored), so the figure is the whole per-entry cost.
    for key, kind, doc, unit in (("big_feed", "feed", "big.xml", 10000), ("big_page", "page", "big.html", 20)):
        xs = []
        for r in range(max(3, runs // 2)):
            p = os.path.join(d, f"{key}{r}")
            a = watch_tidings_config(p, nginx, [(key, doc)] if kind == "feed" else [], [(key, doc)] if kind == "page" else [])
            xs.append(timed([args.bin, "check", "-q"] + a, ok=(0, 1))[:3])
        wall = statistics.median(x[0] for x in xs)
        res[key] = {"bytes": sizes["big_xml" if kind == "feed" else "big_html"], "items": unit, "wall_s": wall,
                    "cpu_s": statistics.median(x[1] for x in xs), "rss_kib": max(x[2] for x in xs)}
        log(f"[6] {doc}: {wall:.2f}s, {res[key]['rss_kib'] // 1024} MiB")
    return res


def smaps_by_mapping(pid):
    """RSS (KiB) per mapping name ("[heap]", "[anon]", a library's file name), largest first."""
    rss, name = {}, None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            parts = line.split()
            if re.match(r"^[0-9a-f]+-[0-9a-f]+$", parts[0]):
                name = os.path.basename(parts[5]) if len(parts) > 5 else "[anon]"
            elif parts[0] == "Rss:":
                rss[name] = rss.get(name, 0) + int(parts[1])
    return sorted(rss.items(), key=lambda kv: -kv[1])


def rollup(pid, key):
    """A total from /proc/PID/smaps_rollup (KiB): Pss, Private_Dirty (what no other process
    shares and the kernel cannot drop: heap, stacks, relocated data)."""
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def idle_daemon(binary, config, state, log_path, seconds, wrap=()):
    """Runs `tidings run` for `seconds` and reads what it costs doing nothing: RSS (now and peak),
    PSS, private dirty, threads, the largest mappings and the libraries it has loaded."""
    with open(log_path, "w") as lf:
        p = subprocess.Popen([*wrap, binary, "run", "--config", config, "--state-dir", state],
                             stdout=subprocess.DEVNULL, stderr=lf, start_new_session=True)
    try:
        time.sleep(seconds)
        if p.poll() is not None:
            raise RuntimeError(f"the idle daemon exited {p.returncode}; see {log_path}")
        pid = p.pid
        if wrap:  # dbus-run-session runs tidings as its child
            kids = subprocess.run(["pgrep", "-P", str(p.pid), "-x", "tidings"], capture_output=True, text=True).stdout.split()
            pid = int(kids[0]) if kids else p.pid
        libs = set()
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) > 5 and ".so" in parts[5]:
                    libs.add(os.path.basename(parts[5]))
        return {"rss_kib": proc_status(pid, "VmRSS"), "peak_rss_kib": proc_status(pid, "VmHWM"),
                "private_dirty_kib": rollup(pid, "Private_Dirty"), "pss_kib": rollup(pid, "Pss"),
                "threads": proc_status(pid, "Threads"), "smaps": smaps_by_mapping(pid)[:12],
                "libraries": len(libs), "library_names": sorted(libs),
                "thread_names": sorted(open(f"/proc/{pid}/task/{t}/comm").read().strip()
                                       for t in os.listdir(f"/proc/{pid}/task"))}
    finally:
        if wrap:  # dbus-run-session leaves its child running when it is stopped: the whole group
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        stop(p)


def desktop_watch_config(d, port):
    """The shipped etc/ plus a desktop sink, one feed and one page source on a local server:
    what a desktop user's daemon holds (libnotify, libxml2) doing nothing."""
    site = os.path.join(d, "site")
    os.makedirs(site, exist_ok=True)
    with open(os.path.join(site, "feed.xml"), "w") as f:
        f.write('<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>'
                '<id>urn:t</id><updated>2026-01-01T00:00:00Z</updated>'
                + "".join(f"<entry><id>urn:e{i}</id><title>Entry {i}</title><updated>2026-01-01T00:00:00Z</updated>"
                          f"<link href=\"http://127.0.0.1:{port}/e{i}\"/></entry>" for i in range(20)) + "</feed>")
    with open(os.path.join(site, "page.html"), "w") as f:
        f.write("<html><body><ul id='jobs'>" + "".join(f"<li data-id='{i}'>Job {i}</li>" for i in range(30)) + "</ul></body></html>")
    etc = os.path.join(d, "etc-desktop")
    plugins = os.path.join(d, "plugins-desktop")
    os.makedirs(etc)
    os.makedirs(plugins)
    main = open(os.path.join(ROOT, "etc", "tidings.toml")).read()
    main = main.replace('plugins_dir = "../plugins.d"', 'plugins_dir = "../plugins-desktop"')
    main += '\n[sinks.desktop]\ntype = "desktop"\n'
    main = re.sub(r'\[\[routes\]\]\s*\nsinks = \["console"\]', '[[routes]]\nsinks = ["console", "desktop"]', main)
    with open(os.path.join(etc, "tidings.toml"), "w") as f:
        f.write(main)
    with open(os.path.join(plugins, "feed.toml"), "w") as f:
        f.write(f'provider = "feed"\nurl = "http://127.0.0.1:{port}/feed.xml"\ninterval = "10s"\n')
    with open(os.path.join(plugins, "page.toml"), "w") as f:
        f.write(f'provider = "page"\nurl = "http://127.0.0.1:{port}/page.html"\ninterval = "10s"\n'
                'select = "css:#jobs li"\neach = true\nkey = "@data-id"\n')
    for path in (etc, plugins):
        os.chmod(path, 0o700)
    return os.path.join(etc, "tidings.toml"), site


def bench_footprint(args, work):
    """What tidings costs doing nothing: the daemon on the shipped configuration, the same with a
    desktop sink, a feed and a page source, `--version`, and the installed binary on disk."""
    d = os.path.join(work, "footprint")
    os.makedirs(os.path.join(d, "etc"))
    shutil.copy(os.path.join(ROOT, "etc", "tidings.toml"), os.path.join(d, "etc"))
    shutil.copytree(os.path.join(ROOT, "plugins.d"), os.path.join(d, "plugins.d"))
    for x in os.listdir(os.path.join(d, "plugins.d", "secrets")):
        os.chmod(os.path.join(d, "plugins.d", "secrets", x), 0o600)  # as a copy in use must be
    port = free_port()
    desktop_config, site = desktop_watch_config(d, port)
    server = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)], cwd=site,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # A session bus for the desktop sink (libnotify), as a logged-in user has.
    wrap = ("dbus-run-session", "--") if shutil.which("dbus-run-session") else ()
    res = {}
    binaries = [("bench", args.bin)]
    if os.path.exists(args.install_bin):
        binaries.append(("installed", args.install_bin))
    seconds = float(os.environ.get("BENCH_IDLE_SECONDS", "40"))
    try:
        for tag, binary in binaries:
            rss = sorted(timed([binary, "--version"])[2] for _ in range(5))
            res[f"version_rss_kib_{tag}"] = rss[2]
            log(f"[7] {tag} binary: --version {rss[2] // 1024} MiB; idle daemon on the shipped etc/ for {seconds:.0f}s")
            res[f"idle_{tag}"] = idle_daemon(binary, os.path.join(d, "etc", "tidings.toml"), os.path.join(d, f"state-{tag}"),
                                             os.path.join(d, f"daemon-{tag}.log"), seconds)
            log(f"[7] {tag} binary: idle daemon with a desktop sink, a feed and a page source for {seconds:.0f}s")
            res[f"idle_desktop_{tag}"] = idle_daemon(binary, desktop_config, os.path.join(d, f"state-desktop-{tag}"),
                                                     os.path.join(d, f"daemon-desktop-{tag}.log"), seconds, wrap)
    finally:
        stop(server)
    if os.path.exists(args.install_bin):
        debug = args.install_bin + ".debug"
        res["installed_bytes"] = os.path.getsize(args.install_bin)
        res["installed_debug_bytes"] = os.path.getsize(debug) if os.path.exists(debug) else None
        res["installed_stripped"] = "symtab" not in subprocess.run(["readelf", "-S", args.install_bin], capture_output=True, text=True).stdout
    return res


# ---------------------------------------------------------------- report

def machine():
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem = subprocess.run(["free", "-h"], capture_output=True, text=True).stdout.splitlines()[1].split()[1]
    return f"{os.cpu_count()} cores, {model}, {mem} RAM, {platform.system()} {platform.release()}"


def table(res):
    rows = []
    mib = lambda k: f"{k / 1024:.1f} MiB"
    prev = None
    for r in res.get("check", []):
        t, u = r["tidings"], r["urlwatch"]
        rows.append((f"1. check N={r['n']}: tidings", f"{t['wall_s']:.3f} s wall, {t['cpu_s']:.3f} s CPU, {mib(t['rss_kib'])}", ""))
        rows.append((f"   urlwatch 2.29", f"{u['wall_s']:.3f} s wall, {u['cpu_s']:.3f} s CPU, {mib(u['rss_kib'])}", ""))
        if prev is None:
            ok = r["wall_ratio"] >= 10 and r["rss_ratio"] >= 2
            verdict = f"wall >= 10x, RSS >= 2x: {'met' if ok else 'MISSED'}"
        else:
            ok = r["wall_ratio"] > prev["wall_ratio"] and r["rss_ratio"] > prev["rss_ratio"]
            verdict = f"gap widens vs N={prev['n']}: {'met' if ok else 'MISSED'}"
        rows.append(("   ratio urlwatch/tidings", f"wall {r['wall_ratio']:.1f}x, CPU {r['cpu_ratio']:.1f}x, RSS {r['rss_ratio']:.1f}x", verdict))
        prev = r
    if "daemon" in res:
        d = res["daemon"]
        rows.append((f"2. daemon {d['sources']} src, {d['seconds']:.0f} s", f"CPU {d['cpu_pct']:.1f}% of a core", f"<= 5%: {'met' if d['cpu_pct'] <= 5 else 'MISSED'}"))
        rows.append(("   peak RSS", mib(d["peak_rss_kib"]), f"<= 64 MiB: {'met' if d['peak_rss_kib'] <= 64 * 1024 else 'MISSED'}"))
        if "p99_ms" in d:
            rows.append((f"   lateness ({d['polls']} polls)", f"p50 {d['p50_ms']:.1f} ms, p99 {d['p99_ms']:.1f} ms, max {d['max_ms']:.0f} ms",
                         f"p99 <= 250 ms: {'met' if d['p99_ms'] <= 250 else 'MISSED'}"))
    if "dedupe" in res:
        x = res["dedupe"]
        rows.append(("3. dedupe+commit, 1,000-item snapshot", f"{x['items_per_s_snapshot_median']:,.0f} items/s ({x['snapshot_ms_median']:.1f} ms)",
                     f">= 200,000/s: {'met' if x['items_per_s_snapshot_median'] >= 200000 else 'MISSED'}"))
        rows.append((f"   {x['total_items']:,.0f} items total", f"{x['items_per_s_total']:,.0f} items/s (baselines {x['items_per_s_baseline']:,.0f}/s)",
                     f">= 200,000/s: {'met' if x['items_per_s_total'] >= 200000 else 'MISSED'}"))
    if "cold" in res:
        c = res["cold"]
        rows.append(("4. cold start `sources`, 10,000 src", f"{c['median_ms']:.1f} ms median, {mib(c['rss_kib'])}", f"<= 100 ms (issue 33): {'met' if c['median_ms'] <= 100 else 'MISSED'}"))
    if "shared" in res:
        x = res["shared"]
        ins = x["instances"]
        rows.append((f"5. shared: {x['sources']} src, 3 daemons, {x['seconds']:.0f} s",
                     "CPU " + " / ".join(f"{i['cpu_pct']:.1f}%" for i in ins) + " of a core",
                     f"sources {' / '.join(str(i['sources']) for i in ins)}"))
        rows.append(("   peak RSS per instance", " / ".join(mib(i["peak_rss_kib"]) for i in ins), ""))
        rows.append((f"   PostgreSQL {x['postgres_version']} (all processes)", f"CPU {x['postgres_cpu_pct']:.1f}% of a core", ""))
        if all("p99_ms" in i for i in ins):
            worst = max(i["p99_ms"] for i in ins)
            rows.append(("   lateness p99 per instance", " / ".join(f"{i['p99_ms']:.1f} ms" for i in ins),
                         f"p99 <= 250 ms: {'met' if worst <= 250 else 'MISSED'}"))
    if "big" in res:
        x = res["big"]
        ins = x["instances"]
        rows.append((f"8. {x['sources']} src, {x['instances_n']} daemons at {x['interval_s']:.0f} s, {x['seconds']:.0f} s",
                     "CPU " + " / ".join("killed" if i["killed"] else f"{i['cpu_pct']:.1f}%" for i in ins) + " of a core",
                     f"sources at the end {' / '.join(str(i['sources']) for i in ins)}"))
        rows.append(("   peak RSS per instance", " / ".join(mib(i["peak_rss_kib"]) for i in ins), ""))
        rows.append(("   RSS at the end (or at the kill)", " / ".join(mib(i["rss_kib_end"]) for i in ins), ""))
        rows.append((f"   PostgreSQL {x['postgres_version']} (all processes)", f"CPU {x['postgres_cpu_pct']:.1f}% of a core", ""))
        if any("p99_ms" in i for i in ins):
            rows.append(("   lateness p50/p99/max per instance", " / ".join(f"{i['p50_ms']:.0f},{i['p99_ms']:.0f},{i['max_ms']:.0f} ms" if "p99_ms" in i else "-"
                                                                        for i in ins), "since each one's start, to its last minute line"))
        for t in x["takeovers"]:
            rows.append((f"   kill -9 of instance {t['instance']} at {t['at_s']:.0f} s ({t['sources']} src)",
                         f"{t['polled_again']} polled again, all within {t['all_polled_after_s'] or 0:.0f} s; since their last poll "
                         f"p50 {t['gap_intervals_p50'] or 0:.2f}, max {t['gap_intervals_max'] or 0:.2f} intervals", "complete" if t["complete"] else "INCOMPLETE"))
        h = x["hook"]
        rows.append(("   events / duplicates", f"{x['items_added']} items added, {x['events']} events, {h['events_delivered']} delivered "
                     f"({h['deliveries']} requests); duplicates: state {x['duplicate_new_events_in_state']}, hook by id {h['duplicate_ids']}, "
                     f"by item {h['duplicate_items']}", ""))
    if "per_source" in res:
        for r in res["per_source"]:
            rows.append((f"9. idle daemon, {r['sources']:,} sources held", mib(r["rss_kib"]),
                         (f"{r['kib_per_source']:.2f} KiB/source" + (f", slope {r['slope_kib_per_source']:.2f}" if "slope_kib_per_source" in r else ""))
                         if r["sources"] else "baseline"))
    if "watch" in res:
        x = res["watch"]
        t, u = x["tidings"], x["urlwatch"]
        rows.append((f"6. check {x['feeds']} feeds + {x['pages']} pages: tidings", f"{t['wall_s']:.3f} s wall, {t['cpu_s']:.3f} s CPU, {mib(t['rss_kib'])}", ""))
        rows.append(("   urlwatch 2.29", f"{u['wall_s']:.3f} s wall, {u['cpu_s']:.3f} s CPU, {mib(u['rss_kib'])}", ""))
        rows.append(("   ratio urlwatch/tidings", f"wall {u['wall_s'] / max(t['wall_s'], 1e-3):.1f}x, CPU {u['cpu_s'] / max(t['cpu_s'], 1e-3):.1f}x, RSS {u['rss_kib'] / t['rss_kib']:.1f}x", ""))
        f, p = x["big_feed"], x["big_page"]
        rows.append((f"   feed of {f['items']:,} entries ({f['bytes'] / 1e6:.1f} MB), empty state", f"{f['items'] / max(f['wall_s'], 1e-3):,.0f} entries/s ({f['wall_s']:.2f} s), {mib(f['rss_kib'])}", ""))
        rows.append((f"   page of {p['bytes'] / 1e6:.1f} MB, empty state", f"{p['bytes'] / 1e6 / max(p['wall_s'], 1e-3):.1f} MB/s ({p['wall_s']:.2f} s), {mib(p['rss_kib'])}", ""))
    if "footprint" in res:
        x = res["footprint"]
        for tag, what in (("bench", "release build"), ("installed", "installed binary (static)")):
            if f"idle_{tag}" not in x:
                continue
            i = x[f"idle_{tag}"]
            rows.append((f"7. idle daemon, shipped etc/, {what}", f"{mib(i['rss_kib'])}, {i['threads']} threads "
                         f"(PSS {mib(i['pss_kib'])}, private dirty {mib(i['private_dirty_kib'])})", ""))
            rows.append(("   largest mappings (smaps RSS)", ", ".join(f"{n} {k / 1024:.1f}" for n, k in i["smaps"][:6]), ""))
            rows.append(("   shared libraries loaded", str(i.get("libraries", "?")), ""))
            if f"idle_desktop_{tag}" in x:
                j = x[f"idle_desktop_{tag}"]
                rows.append(("   same + desktop sink, a feed, a page", f"{mib(j['rss_kib'])}, {j['threads']} threads "
                             f"(PSS {mib(j['pss_kib'])}, private dirty {mib(j['private_dirty_kib'])}), {j.get('libraries', '?')} libraries", ""))
                rows.append(("   largest mappings (smaps RSS)", ", ".join(f"{n} {k / 1024:.1f}" for n, k in j["smaps"][:6]), ""))
            rows.append((f"   `tidings --version`, {what}", mib(x[f"version_rss_kib_{tag}"]), ""))
        if "installed_bytes" in x:
            dbg = x["installed_debug_bytes"]
            rows.append(("   installed binary (.build/install/tidings)", f"{x['installed_bytes'] / 1e6:.1f} MB"
                         + (", stripped" if x["installed_stripped"] else ", NOT stripped")
                         + (f"; debug symbols apart {dbg / 1e6:.1f} MB" if dbg else ""), ""))
    w = [max(len(r[i]) for r in rows) for i in range(3)] if rows else [0, 0, 0]
    lines = [f"tidings benchmarks — {res['machine']}, load average at start {res.get('loadavg', '?')}", ""]
    lines += [f"{a:<{w[0]}}  {b:<{w[1]}}  {c}".rstrip() for a, b, c in rows]
    return "\n".join(lines + [""] + summary(res))


def verdict(value, goal, smaller_is_better=True, unit=""):
    """"met", or "missed by X×" (how far the value is from the goal, as a factor)."""
    if (value <= goal) if smaller_is_better else (value >= goal):
        return "met"
    factor = value / goal if smaller_is_better else goal / max(value, 1e-9)
    return f"missed by {factor:.1f}x"


def summary(res):
    """The open issues' tables: figure | value | goal | met / missed by X (figures not measured in
    this run are left out: BENCH_ONLY)."""
    mib = lambda k: k / 1024
    native, scale = [], []
    x = res.get("footprint", {})
    tag_of = lambda key: ("installed", x[f"{key}_installed"]) if f"{key}_installed" in x else (("release build", x[f"{key}_bench"]) if f"{key}_bench" in x else (None, None))
    if "installed_bytes" in x:
        mb = x["installed_bytes"] / 1e6
        native.append(("installed binary, stripped", f"{mb:.1f} MB", "<= 40 MB (stretch 32)", verdict(mb, 40)))
    tag, v = tag_of("version_rss_kib")
    if v:
        native.append((f"`tidings --version`, peak RSS ({tag})", f"{mib(v):.1f} MiB", "<= 12 MiB", verdict(mib(v), 12)))
    tag, idle = tag_of("idle")
    if idle:
        native.append((f"idle daemon, shipped etc/, RSS ({tag})", f"{mib(idle['rss_kib']):.1f} MiB, {idle['threads']} threads", "<= 16 MiB",
                       verdict(mib(idle["rss_kib"]), 16)))
    tag, idle = tag_of("idle_desktop")
    if idle:
        native.append((f"idle daemon + desktop sink, feed, page ({tag})", f"{mib(idle['rss_kib']):.1f} MiB, {idle['threads']} threads", "<= 24 MiB",
                       verdict(mib(idle["rss_kib"]), 24)))
    c200 = next((r for r in res.get("check", []) if r["n"] == 200), None)
    if c200:
        native.append(("check 200 unchanged vs urlwatch 2.29, peak RSS", f"{c200['rss_ratio']:.2f}x lighter ({mib(c200['tidings']['rss_kib']):.1f} vs {mib(c200['urlwatch']['rss_kib']):.1f} MiB)",
                       ">= 2x", verdict(c200["rss_ratio"], 2, False)))
        native.append(("same, wall", f"{c200['wall_ratio']:.1f}x faster ({c200['tidings']['wall_s']:.3f} vs {c200['urlwatch']['wall_s']:.3f} s)",
                       ">= 10x", verdict(c200["wall_ratio"], 10, False)))
    if "daemon" in res:
        d = res["daemon"]
        scale.append((f"daemon, {d['sources']} sources at 60 s, CPU", f"{d['cpu_pct']:.1f} % of a core", "<= 5 %", verdict(d["cpu_pct"], 5)))
        scale.append(("same, peak RSS", f"{mib(d['peak_rss_kib']):.1f} MiB", "<= 64 MiB", verdict(mib(d["peak_rss_kib"]), 64)))
        if "p99_ms" in d:
            scale.append(("same, lateness p99", f"{d['p99_ms']:.0f} ms", "<= 250 ms", verdict(d["p99_ms"], 250)))
    if "shared" in res:
        worst = max(i["peak_rss_kib"] for i in res["shared"]["instances"])
        scale.append((f"3 instances sharing {res['shared']['sources']} sources, RSS each (max)", f"{mib(worst):.1f} MiB", "<= 96 MiB", verdict(mib(worst), 96)))
        if all("p99_ms" in i for i in res["shared"]["instances"]):
            p99 = max(i["p99_ms"] for i in res["shared"]["instances"])
            scale.append(("same, lateness p99 (worst)", f"{p99:.0f} ms", "<= 250 ms", verdict(p99, 250)))
    if "big" in res:
        x = res["big"]
        worst = max(i["peak_rss_kib"] for i in x["instances"])
        tag = f"{x['instances_n']} instances sharing {x['sources']} sources at {x['interval_s']:.0f} s"
        scale.append((f"{tag}, RSS each (max)", f"{mib(worst):.1f} MiB", "<= 128 MiB", verdict(mib(worst), 128)))
        if any("p99_ms" in i for i in x["instances"]):
            p99 = max(i["p99_ms"] for i in x["instances"] if "p99_ms" in i)
            scale.append(("same, lateness p99 (worst instance)", f"{p99:.0f} ms", "<= 1000 ms", verdict(p99, 1000)))
        for t in x["takeovers"]:
            gap = t["gap_intervals_max"] if t["complete"] else float("inf")
            scale.append((f"same, takeover after kill -9 ({t['sources']} sources)", f"{gap:.2f} intervals", "< 2 intervals", verdict(gap, 2)))
        dups = x["duplicate_new_events_in_state"] and int(x["duplicate_new_events_in_state"]) or 0
        dups += x["hook"]["duplicate_ids"] + x["hook"]["duplicate_items"]
        scale.append(("same, duplicates (state + webhook)", str(dups), "0", "met" if dups == 0 else "MISSED"))
    if "per_source" in res:
        for r in res["per_source"][1:]:
            scale.append((f"memory per held source, {r['sources']:,} sources", f"{r['kib_per_source']:.2f} KiB", "<= 3 KiB", verdict(r["kib_per_source"], 3)))
    if "cold" in res:
        scale.append(("`tidings sources`, 10,000 sources, cold", f"{res['cold']['median_ms']:.0f} ms", "<= 100 ms", verdict(res["cold"]["median_ms"], 100)))
    out = []
    for title, rows in (("figure (issue 31, native)", native), ("figure (issue 33, 100,000 sources)", scale)):
        if not rows:
            continue
        head = (title, "value", "goal", "met / missed by")
        w = [max(len(r[i]) for r in rows + [head]) for i in range(4)]
        fmt = lambda r: f"{r[0]:<{w[0]}} | {r[1]:<{w[1]}} | {r[2]:<{w[2]}} | {r[3]}"
        out += [fmt(head), "-+-".join("-" * n for n in w), *map(fmt, rows), ""]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, ".build/release/tidings"))
    ap.add_argument("--bench-bin", default=os.path.join(ROOT, ".build/release/tidings-bench"))
    ap.add_argument("--install-bin", default=os.path.join(ROOT, ".build/install/tidings"),
                    help="the binary `make install` installs (`make release`), for benchmark 7")
    args = ap.parse_args()
    args.bin, args.bench_bin, args.install_bin = map(os.path.abspath, (args.bin, args.bench_bin, args.install_bin))
    only = set(env_list("BENCH_ONLY", "1 2 3 4 5 7 8 9"))
    ns = env_list("BENCH_N", "200 1000")
    runs = int(os.environ.get("BENCH_RUNS", "7"))
    dn = int(os.environ.get("BENCH_DAEMON_SOURCES", "10000"))
    dsec = float(os.environ.get("BENCH_DAEMON_SECONDS", "135"))
    sn = int(os.environ.get("BENCH_SHARED_SOURCES", "30000"))
    ssec = float(os.environ.get("BENCH_SHARED_SECONDS", "180"))
    bn = int(os.environ.get("BENCH_BIG_SOURCES", "100000"))
    bk = int(os.environ.get("BENCH_BIG_INSTANCES", "5"))
    bsec = float(os.environ.get("BENCH_BIG_SECONDS", "600"))
    bint = float(os.environ.get("BENCH_BIG_INTERVAL", "300"))
    psizes = env_list("BENCH_PER_SOURCE", "1000 10000 100000")
    psec = float(os.environ.get("BENCH_PER_SOURCE_SECONDS", "20"))

    work = tempfile.mkdtemp(prefix="tidings-bench-")
    res = {"machine": machine(), "loadavg": " ".join(open("/proc/loadavg").read().split()[:3]), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    # (Benchmarks 3 and 7 alone need no nginx.)
    nginx = Nginx(work, max(ns + [dn] + ([sn] if 5 in only else []) + ([bn] if 8 in only else []) + (psizes if 9 in only else []))) \
        if only & {1, 2, 4, 5, 6, 8, 9} else None
    try:
        if nginx:
            nginx.start()
            log(f"nginx on 127.0.0.1:{nginx.port}, work dir {work}")
        urlwatch = make_venv(work) if (1 in only or 6 in only) else None
        if 1 in only:
            res["check"] = [bench_check_vs_urlwatch(args, work, nginx, urlwatch, n, runs) for n in ns]
        if 6 in only:
            res["watch"] = bench_watch(args, work, nginx, urlwatch, runs)
        targs = None
        if 2 in only or 4 in only:
            res["daemon"], targs = bench_daemon(args, work, nginx, dn, dsec)
            if 2 not in only:
                del res["daemon"]
        if 3 in only:
            res["dedupe"] = bench_dedupe(args, work)
        if 4 in only:
            res["cold"] = bench_cold_start(args, work, targs)
        if 5 in only:
            res["shared"] = bench_shared(args, work, nginx, sn, ssec)
        if 7 in only:
            res["footprint"] = bench_footprint(args, work)
        if 9 in only:
            res["per_source"] = bench_per_source(args, work, nginx, psizes, psec)
        if 8 in only:
            res["big"] = bench_big(args, work, nginx, bn, bk, bsec, bint)
    finally:
        if nginx:
            nginx.stop()
        if os.environ.get("BENCH_KEEP"):
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(ROOT, "bench-results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench-results", "latest.json"), "w") as f:
        json.dump(res, f, indent=2)
    out = table(res)
    with open(os.path.join(ROOT, "bench-results", "latest.txt"), "w") as f:
        f.write(out + "\n")
    print(out)


if __name__ == "__main__":
    main()
