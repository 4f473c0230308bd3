"""Ending the servers the tests start (Alertmanager, Dovecot, Synapse): one way for all."""
from __future__ import annotations

import subprocess


def stop_process(proc: subprocess.Popen | None, grace: float = 10) -> None:
    """SIGTERM, `grace` seconds to exit, then SIGKILL; always reaped. A process already gone is left."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
