"""The package's layout holds (docs/development.md, "Targets"): dependencies point down, and the
plugin API and the engine do no system work of their own.

- No provider, sink or HTTP-client target depends, directly or through another target, on the
  engine, a state backend, the monitoring endpoint or the app: a provider or sink author needs
  only TidingsPluginAPI (and TidingsPOSIX to spawn a process). The daemon's plumbing (the control
  socket, the state lock: TidingsIPC) is out of their reach, and TidingsPOSIX holds processes only.
- The plugin API and the engine open no socket, lock no file, spawn no process and import no
  SQLite: those live in TidingsPOSIX, TidingsIPC, the backends and the app.
- One SQLite (issue 31 item 4): SQLite's C API through TidingsSQLite alone; no target uses GRDB,
  and no Swift file imports `GRDB` or the C module `CSQLite` outside TidingsSQLite.
- One crypto stack (DESIGN §15): SHA-256, HMAC and random bytes come from OpenSSL's libcrypto
  through TidingsCrypto alone (the plugin API's one dependency of ours); no target of ours uses
  swift-crypto, and no Swift file imports `Crypto` or the C module `CLibCrypto` outside it.

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
ABOVE_THE_API = {"TidingsEngine", "TidingsSQLite", "TidingsPostgres", "TidingsMonitoring", "TidingsSystemBus", "TidingsApp",
                 "TidingsIPC"}
SYSTEM_WORK = re.compile(r"\bsocket\(|\bflock\(|\bposix_spawn|^\s*(@testable |@preconcurrency )?import (GRDB|CSQLite)\b", re.M)
DAEMON_PLUMBING = re.compile(r"\bsocket\(|\bflock\(|\bUnixSocket\b|\bStateLock\b|\bSO_PEERCRED\b")


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
            elif kind == "product":
                names.append(f"{value[1]}:{value[0]}")  # package:product
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


def imports(modules, outside):
    """`FILE:LINE: import M` for each Swift file of Sources and Tests importing one of `modules` (a
    regex), except those of the target `outside` and its unit tests (None: every file)."""
    found = []
    for folder in ("Sources", "Tests"):
        for path in sorted((ROOT / folder).rglob("*.swift")):
            # The target itself, and its own unit tests (which may check it against the C
            # library it wraps, as TidingsCryptoTests checks SHA-256 against libcrypto's).
            if outside and (path.is_relative_to(ROOT / "Sources" / outside) or path.is_relative_to(ROOT / "Tests" / f"{outside}Tests")):
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if re.match(rf"\s*(@testable |@preconcurrency )?import ({modules})\b", line):
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    return found


@pytest.mark.parametrize("target", PLUGINS)
def test_providers_and_sinks_see_only_the_plugin_api(targets, target):
    reach = closure(targets, target)
    assert "TidingsPluginAPI" in reach
    assert not reach & ABOVE_THE_API, f"{target} reaches {sorted(reach & ABOVE_THE_API)}"


def test_the_engine_sits_on_the_plugin_api_alone(targets):
    reach = {d for d in closure(targets, "TidingsEngine") if d.startswith(("Tidings", "C"))}
    # (CDynamicLoad: libcrypto is loaded at its first use, issue 31 item 7.)
    assert reach == {"TidingsPluginAPI", "TidingsCrypto", "CLibCrypto", "CDynamicLoad"}, reach
    assert closure(targets, "TidingsPluginAPI") & set(targets) == {"TidingsCrypto", "CLibCrypto", "CDynamicLoad"}, \
        "the plugin API depends on no target of ours but the crypto module"
    assert closure(targets, "TidingsCrypto") == {"CLibCrypto", "CDynamicLoad"}, "TidingsCrypto sits on libcrypto (loaded at first use) alone"


def test_one_crypto_stack(targets):
    on_swift_crypto = sorted(t for t, ds in targets.items() if any(d.startswith("swift-crypto:") for d in ds))
    assert not on_swift_crypto, f"targets on swift-crypto (BoringSSL): {on_swift_crypto}"
    on_libcrypto = sorted(t for t, ds in targets.items() if "CLibCrypto" in ds)
    assert on_libcrypto == ["TidingsCrypto"], on_libcrypto
    found = imports("Crypto|CryptoExtras|_CryptoExtras|CLibCrypto", outside="TidingsCrypto")
    assert not found, "\n".join(found)


def test_one_sqlite(targets):
    on_grdb = sorted(t for t, ds in targets.items() if any(d.startswith("GRDB.swift:") for d in ds))
    assert not on_grdb, f"targets on GRDB: {on_grdb}"
    on_sqlite = sorted(t for t, ds in targets.items() if "CSQLite" in ds)
    assert on_sqlite == ["TidingsSQLite"], on_sqlite
    found = imports(r"GRDB\w*", outside=None) + imports("CSQLite", outside="TidingsSQLite")
    assert not found, "\n".join(found)


@pytest.mark.parametrize("target", ["TidingsPluginAPI", "TidingsEngine"])
def test_no_system_work_in_the_api_and_the_engine(target):
    found = []
    for path in sorted((ROOT / "Sources" / target).rglob("*.swift")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("//", 1)[0]
            if SYSTEM_WORK.search(code):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


def test_posix_spawns_processes_and_holds_no_daemon_plumbing(targets):
    """Providers and sinks import TidingsPOSIX to spawn (issue 31 item 8): the control socket and
    the state lock live in TidingsIPC, which only the app, the status report and the executable use."""
    found = []
    for path in sorted((ROOT / "Sources" / "TidingsPOSIX").rglob("*.swift")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if DAEMON_PLUMBING.search(line.split("//", 1)[0]):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)
    users = sorted(t for t, ds in targets.items() if "TidingsIPC" in ds and not t.endswith("Tests"))
    assert users == ["TidingsApp", "TidingsMonitoring", "tidings"], users


def test_templates_render_without_swift_mustache(targets):
    """Mustache templates are rendered by TidingsTemplates on the standard library alone (issue 31
    item 6); swift-mustache, which uses corelibs Foundation (NSLock, NSNull), is only the oracle
    of TidingsTemplatesTests, so nothing of the product links it."""
    on_mustache = sorted(t for t, ds in targets.items() if "swift-mustache:Mustache" in ds)
    assert on_mustache == ["TidingsTemplatesTests"], on_mustache
    assert targets["TidingsTemplates"] == [], "TidingsTemplates depends on nothing"
    found = []
    for path in sorted((ROOT / "Sources").rglob("*.swift")):
        in_templates = path.is_relative_to(ROOT / "Sources" / "TidingsTemplates")
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.match(r"\s*(@testable |@preconcurrency )?import (Mustache\b|Foundation)", line) and (in_templates or "Mustache" in line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


def test_postgresql_is_libpq_behind_tidings_postgres(targets):
    """The PostgreSQL backend is libpq (issue 31 item 4): the C module CLibPQ is a dependency
    of TidingsPostgres alone and imported nowhere else, and no target uses postgres-nio or
    swift-nio-ssl (BoringSSL); TLS to the database is libpq's OpenSSL."""
    on_libpq = sorted(t for t, ds in targets.items() if "CLibPQ" in ds)
    assert on_libpq == ["TidingsPostgres"], on_libpq
    gone = sorted(f"{t}: {d}" for t, ds in targets.items() for d in ds if d.startswith(("postgres-nio:", "swift-nio-ssl:")))
    assert not gone, gone
    found = imports("CLibPQ|PostgresNIO|NIOSSL", outside="TidingsPostgres")
    assert not found, "\n".join(found)
