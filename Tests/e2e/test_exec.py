"""Exec plugins in plugins.d: JSON lines and the Nagios convention."""


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
           ("changed", "CRITICAL - down", "critical", "CRITICAL", "t=9")
    state.write_text("0")
    (e,) = tidings.check().events
    assert (e["event"], e["title"], e["severity"]) == ("changed", "OK - fine", "info")


def test_disabled_suffixes_and_subfolders_are_not_scanned(tidings):
    (tidings.plugins / "bin").mkdir()
    script(tidings, "bin/helper", "exit 1\n")
    script(tidings, "old~", "exit 1\n")
    script(tidings, "off.disabled", "exit 1\n")
    r = tidings.run("config", "check")
    assert r.code == 0 and "OK: 0 sources" in r.stdout
