"""The command line itself: options before the subcommand, bare `tidings`, and read-only
commands that work when the daemon's secrets cannot be read (issue 9, items 21 and 22)."""
from __future__ import annotations

import subprocess

from conftest import Result, binary

PROBE = "#!/bin/sh\necho '{\"key\":\"k\",\"title\":\"t\"}'\n"


def raw(t, *args) -> Result:
    """Runs the binary with exactly these arguments (no --config/--state-dir appended)."""
    return Result(subprocess.run([binary(), *args], capture_output=True, text=True, timeout=60, env=t.env))


def test_common_options_before_the_subcommand(tidings):
    tidings.write_config('[sinks.console]\ntype = "stdout"\n')
    tidings.write_plugin("probe", PROBE, mode=0o700)
    cfg, state = str(tidings.config), str(tidings.state)

    r = raw(tidings, "--config", cfg, "--state-dir", state, "-q", "check", "--json")
    assert r.code == 0, r
    assert (tidings.state / "tidings.sqlite").exists(), "--state-dir before the subcommand is used"
    assert "baseline" not in r.stderr, "-q before the subcommand is used"

    r = raw(tidings, "--config", cfg, "sources", "--state-dir", state)   # mixed: before and after
    assert r.code == 0, r
    assert r.stdout.startswith("probe") and "last ok: " in r.stdout and "never" not in r.stdout, r

    for args in (["--help"], ["sources", "--help"]):
        h = raw(tidings, *args)
        assert h.code == 0 and "--config <path>" in h.stdout and "--state-dir <dir>" in h.stdout, h


def test_version_alone_answers_as_the_parser_does(tidings):
    # `--version` alone skips the argument parser (start-up memory, issue 31); with any other
    # argument the parser answers it. Both print the same line on stdout and exit 0.
    alone = raw(tidings, "--version")
    parsed = raw(tidings, "--version", "--config", str(tidings.config))
    assert alone.code == parsed.code == 0, (alone, parsed)
    assert alone.stdout == parsed.stdout and alone.stdout.count("\n") == 1 and alone.stdout.strip(), (alone, parsed)
    assert alone.stderr == parsed.stderr == "", (alone, parsed)


def test_bare_tidings_prints_usage_on_stderr_and_exits_64(tidings):
    for args in ([], ["--config", str(tidings.config)]):
        r = raw(tidings, *args)
        assert r.code == 64, r
        assert r.stdout == ""
        assert "USAGE: tidings" in r.stderr and "SUBCOMMANDS" in r.stderr, r


def test_read_only_commands_work_when_secrets_cannot_be_read(tidings):
    """E.g. `tidings sources` run by a user who cannot read the daemon's secret files."""
    tidings.write_config("""
        [sinks.hook]
        type = "webhook"
        url = "http://127.0.0.1:9/hook"
        secret_env = "TIDINGS_TEST_UNSET_WEBHOOK_SECRET"

        [sources.sd]
        provider = "sportdate"
        base_url = "http://127.0.0.1:9"
        email = "me@example.com"
        password_file = "/nonexistent/sportdate.pass"
    """)
    for args in (["sources"], ["history"], ["outbox"], ["items"], ["notices"], ["silence", "list"], ["sources", "--json"]):
        r = tidings.run(*args)
        assert r.code == 0, (args, r)
        assert f"warning: {tidings.config}:11: source \"sd\": cannot read secret file /nonexistent/sportdate.pass" in r.stderr, r
        assert "TIDINGS_TEST_UNSET_WEBHOOK_SECRET" in r.stderr and "(ignored: this command only reads the state)" in r.stderr
    assert tidings.run("sources").stdout.startswith("sd ")
    # What polls or delivers still needs its secrets.
    for args in (["check"], ["config", "check"], ["sinks", "test", "hook"]):
        r = tidings.run(*args)
        assert r.code == 78 and "cannot read secret file" in r.stderr, (args, r)
