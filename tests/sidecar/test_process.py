"""The real `python -m webhook sidecar` process, its health/metrics endpoints, CLI errors, and SIGTERM."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import requests

from testkit.wait import wait_for
from tests.sidecar.fixtures import pod, rejected
from webhook.cli import main
from webhook.sidecar.observe import ObservabilityServer

ROOT = Path(__file__).resolve().parents[2]


class Process:
    """A sidecar subprocess whose stderr is collected line by line."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "webhook", "sidecar", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def port(self) -> int:
        def found() -> int | None:
            for line in list(self.lines):
                match = re.search(r"serving health and metrics on 127\.0\.0\.1:(\d+)", line)
                if match:
                    return int(match.group(1))
            assert self.proc.poll() is None, f"sidecar exited: {self.lines}"
            return None

        return wait_for(found, timeout=20, what="sidecar listening")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def test_sidecar_process_serves_preempts_and_stops_on_sigterm(cluster, tmp_path):
    kubeconfig = cluster.api.kubeconfig(str(tmp_path / "kubeconfig"))
    proc = Process("--node", "node-a", "--kubeconfig", kubeconfig, "--bind", "127.0.0.1:0")
    try:
        base = f"http://127.0.0.1:{proc.port()}"
        assert requests.get(f"{base}/healthz", timeout=5).status_code == 200
        wait_for(lambda: requests.get(f"{base}/readyz", timeout=5).status_code == 200, what="ready")
        cluster.add(pod("low", cpu="800m"))
        cluster.add(rejected("crit"))
        wait_for(lambda: cluster.evictions.evicted() == ["default/low"], timeout=20, what="eviction")

        def scraped() -> str | None:
            text = requests.get(f"{base}/metrics", timeout=5).text
            return text if 'priority_webhook_sidecar_preemptions_total{resource="cpu"} 1.0' in text else None

        text = wait_for(scraped, what="preemption in /metrics")
        assert 'priority_webhook_sidecar_pods{state="active",static="false"}' in text
        assert "priority_webhook_sidecar_victims_per_preemption_bucket" in text
        since = re.search(r"^priority_webhook_sidecar_sync_age_seconds (\S+)$", text, re.M)
        assert since is not None and 0 <= float(since.group(1)) < 60

        proc.proc.send_signal(signal.SIGTERM)
        assert proc.proc.wait(15) == 0
        proc._reader.join(5)
        assert any("received SIGTERM" in line for line in proc.lines)
        assert proc.lines[-1].endswith("stopped")
    finally:
        proc.stop()


@pytest.mark.parametrize(("level", "debug_lines"), [([], False), (["--log-level", "debug"], True)])
def test_log_level_chooses_what_is_logged(level, debug_lines, cluster, tmp_path):
    """The chart's sidecar.logLevel reaches the process: debug shows the client's connections, info does not."""
    kubeconfig = cluster.api.kubeconfig(str(tmp_path / "kubeconfig"))
    proc = Process("--node", "node-a", "--kubeconfig", kubeconfig, "--bind", "127.0.0.1:0", *level)
    try:
        base = f"http://127.0.0.1:{proc.port()}"
        wait_for(lambda: requests.get(f"{base}/readyz", timeout=5).status_code == 200, what="ready")
        proc.proc.send_signal(signal.SIGTERM)
        assert proc.proc.wait(15) == 0
        proc._reader.join(5)
        assert any(" INFO " in line for line in proc.lines)
        assert any(" DEBUG " in line for line in proc.lines) is debug_lines
    finally:
        proc.stop()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bind", "nope"], "--bind 'nope': must be HOST:PORT"),
        (["--bind", "1.2.3.4:99999"], "must be HOST:PORT with a port from 0 to 65535"),
        (["--max-evictions-per-minute", "0"], "--max-evictions-per-minute 0: must be at least 1"),
        (["--critical-priority", "-1"], "--critical-priority -1: must be from 0 to 2147483647"),
        (["--kubeconfig", "/nonexistent/kubeconfig"], "kubeconfig /nonexistent/kubeconfig"),
    ],
)
def test_bad_arguments_are_one_line_errors(args, message, capsys):
    assert main(["sidecar", "--node", "node-a", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and err.startswith("priority-webhook sidecar: error:")


def test_bind_in_use_is_a_one_line_error(capsys, tmp_path, cluster):
    taken = ObservabilityServer("127.0.0.1", 0, ready=lambda: True, before_scrape=lambda: None)
    try:
        kubeconfig = cluster.api.kubeconfig(str(tmp_path / "kubeconfig"))
        code = main(
            ["sidecar", "--node", "node-a", "--kubeconfig", kubeconfig, "--bind", f"127.0.0.1:{taken.port}"]
        )
        assert code == 2
        assert "cannot listen" in capsys.readouterr().err
    finally:
        taken.stop()


def test_observability_endpoints():
    ready = threading.Event()
    scrapes = []
    server = ObservabilityServer("127.0.0.1", 0, ready=ready.is_set, before_scrape=lambda: scrapes.append(1))
    server.start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        assert requests.get(f"{base}/healthz", timeout=5).status_code == 200
        assert requests.get(f"{base}/readyz", timeout=5).status_code == 503
        ready.set()
        assert requests.get(f"{base}/readyz", timeout=5).status_code == 200
        metrics = requests.get(f"{base}/metrics", timeout=5)
        assert metrics.status_code == 200 and metrics.headers["Content-Type"].startswith("text/plain")
        assert "priority_webhook_sidecar_eviction_failures_total" in metrics.text or scrapes
        assert scrapes == [1]
        assert requests.get(f"{base}/nope", timeout=5).status_code == 404
        assert requests.post(f"{base}/metrics", timeout=5).status_code == 405
        head = requests.head(f"{base}/healthz", timeout=5)
        assert head.status_code == 200 and head.content == b""
    finally:
        server.stop()
