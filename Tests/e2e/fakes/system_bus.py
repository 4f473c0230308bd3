"""A private D-Bus bus that tidings takes for the system bus (DBUS_SYSTEM_BUS_ADDRESS), with
python3-dbusmock's `logind` template and, when a test starts it, its `networkmanager` one.

    with SystemBus() as bus:
        bus.env                              -> {"DBUS_SYSTEM_BUS_ADDRESS": ...} for tidings
        bus.start_network_manager(state=70)  -> NetworkManager on the bus, global State as given
        bus.network_state(20)                -> State changes (StateChanged and PropertiesChanged)
        bus.stop_network_manager()           -> it leaves the bus (NameOwnerChanged)
        bus.prepare_for_sleep(True/False)    -> logind's PrepareForSleep signal

NetworkManager's State (NMState): 20 disconnected, 40 connecting, 70 connected (global).
dbusmock is imported by /usr/bin/python3 (the Debian package), whatever python runs pytest.
"""
from __future__ import annotations

import json
import os
import subprocess
import time

from fakes.session_bus import SYSTEM_PYTHON, available  # noqa: F401  (available: the same needs)

LOGIND = "org.freedesktop.login1"
NETWORK_MANAGER = "org.freedesktop.NetworkManager"

_EMIT = r"""
import dbus, sys
bus = dbus.bus.BusConnection(sys.argv[1])
logind = bus.get_object("org.freedesktop.login1", "/org/freedesktop/login1")
logind.EmitSignal("org.freedesktop.login1.Manager", "PrepareForSleep", "b", [dbus.Boolean(sys.argv[2] == "true")],
                  dbus_interface="org.freedesktop.DBus.Mock")
"""


class SystemBus:
    def __init__(self):
        self.daemon = None
        self.logind = None
        self.network_manager = None

    def __enter__(self):
        # The session configuration: any process of this user may own names and call methods.
        self.daemon = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address=1"],
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.address = self.daemon.stdout.readline().strip()
        assert self.address.startswith("unix:"), self.address
        self.env = {"DBUS_SYSTEM_BUS_ADDRESS": self.address}
        self.logind = self._mock("logind", {}, LOGIND)
        return self

    def _mock(self, template, parameters, name):
        p = subprocess.Popen([SYSTEM_PYTHON, "-m", "dbusmock", "--system", "--template", template,
                              "--parameters", json.dumps(parameters)],
                             env={**os.environ, **self.env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while not self.has_owner(name):
            assert time.monotonic() < deadline, f"nobody claimed {name}"
            time.sleep(0.1)
        return p

    def has_owner(self, name) -> bool:
        r = self._send("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner", f"string:{name}")
        return "boolean true" in r.stdout

    def _send(self, dest, path, method, *args):
        return subprocess.run(["dbus-send", f"--bus={self.address}", "--print-reply", f"--dest={dest}", path, method, *args],
                              capture_output=True, text=True, timeout=20)

    def start_network_manager(self, state=70):
        """The template starts connected (70); another state is set right after (as a uint32:
        its parameters would give the property as an int32 from JSON)."""
        assert self.network_manager is None
        self.network_manager = self._mock("networkmanager", {}, NETWORK_MANAGER)
        if state != 70:
            self.network_state(state)

    def network_state(self, state: int):
        """dbusmock's SetGlobalConnectionState: the State property changes (its
        PropertiesChanged) and NetworkManager's StateChanged(u) is emitted."""
        r = self._send(NETWORK_MANAGER, "/org/freedesktop/NetworkManager",
                       "org.freedesktop.DBus.Mock.SetGlobalConnectionState", f"uint32:{state}")
        assert r.returncode == 0, r.stderr

    def stop_network_manager(self):
        if self.network_manager is not None:
            self.network_manager.terminate()
            self.network_manager.wait(timeout=10)
            self.network_manager = None
        deadline = time.monotonic() + 10
        while self.has_owner(NETWORK_MANAGER):
            assert time.monotonic() < deadline, "NetworkManager's name stayed owned"
            time.sleep(0.1)

    def prepare_for_sleep(self, sleeping: bool):
        subprocess.run([SYSTEM_PYTHON, "-c", _EMIT, self.address, "true" if sleeping else "false"], check=True, timeout=20)

    def __exit__(self, *exc):
        for p in (self.network_manager, self.logind):
            if p is not None and p.poll() is None:
                p.terminate()
                p.wait(timeout=10)
        if self.daemon.poll() is None:
            self.daemon.terminate()
            self.daemon.wait(timeout=10)
