"""The gunicorn worker of `serve`: an asyncio loop that owns every connection, and a small thread pool
that runs only complete requests.

Why not gunicorn's own workers: gthread hands a connection to a pool thread as soon as it is readable and
reads the request there, on a blocking socket. A client that drips a byte now and then holds that thread
for as long as it likes (a read timeout bounds each read, not the request), so a handful of slow clients
take every thread and the API server's calls time out. gevent/eventlet would need monkeypatching under
the kubernetes client's threads and still read in the request's greenlet without an overall deadline.

Here the loop does the TLS handshake (bounded), reads and parses each request whole (llhttp, under one
deadline, webhook.server.http1), and only then answers it: a small review on the loop itself, through the
endpoint the app also uses (webhook.server.endpoint: no hand-off to a thread and back, no Flask request
machinery), anything else in a pool thread that runs the WSGI app.
A connection waiting for its client costs no thread and about 38 KiB (mostly OpenSSL's state; the read
buffers are one per process: webhook.server.tlsproto); a worker holds at most `max_connections` of them
and closes the oldest one not being answered to make room for a new one.

gunicorn's master is kept as it is: it binds, forks, replaces dead workers, relays SIGTERM (graceful:
stop accepting, close idle connections, let requests in progress finish for `graceful_timeout`), and
kills a worker whose heartbeat stops. On SIGTERM a worker first goes on serving for the shutdown delay
(webhook.server.limits.SHUTDOWN_DELAY), each answer closing its connection, and only then stops accepting
and closes what its clients left idle. TLS contexts come from gunicorn's `ssl_context` hook, once per
connection, so a rotated certificate is used by the next connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import os
import signal
import socket
import ssl
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Protocol

from gunicorn.workers.base import Worker

from webhook.server.http1 import Connection, Phase
from webhook.server.limits import JSON, Limits
from webhook.server.reader import Request
from webhook.server.tlsproto import accept_tls
from webhook.server.wsgi import Answer, call_wsgi

if TYPE_CHECKING:  # imported by gunicorn's master before the metrics its module loads may be
    from webhook.server.probes import Probes

HEARTBEAT = 1.0  # seconds between notifications to the master (it kills a worker silent for `timeout`)
# How often, at most, freed heap memory is handed back to the system after connections have closed.
TRIM_INTERVAL = 10.0
TLS_SHUTDOWN_TIMEOUT = 2.0  # waiting for the client's close_notify when we close
_JSON_TYPE = ("Content-Type", JSON)
_SHUTTING_DOWN = b'{"status": "not ready: shutting down"}'
# accept() errors that mean "out of a resource for now": wait a little instead of spinning.
_RESOURCE_ERRORS = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


class OnLoop(Protocol):
    """An admission path (webhook.server.endpoint.ReviewEndpoint; the worker is imported by gunicorn's
    master, before the metrics that module loads may be): on the loop, or else in a pool thread."""

    def answer_on_loop(self, content_type: str | None, body: bytes) -> tuple[int, bytes] | None: ...

    def answer(self, content_type: str | None, read_body: Callable[[], bytes]) -> tuple[int, bytes]: ...


class AsyncWorker(Worker):  # type: ignore[misc]  # gunicorn has no type information
    """A gunicorn worker class; the limits come from the application's `serving_limits()`."""

    alive: bool  # gunicorn's: cleared by its SIGTERM handler, and by us once stopping

    def init_signals(self) -> None:
        super().init_signals()  # gunicorn's defaults until the loop takes the signals over in run()

    def run(self) -> None:
        limits_of = getattr(self.app, "serving_limits", None)
        self.limits: Limits = limits_of() if callable(limits_of) else Limits(keepalive=self.cfg.keepalive)
        endpoints_of = getattr(self.app, "review_endpoints", None)
        self.endpoints: dict[str, OnLoop] = dict(endpoints_of() if callable(endpoints_of) else {})
        self.endpoints_raw = {path.encode("ascii"): endpoint for path, endpoint in self.endpoints.items()}
        probes_of = getattr(self.app, "status_probes", None)
        probes: Probes | None = probes_of() if callable(probes_of) else None
        self.probes_on_loop = {
            path.encode("ascii"): probe for path, probe in (probes.on_loop() if probes else {}).items()
        }
        self.probes_in_thread = probes.in_thread() if probes else {}
        self.connections: dict[Connection, None] = {}  # in accept order
        self.draining = False  # answers close their connection (Owner protocol)
        self.closing = False  # no more accepting: the last connection to close lets the worker exit
        self.access_log = bool(self.cfg.accesslog)
        self.closed_counts: dict[str, int] = {}
        self.closed_since_trim = 0
        try:
            asyncio.run(self._serve())
        finally:
            self.pool.shutdown(wait=False, cancel_futures=True)

    # -- the Owner protocol of webhook.server.http1 ---------------------------------------------------------

    def answer_now(self, request: Request) -> Answer | None:
        path = request.target.partition(b"?")[0]
        if request.method in (b"GET", b"HEAD"):
            if self.draining and path == b"/readyz":
                # Stopping: out of the Service's endpoints even where the pod is not deleted (a restart).
                return "503 Service Unavailable", [_JSON_TYPE], _SHUTTING_DOWN
            probe = self.probes_on_loop.get(path)
            return None if probe is None else _status_answer(*probe())
        if request.method != b"POST":
            return None
        endpoint = self.endpoints_raw.get(path)
        if endpoint is None:
            return None
        content_type = request.header(b"content-type")
        answered = endpoint.answer_on_loop(
            None if content_type is None else content_type.decode("latin-1"), request.body
        )
        if answered is None:
            return None
        status, data = answered
        return _status_answer(status, JSON, data)

    def run_app(self, environ: dict[str, Any]) -> asyncio.Future[Answer]:
        """In a pool thread: a review or /metrics without the web framework, anything else through the app
        (built on its first such request: webhook.server.wsgi.LazyApp)."""
        method, path = environ["REQUEST_METHOD"], environ["PATH_INFO"]
        endpoint = self.endpoints.get(path) if method == "POST" else None
        if endpoint is not None:
            return self.loop.run_in_executor(self.pool, _review_in_thread, endpoint, environ)
        probe = self.probes_in_thread.get(path) if method in ("GET", "HEAD") else None
        if probe is not None:
            return self.loop.run_in_executor(self.pool, lambda: _status_answer(*probe()))
        return self.loop.run_in_executor(self.pool, call_wsgi, self.wsgi, environ)

    def forget(self, connection: Connection) -> None:
        self.connections.pop(connection, None)
        self.closed_since_trim += 1
        if self.closing and not self.connections:
            self.all_closed.set()

    def closed_by_server(self, reason: str) -> None:
        self.closed_counts[reason] = self.closed_counts.get(reason, 0) + 1

    # -- the loop -------------------------------------------------------------------------------------------

    async def _serve(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.pool = ThreadPoolExecutor(max_workers=self.cfg.threads, thread_name_prefix="request")
        self.stop = asyncio.Event()
        self.all_closed = asyncio.Event()
        self.quitting = asyncio.Event()
        self.quit = False
        self.loop.add_signal_handler(signal.SIGTERM, self.stop.set)
        for sig in (signal.SIGQUIT, signal.SIGINT):
            self.loop.add_signal_handler(sig, self._quit)
        self.loop.add_signal_handler(signal.SIGUSR1, self.log.reopen_files)
        if not self.alive:
            # SIGTERM came while the app was loading (gunicorn's handler only clears `alive`): without this
            # the worker would wait for a signal already spent, until the master kills it after
            # graceful_timeout, and `serve` stopped just after it started took that long to exit.
            self.stop.set()
        self._metrics = _connection_metrics()
        accepting = [self.loop.create_task(self._accept(listener.sock)) for listener in self.sockets]
        heartbeat = self.loop.create_task(self._heartbeat())
        await self.stop.wait()

        # Told to stop. Every answer from now on closes its connection, which the client then never reuses.
        self.draining = True
        stopping = self.loop.time()
        if not self.quit and self.limits.shutdown_delay > 0:
            # Go on accepting and answering while the endpoint's removal reaches the clients; the idle
            # connections stay open for their client's next request (see limits.SHUTDOWN_DELAY).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.quitting.wait(), self.limits.shutdown_delay)
        self.alive = False
        for task in accepting:
            task.cancel()
        for listener in self.sockets:
            listener.close()
        if not self.quit:
            self.closing = True
            for connection in list(self.connections):
                connection.drain()
            if self.connections:
                left = self.cfg.graceful_timeout - (self.loop.time() - stopping)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.all_closed.wait(), max(left, 0.0))
        for connection in list(self.connections):
            connection.abort()
        heartbeat.cancel()
        await asyncio.sleep(0)  # let the aborts and cancellations run

    def _quit(self) -> None:
        self.quit = True
        self.quitting.set()
        self.stop.set()

    async def _heartbeat(self) -> None:
        trim = _malloc_trim()
        next_trim = self.loop.time() + TRIM_INTERVAL
        while True:
            self.notify()
            if self.ppid != os.getppid():
                self.log.info("Parent changed, shutting down: %s", self)
                self.stop.set()
            if self._metrics is not None:
                self._metrics(len(self.connections), self.closed_counts)
                self.closed_counts = {}
            if trim is not None and self.closed_since_trim and self.loop.time() >= next_trim:
                trim()
                self.closed_since_trim = 0
                next_trim = self.loop.time() + TRIM_INTERVAL
            await asyncio.sleep(HEARTBEAT)

    async def _accept(self, listener: socket.socket) -> None:
        listener.setblocking(False)
        scheme = "https" if self.cfg.is_ssl else "http"
        warned = False
        while True:
            try:
                sock, _ = await self.loop.sock_accept(listener)
            except OSError as err:
                if err.errno in _RESOURCE_ERRORS:
                    if not warned:
                        self.log.warning("cannot accept connections: %s (raise the open files limit)", err)
                        warned = True
                    await asyncio.sleep(0.1)  # back off until a connection closes; nothing to wait on
                continue
            if len(self.connections) >= self.limits.max_connections:
                self._make_room()
            connection = Connection(self, self.limits, self.loop, scheme)
            self.connections[connection] = None
            connection.handshake = self.loop.create_task(self._open(connection, sock))

    def _make_room(self) -> None:
        """Close the connection that has waited longest for its client (never one being answered)."""
        oldest: Connection | None = None
        for connection in self.connections:
            if connection.phase is not Phase.BUSY and (oldest is None or connection.since < oldest.since):
                oldest = connection
        if oldest is not None:
            oldest.evict()
            self.connections.pop(oldest, None)

    async def _open(self, connection: Connection, sock: socket.socket) -> None:
        try:
            if self.cfg.is_ssl:
                context: ssl.SSLContext = self.cfg.ssl_context(self.cfg, None)
                await accept_tls(
                    self.loop, sock, connection, context, self.limits.request_timeout, TLS_SHUTDOWN_TIMEOUT
                )
            else:
                await self.loop.connect_accepted_socket(lambda: connection, sock)
        except (OSError, ssl.SSLError, asyncio.CancelledError):
            # Refused, timed out or evicted during the handshake; asyncio has closed the socket.
            if connection.phase is Phase.HANDSHAKE:
                self.closed_by_server("handshake")
                connection.phase = Phase.CLOSED
            connection.handshake = None
            self.forget(connection)
            sock.close()


def _status_answer(status: int, content_type: str, body: bytes) -> Answer:
    return f"{status} {HTTPStatus(status).phrase}", [("Content-Type", content_type)], body


def _review_in_thread(endpoint: OnLoop, environ: dict[str, Any]) -> Answer:
    """A review that could not be answered on the loop (large, or it waits), by the same endpoint."""
    status, data = endpoint.answer(environ.get("CONTENT_TYPE"), environ["wsgi.input"].read)
    return _status_answer(status, JSON, data)


def _malloc_trim() -> Callable[[], object] | None:
    """glibc's malloc_trim(0), or None under another C library.

    Thousands of connections opened and closed leave glibc's heap with free pages between live blocks
    (OpenSSL's per-connection state is freed in whatever order the clients left); glibc gives back only the
    top of its heap by itself. Measured with 2,000 connections held and reopened, then closed: 81-89 MiB per
    worker with 9 MiB in use, 49 MiB after a trim. A trim takes 1-10 ms on a heap of 100 MiB.
    """
    try:
        function = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_size_t]
    function.restype = ctypes.c_int
    return lambda: function(0)


def _connection_metrics() -> Any:
    """The connection gauges of this worker, or None where metrics cannot load (never stops serving)."""
    try:
        from webhook.server import metrics
    except Exception:  # pragma: no cover - prometheus_client is a dependency
        return None
    return metrics.observe_connections
