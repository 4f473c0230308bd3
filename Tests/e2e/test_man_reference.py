"""tidings.toml(5) is made from docs/ (etc/man/md2man.py, `make man`) and is complete: every
provider and sink type the binary registers, and every key it takes in the main file,
`[defaults]`, a route, `[state]` and `[http]`, appears in the rendered page. The binary is asked
what it knows (its "unknown …" errors list the known names), so a new key or sink without
documentation fails here."""
import re
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.skipif(subprocess.run(["sh", "-c", "command -v man"], capture_output=True).returncode != 0,
                                reason="man (man-db) is not installed")


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("man") / "tidings.toml.5"
    made = subprocess.run([sys.executable, str(ROOT / "etc/man/md2man.py"), str(ROOT / "etc/man/tidings.toml.5.in"),
                           str(ROOT), "0.0.0", "2026-01-01", "/usr/share/doc/tidings"], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    out.write_text(made.stdout)
    r = subprocess.run(["man", "--warnings", "-l", str(out)], capture_output=True, text=True,
                       env={"MANWIDTH": "100", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    assert r.returncode == 0 and r.stderr == "", r.stderr
    return re.sub(r".\x08", "", r.stdout)


def known(tidings, text, pattern):
    tidings.write_config(text)
    r = tidings.run("config", "check")
    found = {}
    for m in re.finditer(pattern, r.stderr):
        found.setdefault(m.group(1), set()).update(x.strip() for x in m.group(2).split(","))
    assert found, r
    return found


def bare(keys):
    """Secret options appear as X, X_file, X_env, X_credential: the page names X."""
    out = set()
    for k in keys:
        b = re.sub(r"_(file|env|credential)$", "", k)
        out.add(b if b in keys else k)
    return out


def test_every_provider_sink_and_key_is_in_tidings_toml_5(tidings, page):
    lists = known(tidings, """
        bogus_main = 1
        [defaults]
        bogus_defaults = 1
        [state]
        url = "postgres://tidings@127.0.0.1:1/tidings"
        bogus_state = 1
        [http]
        listen = "127.0.0.1:1"
        bogus_http = 1
        [sinks.a]
        type = "no-such-sink"
        [sinks.b]
        type = "stdout"
        [[routes]]
        sinks = ["b"]
        bogus_route = 1
        [sources.s]
        provider = "no-such-provider"
    """, r"(config 'defaults'|config 'state'|config 'http'|config|route #1|unknown sink type|unknown provider)"
         r"(?::| '[^']*') [^(]*\(known: ([^)]*)\)")
    assert set(lists) >= {"config", "config 'defaults'", "config 'state'", "config 'http'", "route #1",
                          "unknown sink type", "unknown provider"}, lists
    words = set(re.findall(r"[\w.-]+", page))
    missing = {what: sorted(k for k in bare(names) if k not in words) for what, names in lists.items()}
    assert {w: m for w, m in missing.items() if m} == {}
    # The README's intro and `tidings --help` name every channel (sink type).
    intro = (ROOT / "README.md").read_text().split("## Quick start")[0].lower()
    helptext = tidings.run("--help").stdout.lower()
    for sink in lists["unknown sink type"]:
        assert sink in intro, f"README's intro does not name the {sink} sink"
        assert sink in helptext, f"tidings --help does not name the {sink} sink"
    # Each provider and sink type has its own part, not just a mention.
    for name in lists["unknown provider"]:
        assert re.search(rf"^ {{3}}.*\b{re.escape(name)}\b", page, re.M), f"no subsection for provider {name}"
