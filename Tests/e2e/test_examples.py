"""The starter examples and the provider docs stay in step with the providers the binary ships:
every provider has a page in docs/providers/ (linked from its index) and an example source in
plugins.d/ or plugins.d/examples/; every example loads as shipped (disabled) without an error
or a warning."""
import re
import shutil

import pytest

from conftest import ROOT

EXAMPLES = sorted((ROOT / "plugins.d" / "examples").glob("*.toml"))


def known_providers(t):
    """The providers this binary registers, as its own error message lists them."""
    t.write_plugin("probe.toml", 'provider = "no-such-provider"\n')
    r = t.run("config", "check")
    (t.plugins / "probe.toml").unlink()
    m = re.search(r"unknown provider 'no-such-provider' \(known: ([^)]*)\)", r.stderr)
    assert m, r
    return [p.strip() for p in m.group(1).split(",")]


def provider_of(path):
    m = re.search(r'^provider\s*=\s*"([^"]+)"', path.read_text(), re.M)
    return m.group(1) if m else None


def test_every_provider_has_a_page_and_an_example(tidings):
    providers = known_providers(tidings)
    assert {"feed", "http-json", "exec"} <= set(providers), providers
    index = (ROOT / "docs" / "providers" / "README.md").read_text()
    shipped = {provider_of(p) for p in (ROOT / "plugins.d").rglob("*.toml")}
    # An executable in plugins.d without a NAME.toml is an exec source (docs/providers/exec.md).
    if any(p.is_file() and p.stat().st_mode & 0o111 for p in (ROOT / "plugins.d").iterdir()):
        shipped.add("exec")
    missing_pages = [p for p in providers if not (ROOT / "docs" / "providers" / f"{p}.md").is_file()]
    unlinked = [p for p in providers if f"]({p}.md)" not in index]
    missing_examples = [p for p in providers if p not in shipped]
    assert (missing_pages, unlinked, missing_examples) == ([], [], [])


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_an_example_loads_as_shipped_without_errors_or_warnings(tidings, example):
    tidings.write_config('plugins_dir = "plugins.d"\n[sinks.out]\ntype = "stdout"\n')
    shutil.copy(example, tidings.plugins / example.name)
    (tidings.plugins / example.name).chmod(0o600)
    # As shipped: the placeholder secrets beside them (plugins.d/secrets, private as `make build` makes them).
    shutil.copytree(ROOT / "plugins.d" / "secrets", tidings.plugins / "secrets")
    for f in (tidings.plugins / "secrets").iterdir():
        f.chmod(0o600)
    text = example.read_text()
    assert re.search(r"^enabled = false$", text, re.M), f"{example.name} ships disabled"
    r = tidings.run("config", "check")
    assert r.code == 0 and "warning" not in r.stderr.lower(), r
    # Enabled, the same file is still a well-formed source: what may fail is only a secret
    # file or placeholder the user must fill in, named with its line.
    (tidings.plugins / example.name).write_text(text.replace("enabled = false", "enabled = true"))
    r = tidings.run("config", "check")
    for line in r.stderr.splitlines():
        if f"{example.name}:" in line:
            assert re.search(r"secret|CHANGE-ME|No such file|cannot read|placeholder", line, re.I), r
