"""Message templates through the real binary: a webhook `body_template` (a Microsoft Teams
MessageCard) signed over exactly what is sent, stdout templates, `sinks test` showing what the
templates render, and broken templates as config errors at their lines."""
from __future__ import annotations

import base64
import json
import os

import pytest

from fakes.server import FakeServer
from fakes.session_bus import SessionBus, available as session_bus_missing
from fakes.webhook_receiver import WebhookReceiver, receiver_state, verify
from feed import Feed, item

SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()
TOKEN = "s3cr3t-header-token-4711"

# The README's Microsoft Teams example, verbatim in spirit: `{{x}}` is escaped for inside a JSON
# string because the content type is JSON.
TEAMS = '''
    body_template = """
    {
      "@type": "MessageCard",
      "@context": "https://schema.org/extensions",
      "summary": "{{title}}",
      "themeColor": "{{#data.color}}{{data.color}}{{/data.color}}{{^data.color}}0076D7{{/data.color}}",
      "title": "{{title}}",
      "text": "{{body}}",
      "potentialAction": [{"@type": "OpenUri", "name": "Open",
                           "targets": [{"os": "default", "uri": "{{url}}"}]}]
    }
    """
'''


@pytest.fixture(scope="module")
def receiver():
    with FakeServer(WebhookReceiver, state=receiver_state(SECRET)) as srv:
        yield srv


def hook_config(t, url, template=TEAMS, extra=""):
    secret = t.write_secret("hook.secret", SECRET)
    token = t.write_secret("token", TOKEN)
    t.write_config(f"""
        [sinks.hook]
        type = "webhook"
        url = "{url}/hook"
        secret_file = "{secret}"
        headers = {{ Authorization_file = "{token}" }}
        timeout = "5s"
        {extra}
        """ + template)


def line_of(t, text):
    """The 1-based line of the config file that contains `text`."""
    return next(i for i, l in enumerate(t.config.read_text().splitlines(), 1) if text in l)


def requests_for(srv, path):
    return [r for r in srv.requests if r.path == path]


def test_teams_card_is_rendered_escaped_and_signed_over_what_is_sent(tidings, receiver):
    title = 'Disk "db1" at 97% <b>\\ full'
    feed = Feed(tidings)
    feed.set([item("a", title, body="line 1\nline 2\t\u0007", url="https://example.org/a?x=1&y=2",
                   data={"color": "FF0000"})])
    hook_config(tidings, receiver.url + "/teams")
    r = tidings.run("check", "--deliver")
    assert r.code == 1, r
    [req] = requests_for(receiver, "/teams/hook")
    assert req.headers["content-type"] == "application/json"
    assert verify(SECRET, req.headers, req.body) is None, "signed over exactly the bytes sent"
    card = json.loads(req.body)
    assert card["@type"] == "MessageCard" and card["themeColor"] == "FF0000"
    assert card["title"] == card["summary"] == title
    assert card["text"] == "line 1\nline 2\t\u0007"
    assert card["potentialAction"][0]["targets"][0]["uri"] == "https://example.org/a?x=1&y=2"
    assert TOKEN not in r.stdout + r.stderr


def test_sinks_test_shows_the_rendering_and_sends_it(tidings, receiver):
    hook_config(tidings, receiver.url + "/sinkstest")
    r = tidings.run("sinks", "test", "hook")
    assert r.code == 0, r
    assert "sink hook (webhook): body_template renders" in r.stderr, r.stderr
    assert '"title": "tidings test event (sink hook)"' in r.stderr, r.stderr
    assert TOKEN not in r.stderr + r.stdout and SECRET not in r.stderr + r.stdout
    [req] = requests_for(receiver, "/sinkstest/hook")
    card = json.loads(req.body)
    assert card["title"] == "tidings test event (sink hook)"
    assert card["themeColor"] == "0076D7", "data.color is missing: the inverted section's default"
    assert card["potentialAction"][0]["targets"][0]["uri"] == "", "a missing url renders empty"
    assert verify(SECRET, req.headers, req.body) is None


def test_google_chat_text_message(tidings, receiver):
    feed = Feed(tidings)
    feed.set([item("g", "Build *failed* on <main>", url="https://ci.example/1", severity="critical")])
    hook_config(tidings, receiver.url + "/chat", template='''
        body_template = '{"text": "{{severity}}: {{title}}{{#url}}\\n{{url}}{{/url}}"}'
        content_type = "application/json; charset=UTF-8"
        ''')
    assert tidings.run("check", "--deliver").code == 1
    [req] = requests_for(receiver, "/chat/hook")
    assert req.headers["content-type"] == "application/json; charset=UTF-8"
    assert json.loads(req.body) == {"text": "critical: Build *failed* on <main>\nhttps://ci.example/1"}
    assert verify(SECRET, req.headers, req.body) is None


def test_stdout_templates(tidings):
    feed = Feed(tidings)
    feed.set([item("s", "Disk \x1b[2Jfull", body="ignored", data={"used": 97, "host": "db1"})])
    tidings.write_config("""
        [sinks.console]
        type = "stdout"
        title_template = "{{data.host}}: {{title}}"
        body_template = "{{data.used}}% used{{#data.missing}} never{{/data.missing}}{{data.nothing}}"
        """)
    r = tidings.run("check", "--deliver")
    assert r.code == 1, r
    sink_line = r.stdout.splitlines()[-1]
    assert "db1: Disk \\u{1B}[2Jfull  — 97% used" in sink_line, sink_line
    assert "\x1b" not in r.stdout and "ignored" not in sink_line


def test_broken_templates_are_config_errors_at_their_lines(tidings):
    tidings.write_config('''
        [sinks.a]
        type = "stdout"
        title_template = "{{#title}} never closed"

        [sinks.b]
        type = "webhook"
        url = "https://hooks.example/x"
        body_template = """
        {
          "text": "{{title}}",
          "oops": "{{/wrong}}"
        }
        """
        ''')
    r = tidings.run("config", "check")
    assert r.code == 78, r
    assert f"{tidings.config}:{line_of(tidings, 'never closed')}: sink \"a\": 'title_template' is not a valid Mustache template: a section is never closed" in r.stderr
    assert f"{tidings.config}:{line_of(tidings, 'wrong')}: sink \"b\": 'body_template' is not a valid Mustache template: a closing tag" in r.stderr
    # Every command refuses it the same way.
    assert tidings.run("check").code == 78


def test_json_body_that_renders_no_json_is_a_warning(tidings):
    tidings.write_config("""
        [sinks.hook]
        type = "webhook"
        url = "https://hooks.example/x"
        body_template = '{"text": "{{{title}}}"}'
        """)
    r = tidings.run("config", "check")
    assert r.code == 0, r
    assert f"{tidings.config}:{line_of(tidings, 'body_template')}: sink \"hook\": 'body_template' is sent as application/json, but for a sample event" in r.stderr


def test_body_template_with_batch_is_refused(tidings):
    tidings.write_config("""
        [sinks.hook]
        type = "webhook"
        url = "https://hooks.example/x"
        batch = true
        body_template = '{"text": "{{title}}"}'
        """)
    r = tidings.run("config", "check")
    assert r.code == 78 and "does not go with 'batch = true'" in r.stderr, r


@pytest.mark.skipif(session_bus_missing() is not None, reason=session_bus_missing() or "")
def test_desktop_templates_escape_the_body_once(tidings):
    feed = Feed(tidings)
    feed.set([item("d", "Disk <full>", body="a & b", severity="critical", data={"host": "db1"})])
    tidings.write_config("""
        [sinks.desktop]
        type = "desktop"
        timeout = "2s"
        title_template = "{{data.host}}: {{title}}"
        body_template = "<b>{{body}}</b> on {{data.host}}"
        """)
    with SessionBus() as bus:
        r = tidings.run("check", "--deliver", env=bus.env)
        assert r.code == 1, r
        [call] = bus.notifications()
    assert call["summary"] == "db1: Disk <full>", "the summary is plain text"
    assert call["body"] == "<b>a &amp; b</b> on db1", "the template's markup stays, the event's text is escaped once"
