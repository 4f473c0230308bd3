"""Configuration errors: exit 78 and FILE:LINE: message."""
import os


def test_config_check_ok(tidings):
    tidings.write_config("""
        [sinks.console]
        type = "stdout"
    """)
    r = tidings.run("config", "check")
    assert r.code == 0, r
    assert "OK: 0 sources" in r.stdout


def test_errors_name_file_and_line_and_exit_78(tidings):
    tidings.write_config("""
        [defaults]
        interval = "5 minutes"

        [sinks.console]
        type = "stdout"
        colour = true
    """)
    r = tidings.run("config", "check")
    assert r.code == 78, r
    lines = r.stderr.strip().splitlines()
    assert f"{tidings.config}:3: config 'defaults': 'interval': invalid duration" in lines[0]
    assert f"{tidings.config}:7: sink \"console\": unknown key 'colour'" in r.stderr
    # Every command refuses a broken config the same way.
    assert tidings.check().code == 78


def test_plugin_file_errors_name_the_plugin_file(tidings):
    p = tidings.write_plugin("api.toml", """
        provider = "http-json"
        url = "ftp://example.com/"
    """)
    r = tidings.run("config", "check")
    assert r.code == 78
    assert f"{p}:3: source \"api\": 'url' must be an http(s) URL" in r.stderr


def test_syntax_error(tidings):
    tidings.write_config('plugins_dir = "x\n')
    r = tidings.run("config", "check")
    assert r.code == 78 and f"{tidings.config}:1: TOML syntax" in r.stderr


def test_inline_secret_in_world_readable_file_is_refused(tidings):
    tidings.write_config("""
        [sources.api]
        provider = "http-json"
        url = "http://127.0.0.1:1/"
        headers = { Authorization = "Bearer abcdefgh12345" }
    """, mode=0o644)
    r = tidings.run("config", "check")
    assert r.code == 78
    assert f"{tidings.config}:5:" in r.stderr and "readable by group or others" in r.stderr
    assert "abcdefgh12345" not in r.stderr


def test_group_writable_exec_plugin_is_refused(tidings):
    p = tidings.write_plugin("probe", "#!/bin/sh\necho\n", mode=0o775)
    r = tidings.run("config", "check")
    assert r.code == 78 and f"{p}: plugin is writable by group or others" in r.stderr


def test_missing_config_file(tidings):
    os.remove(tidings.config)
    r = tidings.run("config", "check")
    assert r.code == 78 and "cannot read config file" in r.stderr


def test_usage_error_exits_64(tidings):
    r = tidings.run("check", "--no-such-flag")
    assert r.code == 64
