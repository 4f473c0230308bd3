"""`make install` and `make deb` under `umask 077` (issue 20): every installed file 0644, or 0755
for the binary and the executable examples, every directory 0755, whatever the umask of the
shell that ran make (a `> FILE` redirection in a recipe would create FILE 0600).

These run in `make test`: instead of the static release binary and its man pages (an 11-minute
build, `make test-install`), they hand make the debug binary (`INSTALL_BIN=`) and a directory
of stand-in man pages (`MAN_BUILD=`): what is checked is the modes, not the contents.
"""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, binary


def make_args(tmp_path: Path, *args: str) -> list[str]:
    """make with the debug binary and stand-in man pages in place of the release build."""
    man = tmp_path / "man"
    if not man.exists():
        man.mkdir(mode=0o700)
        for page in ("tidings.1", "tidings-run.1", "tidings.toml.5"):
            (man / page).write_text(f'.TH "{page[:-2].upper()}" "{page[-1]}"\n.SH NAME\n{page[:-2]} \\- stand-in\n')
            (man / page).chmod(0o600)
        (man / ".stamp").touch()
    return ["make", "--no-print-directory", "-C", str(ROOT), *args,
            f"INSTALL_BIN={os.path.abspath(binary())}", f"MAN_BUILD={man}"]


def run_with_umask_077(args: list[str], **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(["sh", "-c", 'umask 077 && exec "$@"', "sh", *args], capture_output=True, text=True,
                          timeout=600, **kw)
    assert proc.returncode == 0, f"{' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def expected_mode(relative: str) -> int:
    """0755 for the binary and the examples that are executable in the repository, else 0644."""
    if relative == "usr/bin/tidings":
        return 0o755
    example = relative.removeprefix("usr/share/doc/tidings/examples/")
    if example != relative and example.startswith("plugins.d/"):
        return 0o755 if os.access(ROOT / example, os.X_OK) else 0o644
    return 0o644


def wrong_modes(root: Path) -> list[str]:
    wrong = []
    for path in sorted(root.rglob("*")):
        relative = str(path.relative_to(root))
        mode = stat.S_IMODE(path.lstat().st_mode)
        want = 0o755 if path.is_dir() else expected_mode(relative)
        if mode != want:
            wrong.append(f"{relative}: {mode:04o}, want {want:04o}")
    return wrong


def test_the_override_builds_nothing(tmp_path):
    """INSTALL_BIN= and MAN_BUILD= given: make plans copies only, no release build (on a Makefile
    where INSTALL_BIN is also the release build's target, it would rebuild the debug binary)."""
    plan = subprocess.run([*make_args(tmp_path, "install", f"DESTDIR={tmp_path}/dest", "PREFIX=/usr"), "-n"],
                          capture_output=True, text=True, timeout=120)
    assert plan.returncode == 0, plan.stderr
    assert "swift build" not in plan.stdout and "apt-get" not in plan.stdout, plan.stdout
    assert "install -m 0755 " + os.path.abspath(binary()) in plan.stdout, plan.stdout


def test_make_install_under_umask_077_sets_every_mode(tmp_path):
    dest = tmp_path / "dest"
    dest.mkdir()
    run_with_umask_077(make_args(tmp_path, "install", f"DESTDIR={dest}", "PREFIX=/usr"))
    installed = {str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()}
    # The files the recipe writes from a command's output, the ones a redirection made 0600.
    assert {"usr/share/man/man5/tidings.toml.5", "usr/share/bash-completion/completions/tidings",
            "usr/share/zsh/vendor-completions/_tidings", "usr/share/fish/vendor_completions.d/tidings.fish",
            "usr/share/doc/tidings/examples/tidings.toml", "usr/lib/systemd/user/tidings.service",
            "usr/lib/systemd/system/tidings.service", "usr/share/man/man1/tidings.1",
            "usr/share/doc/tidings/examples/plugins.d/secrets/sportdate.password"} <= installed, installed
    assert (dest / "usr/share/zsh/vendor-completions/_tidings").read_text().startswith("#compdef tidings")
    assert wrong_modes(dest) == []


def test_make_install_replaces_files_left_0600_by_an_earlier_install(tmp_path):
    """An install over one made before the fix: the modes are set, not kept."""
    dest = tmp_path / "dest"
    unit = dest / "usr/lib/systemd/user/tidings.service"
    unit.parent.mkdir(parents=True)
    unit.write_text("old\n")
    unit.chmod(0o600)
    run_with_umask_077(make_args(tmp_path, "install", f"DESTDIR={dest}", "PREFIX=/usr"))
    assert stat.S_IMODE(unit.stat().st_mode) == 0o644 and "ExecStart=/usr/bin/tidings run" in unit.read_text()


@pytest.mark.skipif(shutil.which("dpkg-deb") is None or shutil.which("dpkg-shlibdeps") is None,
                    reason="make deb needs dpkg-dev (make test-deps)")
def test_make_deb_under_umask_077_has_standard_modes_and_root_owner(tmp_path):
    """The package built under umask 077: dpkg-deb lists every entry 0644/0755 and root/root; lintian,
    when installed, finds no non-standard-file-perm (nor any other permission tag)."""
    work = tmp_path / "deb"
    proc = run_with_umask_077(make_args(tmp_path, "deb", "DEB_COMPRESSION=none", f"DEB_WORK={work}",
                                        f"DEB_OUT={tmp_path}"))
    debs = [ROOT / proc.stdout.strip().splitlines()[-1]]  # the path packaging/deb.sh prints
    assert debs[0].is_file(), proc.stdout
    listing = subprocess.run(["dpkg-deb", "-c", str(debs[0])], capture_output=True, text=True, check=True).stdout
    wrong = []
    for line in listing.splitlines():
        perms, owner, *_ = line.split()
        path = line.split()[-1].removeprefix(".")
        want = ("drwxr-xr-x" if perms.startswith("d") else
                "-rwxr-xr-x" if path.startswith("/usr/share/doc/") and expected_mode(path[1:]) == 0o755 or path == "/usr/bin/tidings" else
                "-rw-r--r--")
        if (perms, owner) != (want, "root/root"):
            wrong.append(f"{path}: {perms} {owner}, want {want} root/root")
    assert wrong == [], listing
    control = subprocess.run(["sh", "-c", f'dpkg-deb --ctrl-tarfile "{debs[0]}" | tar -tvf -'], capture_output=True,
                             text=True, check=True).stdout
    assert all(line.startswith(("-rw-r--r--", "drwxr-xr-x")) for line in control.splitlines()), control
    assert debs[0].parent == tmp_path, "DEB_OUT: the package goes where the test said, not in the repository"
    if shutil.which("lintian") is None:
        pytest.skip("lintian not installed: modes checked with dpkg-deb only")
    proc = subprocess.run(["lintian", "--tag-display-limit", "0", str(debs[0])], capture_output=True, text=True)
    perm_tags = [l for l in proc.stdout.splitlines() if "perm" in l]
    assert perm_tags == [], proc.stdout
