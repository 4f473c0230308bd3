"""A private D-Bus session bus with python3-dbusmock's notification_daemon template.

    with SessionBus() as bus:
        bus.env            -> environment for tidings (DBUS_SESSION_BUS_ADDRESS, no DISPLAY)
        bus.notifications() -> every Notify call so far, as dicts:
            {"app_name", "replaces_id", "app_icon", "summary", "body", "actions", "hints", "expire_timeout"}
        bus.freeze() / bus.thaw()  -> SIGSTOP / SIGCONT the notification server (a hung server)

dbusmock is imported by /usr/bin/python3 (the Debian package), whatever python runs pytest.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

SYSTEM_PYTHON = "/usr/bin/python3"

_QUERY = r"""
import dbus, json, sys
bus = dbus.bus.BusConnection(sys.argv[1])
mock = bus.get_object("org.freedesktop.Notifications", "/org/freedesktop/Notifications")
def plain(v):
    if isinstance(v, (dbus.Array, list)): return [plain(x) for x in v]
    if isinstance(v, (dbus.Dictionary, dict)): return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, dbus.Byte): return int(v)
    if isinstance(v, dbus.Boolean): return bool(v)
    if isinstance(v, (dbus.String, dbus.ObjectPath, str)): return str(v)
    if isinstance(v, (int, float)): return v
    return str(v)
names = ["app_name", "replaces_id", "app_icon", "summary", "body", "actions", "hints", "expire_timeout"]
calls = mock.GetMethodCalls("Notify", dbus_interface="org.freedesktop.DBus.Mock", timeout=5)
print(json.dumps([dict(zip(names, plain(args))) for _, args in calls]))
"""


def available() -> str | None:
    """Why the desktop tests cannot run here, or None."""
    if not shutil.which("dbus-daemon"):
        return "dbus-daemon not installed (apt: dbus-daemon)"
    if subprocess.run([SYSTEM_PYTHON, "-c", "import dbusmock, dbus"], capture_output=True).returncode != 0:
        return "python3-dbusmock not installed (apt: python3-dbusmock)"
    return None


class SessionBus:
    def __init__(self, capabilities="body body-markup actions", mock=True):
        """`mock=False`: just the bus; the test starts a real notification server (dunst)."""
        self.capabilities = capabilities
        self.with_mock = mock
        self.dir = tempfile.mkdtemp(prefix="tidings-bus-")
        self.daemon = None
        self.mock = None

    def __enter__(self):
        self.daemon = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address=1"],
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.address = self.daemon.stdout.readline().strip()
        assert self.address.startswith("unix:"), self.address
        self.env = {"DBUS_SESSION_BUS_ADDRESS": self.address, "DISPLAY": "", "XDG_RUNTIME_DIR": self.dir}
        if self.with_mock:
            self.start_server()
        return self

    def start_server(self):
        env = {**os.environ, "DBUS_SESSION_BUS_ADDRESS": self.address}
        self.mock = subprocess.Popen(
            [SYSTEM_PYTHON, "-m", "dbusmock", "--session", "--template", "notification_daemon",
             "--parameters", json.dumps({"capabilities": self.capabilities})],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.wait_for_server()

    def wait_for_server(self, timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.server_present():
                return
            time.sleep(0.1)
        raise AssertionError("nobody claimed org.freedesktop.Notifications")

    def server_present(self):
        r = subprocess.run(["dbus-send", f"--bus={self.address}", "--print-reply", "--dest=org.freedesktop.DBus",
                            "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner",
                            "string:org.freedesktop.Notifications"], capture_output=True, text=True)
        return "boolean true" in r.stdout

    def stop_server(self):
        if self.mock and self.mock.poll() is None:
            self.mock.send_signal(signal.SIGCONT)
            self.mock.terminate()
            self.mock.wait(timeout=10)

    def notifications(self):
        r = subprocess.run([SYSTEM_PYTHON, "-c", _QUERY, self.address], capture_output=True, text=True, timeout=20)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def invoke_action(self, notification_id: int, action: str):
        """Emits ActionInvoked as if the user clicked `action` on notification `notification_id`."""
        code = ("import dbus, sys; bus = dbus.bus.BusConnection(sys.argv[1]); "
                "m = bus.get_object('org.freedesktop.Notifications', '/org/freedesktop/Notifications'); "
                "m.EmitSignal('org.freedesktop.Notifications', 'ActionInvoked', 'us', "
                "[dbus.UInt32(int(sys.argv[2])), sys.argv[3]], dbus_interface='org.freedesktop.DBus.Mock')")
        subprocess.run([SYSTEM_PYTHON, "-c", code, self.address, str(notification_id), action], check=True, timeout=20)

    def freeze(self):
        self.mock.send_signal(signal.SIGSTOP)

    def thaw(self):
        self.mock.send_signal(signal.SIGCONT)

    def __exit__(self, *exc):
        self.stop_server()
        if self.daemon.poll() is None:
            self.daemon.terminate()
            self.daemon.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)
