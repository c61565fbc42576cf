"""A replica told to stop while the API server keeps calling it loses no review.

The API server (Go's net/http) resolves a webhook Service's endpoints only when it dials, and reuses its
kept-alive connections to a replica until the replica closes them; a POST written to a connection the server
is closing is lost (HTTP 500 `failed calling webhook ... write: broken pipe` on a real node, not retried:
Go retries only a request of which nothing was written). Here a Go client of our own does what the API server
does, on several connections, against the real server (gunicorn, TLS): the replica's endpoint is removed
(new connections go to the other replica), SIGTERM follows, and every review must still be answered.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.keepalive_load import build_client, replica_stops_under_load
from testkit.reviews import pod, review
from testkit.server import EXAMPLE_CLASSES, webhook_server
from testkit.wait import wait_for

GRACEFUL = 20


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_client(tmp_path_factory.mktemp("go"))


def test_no_review_is_lost_when_a_replica_stops_under_load(client: Path, tmp_path: Path) -> None:
    serve = ("--workers", "2", "--graceful-timeout", str(GRACEFUL), "--shutdown-delay", "2")
    counts = replica_stops_under_load(client, tmp_path, serve, graceful_timeout=GRACEFUL)
    assert counts["failed"] == 0, counts["errors"]
    assert counts["exitCode"] == 0
    # The stopping replica was still called on its kept-alive connections after its endpoint went: the test
    # saw the race it is about.
    assert counts["stoppingAnswered"] > 0, counts
    assert counts["answeredByStopping"] >= 500 and counts["ok"] == sum(counts["answered"].values())


def test_a_shutdown_delay_not_within_the_graceful_timeout_is_refused() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "webhook", "serve", "--shutdown-delay", "25", "--graceful-timeout", "25"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [
        "priority-webhook serve: error: --shutdown-delay 25: must be less than --graceful-timeout (25), which "
        "counts from SIGTERM and also bounds the requests in progress"
    ]


def test_during_the_shutdown_delay_new_connections_are_answered_and_closed(tmp_path: Path) -> None:
    """An endpoint's removal reaches the API server after SIGTERM may: it can still dial this replica. /readyz
    says it is stopping (so a replica restarted rather than deleted leaves the endpoints too); /healthz is
    still 200 (the kubelet must not kill it meanwhile).

    One worker: the master relays SIGTERM to each worker in turn, so with two an answer from the first to
    drain can be followed by a new connection the second accepts before it has seen its signal."""
    serve = (
        *("--classes", str(EXAMPLE_CLASSES), "--workers", "1"),
        *("--graceful-timeout", "30", "--shutdown-delay", "20"),
    )
    with webhook_server(tmp_path, *serve) as server:
        body = review(pod("web"))
        assert "close" not in server.review("/mutate", body).headers.get("Connection", "")
        server.process.send_signal(signal.SIGTERM)

        def draining() -> bool:
            return server.review("/mutate", body).headers.get("Connection") == "close"

        wait_for(draining, timeout=15, interval=0.05, what="answers closing their connection")
        # The pool's connection was closed by that answer: this one is new, and still accepted and answered.
        answer = server.review("/mutate", body)
        assert answer.status_code == 200 and answer.json()["response"]["allowed"] is True
        assert answer.headers["Connection"] == "close"
        ready = server.session.get(server.url + "/readyz", timeout=10)
        assert ready.status_code == 503 and ready.json() == {"status": "not ready: shutting down"}
        assert server.session.get(server.url + "/healthz", timeout=10).status_code == 200
        assert server.process.wait(40) == 0
