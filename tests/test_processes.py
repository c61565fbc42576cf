"""testkit.processes: a server's process tree and its CPU, as the benchmarks read them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from testkit import processes
from testkit.wait import wait_for

# A parent that only waits, and two children that burn CPU until they are killed (as a master and its
# workers); the parent prints its children's pids.
PARENT = """
import subprocess, sys
burn = [sys.executable, "-c", "while True: pass"]
children = [subprocess.Popen(burn) for _ in range(2)]
print(*(c.pid for c in children), flush=True)
for c in children:
    c.wait()
"""


def test_the_tree_lists_the_children_and_their_cpu_is_counted() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        children = [int(pid) for pid in parent.stdout.readline().split()]
        assert len(children) == 2
        assert sorted(processes.tree(parent.pid)) == sorted([parent.pid, *children])
        # The parent itself does nothing: what is counted is its children's.
        wait_for(lambda: processes.cpu_seconds(parent.pid) > 0.2, timeout=60, what="the children's CPU")
        assert processes.cpu_seconds(parent.pid) > processes.cpu_seconds(children[0])
        # Each a Python interpreter: a few MiB resident, as the kernel counts it.
        assert all(1024 < (processes.rss_kib(pid) or 0) < 1024 * 1024 for pid in [parent.pid, *children])
    finally:
        for pid in processes.tree(parent.pid)[1:]:
            os.kill(pid, signal.SIGTERM)
        parent.wait(60)


def test_a_process_that_is_gone_has_no_children_and_no_cpu() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(60)
    assert processes.tree(gone.pid) == [gone.pid]
    assert processes.cpu_seconds(gone.pid) == 0.0
    assert processes.rss_kib(gone.pid) is None
