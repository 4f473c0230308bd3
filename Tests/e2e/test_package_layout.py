"""The package's layout holds (docs/development.md, "Targets"): dependencies point down, and the
plugin API and the engine do no system work of their own.

- No provider, sink or HTTP-client target depends, directly or through another target, on the
  engine, a state backend, the monitoring endpoint or the app: a provider or sink author needs
  only TidingsPluginAPI (and TidingsPOSIX to spawn a process).
- The plugin API and the engine open no socket, lock no file, spawn no process and import no
  GRDB: those live in TidingsPOSIX, the backends and the app.

Asked of SwiftPM itself (`swift package dump-package`), not of a copy of Package.swift's text."""
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import ROOT

SWIFT = os.environ.get("SWIFT") or shutil.which("swift") or "/opt/swift/usr/bin/swift"
pytestmark = pytest.mark.skipif(not os.path.exists(SWIFT) and shutil.which(SWIFT) is None,
                                reason="the Swift toolchain is not installed")

PLUGINS = ["TidingsProviders", "TidingsSinks", "TidingsCurl"]
ABOVE_THE_API = {"TidingsEngine", "TidingsSQLite", "TidingsPostgres", "TidingsMonitoring", "TidingsSystemBus", "TidingsApp"}
SYSTEM_WORK = re.compile(r"\bsocket\(|\bflock\(|\bposix_spawn|^\s*(@testable |@preconcurrency )?import GRDB", re.M)


@pytest.fixture(scope="module")
def targets():
    r = subprocess.run([SWIFT, "package", "dump-package"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    deps = {}
    for t in json.loads(r.stdout)["targets"]:
        names = []
        for d in t["dependencies"]:
            (kind, value), = d.items()
            if kind in ("byName", "target"):
                names.append(value[0])
        deps[t["name"]] = names
    return deps


def closure(deps, name):
    seen, todo = set(), [name]
    while todo:
        for d in deps.get(todo.pop(), []):
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


@pytest.mark.parametrize("target", PLUGINS)
def test_providers_and_sinks_see_only_the_plugin_api(targets, target):
    reach = closure(targets, target)
    assert "TidingsPluginAPI" in reach
    assert not reach & ABOVE_THE_API, f"{target} reaches {sorted(reach & ABOVE_THE_API)}"


def test_the_engine_sits_on_the_plugin_api_alone(targets):
    reach = {d for d in closure(targets, "TidingsEngine") if d.startswith(("Tidings", "C"))}
    assert reach == {"TidingsPluginAPI"}, reach
    assert closure(targets, "TidingsPluginAPI") & set(targets) == set(), "the plugin API depends on no target of ours"


@pytest.mark.parametrize("target", ["TidingsPluginAPI", "TidingsEngine"])
def test_no_system_work_in_the_api_and_the_engine(target):
    found = []
    for path in sorted((ROOT / "Sources" / target).rglob("*.swift")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("//", 1)[0]
            if SYSTEM_WORK.search(code):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)
