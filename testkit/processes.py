"""A server under test as the kernel sees it: its process and its children (gunicorn's master and its
workers), the CPU they have used and the memory they hold, read from /proc."""

from __future__ import annotations

import os
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def tree(pid: int) -> list[int]:
    """`pid` and its children alive now (one level: a gunicorn master's workers)."""
    children: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return [pid]  # gone: callers read nothing from it either
    for task in tasks:
        try:
            children += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue  # a thread that ended while we read
    return [pid, *children]


def cpu_seconds(pid: int) -> float:
    """User + system CPU used so far by `pid` and its children alive now."""
    total = 0
    for each in tree(pid):
        try:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # a worker that exited between the listing and the read
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS


def rss_kib(pid: int) -> int | None:
    """Resident memory of `pid` now, KiB; None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None  # a zombie has no VmRSS line
