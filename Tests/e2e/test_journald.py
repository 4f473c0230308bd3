"""Under journald (`JOURNAL_STREAM` names stderr), log lines carry `<N>` syslog priorities and
no timestamp of their own (issue 10, DESIGN §8); otherwise they keep their UTC timestamp."""
from __future__ import annotations

import os
import re
import signal
import subprocess

from conftest import wait_for

TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ")


def failing_source(tidings, journal_stream) -> list[str]:
    """A failing exec source, first in `tidings check` (its one line: the diagnostic) and then
    in the daemon (its log: "poll failed … next try"), stderr into a file; JOURNAL_STREAM from
    `journal_stream(stat of that file)`. Returns the stderr lines of both."""
    tidings.write_config('[sinks.console]\ntype = "stdout"\n')
    tidings.write_plugin("broken", "#!/bin/sh\necho 'it \x1b[2J broke' >&2\nexit 3\n", mode=0o755)
    tidings.write_plugin("broken.toml", 'interval = "1s"\nmax_backoff = "1s"\njitter = 0\n')
    log = tidings.root / "stderr.log"
    with open(log, "w") as f:
        env = {**tidings.env, "JOURNAL_STREAM": journal_stream(os.fstat(f.fileno()))}
        proc = subprocess.run(tidings.args("check", "broken"), stdout=subprocess.PIPE, stderr=f, env=env,
                              timeout=60)
        assert proc.returncode == 2
        daemon = subprocess.Popen(tidings.args("run"), stdout=subprocess.DEVNULL, stderr=f, env=env)
        try:
            wait_for(lambda: "poll failed" in log.read_text(), timeout=30, what="the daemon's failed poll")
        finally:
            daemon.send_signal(signal.SIGTERM)
            assert daemon.wait(timeout=30) == 0
    return log.read_text().splitlines()


def test_journal_lines_carry_priorities_and_no_timestamp(tidings):
    lines = failing_source(tidings, lambda st: f"{st.st_dev}:{st.st_ino}")
    warning = [l for l in lines if "poll failed" in l]
    assert len(warning) >= 1 and warning[0].startswith("<4>warning source=broken poll failed"), lines
    # The diagnostic of the failed source is an error; remote text stays escaped.
    assert "<3>tidings: source broken failed: ./broken exited with status 3: it \\u{1B}[2J broke" in lines, lines
    assert all(re.match(r"^<[0-7]>", l) and not TIMESTAMP.search(l[3:]) for l in lines), lines


def test_other_streams_keep_timestamps(tidings):
    """JOURNAL_STREAM inherited by a process whose stderr goes elsewhere (another inode)."""
    lines = failing_source(tidings, lambda st: f"{st.st_dev}:{st.st_ino + 1}")
    warning = [l for l in lines if "poll failed" in l]
    assert len(warning) >= 1 and TIMESTAMP.match(warning[0]) and " warning source=broken poll failed" in warning[0], lines
    assert not any(l.startswith("<") for l in lines), lines
