"""Process metrics (memory, CPU, open files) of every worker, from a real server (gunicorn, 2 workers),
and the collector's choice of processes."""

from __future__ import annotations

import os
import re
from pathlib import Path

from testkit.server import webhook_server
from testkit.wait import wait_for
from webhook.server import metrics

SAMPLE = re.compile(r'^(process_[a-z_]+)\{pid="(\d+)"\} (\S+)$', re.M)


def by_pid(text: str) -> dict[str, dict[int, float]]:
    found: dict[str, dict[int, float]] = {}
    for name, pid, value in SAMPLE.findall(text):
        found.setdefault(name, {})[int(pid)] = float(value)
    return found


def test_every_worker_reports_its_memory_cpu_and_open_files(tmp_path: Path) -> None:
    with webhook_server(tmp_path, "--workers", "2") as server:

        def two_workers() -> dict[str, dict[int, float]] | None:
            found = by_pid(server.session.get(server.url + "/metrics", timeout=5).text)
            rss = found.get("process_resident_memory_bytes", {})
            return found if len(rss) >= 2 else None

        found = wait_for(two_workers, timeout=60, interval=0.5, what="two workers in the process metrics")
    pids = set(found["process_resident_memory_bytes"])
    for name in (
        "process_cpu_seconds_total",
        "process_open_fds",
        "process_max_fds",
        "process_start_time_seconds",
    ):
        assert set(found[name]) == pids, name
    assert all(value > 10 * 2**20 for value in found["process_resident_memory_bytes"].values())
    assert all(value >= 3 for value in found["process_open_fds"].values())  # stdio at least


def test_only_live_processes_with_metric_files_are_read(tmp_path: Path) -> None:
    dead = 2**22 + 17  # above Linux's pid_max: never a live process
    for name in (f"counter_{os.getpid()}.db", f"gauge_livemin_{dead}.db", "unrelated.txt"):
        (tmp_path / name).write_bytes(b"")
    collector = metrics._ProcessesWithMetricFiles(str(tmp_path))
    assert collector.pids() == [os.getpid()]
    families = {family.name: family for family in collector.collect()}
    (sample,) = families["process_resident_memory_bytes"].samples
    assert sample.labels == {"pid": str(os.getpid())} and sample.value > 0
