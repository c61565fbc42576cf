"""A replica told to stop while the API server keeps calling it loses no review.

The API server (Go's net/http) resolves a webhook Service's endpoints only when it dials, and reuses its
kept-alive connections to a replica until the replica closes them; a POST written to a connection the server
is closing is lost (HTTP 500 `failed calling webhook ... write: broken pipe` on a real node, not retried:
Go retries only a request of which nothing was written). Here a Go client of our own does what the API server
does, on several connections, against the real server (gunicorn, TLS): the replica's endpoint is removed
(new connections go to the other replica), SIGTERM follows, and every review must still be answered.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.keepalive_load import build_client, keepalive_load
from testkit.reviews import pod, review
from testkit.server import webhook_server
from testkit.wait import wait_for
from webhook.files import tls

SERVICE_NAME = f"{tls.DEFAULT_SERVICE}.{tls.DEFAULT_NAMESPACE}.svc"
CONNECTIONS = 16
GRACEFUL = 20


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_client(tmp_path_factory.mktemp("go"))


def a_real_pod_review(folder: Path) -> Path:
    """A pod as a Deployment makes it: over 4 KiB, so Go writes it in more than one piece."""
    env = [{"name": f"SETTING_{i}", "value": "x" * 40} for i in range(60)]
    containers = [{"name": "app", "image": "registry.example/app:1.0", "env": env}]
    path = folder / "review.json"
    path.write_text(json.dumps(review(pod("web-7d4b9c", containers=containers))))
    assert path.stat().st_size > 4096
    return path


def test_no_review_is_lost_when_a_replica_stops_under_load(client: Path, tmp_path: Path) -> None:
    certs = tmp_path / "certs"
    tls.write_certificates(certs)
    body = a_real_pod_review(tmp_path)
    serve = ("--workers", "2", "--graceful-timeout", str(GRACEFUL), "--shutdown-delay", "2")
    with (
        webhook_server(tmp_path, "--classes", "examples/priorityclasses.yaml", *serve, cert_dir=certs) as old,
        webhook_server(tmp_path, "--classes", "examples/priorityclasses.yaml", *serve, cert_dir=certs) as new,
    ):
        old_endpoint, new_endpoint = f"{old.host}:{old.port}", f"{new.host}:{new.port}"
        with keepalive_load(
            client,
            certs / tls.CA_CERT,
            body,
            [old_endpoint],
            connections=CONNECTIONS,
            server_name=SERVICE_NAME,
        ) as load:
            wait_for(lambda: load.counts()["ok"] >= 500, timeout=60, what="reviews answered by the replica")
            # The replica is deleted: its endpoint goes, and (after the chart's preStop) SIGTERM comes.
            load.endpoints([new_endpoint])
            old.process.terminate()
            assert old.process.wait(GRACEFUL + 10) == 0
            late = load.counts()["answeredSinceEndpoints"]
            served = late.get(new_endpoint, 0)
            wait_for(
                lambda: load.counts()["answeredSinceEndpoints"].get(new_endpoint, 0) >= served + 500,
                timeout=60,
                what="reviews answered by the other replica",
            )
            counts = load.stop()
    assert counts["failed"] == 0, counts["errors"]
    # The stopping replica was still called on its kept-alive connections after its endpoint went: the test
    # saw the race it is about.
    assert late.get(old_endpoint, 0) > 0, late
    assert counts["answered"][old_endpoint] >= 500 and counts["ok"] == sum(counts["answered"].values())


def test_a_shutdown_delay_not_within_the_graceful_timeout_is_refused(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "webhook", "serve", "--shutdown-delay", "25", "--graceful-timeout", "25"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [
        "priority-webhook serve: error: --shutdown-delay 25: must be less than --graceful-timeout (25), which counts "
        "from SIGTERM and also bounds the requests in progress"
    ]
