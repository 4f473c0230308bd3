"""The desktop sink against a real notification server: dunst on a headless X server (Xvfb)."""
from __future__ import annotations

import json
import os
import random
import shutil
import subprocess

import pytest

from fakes.session_bus import SessionBus, available
from feed import Feed, item
from conftest import wait_for

missing = available() or next((f"{b} not installed" for b in ("Xvfb", "dunst", "dunstctl") if not shutil.which(b)), None)
pytestmark = pytest.mark.skipif(missing is not None, reason=missing or "")


def start_xvfb():
    """Xvfb on a random high display number (low ones may be in use on a shared box)."""
    for _ in range(10):
        n = random.randint(100, 4000)
        if os.path.exists(f"/tmp/.X11-unix/X{n}") or os.path.exists(f"/tmp/.X{n}-lock"):
            continue
        p = subprocess.Popen(["Xvfb", f":{n}", "-nolisten", "tcp", "-screen", "0", "800x600x24"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: p.poll() is not None or os.path.exists(f"/tmp/.X11-unix/X{n}"), what="Xvfb")
        if p.poll() is None:
            return p, f":{n}"
    raise AssertionError("could not start Xvfb")


@pytest.fixture
def dunst(tmp_path):
    with SessionBus(mock=False) as bus:
        xvfb, display = start_xvfb()
        config = tmp_path / "dunstrc"
        config.write_text("[global]\n    font = Monospace 8\n")
        env = {**os.environ, **bus.env, "DISPLAY": display}
        log = open(tmp_path / "dunst.log", "w")
        d = subprocess.Popen(["dunst", "-config", str(config)], env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            try:
                bus.wait_for_server()
            except AssertionError:
                raise AssertionError(f"dunst did not start on {display}: {(tmp_path / 'dunst.log').read_text()}")
            bus.env["DISPLAY"] = display
            yield bus
        finally:
            d.terminate()
            d.wait(timeout=10)
            xvfb.terminate()
            xvfb.wait(timeout=10)


def dunstctl(bus, *args):
    r = subprocess.run(["dunstctl", *args], env={**os.environ, **bus.env}, capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_dunst_shows_the_notification(tidings, dunst):
    feed = Feed(tidings)
    feed.set([item("a", "Nytt meddelande", body="från <Lisa> & co", severity="critical", url="https://example.org/m")])
    tidings.write_config("""
        [sinks.desktop]
        type = "desktop"
        """)
    r = tidings.run("check", "--deliver", env=dunst.env)
    assert r.code == 1, r
    wait_for(lambda: dunstctl(dunst, "count", "displayed").strip() == "1", what="dunst to display it")
    dunstctl(dunst, "close-all")
    history = json.loads(dunstctl(dunst, "history"))["data"][0]
    [n] = [h for h in history if h["summary"]["data"] == "Nytt meddelande"]
    assert n["appname"]["data"] == "tidings"
    assert n["category"]["data"] == "x-tidings.message"
    assert n["timeout"]["data"] == 0, "critical: never expires"
    assert n["body"]["data"] == "från <Lisa> & co", "dunst renders the escaped markup back to the text"
