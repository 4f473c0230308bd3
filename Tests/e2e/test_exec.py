"""Exec plugins in plugins.d: JSON lines and the Nagios convention."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import wait_for


def script(tidings, name, body, mode=0o755):
    return tidings.write_plugin(name, "#!/bin/sh\n" + body, mode=mode)


def test_bare_executable_is_a_jsonl_source_run_in_plugins_dir(tidings):
    (tidings.plugins / "bin").mkdir()
    (tidings.plugins / "data.jsonl").write_text('{"key": "a", "title": "Alpha"}\n')
    script(tidings, "lister", "cat ./data.jsonl\n")
    assert tidings.check().code == 0
    (tidings.plugins / "data.jsonl").write_text(
        '{"key": "a", "title": "Alpha"}\n{"key": "b", "title": "Bravo ÆØÅ", "url": "https://x/b", "severity": "warning", "data": {"n": 2}}\n')
    r = tidings.check()
    assert r.code == 1
    (e,) = r.events
    assert (e["source"], e["provider"], e["key"], e["title"], e["url"], e["severity"], e["data"]) == \
           ("lister", "exec", "b", "Bravo ÆØÅ", "https://x/b", "warning", {"n": 2})


def test_nonzero_exit_fails_the_poll_with_stderr_reason(tidings):
    script(tidings, "broken", "echo 'cannot reach the thing' >&2\nexit 3\n")
    r = tidings.check()
    assert r.code == 2
    assert "source broken failed:" in r.stderr and "cannot reach the thing" in r.stderr


def test_bad_output_line_is_named(tidings):
    script(tidings, "garbled", "echo '{\"key\":\"a\",\"title\":\"x\"}'\necho 'not json'\n")
    r = tidings.check()
    assert r.code == 2 and "plugin output line 2" in r.stderr


def test_timeout_kills_the_plugin(tidings):
    script(tidings, "sleepy", "sleep 30\n")
    tidings.write_plugin("sleepy.toml", 'timeout = "1s"\n')
    r = tidings.check(timeout=20)
    assert r.code == 2 and "timed out after 1s" in r.stderr


def test_nagios_transitions_are_events(tidings):
    state = tidings.root / "exitcode"
    state.write_text("0")
    script(tidings, "svc", f'c=$(cat {state})\ncase $c in 0) echo "OK - fine | t=1";; 2) echo "CRITICAL - down | t=9";; esac\nexit $c\n')
    tidings.write_plugin("svc.toml", 'format = "nagios"\n')
    assert tidings.check().code == 0
    assert tidings.check().code == 0, "no transition, no event"
    state.write_text("2")
    r = tidings.check()
    assert r.code == 1, r
    (e,) = r.events
    assert (e["event"], e["title"], e["severity"], e["data"]["state"], e["data"]["perfdata"]) == \
           ("changed", "CRITICAL - down", "critical", "CRITICAL", [{"label": "t", "value": 9}])
    state.write_text("0")
    (e,) = tidings.check().events
    assert (e["event"], e["title"], e["severity"]) == ("changed", "OK - fine", "info")


def test_nagios_long_output_is_the_body_and_perfdata_is_parsed(tidings):
    """Monitoring Plugins layout: perfdata after `|` on line 1 and on the last long-text line,
    then perfdata lines. Changing numbers and text are no event; only the state is."""
    state = tidings.root / "exitcode"
    state.write_text("0")
    script(tidings, "disk", f"""\
c=$(cat {state})
case $c in
0) echo "DISK OK | /=2643MB;5948;5958;0;5968"; echo "/ 15272 MB (77%);"; echo "/boot 68 MB (69%); | /boot=68MB;88;93;0;98"; echo "'var log'=818MB;970;975;0;980";;
2) echo "DISK CRITICAL - /boot is full | /=2650MB;5948;5958;0;5968"; echo "/boot 98 MB (100%);"; echo "more detail | /boot=98MB;88;93;0;98";;
esac
exit $c
""")
    tidings.write_plugin("disk.toml", 'format = "nagios"\nnotify_existing = true\n')
    (e,) = tidings.check().events
    assert (e["title"], e["body"]) == ("DISK OK", "/ 15272 MB (77%);\n/boot 68 MB (69%);")
    assert e["data"]["perfdata"] == [
        {"label": "/", "value": 2643, "uom": "MB", "warn": "5948", "crit": "5958", "min": 0, "max": 5968},
        {"label": "/boot", "value": 68, "uom": "MB", "warn": "88", "crit": "93", "min": 0, "max": 98},
        {"label": "var log", "value": 818, "uom": "MB", "warn": "970", "crit": "975", "min": 0, "max": 980},
    ]
    state.write_text("2")
    (e,) = tidings.check().events
    assert (e["event"], e["title"], e["body"]) == ("changed", "DISK CRITICAL - /boot is full", "/boot 98 MB (100%);\nmore detail")
    assert [p["value"] for p in e["data"]["perfdata"]] == [2650, 98]
    assert tidings.check().code == 0, "same state, no event"


def test_text_format_whole_output_is_one_item_and_a_change_is_a_diff(tidings):
    """format = "text" (DESIGN §14): the output is one item; an edit is a `changed` event
    whose body is the unified diff; the same output again, or only a trailing blank line
    more, is no event; a failing exit fails the poll as jsonl does."""
    out = tidings.root / "out.txt"
    out.write_text("disk ok\n/var 40%\n/home 10%\n")
    script(tidings, "df", f"cat {out}\n")
    tidings.write_plugin("df.toml", 'format = "text"\nnotify_existing = true\n')
    (e,) = tidings.check().events
    assert (e["event"], e["provider"], e["key"], e["kind"], e["title"], e["body"]) == \
           ("new", "exec", "output", "text", "disk ok", "disk ok\n/var 40%\n/home 10%")
    assert tidings.check().code == 0, "same output, no event"
    out.write_text("disk ok\n/var 40%\n/home 10%\n\n")
    assert tidings.check().code == 0, "a trailing blank line is no change"
    out.write_text("disk ok\n/var 95%\n/home 10%\n")
    r = tidings.check()
    assert r.code == 1, r
    (e,) = r.events
    assert e["event"] == "changed"
    assert "-/var 40%" in e["body"].splitlines() and "+/var 95%" in e["body"].splitlines(), e["body"]
    assert (e["data"]["added"], e["data"]["removed"]) == (["/var 95%"], ["/var 40%"])
    script(tidings, "df", "echo 'no mount table' >&2\nexit 4\n")
    r = tidings.check()
    assert r.code == 2 and "exited with status 4" in r.stderr and "no mount table" in r.stderr


def test_unknown_format_names_the_three(tidings):
    script(tidings, "x", "true\n")
    tidings.write_plugin("x.toml", 'format = "yaml"\n')
    r = tidings.check()
    assert r.code == 78 and '"jsonl", "nagios" or "text"' in r.stderr, r


def test_disabled_suffixes_and_subfolders_are_not_scanned(tidings):
    (tidings.plugins / "bin").mkdir()
    script(tidings, "bin/helper", "exit 1\n")
    script(tidings, "old~", "exit 1\n")
    script(tidings, "off.disabled", "exit 1\n")
    r = tidings.run("config", "check")
    assert r.code == 0 and "OK: 0 sources" in r.stdout


# A plugin reads its own signal state with shell builtins only (no child in between).
SIGNAL_STATE = """\
while read -r k v; do case "$k" in SigBlk:) blk=$v;; SigIgn:) ign=$v;; esac; done < /proc/$$/status
start=$(date +%s%N); timeout 1 sleep 4; took=$(( ($(date +%s%N) - start) / 1000000 ))
line="{\\"key\\": \\"sig\\", \\"title\\": \\"state\\", \\"data\\": {\\"blk\\": \\"$blk\\", \\"ign\\": \\"$ign\\", \\"ms\\": $took}}"
echo "$line"
echo "$line" > "$0.out"
"""


def assert_clean_signal_state(data):
    assert (data["blk"], data["ign"]) == ("0000000000000000", "0000000000000000"), data
    assert data["ms"] < 2500, f"`timeout 1 sleep 4` took {data['ms']} ms inside the plugin"


def test_plugin_starts_with_clean_signals_under_check(tidings):
    script(tidings, "sigstate", SIGNAL_STATE)
    tidings.write_plugin("sigstate.toml", "notify_existing = true\n")
    r = tidings.check(timeout=30)
    assert r.code == 1, r
    (e,) = r.events
    assert_clean_signal_state(e["data"])


def test_plugin_starts_with_clean_signals_under_the_daemon(tidings):
    """`tidings run` blocks signals for its own handling: a plugin must not inherit that."""
    tidings.write_config('[sinks.console]\ntype = "stdout"\nformat = "json"\n')
    plugin = script(tidings, "sigstate", SIGNAL_STATE)
    tidings.write_plugin("sigstate.toml", 'interval = "1h"\n')
    out = plugin.parent / "sigstate.out"
    tidings.start_daemon()
    wait_for(lambda: out.exists() and out.read_text().endswith("\n"), timeout=30, what="the plugin's report")
    assert_clean_signal_state(json.loads(out.read_text())["data"])


def live_members(sid):
    """Processes (not zombies) in session or process group `sid`."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = open(f"/proc/{d}/stat").read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        state, pgid, session = fields[0], int(fields[2]), int(fields[3])
        if state not in "ZX" and sid in (pgid, session):
            found.append(int(d))
    return found


def test_timeout_kills_the_whole_group_before_check_exits(tidings):
    pidfile = tidings.root / "hung.pid"
    script(tidings, "hung", f"""\
trap '' TERM
echo $$ > {pidfile}
sleep 300 &
sh -c 'trap "" TERM; sleep 301' &
sleep 302
""")
    tidings.write_plugin("hung.toml", 'timeout = "1s"\n')
    start = time.monotonic()
    r = tidings.check(timeout=60)
    took = time.monotonic() - start
    leader = int(pidfile.read_text())
    left = live_members(leader)
    for pid in left:  # do not leave them behind when this fails (the old binary)
        os.kill(pid, signal.SIGKILL)
    assert r.code == 2 and "timed out after 1s" in r.stderr, r
    assert left == [], f"processes of the timed-out plugin still running after check exited: {left}"
    assert took < 10


def stuck_plugin(t, name="stuck"):
    """A plugin deaf to SIGTERM that leaves a child and a grandchild (deaf too) in its process
    group and then sleeps; its PID file appears once they run."""
    pidfile = t.root / f"{name}.pid"
    script(t, name, f"""\
trap '' TERM
sleep 60 &
sh -c 'trap "" TERM; sleep 61' &
echo $$ > {pidfile}.tmp && mv {pidfile}.tmp {pidfile}
sleep 62
""")
    t.write_plugin(f"{name}.toml", 'timeout = "5m"\n')
    return pidfile


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupting_check_kills_and_reaps_the_plugins_group_first(tidings, sig):
    """The plugin leads a process group of its own, which Ctrl-C at the terminal never reaches:
    check kills it (SIGTERM, then SIGKILL) and reaps it, then dies of the signal itself (status
    128+N in a shell)."""
    pidfile = stuck_plugin(tidings)
    p = subprocess.Popen(tidings.args("check", "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=tidings.env)
    leader = None
    try:
        wait_for(pidfile.exists, timeout=30, what="the plugin's start")
        leader = int(pidfile.read_text())
        start = time.monotonic()
        p.send_signal(sig)
        _, err = p.communicate(timeout=30)
        took = time.monotonic() - start
        left = live_members(leader)
    finally:
        if p.poll() is None:
            p.kill()
        for pid in live_members(leader) if leader else []:  # not left behind by the old binary
            os.kill(pid, signal.SIGKILL)
    assert left == [], f"processes of the plugin still running after check ended: {left}"
    assert p.returncode == -sig, (p.returncode, err)
    assert took < 10


def test_background_process_holding_stdout_is_not_a_timeout(tidings):
    pidfile = tidings.root / "bg.pid"
    script(tidings, "spawner", f"""\
echo '{{"key": "a", "title": "Alpha"}}'
sleep 30 &
echo $! > {pidfile}
exit 0
""")
    tidings.write_plugin("spawner.toml", 'timeout = "10s"\nnotify_existing = true\n')
    try:
        r = tidings.check(timeout=60)
    finally:
        os.kill(int(pidfile.read_text()), signal.SIGKILL)
    assert r.code == 1, r
    assert [e["key"] for e in r.events] == ["a"]
