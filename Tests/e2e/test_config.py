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


def test_a_duration_of_ten_years_names_the_limit_at_its_line(tidings):
    """Issue 30 item 18: 3650 days or more was "expected a number and a unit"."""
    tidings.write_config("""
        [defaults]
        interval = "5m"
        max_backoff = "522w"

        [sinks.console]
        type = "stdout"
    """)
    r = tidings.run("config", "check")
    assert r.code == 78, r
    assert (f"{tidings.config}:4: config 'defaults': 'max_backoff': invalid duration \"522w\": "
            "durations must be shorter than 3650d (10 years)") in r.stderr, r


def test_plugin_file_errors_name_the_plugin_file(tidings):
    p = tidings.write_plugin("api.toml", """
        provider = "http-json"
        url = "ftp://example.com/"
    """)
    r = tidings.run("config", "check")
    assert r.code == 78
    assert f"{p}:3: source \"api\": 'url' must be an http:// or https:// URL" in r.stderr


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


def test_config_check_reports_every_error(tidings):
    """Not only the first: every unknown key of a table, every plugin after a broken one, and a
    route that matches a source (or provider) that does not exist, each with FILE:LINE."""
    tidings.write_config("""
        [sinks.console]
        type = "stdout"
        colour = true
        formatt = "json"

        [[routes]]
        match = { source = "helpdsk" }
        sinks = ["console"]

        [[routes]]
        match = { provider = "alert-manager" }
        sinks = ["console"]
    """)
    broken = tidings.write_plugin("broken.toml", 'provider = "http-json"\nurl = "http://127.0.0.1:9/\n')
    typo = tidings.write_plugin("helpdesk.toml", 'provider = "http-json"\nurl = "http://127.0.0.1:9/"\nitmes = "/x"\n')
    r = tidings.run("config", "check")
    assert r.code == 78, r
    c = tidings.config
    for expected in [f"{c}:4: sink \"console\": unknown key 'colour'",
                     f"{c}:5: sink \"console\": unknown key 'formatt'",
                     f"{c}:8: route #1: match names no configured source 'helpdsk' (configured: helpdesk)",
                     f"{c}:12: route #2: match names no provider 'alert-manager'",
                     f"{broken}:2: TOML syntax",
                     f"{typo}:3: source \"helpdesk\": unknown key 'itmes'"]:
        assert expected in r.stderr, f"missing {expected!r} in\n{r.stderr}"


def test_a_config_without_sinks_is_reported_by_config_check_and_at_daemon_start(tidings):
    tidings.write_plugin("probe", "#!/bin/sh\necho '{\"key\":\"k\",\"title\":\"t\"}'\n", mode=0o700)
    r = tidings.run("config", "check")
    assert r.code == 0, r
    assert "warning: " in r.stderr and "no sinks configured" in r.stderr, r.stderr

    from conftest import read_log, wait_for
    d = tidings.start_daemon()
    wait_for(lambda: "starting" in read_log(d), what="daemon start")
    d.send_signal(15)
    assert d.wait(timeout=20) == 0
    assert "no sinks configured: `tidings run` records events but delivers them nowhere" in read_log(d)


def test_config_check_poll_warns_when_the_key_pointer_matches_no_item(tidings):
    from fakes.json_api import JSONAPI
    from fakes.server import FakeServer
    with FakeServer(JSONAPI, {"items": [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]}) as api, \
         FakeServer(JSONAPI, {"status": 500}) as down:
        tidings.write_config('[sinks.console]\ntype = "stdout"\n')
        for name, url, key in [("good", api.url, "/id"), ("typo", api.url, "/uid"), ("down", down.url, "/id")]:
            tidings.write_plugin(f"{name}.toml", f"""
                provider = "http-json"
                url = "{url}/items"
                items = "/items"
                key = "{key}"
                timeout = "2s"
            """)
        r = tidings.run("config", "check", "--poll", "good", "typo")
        assert r.code == 0, r
        assert "source good: polled, 2 items" in r.stdout and "source typo: polled, 2 items" in r.stdout, r
        warnings = [l for l in r.stderr.splitlines() if "'key' resolved in none of the 2 items" in l]
        assert len(warnings) == 1 and "source=typo" in warnings[0], r.stderr
        assert not tidings.state.exists(), "a sample poll records nothing"

        r = tidings.run("config", "check", "--poll")
        assert r.code == 2, r
        assert "source down: sample poll failed: HTTP 500" in r.stderr, r.stderr


def test_a_poll_warns_once_when_the_key_pointer_matches_no_item(tidings):
    from conftest import read_log, wait_for
    from fakes.json_api import JSONAPI
    from fakes.server import FakeServer
    with FakeServer(JSONAPI, {"items": [{"id": 1, "name": "a"}]}) as api:
        tidings.write_config('[sinks.console]\ntype = "stdout"\n')
        tidings.write_plugin("typo.toml", f"""
            provider = "http-json"
            url = "{api.url}/items"
            items = "/items"
            key = "/uid"
            interval = "1s"
            jitter = 0.0
        """)
        d = tidings.start_daemon()
        wait_for(lambda: len(api.requests) >= 3, timeout=30, what="three polls")
        d.send_signal(15)
        assert d.wait(timeout=20) == 0
        assert read_log(d).count("'key' resolved in none of the 1 items") == 1, read_log(d)
