"""A replica told to stop while the API server keeps calling it loses no review.

The API server (Go's net/http) resolves a webhook Service's endpoints only when it dials, and reuses its
kept-alive connections to a replica until the replica closes them; a POST written to a connection the server
is closing is lost (HTTP 500 `failed calling webhook ... write: broken pipe` on a real node, not retried:
Go retries only a request of which nothing was written). Here a Go client of our own does what the API server
does, on several connections, against the real server (gunicorn, TLS): the replica's endpoint is removed
(new connections go to the other replica), SIGTERM follows, and every review must still be answered.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from testkit.keepalive_load import build_client, replica_stops_under_load

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
