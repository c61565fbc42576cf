"""`plan` shows its progress on standard error when that is a terminal, and only then; the answer on
standard output is the same either way."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.preemption.planner_data.builders import HIGH, LOW, VL, L, node, pod
from webhook.commands.progress import DELAY_VARIABLE

NODES = 200  # the dry run tells its progress every 64 nodes


@pytest.fixture
def files(tmp_path: Path) -> tuple[str, str]:
    items = [node(f"n{i:03d}") for i in range(NODES)]
    items += [pod(f"p{i:03d}", f"n{i:03d}", LOW, L, start=i) for i in range(NODES)]
    cluster, pending = tmp_path / "c.json", tmp_path / "p.json"
    cluster.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    pending.write_text(json.dumps(pod("pre", "", HIGH, VL)))
    return str(cluster), str(pending)


def run(files: tuple[str, str], *, terminal: bool, delay: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `plan`, its stderr a pseudo-terminal or a pipe."""
    cmd = [sys.executable, "-m", "webhook", "plan", "--cluster", files[0], "--pod", files[1], "-o", "json"]
    env = {**os.environ, DELAY_VARIABLE: delay}
    if not terminal:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, check=False)
        return proc.returncode, proc.stdout, proc.stderr
    master, slave = pty.openpty()
    err: list[bytes] = []

    def drain() -> None:  # concurrently: a full terminal buffer would block the command
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the command and its terminal end are gone
                return
            if not chunk:
                return
            err.append(chunk)

    reader = threading.Thread(target=drain)
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave, env=env, text=True)
        os.close(slave)
        reader.start()
        stdout, _ = proc.communicate(timeout=120)
        reader.join(timeout=30)
        return proc.returncode, stdout, b"".join(err).decode()
    finally:
        os.close(master)


def test_a_terminal_sees_reading_and_examining_then_a_clean_line(files):
    code, out, err = run(files, terminal=True, delay="0")
    assert code == 0 and json.loads(out)["node"] is not None
    assert re.search(rf"\r\x1b\[Kreading {re.escape(files[0])}: \d+/\d+ MiB, \d+ nodes, \d+ pods", err)
    assert "\r\x1b[Kexamining nodes: 64/200" in err
    assert err.endswith("\r\x1b[K")  # erased before the command ends: the prompt starts on a clean line


def test_a_pipe_sees_nothing_and_the_answer_is_the_same(files):
    quiet = run(files, terminal=False, delay="0")
    shown = run(files, terminal=True, delay="0")
    assert quiet[2] == ""
    assert quiet[:2] == shown[:2]


def test_a_quick_run_on_a_terminal_shows_nothing(files):
    code, _, err = run(files, terminal=True, delay="600")
    assert (code, err) == (0, "")
