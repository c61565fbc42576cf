"""The app under the other path that serves it: gunicorn's gthread worker (PRIORITY_WEBHOOK_WORKER_CLASS,
kept for the benchmarks' comparisons), where the app reads the body itself from the socket in a pool thread.

The serving worker hands the app complete requests within the limit, so the app's gthread-era defences
(a per-read socket timeout, draining unread bodies, shutting the read side) are gone. What bounds a stalled
body under gthread is the socket timeout the TLS context sets (webhook.server.tlscontext), which read_body
turns into the usual one-line 400.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from collections.abc import Iterator

import pytest

from testkit.server import EXAMPLE_CLASSES, WebhookServer, webhook_server

READ_TIMEOUT = 2.0


@pytest.fixture(scope="module")
def gthread_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookServer]:
    tmp = tmp_path_factory.mktemp("gthread")
    with webhook_server(
        tmp,
        "--classes",
        str(EXAMPLE_CLASSES),
        "--read-timeout",
        str(READ_TIMEOUT),
        env={"PRIORITY_WEBHOOK_WORKER_CLASS": "gthread"},
    ) as running:
        yield running


def test_under_gthread_a_stalled_body_is_refused_by_the_app(gthread_server: WebhookServer) -> None:
    context = ssl.create_default_context(cafile=str(gthread_server.ca_file))
    raw = socket.create_connection((gthread_server.host, gthread_server.port), timeout=30)
    with context.wrap_socket(raw, server_hostname="localhost") as sock:
        sock.sendall(
            b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b'Content-Length: 1000\r\n\r\n{"apiVersion"'
        )
        response = http.client.HTTPResponse(sock)  # type: ignore[arg-type]
        response.begin()  # the client stays silent
        status, body = response.status, response.read()
    assert status == 400
    assert json.loads(body)["error"] == "body: stalled before its end"
