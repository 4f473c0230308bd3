"""`tidings config init [--user|--system]` (issue 10): a starter config where the lookup order
(DESIGN §2) finds it, never overwriting one."""
from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from conftest import binary


def run(*args, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([binary(), *args], capture_output=True, text=True, timeout=60, env=env)


def user_env(home: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TIDINGS_", "XDG_"))}
    return {**env, "HOME": str(home), **extra}


def mode(p: Path) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


def test_user_init_writes_where_the_lookup_finds_it(tmp_path):
    env = user_env(tmp_path, XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    first = run("config", "init", env=env)
    config = tmp_path / "xdg/tidings/tidings.toml"
    assert first.returncode == 0, first
    assert first.stdout.splitlines()[0] == f"wrote {config} (mode 0600), and {config.parent}/plugins.d/ for the sources"
    assert "systemctl --user enable --now tidings" in first.stdout and "note:" not in first.stdout
    assert (mode(config), mode(config.parent), mode(config.parent / "plugins.d")) == (0o600, 0o700, 0o700)
    assert '[sinks.desktop]\ntype = "desktop"' in config.read_text()
    # Found without --config, and valid.
    check = run("config", "check", env=env)
    assert check.returncode == 0 and check.stdout.startswith(f"{config}: OK: 0 sources"), check


def test_user_init_defaults_to_dot_config_and_creates_missing_directories(tmp_path):
    env = user_env(tmp_path)
    assert run("config", "init", "--user", env=env).returncode == 0
    config = tmp_path / ".config/tidings/tidings.toml"
    assert mode(config) == 0o600 and mode(tmp_path / ".config") == 0o700
    assert run("config", "check", env=env).returncode == 0


def test_init_never_overwrites(tmp_path):
    env = user_env(tmp_path)
    config = tmp_path / ".config/tidings/tidings.toml"
    config.parent.mkdir(parents=True)
    config.write_text("# mine\n")
    again = run("config", "init", env=env)
    assert again.returncode == 2 and again.stdout == "", again
    assert again.stderr == f"tidings: {config} exists; not overwriting it (edit it, or move it away first)\n"
    assert config.read_text() == "# mine\n"
    assert not (config.parent / "plugins.d").exists()


def test_system_init_writes_a_readable_config_for_the_service(tmp_path):
    """--system with --config: where the package build puts /etc/tidings/tidings.toml."""
    config = tmp_path / "etc/tidings/tidings.toml"
    env = user_env(tmp_path, TIDINGS_CONFIG=str(tmp_path / "elsewhere.toml"))
    out = run("config", "init", "--system", "--config", str(config), env=env)
    assert out.returncode == 0, out
    assert (mode(config), mode(config.parent), mode(config.parent / "plugins.d")) == (0o644, 0o755, 0o755)
    text = config.read_text()
    assert '[sinks.journal]\ntype = "stdout"' in text and "desktop" not in text.replace("your desktop", "")
    assert f"tidings --config {config} config check" in out.stdout and "systemctl enable --now tidings" in out.stdout
    # The lookup (here $TIDINGS_CONFIG) would not find it: said so.
    assert f"note: without --config, tidings reads {tmp_path}/elsewhere.toml, not this file" in out.stdout
    check = run("config", "check", "--config", str(config), env=env)
    assert check.returncode == 0, check


def test_init_that_cannot_create_the_file_says_why(tmp_path):
    (tmp_path / "afile").write_text("")
    target = tmp_path / "afile" / "tidings.toml"
    out = run("config", "init", "--system", "--config", str(target), env=user_env(tmp_path))
    assert out.returncode == 2 and out.stdout == "", out
    assert out.stderr.startswith(f"tidings: cannot create {tmp_path}/afile"), out
