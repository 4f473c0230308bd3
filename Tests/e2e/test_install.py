"""`make install`, `make uninstall` and `make deb` (issue 10, DESIGN §8): the layout, a binary
that runs without the Swift toolchain, systemd units that `systemd-analyze` accepts, man pages
that render, completions that load, and a package lintian accepts.

These run `make` in the repository, from `make test-install`, which builds the static release
binary and the man pages first (`make release man`); every install, the .deb included, only
copies them.
"""
from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from conftest import ROOT

# The static release build these install takes about 11 minutes on 2 cores: `make test-install`
# runs them; `make test` (CI) skips them.
pytestmark = pytest.mark.skipif(not os.environ.get("TIDINGS_TEST_INSTALL"),
                                reason="install tests run with `make test-install` (they need the static release build)")

VERSION = re.search(r'string = "(.*)"', (ROOT / "Sources/TidingsPluginAPI/Support/TidingsVersion.swift").read_text())[1]
# A PATH without the toolchain: what a machine that installed the package has.
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def make(*args: str, timeout: int = 3600, umask: int | None = None) -> subprocess.CompletedProcess:
    """make in the repository; with `umask`, under that umask (the install must not depend on it)."""
    command = ["make", "--no-print-directory", "-C", str(ROOT), *args]
    if umask is not None:
        command = ["sh", "-c", f'umask {umask:03o} && exec "$@"', "sh", *command]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"make {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def system_env(**extra) -> dict:
    """The environment of a user without the toolchain: no /opt/swift on PATH or LD_LIBRARY_PATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH",) and not k.startswith("TIDINGS_")}
    env["PATH"] = SYSTEM_PATH
    return {**env, **extra}


@pytest.fixture(scope="module")
def staged(tmp_path_factory) -> Path:
    """`make install DESTDIR=… PREFIX=/usr`, once for the module, under umask 077."""
    dest = tmp_path_factory.mktemp("destdir")
    make("install", f"DESTDIR={dest}", "PREFIX=/usr", umask=0o077)
    return dest


@pytest.fixture(scope="module")
def prefixed(tmp_path_factory) -> Path:
    """`make install PREFIX=<tmp>/usr`: the units' ExecStart then names a binary that exists on
    this machine, so `systemd-analyze verify` can check them against the host's own units."""
    prefix = tmp_path_factory.mktemp("prefix") / "usr"
    make("install", f"PREFIX={prefix}")
    return prefix


def command_pages(binary: Path) -> set[str]:
    """tidings.1 and tidings-SUB[-SUB].1 for every command the argument parser knows."""
    dump = json.loads(subprocess.run([str(binary), "--experimental-dump-help"], capture_output=True,
                                     text=True, check=True, env=system_env()).stdout)
    names = set()

    def walk(command, path):
        names.add("-".join(path) + ".1")
        for sub in command.get("subcommands") or []:
            walk(sub, path + [sub["commandName"]])

    walk(dump["command"], ["tidings"])
    return names


def test_install_lays_out_what_design_8_lists(staged):
    usr = staged / "usr"
    pages = command_pages(usr / "bin/tidings")
    assert {"tidings.1", "tidings-run.1", "tidings-check.1", "tidings-config-check.1", "tidings-config-init.1"} <= pages
    examples = {f"share/doc/tidings/examples/{p.relative_to(ROOT)}" for p in (ROOT / "plugins.d").rglob("*") if p.is_file()}
    expected = {
        "bin/tidings",
        "share/man/man5/tidings.toml.5",
        "share/bash-completion/completions/tidings",
        "share/zsh/vendor-completions/_tidings",
        "share/fish/vendor_completions.d/tidings.fish",
        "share/doc/tidings/examples/tidings.toml",
        "share/doc/tidings/examples/tidings-alerts.yml",
        "lib/systemd/user/tidings.service",
        "lib/systemd/system/tidings.service",
        *(f"share/man/man1/{p}" for p in pages),
        *examples,
    }
    assert files_under(usr) == expected
    assert files_under(staged) == {f"usr/{f}" for f in expected}, "nothing outside PREFIX"
    assert os.stat(usr / "bin/tidings").st_mode & 0o777 == 0o755
    assert os.access(usr / "share/doc/tidings/examples/plugins.d/disk-usage", os.X_OK), "example plugins stay runnable"
    for scope in ("user", "system"):
        unit = (usr / f"lib/systemd/{scope}/tidings.service").read_text()
        assert "ExecStart=/usr/bin/tidings run" in unit and "@BINDIR@" not in unit and "@UNITDIR@" not in unit


def test_installed_binary_runs_without_the_toolchain(staged, tmp_path):
    binary = staged / "usr/bin/tidings"
    ldd = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=True).stdout
    assert "/opt/swift" not in ldd and "not found" not in ldd, ldd
    assert not re.search(r"libswift|libFoundation|libdispatch", ldd), ldd
    dyn = subprocess.run(["readelf", "-d", str(binary)], capture_output=True, text=True, check=True).stdout
    assert "RUNPATH" not in dyn and "RPATH" not in dyn, dyn
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, env=system_env())
    assert (version.returncode, version.stdout.strip()) == (0, VERSION), version
    # The shipped example configuration loads with the installed binary (its plugins included),
    # copied as its README says: the placeholder secrets are installed 0644 like all of share/doc,
    # and a secret file in use must be 0600.
    example = tmp_path / "examples/tidings.toml"
    shutil.copytree(staged / "usr/share/doc/tidings/examples", example.parent)
    for secret in (example.parent / "plugins.d/secrets").iterdir():
        secret.chmod(0o600)
    check = subprocess.run([str(binary), "config", "check", "--config", str(example)],
                           capture_output=True, text=True, env=system_env())
    assert check.returncode == 0 and ": OK:" in check.stdout, (check.stdout, check.stderr)
    # config init points to the examples of this installation.
    init = subprocess.run([str(binary), "config", "init", "--config", str(tmp_path / "tidings.toml")],
                          capture_output=True, text=True, env=system_env())
    assert init.returncode == 0 and f"the examples in {staged}/usr/share/doc/tidings/examples/" in init.stdout, init


def test_release_binary_crash_backtrace_names_functions(tmp_path):
    """The release link (lld, a section per function, packaging/text-order.txt, stripped with its
    symbols in tidings.debug beside it) keeps crashes readable: a SIGSEGV to the idle daemon under
    the Swift runtime's backtracer names the control thread's frames."""
    binary = ROOT / ".build/install/tidings"
    swift = shutil.which("swift")
    backtracer = Path(swift).resolve().parent.parent / "libexec/swift/linux/swift-backtrace-static" if swift else None
    if backtracer is None or not backtracer.exists():
        pytest.skip("needs the toolchain's swift-backtrace-static")
    shutil.copytree(ROOT / "plugins.d", tmp_path / "plugins.d")
    for secret in (tmp_path / "plugins.d/secrets").iterdir():
        secret.chmod(0o600)
    (tmp_path / "etc").mkdir()
    shutil.copy(ROOT / "etc/tidings.toml", tmp_path / "etc")
    state, log = tmp_path / "state", tmp_path / "stderr"
    env = system_env(SWIFT_BACKTRACE=f"enable=yes,interactive=no,swift-backtrace={backtracer}")
    with open(log, "w") as err:
        daemon = subprocess.Popen([str(binary), "run", "--config", str(tmp_path / "etc/tidings.toml"), "--state-dir", str(state)],
                                  stdout=subprocess.DEVNULL, stderr=err, env=env)
    try:
        # The control thread is parked in accept(2) once the control socket exists.
        for _ in range(600):
            if any(p.is_socket() for p in state.rglob("*")) if state.exists() else False:
                break
            assert daemon.poll() is None, log.read_text()
            time.sleep(0.05)
        else:
            pytest.fail("no control socket: " + log.read_text())
        daemon.send_signal(signal.SIGSEGV)
        for _ in range(1200):
            if "Backtrace took" in log.read_text() or daemon.poll() is not None:
                break
            time.sleep(0.05)
    finally:
        daemon.kill()
        daemon.wait()
    text = log.read_text()
    assert "Backtrace took" in text, text
    assert "UnixSocket.accept(timeout:)" in text and "ControlServer.acceptLoop()" in text, text


def test_installed_binary_runs_with_the_toolchain_hidden(staged, tmp_path):
    """The strongest form: /opt/swift is an empty directory for the process (a private mount
    namespace). Skipped only where unprivileged namespaces are not allowed."""
    if shutil.which("unshare") is None or not Path("/opt/swift").is_dir():
        pytest.skip("needs unshare(1) and a toolchain to hide")
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no private mount namespace here: {probe.stderr!r}")
    binary = staged / "usr/bin/tidings"
    script = 'mount -t tmpfs none /opt/swift && ls -A /opt/swift | wc -l && exec "$0" --version'
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", script, str(binary)], capture_output=True, text=True,
                          env=system_env())
    assert proc.returncode == 0 and proc.stdout.split() == ["0", VERSION], (proc.stdout, proc.stderr)


@pytest.mark.parametrize("scope", ["user", "system"])
def test_units_pass_systemd_analyze_verify(prefixed, scope, tmp_path):
    unit = prefixed / f"lib/systemd/{scope}/tidings.service"
    assert f"ExecStart={prefixed}/bin/tidings run" in unit.read_text()
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    # MANPATH: the Documentation= man pages are looked up (and must exist) among the installed ones.
    env = {**os.environ, "MANPATH": str(prefixed / "share/man"), "XDG_RUNTIME_DIR": str(runtime)}
    args = ["systemd-analyze", "verify", *(["--user"] if scope == "user" else []), str(unit)]
    proc = subprocess.run(args, capture_output=True, text=True, env=env)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", ""), proc


def test_system_unit_exposure_is_at_most_2(prefixed):
    unit = prefixed / "lib/systemd/system/tidings.service"
    proc = subprocess.run(["systemd-analyze", "security", "--offline=yes", "--threshold=20", str(unit)],
                          capture_output=True, text=True)
    level = re.search(r"Overall exposure level for tidings.service: ([0-9.]+)", proc.stdout)
    assert level, proc.stdout + proc.stderr
    print(f"exposure {level[1]}")
    assert float(level[1]) <= 2.0 and proc.returncode == 0, proc.stdout


def render(page: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["man", "--warnings", "-l", str(page)], capture_output=True, text=True,
                          env={**os.environ, "MANWIDTH": "80", "LC_ALL": "C.UTF-8"})


def plain(text: str) -> str:
    """man's output without its overstrike bold and underline."""
    return re.sub(".\x08", "", text)


def test_every_man_page_renders(staged):
    pages = sorted((staged / "usr/share/man").rglob("*.[15]"))
    assert len(pages) > 10
    for page in pages:
        proc = render(page)
        assert proc.returncode == 0 and proc.stderr == "", (page, proc.stderr)
        assert "NAME" in plain(proc.stdout) and "tidings" in plain(proc.stdout), page
        # whatis(1) can index it: NAME names the page itself.
        whatis = subprocess.run(["lexgrog", str(page)], capture_output=True, text=True)
        assert whatis.returncode == 0 and f'"{page.name.rsplit(".", 1)[0]} - ' in whatis.stdout, whatis.stdout
    toml = plain(render(staged / "usr/share/man/man5/tidings.toml.5").stdout)
    assert "max_concurrent" in toml and "/usr/share/doc/tidings/examples/" in toml and f"tidings {VERSION}" in toml


def complete_in_bash(staged: Path, words: list[str]) -> list[str]:
    """What the installed bash completion offers for the last of `words`."""
    script = staged / "usr/share/bash-completion/completions/tidings"
    line = " ".join(words)
    prev = words[-2] if len(words) > 1 else ""
    bash = f"""
        source /usr/share/bash-completion/bash_completion
        source {script}
        complete -p tidings
        COMP_WORDS=({' '.join(f"'{w}'" for w in words)})
        COMP_CWORD={len(words) - 1}
        COMP_LINE='{line}'
        COMP_POINT=${{#COMP_LINE}}
        _tidings tidings '{words[-1]}' '{prev}'
        printf 'offer:%s\\n' "${{COMPREPLY[@]}}"
    """
    proc = subprocess.run(["bash", "-c", bash], capture_output=True, text=True,
                          env=system_env(PATH=f"{staged}/usr/bin:{SYSTEM_PATH}"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("complete -o filenames -F _tidings tidings\n"), proc.stdout
    return [l[len("offer:"):] for l in proc.stdout.splitlines() if l.startswith("offer:") and l != "offer:"]


def test_bash_completion_loads_and_completes_names_from_the_config(staged, tmp_path):
    config = tmp_path / "tidings.toml"
    config.write_text('[sinks.ops]\ntype = "stdout"\n[sinks.desk]\ntype = "stdout"\n'
                      '[sources.alpha]\nprovider = "exec"\ncommand = ["/bin/true"]\n'
                      '[sources.beta]\nprovider = "exec"\ncommand = ["/bin/true"]\n')
    config.chmod(0o600)
    (tmp_path / "plugins.d").mkdir()
    (tmp_path / "plugins.d" / "gamma.toml").write_text('provider = "exec"\ncommand = ["/bin/true"]\n')
    assert "check" in complete_in_bash(staged, ["tidings", "ch"])
    assert complete_in_bash(staged, ["tidings", "--config", str(config), "check", ""]) == ["alpha", "beta", "gamma"]
    assert complete_in_bash(staged, ["tidings", "history", "--config", str(config), "--source", "g"]) == ["gamma"]
    assert complete_in_bash(staged, ["tidings", "sinks", "test", "--config", str(config), ""]) == ["desk", "ops"]
    # --config completes .toml files (and directories on the way).
    assert complete_in_bash(staged, ["tidings", "--config", f"{tmp_path}/ti"]) == [str(config)]
    # An unreadable or broken config completes nothing, and prints nothing into the command line.
    assert complete_in_bash(staged, ["tidings", "--config", str(tmp_path / "missing.toml"), "check", ""]) == []


def test_zsh_and_fish_completions_name_the_commands(staged):
    zsh = (staged / "usr/share/zsh/vendor-completions/_tidings").read_text()
    fish = (staged / "usr/share/fish/vendor_completions.d/tidings.fish").read_text()
    assert zsh.startswith("#compdef tidings") and "---completion check" in zsh
    assert "complete -c 'tidings'" in fish and "---completion check" in fish


def test_make_uninstall_removes_everything(tmp_path):
    make("install", f"DESTDIR={tmp_path}", "PREFIX=/usr/local")
    assert (tmp_path / "usr/local/bin/tidings").is_file()
    make("uninstall", f"DESTDIR={tmp_path}", "PREFIX=/usr/local")
    assert files_under(tmp_path) == set()
    assert not (tmp_path / "usr/local/share/doc/tidings").exists()


@pytest.fixture(scope="module")
def deb() -> Path:
    out = make("deb", "DEB_COMPRESSION=gzip", umask=0o077).stdout.strip().splitlines()[-1]
    path = ROOT / out
    assert path.name == f"tidings_{VERSION}_{subprocess.check_output(['dpkg', '--print-architecture'], text=True).strip()}.deb"
    return path


def test_deb_has_the_install_layout_under_usr_and_the_config_as_conffile(deb, staged):
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    entries = {}
    for line in listing.splitlines():
        mode, owner, *_rest = line.split(None, 5)
        path = line.split()[-1].removeprefix(".")
        entries[path.rstrip("/") or "/"] = (mode, owner)
    files = {p for p, (mode, _) in entries.items() if mode.startswith("-")}
    installed = {"/" + f for f in files_under(staged)}
    # Man pages and the changelog are compressed in the package; the rest is the same layout.
    expected = {p + ".gz" if "/share/man/" in p else p for p in installed}
    expected |= {"/usr/share/doc/tidings/copyright", "/usr/share/doc/tidings/changelog.gz", "/etc/tidings/tidings.toml"}
    assert files == expected
    assert entries["/etc/tidings/plugins.d"][0].startswith("d")
    assert {owner for _, owner in entries.values()} == {"root/root"}
    assert entries["/etc/tidings/tidings.toml"][0] == "-rw-r--r--"
    # Built under umask 077: directories 0755, the binary and the executable examples 0755, the
    # rest 0644 (the example secrets too: documentation, see the Makefile's install).
    executable = {"/usr/bin/tidings"} | {f"/usr/share/doc/tidings/examples/{p.relative_to(ROOT)}"
                                         for p in (ROOT / "plugins.d").rglob("*") if p.is_file() and os.access(p, os.X_OK)}
    wrong = {p: mode for p, (mode, _) in entries.items()
             if mode != ("drwxr-xr-x" if mode.startswith("d") else "-rwxr-xr-x" if p in executable else "-rw-r--r--")}
    assert wrong == {}, listing

    info = lambda field: subprocess.run(["dpkg-deb", "-f", str(deb), field], capture_output=True, text=True,
                                        check=True).stdout.strip()
    assert info("Package") == "tidings" and info("Version") == VERSION
    depends = {d.split()[0] for d in info("Depends").split(", ")}
    # Loaded at first use (dlopen, DESIGN §15), but needed by every daemon (SQLite, the default
    # state) or by libcurl anyway (libcrypto): named, not found by dpkg-shlibdeps.
    assert {"libc6", "libcurl4", "libsqlite3-0", "libssl3"} <= depends and not {"libpq5", "libyaml-0-2"} & depends, depends
    assert "libssl3 | libssl3t64" in info("Depends"), info("Depends")
    # Loaded at first use for some runs only: recommended, not linked.
    recommends = {d.split()[0] for d in info("Recommends").split(", ")}
    assert {"libxml2", "libnotify4", "libglib2.0-0", "libpq5", "libyaml-0-2"} <= recommends and not recommends & depends, (recommends, depends)
    assert not any("swift" in d for d in depends), depends
    conffiles = subprocess.run(["dpkg-deb", "--ctrl-tarfile", str(deb)], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(conffiles)) as t:
        assert t.extractfile("./conffiles").read().decode().split() == ["/etc/tidings/tidings.toml"]


def test_deb_has_no_lintian_errors(deb):
    proc = subprocess.run(["lintian", "--tag-display-limit", "0", str(deb)], capture_output=True, text=True)
    print(proc.stdout)
    errors = [l for l in proc.stdout.splitlines() if l.startswith("E:")]
    assert errors == [] and proc.returncode == 0, proc.stdout + proc.stderr
    # The package is built under umask 077 (the fixture): no non-standard-file-perm (a warning).
    assert [l for l in proc.stdout.splitlines() if "perm" in l] == [], proc.stdout
