"""Plain-HTTP health and metrics endpoints for the sidecar: /healthz, /readyz, /metrics.

A small threaded stdlib server (no Flask: nothing here needs routing or TLS; Prometheus scrapes the pod
IP). Only GET/HEAD are served; anything else is 405, unknown paths 404.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest


class ObservabilityServer:
    def __init__(self, host: str, port: int, *, ready: Callable[[], bool], before_scrape: Callable[[], None]):
        self._ready = ready
        self._before_scrape = before_scrape
        handler = _handler_class(self)
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread = threading.Thread(target=self._server.serve_forever, name="sidecar-http", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:  # shutdown() waits for serve_forever: only after start()
            self._server.shutdown()
            self._thread.join(timeout=5)
        self._server.server_close()

    def respond(self, path: str) -> tuple[int, str, bytes]:
        if path == "/healthz":
            return 200, "text/plain; charset=utf-8", b"ok\n"
        if path == "/readyz":
            if self._ready():
                return 200, "text/plain; charset=utf-8", b"ok\n"
            return 503, "text/plain; charset=utf-8", b"node and pod watches not synced\n"
        if path == "/metrics":
            self._before_scrape()
            return 200, CONTENT_TYPE_LATEST, generate_latest(REGISTRY)
        return 404, "text/plain; charset=utf-8", b"not found\n"


def _handler_class(owner: ObservabilityServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "priority-webhook-sidecar"
        sys_version = ""

        def log_message(self, format: str, *args: Any) -> None:  # scrapes every few seconds: stay quiet
            pass

        def _reply(self, head_only: bool) -> None:
            status, ctype, body = owner.respond(self.path.split("?", 1)[0])
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head_only:
                self.wfile.write(body)

        def do_GET(self) -> None:
            self._reply(head_only=False)

        def do_HEAD(self) -> None:
            self._reply(head_only=True)

        def _not_allowed(self) -> None:
            body = b"method not allowed\n"
            self.send_response(405)
            self.send_header("Allow", "GET, HEAD")
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_PUT = do_DELETE = do_PATCH = _not_allowed

    return Handler
