#!/usr/bin/env python3
"""Issue 33: the memory of sources a daemon does NOT hold, where daemons share a PostgreSQL state.

One daemon on a private PostgreSQL with N plugins.d sources (benchmark 9's http-json sources)
whose leases are all held by another, live instance: a row in `instance` and in `lease` that
never expire (the other instance is not a process; nothing else changes), so the daemon holds
none of them and polls nothing. RSS after `--seconds` idle, for N = 0 and each size; the
difference over N is the cost of a source not held. Also the anonymous part of the RSS and
the daemon's CPU seconds until then (the load's, as it polls nothing). UNHELD_PROBE: a shell
command run at the measurement, `{pid}` the daemon's (a gdb call of malloc_stats, which
writes to the daemon's log).

    python3 bench/unheld.py --bin .build/install/tidings --sizes 10000 30000 [--seconds 40] [--polled] [--cold]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import bench  # noqa: E402
from bench import postgres  # noqa: E402


class NoServer:
    """The sources' URLs: never requested (this daemon polls none of them)."""

    def url(self, i):
        return f"http://127.0.0.1:9/s/{i}.json"


def idle_rss(binary, pg, work, n, seconds, polled=False, cold=False):
    db = pg.create_database(f"unheld{n}")
    d = os.path.join(work, f"n{n}")
    targs = bench.tidings_config(d, NoServer(), n, interval="300s")
    with open(os.path.join(d, "tidings.toml"), "a") as f:
        f.write(db.state_toml())
    # The schema, then every lease held by a live instance that is not this one.
    subprocess.run([binary, "outbox"] + targs, check=False, capture_output=True)
    far = time.time() + 30 * 86400
    db.query(f"INSERT INTO instance(id, host, pid, started_at, seen_at) VALUES ('other', 'elsewhere', 1, {time.time()}, {far})")
    if n:
        db.query(f"INSERT INTO lease(name, owner, expires_at, length, taken_at) SELECT 'source:s' || lpad(i::text, 5, '0'), "
                 f"'other', {far}, 300, {time.time()} FROM generate_series(0, {n - 1}) AS i")
    if n and polled:
        # As after benchmark 8's baseline check: every source has its row (polled once, not failing).
        db.query(f"INSERT INTO source_state(source, provider, last_poll, last_success, baseline_at, next_due) SELECT "
                 f"'s' || lpad(i::text, 5, '0'), 'http-json', {time.time()}, {time.time()}, {time.time()}, {far} "
                 f"FROM generate_series(0, {n - 1}) AS i")
    if cold:  # the parse cache the `outbox` run above wrote: the daemon parses every file, and writes it
        for f in os.listdir(os.path.join(d, "state")) if os.path.isdir(os.path.join(d, "state")) else []:
            if f.startswith("config-cache-"):
                os.unlink(os.path.join(d, "state", f))
    log = os.path.join(d, "daemon.log")
    with open(log, "w") as lf:
        # UNHELD_WRAP: a command to run the daemon under (a heap profiler); it is then killed,
        # so the profile shows what was allocated at the measurement.
        wrap = os.environ.get("UNHELD_WRAP", "").split()
        p = subprocess.Popen(wrap + [binary, "run"] + targs, stdout=subprocess.DEVNULL, stderr=lf)
    try:
        time.sleep(seconds)
        if p.poll() is not None:
            raise RuntimeError(f"daemon exited; see {log}")
        rss, peak = bench.proc_status(p.pid, "VmRSS"), bench.proc_status(p.pid, "VmHWM")
        cpu = bench.proc_cpu(p.pid) if not wrap else None
        anon = bench.rollup(p.pid, "Anonymous") if not wrap else None
        if os.environ.get("UNHELD_PROBE"):  # e.g. gdb -p {pid} -batch -ex 'call (void)malloc_stats()'
            subprocess.run(os.environ["UNHELD_PROBE"].replace("{pid}", str(p.pid)), shell=True, check=False,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
            for line in open(log):  # malloc_stats' lines, in the daemon's log
                if line.startswith(("Arena", "system bytes", "in use bytes", "Total (incl. mmap)", "max mmap")):
                    print(f"  {n}: {line.rstrip()}", file=sys.stderr)
        if os.environ.get("UNHELD_SMAPS"):  # where the RSS is, mapping by mapping
            with open(f"/proc/{p.pid}/smaps") as f, open(f"{os.environ['UNHELD_SMAPS']}.{n}", "w") as out:
                out.write(f.read())
    finally:
        if wrap:
            # Kill the daemon itself (not the profiler, which then writes its file out).
            for child in subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split():
                with open(f"/proc/{child}/cmdline", "rb") as f:
                    if f.read().split(b"\0")[0] == binary.encode():
                        os.kill(int(child), 9)
            p.wait()
        else:
            bench.stop(p)
    held = [line for line in open(log) if "leases: polling" in line]
    owned = db.scalar("SELECT count(*) FROM lease WHERE owner <> 'other'")
    return {"sources": n, "rss_kib": rss, "peak_rss_kib": peak, "anon_kib": anon, "cpu_s": cpu, "held_by_it": owned, "lease_line": held[-1].strip() if held else None}


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--bin", required=True)
    a.add_argument("--sizes", type=int, nargs="+", default=[10000, 30000])
    a.add_argument("--seconds", type=float, default=40)
    a.add_argument("--cold", action="store_true", help="no parse cache when the daemon starts")
    a.add_argument("--polled", action="store_true", help="every source has a source_state row (as after a baseline check)")
    args = a.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="tidings-unheld-") as work, postgres.PostgresServer() as pg:
        for n in [0] + args.sizes:
            r = idle_rss(os.path.abspath(args.bin), pg, work, n, args.seconds, args.polled, args.cold)
            if rows:
                r["kib_per_source"] = (r["rss_kib"] - rows[0]["rss_kib"]) / n
            rows.append(r)
            print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
