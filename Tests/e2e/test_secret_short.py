"""Secrets the scrubber could miss (issue 30, item 4).

- A secret shorter than 4 characters cannot be scrubbed (it would redact ordinary words): it is
  refused at load, in every form, at the line it is given on.
- A feed's warning names its URL without the user name or password.
"""
from __future__ import annotations

import pytest

from fakes.hostile import HostilePair

SHORT = "pw!"


@pytest.mark.parametrize("form", ["inline", "file", "env", "credential", "url"])
def test_a_secret_shorter_than_4_characters_is_refused_at_its_line(tidings, form):
    path = tidings.write_secret("short", SHORT)
    option = {
        "inline": f'X-Api-Key = "{SHORT}"',
        "file": f'X-Api-Key_file = "{path}"',
        "env": 'X-Api-Key_env = "SHORT_KEY"',
        "credential": 'X-Api-Key_credential = "short"',
        "url": None,
    }[form]
    url = "http://u:pw!@127.0.0.1:9/x" if form == "url" else "http://127.0.0.1:9/x"
    headers = f"headers = {{ Accept = \"application/json\", {option} }}" if option else ""
    tidings.write_plugin("api.toml", f'provider = "http-json"\nurl = "{url}"\n{headers}\n')
    r = tidings.run("config", "check", env={"SHORT_KEY": SHORT, "CREDENTIALS_DIRECTORY": str(path.parent)})
    assert r.code == 78, r
    line = 2 if form == "url" else 3
    assert f"api.toml:{line}:" in r.stderr and "shorter than 4 characters" in r.stderr, r
    assert "cannot be kept out of logs and events" in r.stderr, r


def test_a_secret_of_4_characters_is_accepted(tidings):
    path = tidings.write_secret("four", "pw!x")
    tidings.write_plugin("api.toml", f'provider = "http-json"\nurl = "http://127.0.0.1:9/x"\nheaders = {{ X-Api-Key_file = "{path}" }}\n')
    r = tidings.run("config", "check")
    assert r.code == 0, r


def test_a_feed_warning_names_its_url_without_user_or_password(tidings):
    with HostilePair() as pair:
        pair.script("/feed", raw=b"<rss><channel><item><title>a</title><guid>1</guid></item><item><title>b",
                    headers={"Content-Type": "application/rss+xml"})
        url = pair.main.url.replace("http://", "http://feeduser-4471:feed-pass-4471@") + "/feed"
        tidings.write_plugin("news.toml", f'provider = "feed"\nurl = "{url}"\n')
        r = tidings.check()
        assert r.code == 0, r
        assert f"the feed at {pair.main.url}/feed is not well-formed XML" in r.stderr, r
        assert "feeduser-4471" not in r.stderr and "feed-pass-4471" not in r.stderr, r
        assert pair.main.requests[0].headers.get("authorization", "").startswith("Basic "), "the request had them"
