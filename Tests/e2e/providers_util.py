"""Helpers shared by the provider end-to-end tests."""
from __future__ import annotations

from pathlib import Path


def assert_no_secrets(t, results, secrets):
    """No secret value in any stdout/stderr, or anywhere in the state directory (DB, WAL)."""
    for r in results:
        for s in secrets:
            assert s not in r.stdout, f"secret leaked on stdout: {r!r}"
            assert s not in r.stderr, f"secret leaked on stderr: {r!r}"
    for f in Path(t.state).rglob("*"):
        if f.is_file():
            blob = f.read_bytes()
            for s in secrets:
                assert s.encode() not in blob, f"secret leaked into {f}"


def items_events(result):
    """Events about items (not source health)."""
    return [e for e in result.events if e["kind"] != "source"]


def by_key(events):
    return {(e["event"], e["key"]): e for e in events}


def cpu_seconds(pid):
    """User + system CPU time a process has used so far (/proc/PID/stat, every thread)."""
    import os
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def assert_poll_stops_using_cpu(t, source_name, failure, window=6.0, max_after=1.0, max_total=10.0):
    """Runs the daemon until the source's first poll fails with a line containing one of
    `failure`, then checks that the daemon stops using CPU: at most `max_after` seconds of CPU
    in the next `window` seconds (a parser left running past the timeout keeps a core busy),
    and at most `max_total` seconds of CPU in all (the source's timeout is 2 s)."""
    import time
    from conftest import wait_for
    d = t.start_daemon()
    try:
        def failed():
            log = d.log_path.read_text(errors="replace")
            return [l for l in log.splitlines() if source_name in l and "poll failed" in l]
        try:
            lines = wait_for(failed, timeout=90, what=f"the first poll of {source_name} to fail")
        except AssertionError:
            raise AssertionError(f"no failed poll of {source_name} in 90s; the log:\n" + d.log_path.read_text(errors="replace"))
        assert any(f in lines[0] for f in failure), lines[0]
        before = cpu_seconds(d.pid)
        time.sleep(window)
        after = cpu_seconds(d.pid)
        print(f"{source_name}: {before:.2f}s of CPU until the poll failed, {after - before:.2f}s in the {window:.0f}s after")
        assert after - before <= max_after, (
            f"the daemon used {after - before:.1f}s of CPU in the {window:.0f}s after the poll failed: {lines[0]}")
        assert after <= max_total, f"one poll with a 2s timeout cost {after:.1f}s of CPU"
        assert d.poll() is None, "the daemon is still running"
    finally:
        t.stop_all()
    return lines[0]
