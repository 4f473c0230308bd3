"""The systemd user unit's sandbox (issue 20): etc/systemd/user/tidings.service.in, rendered as
`make install` renders it.

- the directives a user service can have are there, and those that break it are not (a user
  manager fails the start of a unit that drops capabilities, 218/CAPABILITIES; for the mount
  ones systemd 253 and later set up a user namespace in which root's files belong to "nobody",
  and tidings refuses a configuration below a directory it cannot trust);
- `systemd-analyze verify` accepts it; `systemd-analyze security` rates it at most EXPOSURE;
- tidings runs under it in a real systemd user manager, started here for the user daemon when
  this is a container where PID 1 is not systemd and we are root (else skipped, saying so):
  READY=1, state written, an exec plugin (which sees the sandbox from inside) delivered to a
  webhook, to desktop notifications over a session bus and, in the venv, through apprise;
  reload and stop.
"""
from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import ROOT, binary, wait_for
from fakes.server import FakeServer
from fakes.session_bus import _QUERY, SYSTEM_PYTHON, available as bus_unavailable
from fakes.webhook_receiver import WebhookReceiver, receiver_state

UNIT_IN = ROOT / "etc/systemd/user/tidings.service.in"
# `systemd-analyze security --user` on systemd 252: 9.6 before issue 20, 6.4 with the sandbox. Most
# of the rest is capabilities the analyzer assumes (it rates a user unit as if it ran as root).
EXPOSURE = 6.4

SANDBOX = {
    "NoNewPrivileges": "yes",
    "RestrictSUIDSGID": "yes",
    "UMask": "0077",
    "KeyringMode": "private",
    "SystemCallFilter": "@system-service",
    "SystemCallErrorNumber": "EPERM",
    "SystemCallArchitectures": "native",
    "RestrictNamespaces": "yes",
    "RestrictRealtime": "yes",
    "LockPersonality": "yes",
    "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6 AF_NETLINK",
    "MemoryDenyWriteExecute": "yes",
}
# A user manager cannot drop capabilities: the start fails, 218/CAPABILITIES (systemd 252, measured).
FAILS_TO_START = {"CapabilityBoundingSet", "AmbientCapabilities", "ProtectKernelModules", "ProtectKernelLogs",
                  "ProtectClock", "PrivateDevices"}
# Need a mount, UTS or user namespace: ignored by systemd 252, a user namespace (PrivateUsers=) from
# 253 on, in which /, /home and /usr appear owned by nobody and tidings refuses its configuration.
NEEDS_A_NAMESPACE = {"PrivateUsers", "ProtectSystem", "ProtectHome", "ReadWritePaths", "ReadOnlyPaths",
                     "InaccessiblePaths", "ExecPaths", "NoExecPaths", "BindPaths", "BindReadOnlyPaths",
                     "TemporaryFileSystem", "PrivateTmp", "PrivateMounts", "PrivateIPC", "PrivateNetwork",
                     "ProtectKernelTunables", "ProtectControlGroups", "ProtectHostname", "ProtectProc",
                     "ProcSubset", "MountAPIVFS", "RootDirectory"}


def render(bindir: str, unitdir: str = "/usr/lib/systemd") -> str:
    """The unit as the Makefile's install writes it (its sed expressions)."""
    text = subprocess.run(["sed", "-e", f"s|@BINDIR@|{bindir}|g", "-e", f"s|@UNITDIR@|{unitdir}|g", str(UNIT_IN)],
                          capture_output=True, text=True, check=True).stdout
    assert not re.search(r"@[A-Z]+@", text), "a placeholder left"
    return text


def service_settings(text: str) -> dict[str, list[str]]:
    settings: dict[str, list[str]] = {}
    section = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line
        elif section == "[Service]":
            key, _, value = line.partition("=")
            settings.setdefault(key, []).append(value)
    return settings


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    """The rendered unit, its ExecStart the binary under test."""
    unit = tmp_path_factory.mktemp("unit") / "tidings.service"
    unit.write_text(render(os.path.dirname(os.path.abspath(binary()))))
    return unit


def analyze_env(tmp_path: Path) -> dict:
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    return {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}


def test_user_unit_has_the_sandbox_directives():
    settings = service_settings(render("/usr/bin"))
    assert {k: settings.get(k) for k in SANDBOX} == {k: [v] for k, v in SANDBOX.items()}


def test_user_unit_has_nothing_a_user_service_cannot_have():
    settings = service_settings(render("/usr/bin"))
    assert sorted(set(settings) & FAILS_TO_START) == [], "a user manager fails the start (218/CAPABILITIES)"
    assert sorted(set(settings) & NEEDS_A_NAMESPACE) == [], \
        "in the user namespace this needs, / and /home belong to nobody and tidings refuses its configuration"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed (apt: systemd)")
def test_user_unit_passes_systemd_analyze_verify(rendered, tmp_path):
    proc = subprocess.run(["systemd-analyze", "verify", "--user", "--man=no", str(rendered)],
                          capture_output=True, text=True, env=analyze_env(tmp_path))
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", ""), proc


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed (apt: systemd)")
def test_user_unit_exposure_is_at_most_the_measured_level(rendered, tmp_path):
    proc = subprocess.run(["systemd-analyze", "security", "--user", "--offline=yes", "--threshold=100", str(rendered)],
                          capture_output=True, text=True, env=analyze_env(tmp_path))
    level = re.search(r"Overall exposure level for tidings\.service: ([0-9.]+)", proc.stdout)
    assert level and proc.returncode == 0, proc.stdout + proc.stderr
    print(f"exposure {level[1]}")
    assert float(level[1]) <= EXPOSURE, proc.stdout


# -- a real user manager -------------------------------------------------------------------------

# The user the manager runs for: `daemon` (uid 1), an ordinary user to systemd. Not nobody: in a
# user namespace root's files appear owned by the overflow uid, nobody's own, so nobody would trust
# them and the test would not see what the user namespace does to a real user.
USER = pwd.getpwnam("daemon")
UID = USER.pw_uid
SYSTEMD = next((p for p in ("/usr/lib/systemd/systemd", "/lib/systemd/systemd") if os.access(p, os.X_OK)), None)
APPRISE = Path(os.path.abspath(sys.executable)).parent / "apprise"  # the venv's, beside its python


def no_user_manager_here() -> str | None:
    """Why this machine cannot start a user manager of its own for the test, or None."""
    if os.geteuid() != 0:
        return "needs root (a delegated cgroup, a mount namespace, and a user manager for daemon)"
    if Path("/proc/1/comm").read_text().strip() == "systemd":
        return "PID 1 is systemd: this test starts its own user manager only where none can be had (a container)"
    if SYSTEMD is None or not shutil.which("unshare") or not shutil.which("setpriv"):
        return "needs systemd, unshare and setpriv"
    if bus_unavailable():
        return bus_unavailable()
    return None


def as_user(*args: str) -> list[str]:
    return ["setpriv", f"--reuid={UID}", f"--regid={USER.pw_gid}", "--clear-groups", *args]


def cgroup_dirs() -> list[Path]:
    """Where a cgroup for the manager is made: the cgroup2 hierarchy and, on a hybrid layout, the
    name=systemd one (systemd tracks its units there)."""
    mounts = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        fstype, options = fields[fields.index("-") + 1], fields[-1]
        if fstype == "cgroup2":
            mounts["0::"] = Path(fields[4])
        elif fstype == "cgroup" and "name=systemd" in options:
            mounts["name=systemd"] = Path(fields[4])
    dirs = []
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        ident, _, path = line.rpartition(":")
        key = "0::" if ident == "0:" else ident.partition(":")[2]
        if key in mounts:
            dirs.append(mounts[key] / path.lstrip("/"))
    return dirs


class UserManager:
    """`systemd --user` for USER: in a cgroup of its own (delegated: owned by USER), in a private
    mount namespace with a tmpfs on /run holding /run/systemd/system (systemd's sign of a system
    booted with systemd; PID 1 here is not), HOME and XDG_RUNTIME_DIR in `base`."""

    def __init__(self, base: Path, env: dict):
        self.base = base
        self.home = base / "home"
        self.runtime = base / "runtime"
        self.log = base / "manager.log"
        self.env = env
        self.cgroups = [d / f"tidings-test-{os.getpid()}-{int(time.time() * 1000)}" for d in cgroup_dirs()]
        self.proc = None

    def start(self) -> str | None:
        """Starts it; None, or why it could not be started here (the test is then skipped)."""
        if not self.cgroups:
            return "no cgroup hierarchy found"
        for d in (self.home, self.runtime):
            d.mkdir(mode=0o700)
            os.chown(d, UID, USER.pw_gid)
        try:
            for cg in self.cgroups:
                cg.mkdir()
                for p in [cg, *cg.iterdir()]:
                    os.chown(p, UID, USER.pw_gid)
        except OSError as e:
            return f"cannot make a delegated cgroup: {e}"
        env = {"HOME": str(self.home), "USER": USER.pw_name, "LOGNAME": USER.pw_name, "SHELL": "/bin/sh",
               "XDG_RUNTIME_DIR": str(self.runtime), "PATH": "/usr/local/bin:/usr/bin:/bin",
               "SYSTEMD_LOG_TARGET": "console", "SYSTEMD_LOG_LEVEL": "info", **self.env}
        enter = " ".join(f"echo $$ > {cg}/cgroup.procs &&" for cg in self.cgroups)
        inner = ("mount -t tmpfs -o mode=0755 tmpfs /run && mkdir -p /run/systemd/system && exec "
                 + " ".join(as_user("env", "-i", *(f"{k}={v}" for k, v in env.items()), SYSTEMD, "--user")))
        script = f'{enter} exec unshare --mount --propagation private sh -c "$0"'
        self.proc = subprocess.Popen(["sh", "-c", script, inner], stdout=open(self.log, "w"), stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return f"the user manager exited {self.proc.returncode}: {self.log.read_text()[-2000:]}"
            state = self.systemctl("is-system-running", check=False).stdout.strip()
            if state in ("running", "degraded"):
                return None
            time.sleep(0.2)
        return f"the user manager did not come up: {self.log.read_text()[-2000:]}"

    def run(self, *args: str, check=True, timeout=120) -> subprocess.CompletedProcess:
        """A command as USER, in the manager's mount namespace (its /run)."""
        env = ["env", "-i", f"HOME={self.home}", f"XDG_RUNTIME_DIR={self.runtime}", "PATH=/usr/bin:/bin"]
        proc = subprocess.run(["nsenter", "-t", str(self.proc.pid), "-m", *as_user(*env, *args)],
                              capture_output=True, text=True, timeout=timeout)
        assert not check or proc.returncode == 0, f"{args}: {proc}\nmanager log:\n{self.log.read_text()[-3000:]}"
        return proc

    def systemctl(self, *args: str, check=True) -> subprocess.CompletedProcess:
        return self.run("systemctl", "--user", "--no-pager", *args, check=check)

    def show(self, *props: str) -> dict:
        out = self.systemctl("show", "tidings", *(f"--property={p}" for p in props)).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        for cg in self.cgroups:
            for d in sorted((p for p in [cg, *cg.rglob("*")] if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
                for _ in range(50):
                    try:
                        d.rmdir()
                        break
                    except FileNotFoundError:
                        break
                    except OSError:
                        time.sleep(0.1)


class UsersBus:
    """dbusmock's notification server on USER's session bus at `socket`, $XDG_RUNTIME_DIR/bus:
    the user manager's own (its dbus.socket, where installed: the manager hands services that
    address), else a dbus-daemon started here. Both run as USER (a session bus takes
    connections from its own user only)."""

    def __init__(self, base: Path, socket: Path):
        self.base = base
        self.address = f"unix:path={socket}"
        self.socket = socket
        self.daemon = None

    def __enter__(self):
        if not self.socket.exists():
            self.daemon = subprocess.Popen(as_user("dbus-daemon", "--session", "--nofork", f"--address={self.address}"),
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_for(self.socket.exists, what="the session bus")
        env = {"PATH": "/usr/bin:/bin", "DBUS_SESSION_BUS_ADDRESS": self.address, "HOME": str(self.base)}
        self.mock = subprocess.Popen(as_user(SYSTEM_PYTHON, "-m", "dbusmock", "--session", "--template",
                                               "notification_daemon"),
                                     env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: "boolean true" in subprocess.run(
            as_user("dbus-send", f"--bus={self.address}", "--print-reply", "--dest=org.freedesktop.DBus",
                      "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner",
                      "string:org.freedesktop.Notifications"), capture_output=True, text=True).stdout,
                 what="dbusmock's notification server")
        return self

    def notifications(self) -> list[dict]:
        r = subprocess.run(as_user(SYSTEM_PYTHON, "-c", _QUERY, self.address), capture_output=True, text=True,
                           timeout=20, env={"PATH": "/usr/bin:/bin", "HOME": str(self.base)})
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def __exit__(self, *exc):
        for p in (self.mock, self.daemon):
            if p and p.poll() is None:
                p.terminate()
                p.wait(timeout=10)


# The plugin reports the sandbox it finds itself in: no new privileges, a seccomp filter, no user
# namespaces, no writable executable memory (python3 itself runs under MemoryDenyWriteExecute).
PROBE = r"""#!/usr/bin/python3
import json, mmap, subprocess
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
userns = "denied" if subprocess.run(["unshare", "--user", "true"], capture_output=True).returncode else "allowed"
try:
    mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    wx = "allowed"
except OSError:
    wx = "denied"
title = f"nnp={status['NoNewPrivs'].strip()} seccomp={status['Seccomp'].strip()} userns={userns} wx={wx}"
print(json.dumps({"key": "sandbox", "title": title}))
"""
INSIDE = "nnp=1 seccomp=2 userns=denied wx=denied"


class Deployment:
    """tidings installed for USER under the rendered unit (plus `drop_in`, [Service] lines) in a user
    manager of its own: ~/.config/tidings/ with a webhook sink, a desktop sink and, in the venv, an
    apprise sink (both to `hook`), and the probe plugin."""

    def __init__(self, manager: UserManager, hook: FakeServer, drop_in: str = ""):
        self.manager = manager
        config_dir = manager.home / ".config/tidings"
        (config_dir / "plugins.d").mkdir(parents=True)
        self.apprise = APPRISE.exists()
        apprise = ""
        if self.apprise:
            (config_dir / "secrets").mkdir()
            (config_dir / "secrets/apprise.urls").write_text(f"json://127.0.0.1:{hook.httpd.server_address[1]}/apprise\n")
            (config_dir / "secrets/apprise.urls").chmod(0o600)
            apprise = (f'[sinks.push]\ntype = "apprise"\nurls_file = "secrets/apprise.urls"\n'
                       f'command = "{APPRISE}"\ntimeout = "60s"\n')
        (config_dir / "tidings.toml").write_text(
            f'[sinks.hook]\ntype = "webhook"\nurl = "{hook.url}/hook"\ntimeout = "10s"\n\n'
            f'[sinks.desktop]\ntype = "desktop"\n\n{apprise}')
        (config_dir / "tidings.toml").chmod(0o600)
        (config_dir / "plugins.d/probe").write_text(PROBE)
        (config_dir / "plugins.d/probe").chmod(0o755)
        (config_dir / "plugins.d/probe.toml").write_text('interval = "1h"\nnotify_existing = true\n')
        units = manager.home / ".config/systemd/user"
        (units / "tidings.service.d").mkdir(parents=True)
        (units / "tidings.service").write_text(render(os.path.dirname(os.path.abspath(binary()))))
        # The unit's output goes to the journal, which this manager has not got: to a file instead.
        (units / "tidings.service.d/test.conf").write_text(
            f"[Service]\nStandardOutput=append:{manager.home}/tidings.log\nStandardError=inherit\n{drop_in}\n")
        for p in [manager.home / ".config", *(manager.home / ".config").rglob("*")]:
            os.chown(p, UID, USER.pw_gid)
            if p.is_dir():
                p.chmod(0o700)
        manager.systemctl("daemon-reload")

    def log(self) -> str:
        path = self.manager.home / "tidings.log"
        return path.read_text(errors="replace") if path.exists() else "(no log)"

    def start(self) -> subprocess.CompletedProcess:
        """systemctl --user start: for a Type=notify unit it returns once tidings sent READY=1."""
        return self.manager.systemctl("start", "tidings", check=False)


@contextlib.contextmanager
def deployed(drop_in: str = ""):
    """(Deployment, webhook receiver, session bus); skips the test where no user manager can be had."""
    base = Path(tempfile.mkdtemp(prefix="tidings-unit-"))
    base.chmod(0o755)  # USER reaches its HOME below
    manager = UserManager(base, {"DBUS_SYSTEM_BUS_ADDRESS": f"unix:path={base}/no-system-bus"})
    try:
        why = manager.start()
        if why:
            pytest.skip(why)
        with FakeServer(WebhookReceiver, state=receiver_state()) as hook, UsersBus(base, manager.runtime / "bus") as bus:
            yield Deployment(manager, hook, drop_in), hook, bus
    finally:
        manager.stop()
        shutil.rmtree(base, ignore_errors=True)


real_manager = pytest.mark.skipif(no_user_manager_here() is not None, reason=no_user_manager_here() or "")


@real_manager
def test_tidings_runs_under_the_user_unit_in_a_real_user_manager():
    with deployed() as (tidings, hook, bus):
        manager, log = tidings.manager, tidings.log
        start = tidings.start()
        assert start.returncode == 0, f"{start.stderr}\n{log()}\n{manager.systemctl('status', 'tidings', check=False).stdout}"
        shown = manager.show("ActiveState", "SubState", "MainPID")
        assert (shown["ActiveState"], shown["SubState"]) == ("active", "running"), shown
        status = dict(l.split(":", 1) for l in Path(f"/proc/{shown['MainPID']}/status").read_text().splitlines())
        assert (status["NoNewPrivs"].strip(), status["Seccomp"].strip(), status["Uid"].split()[0]) == \
               ("1", "2", str(UID)), status

        wait_for(lambda: [b for b in hook.state["accepted"] if b.get("title") == INSIDE], timeout=60,
                 what=f"the probe's event at the webhook ({hook.state['accepted']}; log: {log()})")
        wait_for(lambda: [n for n in bus.notifications() if n["summary"] == INSIDE], timeout=30,
                 what=f"the probe's event as a desktop notification (log: {log()})")
        if tidings.apprise:
            wait_for(lambda: [r for r in hook.httpd.requests if r.path == "/apprise" and INSIDE in r.body.decode()],
                     timeout=60, what=f"the probe's event through apprise (log: {log()})")
        database = manager.home / ".local/state/tidings/tidings.sqlite"
        assert database.is_file() and database.stat().st_uid == UID, list((manager.home / ".local").rglob("*"))

        manager.systemctl("reload", "tidings")
        wait_for(lambda: manager.show("SubState")["SubState"] == "running", what="running after reload")
        manager.systemctl("stop", "tidings")
        stopped = manager.show("ActiveState", "ExecMainStatus", "Result")
        assert (stopped["ActiveState"], stopped["ExecMainStatus"], stopped["Result"]) == ("inactive", "0", "success"), \
            f"{stopped}\n{log()}"
        print(f"apprise {'delivered' if tidings.apprise else 'not tested (not in this python: run in the venv)'}")


@real_manager
def test_a_user_namespace_makes_tidings_refuse_its_configuration():
    """Why the unit has no ProtectSystem= and the like: the user namespace they need in a user
    manager (explicit here; implied by them from systemd 253 on) shows root's directories as
    nobody's, and tidings will not read a configuration below directories it cannot trust. If
    this changes, the sandbox can grow."""
    with deployed("PrivateUsers=yes") as (tidings, _hook, _bus):
        start = tidings.start()
        assert start.returncode != 0, tidings.log()
        assert "tidings: /: directory is owned by nobody (uid 65534)" in tidings.log(), tidings.log()
        shown = tidings.manager.show("ActiveState", "ExecMainStatus")
        assert (shown["ActiveState"], shown["ExecMainStatus"]) == ("failed", "78"), shown
