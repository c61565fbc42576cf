"""testkit.live: what tests start is stopped newest first, by atexit or SIGTERM, unless already closed."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from testkit import live
from testkit.server import REPO
from testkit.wait import wait_for


def test_stop_all_stops_newest_first_and_skips_what_was_forgotten() -> None:
    stopped: list[str] = []
    registry = live.Registry()  # not the test process's: its control planes stay up
    plane, node, closed = object(), object(), object()
    registry.track(plane, lambda: stopped.append("plane"))
    registry.track(node, lambda: stopped.append("node"))
    registry.track(closed, lambda: stopped.append("closed"))
    registry.forget(closed)
    registry.stop_all()
    assert stopped == ["node", "plane"]
    registry.stop_all()
    assert stopped == ["node", "plane"]  # each at most once


CHILD = """
import sys, time
from pathlib import Path
from testkit import live
out = Path(sys.argv[1])
for name in ("plane", "node"):
    live.track(name, lambda name=name: out.open("a").write(name + "\\n"))
out.open("a").write("ready\\n")
time.sleep(120)
"""


def test_sigterm_stops_what_was_started_before_the_process_dies(tmp_path: Path) -> None:
    out = tmp_path / "stopped"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(out)], cwd=REPO)
    try:
        wait_for(lambda: out.exists() and "ready" in out.read_text(), timeout=60, what="the child to start")
        child.send_signal(signal.SIGTERM)
        assert child.wait(60) == -signal.SIGTERM
    finally:
        child.kill()
    assert out.read_text().split() == ["ready", "node", "plane"]
