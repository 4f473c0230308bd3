"""A mistyped URL never prints its password (issue 30, item 3).

A URL's user info is split off when the option is read, its password registered with the
scrubber before the value is validated, and every error about the value quotes it with the
password masked: in `config check` and on `tidings run`'s stderr (the journal).
"""
from __future__ import annotations

import pytest

PASSWORD = "typo-Pa55word-7781"


def assert_refused_without_password(tidings, r, line):
    assert r.code == 78, r
    assert f":{line}:" in r.stderr, r
    assert "‹redacted›" in r.stderr, r
    for form in (PASSWORD, "Pa55word", "typo-Pa55%77ord"):
        assert form not in r.stdout + r.stderr, r


SOURCES = {
    "http-json": 'url = "htps://u:{p}@127.0.0.1/x"',
    "feed": 'url = "htps://u:{p}@127.0.0.1/x"',
    "page": 'url = "htps://u:{p}@127.0.0.1/x"',
    "imap": 'url = "imapx://u:{p}@127.0.0.1/INBOX"\nusername = "u"\npassword = "imap-pw-1234"',
    "alertmanager": 'base_url = "htp://u:{p}@127.0.0.1:9093"',
}


@pytest.mark.parametrize("provider", sorted(SOURCES))
def test_a_source_url_typo_quotes_it_without_the_password(tidings, provider):
    options = SOURCES[provider].format(p=PASSWORD)
    tidings.write_plugin("s.toml", f'provider = "{provider}"\n{options}\n')
    r = tidings.run("config", "check")
    assert_refused_without_password(tidings, r, 2)
    assert "htps://u:‹redacted›@127.0.0.1/x" in r.stderr or provider in ("imap", "alertmanager"), r


SINKS = {
    "webhook": 'url = "htps://u:{p}@127.0.0.1/hook"',
    "ntfy": 'url = "htps://u:{p}@127.0.0.1"\ntopic = "t"',
    "gotify": 'url = "htps://u:{p}@127.0.0.1"\ntoken = "gotify-token-1"',
    "matrix": 'homeserver = "htps://u:{p}@127.0.0.1"\nroom = "!r:x"\naccess_token = "matrix-token-1"',
}


@pytest.mark.parametrize("sink", sorted(SINKS))
def test_a_sink_url_typo_quotes_it_without_the_password(tidings, sink):
    options = SINKS[sink].format(p=PASSWORD)
    tidings.write_config(f'[sinks.s]\ntype = "{sink}"\n{options}\n')
    r = tidings.run("config", "check")
    assert_refused_without_password(tidings, r, 3)


def test_a_state_url_typo_quotes_it_without_the_password_on_run_too(tidings):
    tidings.write_config(f'[state]\nurl = "postgre://u:{PASSWORD}@127.0.0.1/tidings"\n')
    r = tidings.run("config", "check")
    assert_refused_without_password(tidings, r, 2)
    assert "postgre://u:‹redacted›@127.0.0.1/tidings" in r.stderr, r
    r = tidings.run("run", timeout=20)
    assert_refused_without_password(tidings, r, 2)


def test_a_partly_percent_encoded_password_in_a_typo_is_masked_as_written(tidings):
    tidings.write_plugin("s.toml", 'provider = "feed"\nurl = "htps://u:typo-Pa55%77ord-7781@127.0.0.1/x"\n')
    r = tidings.run("config", "check")
    assert_refused_without_password(tidings, r, 2)
    r = tidings.run("run", timeout=20)
    assert_refused_without_password(tidings, r, 2)
