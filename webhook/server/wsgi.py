"""The WSGI side of the serving loop: the environ of a complete request, and the app run on it whole.

The connection (webhook.server.http1) reads and answers on the worker's loop; this part only translates
between a request read whole (webhook.server.reader) and WSGI: request_environ on the loop, call_wsgi in a
pool thread. Like the connection, it never imports Flask: the app is whatever WSGI callable the worker
hands over.
"""

from __future__ import annotations

import io
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote_to_bytes

from webhook.server.reader import Request

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
Answer = tuple[str, list[tuple[str, str]], bytes]


def request_environ(
    request: Request, scheme: str, sockname: Any, peername: Any
) -> dict[str, Any]:  # sockname, peername: the transport's extra info (a tuple, or None)
    """The WSGI environ of a request read whole: its body is all of it, so there is no chunked framing."""
    target = request.target
    query = target.partition(b"?")[2]
    server = sockname or ("", 0)
    peer = peername or ("", 0)
    environ: dict[str, Any] = {
        "REQUEST_METHOD": request.method.decode("ascii"),
        "SCRIPT_NAME": "",
        "PATH_INFO": request_path(request),
        "QUERY_STRING": query.decode("latin-1"),
        "RAW_URI": target.decode("latin-1"),
        "SERVER_NAME": str(server[0]),
        "SERVER_PORT": str(server[1]),
        "SERVER_PROTOCOL": "HTTP/" + request.http_version,
        "REMOTE_ADDR": str(peer[0]),
        "REMOTE_PORT": str(peer[1]),
        "CONTENT_LENGTH": str(len(request.body)),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scheme,
        "wsgi.input": io.BytesIO(request.body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    for raw_name, raw_value in request.headers:
        name = raw_name.decode("latin-1")
        value = raw_value.decode("latin-1")
        if name == "content-type":
            environ["CONTENT_TYPE"] = value
        elif name in ("content-length", "transfer-encoding"):
            continue  # the body is whole: its length is CONTENT_LENGTH
        else:
            key = "HTTP_" + name.upper().replace("-", "_")
            environ[key] = f"{environ[key]},{value}" if key in environ else value
    return environ


def request_path(request: Request) -> str:
    """PATH_INFO: the target's path, percent-decoded, without the query (the access log shows the same)."""
    return unquote_to_bytes(request.target.partition(b"?")[0]).decode("latin-1")


def call_wsgi(app: WsgiApp, environ: dict[str, Any]) -> Answer:
    """Run the WSGI app on a complete request (in a pool thread): status, headers and the whole body."""
    started: list[Any] = []

    def start_response(
        status: str, headers: list[tuple[str, str]], exc_info: Any = None
    ) -> Callable[..., Any]:
        started[:] = [status, headers]
        return _no_write

    result = app(environ, start_response)
    try:
        body = b"".join(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    status, headers = started
    return status, list(headers), body


class LazyApp:
    """A WSGI app built on its first request, once, from `build`: the serving worker answers the reviews
    and the probes itself, so a worker that is never asked anything else never loads the web framework."""

    def __init__(self, build: Callable[[], WsgiApp]) -> None:
        self._build = build
        self._app: WsgiApp | None = None
        self._lock = threading.Lock()

    @property
    def built(self) -> bool:
        return self._app is not None

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if self._app is None:
            with self._lock:  # pool threads: build it once
                if self._app is None:
                    self._app = self._build()
        return self._app(environ, start_response)


def _no_write(data: bytes) -> None:
    raise NotImplementedError("the webhook's app returns its body; write() is not supported")
