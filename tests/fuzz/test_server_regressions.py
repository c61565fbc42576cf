"""Server behaviour the fuzzer found wrong, pinned against the real server."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("method", "path", "content_type", "status"),
    [
        ("GET", "/mutate", "application/json", 405),
        ("PUT", "/validate", "application/json", 405),
        ("POST", "/healthz", "application/json", 405),
        ("POST", "/nope", "application/json", 404),
        ("POST", "/mutate", "text/plain", 400),
    ],
)
@pytest.mark.parametrize("size", [1000, 100_000, 1_000_000])
def test_an_unread_body_does_not_break_the_kept_alive_connection(
    server, method, path, content_type, status, size
):
    # Such errors used to be answered without reading the body: gunicorn then closed the connection (over
    # 64 KiB unread) or parsed the rest of the body as the next request, and the client saw a reset.
    first = server.session.request(
        method, server.url + path, data=b"[" * size, headers={"Content-Type": content_type}, timeout=30
    )
    assert first.status_code == status and "error" in first.json()
    second = server.session.post(
        server.url + "/mutate", data=b"{}", headers={"Content-Type": "application/json"}, timeout=30
    )
    assert second.status_code == 400 and second.json()["error"].startswith("apiVersion")
