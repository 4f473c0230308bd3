"""Header secrets on sources and sinks, and what a hostile server can make tidings print
(issue 9, item 8).

- Every header value may be `X`, `X_file`, `X_env` or `X_credential`, on http-json sources and
  on webhook sinks alike; `Authorization_env` sends `Authorization`.
- A server that echoes a credential back (in items, in an error body) never gets it printed,
  stored or forwarded: not the whole value, not its token part, not its JSON-escaped or
  percent-encoded forms.
- An inline credential-like header in a file others can read is refused with FILE:LINE.
"""
from __future__ import annotations

import json
import shutil
import tempfile
import os
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

import leaks
from fakes.hostile import HostilePair
from feed import Feed, item

# A token with characters that JSON and URLs escape.
TOKEN = 'Tok"en\\Sec/ret+pl&us!'
HEADER = "Bearer " + TOKEN
TOML_HEADER = json.dumps(HEADER)  # a TOML basic string: the same escapes


def forms(secret):
    """The forms an echo may carry: raw, JSON-escaped (and escaped again inside JSON text),
    percent-encoded (either hex case) and form-encoded."""
    escaped = json.dumps(secret)[1:-1]
    percent = quote(secret, safe="")
    return {secret, escaped, json.dumps(escaped)[1:-1], percent, percent.lower(), quote_plus(secret)}


LEAKS = forms(TOKEN) | forms(HEADER)


def assert_nothing_leaks(t, outputs):
    leaks.assert_nothing_leaks(t, outputs, LEAKS)


@pytest.fixture
def pair():
    with HostilePair() as p:
        yield p


def outputs_of(t, env, **checks):
    """Every human and JSON view a user or a script has of the state, plus the given runs."""
    out = {name: r.stdout + r.stderr for name, r in checks.items()}
    for args in [("sources",), ("sources", "--json"), ("history",), ("history", "--json"), ("outbox",), ("outbox", "--json")]:
        r = t.run(*args, env=env)
        assert r.code == 0, r
        out[" ".join(args)] = r.stdout + r.stderr
    return out


def test_a_source_whose_server_echoes_its_secret_never_prints_or_stores_it(tidings, pair):
    secret = tidings.write_secret("auth", HEADER)
    # Items are the echoed headers: titles and bodies built from every echoed form.
    pair.script("/echo", echo=True)
    tidings.write_plugin("api.toml", f"""
        provider = "http-json"
        url = "{pair.main.url}/echo"
        headers = {{ Authorization_file = "{secret}" }}
        items = "/headers"
        key = "/_key"
        title = "{{/_key}}: {{/raw}} {{/parts/1}}"
        body = "{{/json}} {{/percent}}"
        notify_existing = true
        """)
    first = tidings.check()
    assert first.code == 1, first
    assert any(e["key"] == "authorization" for e in first.events), first
    assert pair.main.requests[0].headers["authorization"] == HEADER, "the source sent its secret"

    # Now its error body echoes it (first in the body, so in the excerpt).
    pair.script("/echo", echo=True, status=500, only=["authorization"])
    second = tidings.check()
    assert second.code == 2, second

    outputs = outputs_of(tidings, {}, check=first, failed=second)
    assert "‹redacted›" in outputs["history --json"] and "HTTP 500" in outputs["sources"]
    assert_nothing_leaks(tidings, outputs)


def test_a_webhook_whose_receiver_echoes_its_secret_header_never_prints_or_stores_it(tidings, pair):
    feed = Feed(tidings)
    feed.set([item("a")])
    pair.script("/hook", echo=True, status=400, only=["authorization"])
    tidings.write_config(f"""
        [sinks.hook]
        type = "webhook"
        url = "{pair.main.url}/hook"
        headers = {{ Authorization_env = "HOOK_AUTH" }}
        """)
    env = {"HOOK_AUTH": HEADER}
    r = tidings.run("check", "--deliver", env=env)
    assert r.code == 2 and "HTTP 400" in r.stderr, r
    [post] = pair.main.requests
    assert post.headers.get("authorization") == HEADER, "the sink sent its secret header"

    outputs = outputs_of(tidings, env, check=r)
    assert "‹redacted›" in outputs["outbox --json"] and "HTTP 400" in outputs["outbox"]
    assert_nothing_leaks(tidings, outputs)


@pytest.mark.parametrize("variant", ["env", "file", "credential"])
def test_webhook_header_secrets_send_the_header_they_name(tidings, pair, variant):
    feed = Feed(tidings)
    feed.set([item("a")])
    pair.script("/hook", json={"ok": True})
    path = tidings.write_secret("hook-auth", HEADER)
    value = {"env": "HOOK_AUTH", "file": str(path), "credential": "hook-auth"}[variant]
    tidings.write_config(f"""
        [sinks.hook]
        type = "webhook"
        url = "{pair.main.url}/hook"
        headers = {{ Authorization_{variant} = "{value}", X-Team = "ops" }}
        """)
    r = tidings.run("check", "--deliver", env={"HOOK_AUTH": HEADER, "CREDENTIALS_DIRECTORY": str(path.parent)})
    assert r.code == 1, r
    [post] = pair.main.requests
    assert post.headers["authorization"] == HEADER and post.headers["x-team"] == "ops"
    assert not [h for h in post.headers if h.startswith("authorization_")], post.headers


def test_a_missing_credentials_directory_is_a_config_error_with_file_and_line(tidings):
    tidings.write_config("""
        [sinks.hook]
        type = "webhook"
        url = "http://127.0.0.1:9/hook"
        headers = { Authorization_credential = "hook-auth" }
        """)
    r = tidings.run("config", "check")
    assert r.code == 78, r
    assert f"{tidings.config}:5:" in r.stderr and "CREDENTIALS_DIRECTORY" in r.stderr, r


def test_inline_credential_headers_in_readable_files_are_refused_with_file_and_line(tidings):
    tidings.write_config(f"""
        [sinks.hook]
        type = "webhook"
        url = "http://127.0.0.1:9/hook"
        headers = {{ X-Team = "ops", Authorization = {TOML_HEADER} }}
        """, mode=0o644)
    plugin = tidings.write_plugin("api.toml", """
        provider = "http-json"
        url = "http://127.0.0.1:9/items"
        headers = { Accept = "application/json", X-Api-Key = "inline-api-key-1" }
        """, mode=0o644)
    r = tidings.run("config", "check")
    assert r.code == 78, r
    assert f"{tidings.config}:5:" in r.stderr and "inline secret 'Authorization'" in r.stderr, r
    assert f"{plugin}:4:" in r.stderr and "inline secret 'X-Api-Key'" in r.stderr, r
    assert TOKEN not in r.stderr and "inline-api-key-1" not in r.stderr

    os.chmod(tidings.config, 0o600)
    os.chmod(plugin, 0o600)
    r = tidings.run("config", "check")
    assert r.code == 0, r


def test_secret_files_that_cannot_be_used_say_why_with_file_and_line(tidings):
    """`cannot read secret file PATH` says why (issue 20, item 14): no such file, a directory,
    not a regular file; a secret file group or others can read is refused as an inline secret
    in such a file is; a placeholder still `CHANGE-ME…` is a warning. All reported at once."""
    secrets = tidings.root / "secrets"
    secrets.mkdir()
    (secrets / "a-directory").mkdir()
    os.mkfifo(secrets / "a-fifo")
    readable = secrets / "readable"
    readable.write_text("s3cret-readable-value\n")
    os.chmod(readable, 0o644)
    placeholder = tidings.write_secret("placeholder", "CHANGE-ME-ops-token")
    hooks = "".join(f"""
        [sinks.{name}]
        type = "webhook"
        url = "http://127.0.0.1:9/hook"
        headers = {{ Authorization_file = "{secrets / name}" }}
        """ for name in ["missing", "a-directory", "a-fifo", "readable", "placeholder"])
    tidings.write_config(hooks)
    r = tidings.run("config", "check", timeout=20)
    assert r.code == 78, r
    line = {name: 5 * i + 5 for i, name in enumerate(["missing", "a-directory", "a-fifo", "readable", "placeholder"])}
    errors = [l.removeprefix("tidings: ") for l in r.stderr.splitlines() if str(tidings.config) in l]
    def reported(name, text):
        return any(f"{tidings.config}:{line[name]}:" in l and text in l for l in errors)
    assert reported("missing", f"cannot read secret file {secrets / 'missing'}: no such file"), r.stderr
    assert reported("a-directory", "it is a directory"), r.stderr
    assert reported("a-fifo", "it is not a regular file"), r.stderr
    assert reported("readable", f"is readable by group or others (mode 644): chmod 600 {readable}"), r.stderr
    assert reported("placeholder", "still holds the example's placeholder (CHANGE-ME…)"), r.stderr
    assert "s3cret-readable-value" not in r.stderr and "CHANGE-ME-ops-token" not in r.stderr

    # Fixed but the placeholder: valid, with its warning.
    tidings.write_config(f"""
        [sinks.placeholder]
        type = "webhook"
        url = "http://127.0.0.1:9/hook"
        headers = {{ Authorization_file = "{placeholder}" }}
        """)
    r = tidings.run("config", "check")
    assert r.code == 0, r
    assert f"{tidings.config}:5:" in r.stderr and "CHANGE-ME" in r.stderr and "warning" in r.stderr, r


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to run tidings as another user")
def test_a_secret_file_the_user_may_not_read_says_permission_denied(tmp_path_factory):
    """The one reason root cannot meet by itself: tidings runs as nobody, the secret is root's."""
    import subprocess
    from conftest import binary
    root = Path(tempfile.mkdtemp(prefix="tidings-e2e-perm-"))
    try:
        os.chmod(root, 0o755)
        secret = root / "token"
        secret.write_text("root-only-token\n")
        os.chmod(secret, 0o600)
        config = root / "tidings.toml"
        config.write_text(f'[sinks.hook]\ntype = "webhook"\nurl = "http://127.0.0.1:9/hook"\n'
                          f'headers = {{ Authorization_file = "{secret}" }}\n')
        os.chmod(config, 0o644)
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", binary(), "config", "check",
                            "--config", str(config), "--state-dir", str(root / "state")],
                           capture_output=True, text=True, timeout=30, env={"PATH": os.environ["PATH"], "HOME": str(root)})
        assert r.returncode == 78, r
        assert f"{config}:4:" in r.stderr and f"cannot read secret file {secret}: permission denied" in r.stderr, r.stderr
    finally:
        shutil.rmtree(root)


def test_a_placeholder_secret_is_a_warning_only_where_it_is_used(tidings):
    """The example's `CHANGE-ME…` is worth a warning on an enabled source (it will be sent and
    refused), not on a disabled one, which is what the shipped examples are."""
    secret = tidings.write_secret("password", "CHANGE-ME-sportdate-password")
    for enabled, warned in [("false", False), ("true", True)]:
        tidings.write_plugin("sd.toml", f"""
            enabled = {enabled}
            provider = "sportdate"
            base_url = "http://127.0.0.1:9"
            email = "me@example.com"
            password_file = "{secret}"
            """)
        r = tidings.run("config", "check")
        assert r.code == 0, r
        assert ("still holds the example's placeholder" in r.stderr) == warned, (enabled, r.stderr)
