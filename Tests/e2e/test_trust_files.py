"""Files tidings acts on must be safe from other users (sshd's StrictModes): the main config,
plugins_dir and every plugin in it, exec commands, the state directory and its database.

Every refusal names the file at fault and says what to run; `config check` reports all of them.
The suite runs under /tmp (1777, sticky): a sticky world-writable directory above the files is
fine, others may not replace what they do not own there.
"""
import base64
import os
import pwd
import stat

import pytest

NOBODY = pwd.getpwnam("nobody").pw_uid
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def marker_plugin(tidings, name="probe", mode=0o600):
    """A plugin whose command leaves a marker file when it runs."""
    marker = tidings.root / f"{name}.ran"
    tidings.write_plugin(f"{name}.toml", f"""
        provider = "exec"
        command = ["/bin/sh", "-c", "touch {marker}; echo '{{\\"key\\": \\"a\\", \\"title\\": \\"A\\"}}'"]
    """, mode=mode)
    return marker


def refused(r, path, text):
    assert r.code == 78, r
    assert any(line.startswith(f"tidings: {path}: ") and text in line for line in r.stderr.splitlines()), r


def test_world_writable_plugin_config_is_refused_and_not_run(tidings):
    marker = marker_plugin(tidings, mode=0o666)
    p = tidings.plugins / "probe.toml"
    r = tidings.check()
    refused(r, p, f"plugin config is writable by group or others (mode 666): chmod go-w {p}")
    assert not marker.exists(), "the command of an untrusted plugin ran"
    refused(tidings.run("config", "check"), p, "writable by group or others")


def test_world_writable_main_config_is_refused(tidings):
    tidings.write_config('[sinks.console]\ntype = "stdout"\n', mode=0o666)
    marker = marker_plugin(tidings)
    r = tidings.check()
    refused(r, tidings.config, f"config file is writable by group or others (mode 666): chmod go-w {tidings.config}")
    assert not marker.exists()


def test_world_writable_plugins_dir_is_refused(tidings):
    marker = marker_plugin(tidings)
    os.chmod(tidings.plugins, 0o777)
    r = tidings.check()
    refused(r, tidings.plugins, f"plugins directory is writable by group or others (mode 777): chmod go-w {tidings.plugins}")
    assert not marker.exists()
    os.chmod(tidings.plugins, 0o1777)  # sticky does not help: others could still add plugins
    refused(tidings.run("config", "check"), tidings.plugins, "plugins directory is writable by group or others (mode 1777)")


def test_writable_directory_above_the_config_is_refused_unless_sticky(tidings):
    marker_plugin(tidings)
    os.chmod(tidings.root, 0o777)
    try:
        r = tidings.run("config", "check")
        refused(r, tidings.root, f"directory is writable by group or others (mode 777), so they could replace what tidings reads below it: chmod go-w {tidings.root}")
        assert r.stderr.count(f"tidings: {tidings.root}: ") == 1, "one directory, one report"
        os.chmod(tidings.root, 0o1777)  # like /tmp
        assert tidings.run("config", "check").code == 0
    finally:
        os.chmod(tidings.root, 0o700)


@as_root
def test_files_owned_by_another_user_are_refused(tidings):
    marker_plugin(tidings)
    exe = tidings.write_plugin("lister", "#!/bin/sh\necho\n", mode=0o755)
    os.chown(exe, NOBODY, -1)
    os.chown(tidings.plugins / "probe.toml", NOBODY, -1)
    r = tidings.run("config", "check")
    refused(r, exe, f"plugin is owned by nobody (uid {NOBODY}), not by root (the running user): chown root {exe}")
    refused(r, tidings.plugins / "probe.toml", "plugin config is owned by nobody")


def test_every_problem_is_reported_at_once(tidings):
    """The group-writable files of a checkout made with umask 002, and more: one run lists all."""
    tidings.write_config("", mode=0o664)
    marker_plugin(tidings, mode=0o664)
    exe = tidings.write_plugin("lister", "#!/bin/sh\necho\n", mode=0o775)
    tidings.write_plugin("typo.toml", 'provider = "exec"\ncommand = "./lister --all"\n')
    r = tidings.run("config", "check")
    refused(r, tidings.config, f"chmod go-w {tidings.config}")
    refused(r, tidings.plugins / "probe.toml", "chmod go-w")
    refused(r, exe, f"plugin is writable by group or others (mode 775): chmod go-w {exe}")
    assert f"{tidings.plugins / 'typo.toml'}:2: source \"typo\": 'command' must be an array" in r.stderr, r


def test_a_secret_file_others_can_write_is_refused(tidings):
    """Whoever can replace a `X_file` secret chooses the credential tidings sends."""
    secret = tidings.write_secret("hook", "whsec_" + base64.b64encode(b"k" * 32).decode())
    os.chmod(secret, 0o666)
    tidings.write_config(f"""
        [sinks.hook]
        type = "webhook"
        url = "http://127.0.0.1:9/hook"
        secret_file = "{secret}"
        """)
    r = tidings.run("config", "check")
    assert r.code == 78, r
    assert f"{secret}: secret file is writable by group or others (mode 666): chmod go-w {secret}" in r.stderr, r
    os.chmod(secret, 0o600)
    assert tidings.run("config", "check").code == 0


def test_exec_command_outside_plugins_dir_is_checked(tidings):
    bin_dir = tidings.root / "bin"
    bin_dir.mkdir()
    cmd = bin_dir / "check-thing"
    cmd.write_text("#!/bin/sh\necho\n")
    os.chmod(cmd, 0o755)
    os.chmod(bin_dir, 0o777)
    p = tidings.write_plugin("thing.toml", f'provider = "exec"\ncommand = ["{cmd}", "-v"]\n')
    r = tidings.run("config", "check")
    assert r.code == 78, r
    assert f"{p}:2: source \"thing\": {bin_dir}: directory is writable by group or others (mode 777)" in r.stderr, r
    os.chmod(bin_dir, 0o755)
    os.chmod(cmd, 0o757)
    r = tidings.run("config", "check")
    assert f"{p}:2: source \"thing\": {cmd}: command is writable by group or others (mode 757): chmod go-w {cmd}" in r.stderr, r
    os.chmod(cmd, 0o755)
    assert tidings.run("config", "check").code == 0


def test_exec_sink_command_is_checked(tidings):
    bin_dir = tidings.etc / "bin"
    bin_dir.mkdir()
    cmd = bin_dir / "notify"
    cmd.write_text("#!/bin/sh\ncat >/dev/null\n")
    os.chmod(cmd, 0o777)
    tidings.write_config('[sinks.pager]\ntype = "exec"\ncommand = ["bin/notify", "--quiet"]\n')
    r = tidings.run("config", "check")
    assert r.code == 78, r
    assert f'{tidings.config}:3: sink "pager": {cmd}: command is writable by group or others (mode 777): chmod go-w {cmd}' in r.stderr, r
    tidings.write_config('[sinks.pager]\ntype = "exec"\ncommand = "bin/notify --quiet"\n')
    r = tidings.run("config", "check")
    assert f"{tidings.config}:3: sink \"pager\": 'command' must be an array" in r.stderr, r


def test_command_given_as_a_string_suggests_the_array(tidings):
    p = tidings.write_plugin("disk.toml", 'provider = "exec"\ncommand = "./check --warn 90"\n')
    r = tidings.run("config", "check")
    assert r.code == 78
    assert f'{p}:2: source "disk": \'command\' must be an array (the program, then each argument), like command = ["./check", "--warn", "90"]' in r.stderr, r


def test_exec_source_whose_working_directory_is_missing(tidings):
    tidings.write_config("""
        plugins_dir = "nowhere"

        [sources.disk]
        provider = "exec"
        command = ["/bin/true"]
    """)
    r = tidings.run("config", "check")
    assert r.code == 78
    assert f'{tidings.config}:4: source "disk": its working directory, plugins_dir {tidings.etc / "nowhere"}, does not exist' in r.stderr, r


# state ---------------------------------------------------------------------------------------


def test_state_database_is_created_0600_in_a_0700_directory(tidings):
    marker_plugin(tidings)
    assert tidings.check().code == 0
    assert stat.S_IMODE(os.stat(tidings.state).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(tidings.state / "tidings.sqlite").st_mode) == 0o600
    # One made by an older version with the umask's 0644 is narrowed.
    os.chmod(tidings.state / "tidings.sqlite", 0o644)
    assert tidings.check().code == 0
    assert stat.S_IMODE(os.stat(tidings.state / "tidings.sqlite").st_mode) == 0o600


def test_world_writable_state_dir_is_refused(tidings):
    marker_plugin(tidings)
    tidings.state.mkdir()
    os.chmod(tidings.state, 0o777)
    r = tidings.check()
    assert r.code == 2, r
    assert f"{tidings.state}: state directory is writable by group or others (mode 777): chmod 700 {tidings.state}" in r.stderr, r
    assert not (tidings.state / "tidings.sqlite").exists()


@as_root
def test_state_dir_of_another_user_is_refused(tidings):
    tidings.state.mkdir(mode=0o700)
    os.chown(tidings.state, NOBODY, -1)
    r = tidings.run("sources")
    assert r.code == 2, r
    assert f"{tidings.state}: state directory is owned by nobody (uid {NOBODY})" in r.stderr, r


@pytest.mark.parametrize("name", ["tidings.sqlite", "tidings.sqlite-wal", "tidings.sqlite-shm"])
def test_symlinked_database_files_are_refused(tidings, name):
    marker = marker_plugin(tidings)
    tidings.state.mkdir(mode=0o700)
    target = tidings.root / "elsewhere"
    link = tidings.state / name
    os.symlink(target, link)
    r = tidings.check()
    assert r.code == 2, r
    assert f"{link}: state database file is a symbolic link, which tidings does not follow" in r.stderr, r
    assert not target.exists(), "the link was followed"
    assert not marker.exists()
