"""What one request and one connection may cost the server, and the one-line JSON error for going over.

Shared by the Flask app and the serving loop (webhook.server.http1), which answers requests that never reach
the app (too large, malformed, too slow) with the same kind of error the app gives. Imports neither Flask
nor prometheus_client: gunicorn's master imports the serving loop before the metrics directory is set.
"""

from __future__ import annotations

from dataclasses import dataclass
from http import HTTPStatus

from webhook import json_codec

# An UPDATE review carries the object twice, each up to the API server's 3 MiB request limit.
MAX_BODY_BYTES = 7 * 1024 * 1024
# Request line and headers together. The API server sends a few hundred bytes; gunicorn allowed 4 KiB for
# the line and 100 fields of 8 KiB each, h11 (our parser before llhttp) 16 KiB, which is plenty and keeps
# a dripped header block small.
MAX_HEADER_BYTES = 16 * 1024
# Longest a client may take for the TLS handshake, and for a whole request (line, headers and body) from
# its first byte (or, for the first request of a connection, from the end of the handshake). The API
# server's default webhook timeout is 10 s, so an honest request is never cut by it.
REQUEST_TIMEOUT = 10.0
# How long an idle kept-alive connection stays open. The API server (Go's HTTP client) keeps idle
# connections for 90 s: a shorter server-side keep-alive means a fresh handshake for most reviews after a
# quiet minute, a longer one only idle sockets.
KEEPALIVE = 75.0
# After SIGTERM, how long the server goes on accepting and answering (each answer with `Connection: close`)
# before it stops accepting and closes the connections its clients left idle. The API server resolves a
# webhook Service's endpoints only when it dials, and reuses its kept-alive connections to a replica until
# that replica closes them: a connection closed while idle can meet a request the client has just written
# (lost, not retried: a POST), one closed after an answer that said so cannot. 0: stop at once.
SHUTDOWN_DELAY = 0.0
# Connections one worker process holds at most; the oldest one not being answered is closed to make room.
MAX_CONNECTIONS = 1000
JSON = "application/json"


@dataclass(frozen=True)
class Limits:
    request_timeout: float = REQUEST_TIMEOUT
    keepalive: float = KEEPALIVE
    max_connections: int = MAX_CONNECTIONS
    max_body_bytes: int = MAX_BODY_BYTES
    max_header_bytes: int = MAX_HEADER_BYTES
    shutdown_delay: float = SHUTDOWN_DELAY


def error_body(message: str) -> bytes:
    """`{"error": "<one line>"}`: the body of every error the server gives, from the app or not."""
    return json_codec.dumps({"error": " ".join(message.split())})


def error_response(status: int, message: str) -> bytes:
    """A whole HTTP/1.1 error response that closes the connection (sent when no request can follow)."""
    body = error_body(message)
    reason = HTTPStatus(status).phrase
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: {JSON}\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body
