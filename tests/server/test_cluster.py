"""`serve --kubeconfig`: every worker watches PriorityClasses through the real client against the test API
server; /readyz follows the cache; a class created in the cluster is served by every worker."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import requests

from testkit.kubeapi import KubeAPIServer
from testkit.reviews import pod, review
from testkit.server import WebhookServer, webhook_server
from testkit.wait import wait_for


def fresh_connection_mutate(server: WebhookServer, class_name: str | None) -> dict:
    """A review on a new connection, so that any worker may answer it."""
    resp = requests.post(
        server.url + "/mutate", json=review(pod(class_name=class_name)), verify=str(server.ca_file), timeout=5
    )
    assert resp.status_code == 200
    return resp.json()["response"]


def ready(server: WebhookServer) -> int:
    return requests.get(server.url + "/readyz", verify=str(server.ca_file), timeout=5).status_code


def test_cluster_classes_reach_every_worker(tmp_path: Path) -> None:
    with KubeAPIServer(bookmark_interval=0.2) as api:
        kubeconfig = api.kubeconfig(str(tmp_path / "kubeconfig"))
        api.create("priorityclasses", {"metadata": {"name": "gold"}, "value": 5000})
        with webhook_server(tmp_path, "--kubeconfig", kubeconfig) as server:
            wait_for(lambda: ready(server) == 200, timeout=60, what="/readyz once the cache synced")
            allowed = fresh_connection_mutate(server, "gold")
            assert allowed["allowed"] is True

            # A class created after startup: every worker's own watch must deliver it. Ten answers in a row
            # on fresh connections (spread over both workers) must all know it.
            api.create("priorityclasses", {"metadata": {"name": "platinum"}, "value": 9000})
            streak = []

            def every_worker_knows_platinum() -> bool:
                streak.append(fresh_connection_mutate(server, "platinum")["allowed"])
                return len(streak) >= 10 and all(streak[-10:])

            wait_for(every_worker_knows_platinum, timeout=60, interval=0.02, what="platinum on every worker")

            metrics = requests.get(server.url + "/metrics", verify=str(server.ca_file), timeout=5).text
            assert "priority_webhook_admission_requests_total" in metrics
            watches = [r for r in api.requests if r.watch and "priorityclasses" in r.path]
            assert len({r.path for r in watches}) >= 1 and api.watch_count() >= 2  # one watch per worker


def test_reviews_before_the_first_sync_are_503_never_judged_on_nothing(tmp_path: Path) -> None:
    with KubeAPIServer(bookmark_interval=0.2) as api:
        api.create("priorityclasses", {"metadata": {"name": "default"}, "value": 7, "globalDefault": True})
        kubeconfig = api.kubeconfig(str(tmp_path / "kubeconfig"))
        api.stall()
        with webhook_server(tmp_path, "--kubeconfig", kubeconfig, "--workers", "1") as server:
            assert ready(server) == 503
            answer = requests.post(
                server.url + "/mutate", json=review(pod()), verify=str(server.ca_file), timeout=30
            )
            # 503 makes the API server apply the failurePolicy; an empty set would have said priority 0.
            assert answer.status_code == 503
            assert answer.json() == {
                "error": "PriorityClasses not synced yet: answering now would misjudge every pod"
            }

            api.release()
            wait_for(lambda: ready(server) == 200, timeout=60, what="/readyz once the API answers")
            patch = json.loads(base64.b64decode(fresh_connection_mutate(server, None)["patch"]))
            assert {"op": "add", "path": "/spec/priority", "value": 7} in patch


def test_bad_kubeconfig_exits_2(tmp_path: Path) -> None:
    (tmp_path / "kubeconfig").write_text("not: [a kubeconfig")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "webhook",
            "serve",
            "--bind",
            "127.0.0.1:1",
            "--cert-dir",
            str(tmp_path / "c"),
            "--kubeconfig",
            str(tmp_path / "kubeconfig"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"priority-webhook serve: error: kubeconfig {tmp_path / 'kubeconfig'}")
