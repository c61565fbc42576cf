"""One HTTP/1.1 connection of the serving loop: a whole request is read, under one deadline, before any
thread is used for it.

The worker's asyncio loop owns every connection (webhook.server.worker); webhook.server.reader parses. A
connection is in one phase at a time:

- READING: from the first byte of a request (for a connection's first request: from the end of the TLS
  handshake) the client has `request_timeout` seconds for the request line, the headers and the whole body.
  A dripping or silent client is answered 408 (or, if it sent nothing, dropped) at the deadline, however
  slowly it sends: the deadline is for the request, not for each read.
- BUSY: the complete request is answered: at once on the loop when the worker can (a small review), else
  in the worker's thread pool (the WSGI app); a pipelined request is read, and waits until the answer is
  sent (reading stops once a request's worth waits).
- IDLE: kept alive between requests, closed after `keepalive` seconds.

Errors found while reading (malformed request line or headers, a bad Content-Length, headers over
MAX_HEADER_BYTES, a body over the limit) are answered here with the same one-line JSON error as the app's,
and the connection is closed: after a framing error nothing on it can be trusted.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, cast

from webhook.server.limits import JSON, Limits, error_body, error_response
from webhook.server.reader import Refusal, Request, RequestReader
from webhook.server.wsgi import Answer, request_environ, request_path

log = logging.getLogger(__name__)
access_log = logging.getLogger("webhook.access")


class Phase(enum.Enum):
    HANDSHAKE = "handshake"
    READING = "reading"
    BUSY = "busy"
    IDLE = "idle"
    LINGER = "linger"
    CLOSED = "closed"


# After an error answer, how long the rest of what the client sends is read and discarded before the close:
# closing a socket with unread data makes the kernel send a reset, which can destroy the answer before the
# client has read it.
LINGER_SECONDS = 2.0
READ_BUFFER = 64 * 1024
# One read buffer for every connection of this process: the worker's event loop thread is its only user, and
# buffer_updated() copies the bytes out before the next read. A buffer per connection was 64 KiB for each
# connection held, silent ones included.
_READ_VIEW = memoryview(bytearray(READ_BUFFER))
# Whole pipelined requests a connection may have read ahead of its answers before it stops reading: a
# client that sends faster than it is answered is held to what it has sent so far, plus one read.
PIPELINED = 16
INTERNAL_ERROR: Answer = ("500 Internal Server Error", [("Content-Type", JSON)], error_body("internal error"))


class Owner(Protocol):
    """What a connection needs from its worker."""

    draining: bool
    access_log: bool

    def answer_now(self, request: Request) -> Answer | None:
        """The answer, when it can be given on the loop (a small review); None: run the app in a thread."""
        ...

    def run_app(self, environ: dict[str, Any]) -> Awaitable[Answer]: ...

    def forget(self, connection: Connection) -> None: ...

    def closed_by_server(self, reason: str) -> None: ...


class Connection(asyncio.BufferedProtocol):
    """An accepted connection, from before its TLS handshake to its close."""

    # From the end of the handshake: asyncio calls connection_lost, which closes it, for every connection it
    # called connection_made for (the reader and its parser refer to each other).
    reader: RequestReader

    def __init__(self, owner: Owner, limits: Limits, loop: asyncio.AbstractEventLoop, scheme: str) -> None:
        self.owner, self.limits, self.loop, self.scheme = owner, limits, loop, scheme
        self.phase = Phase.HANDSHAKE
        self.since = loop.time()  # when the current phase began: the oldest idle connection goes first
        self.transport: asyncio.Transport | None = None
        self.handshake: asyncio.Task[Any] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.keep_alive = True  # the request being answered allows another one after it
        self.waiting = 0  # bytes read while a request is answered
        self.received = False  # any byte of the current request
        self.write_paused = False
        self.after_write: Callable[[], None] | None = None

    # -- asyncio callbacks ---------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # after the TLS handshake
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio.Transport subclasses
        self.handshake = None
        self.reader = RequestReader(self.limits)
        self._read_next(first=True)

    # A buffered protocol: asyncio's TLS reads decrypted bytes straight into the shared buffer. As a plain
    # Protocol each read would allocate (and mostly free again) a 256 KiB bytes object.
    def get_buffer(self, sizehint: int) -> memoryview:
        return _READ_VIEW

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(bytes(_READ_VIEW[:nbytes]))

    def data_received(self, data: bytes) -> None:
        if self.phase in (Phase.CLOSED, Phase.LINGER):
            return
        self.reader.feed(data)
        if self.phase is Phase.BUSY:
            self.waiting += len(data)
        # Pipelined requests are read ahead of their answers, but reading stops (until the next answer is
        # sent) once a request's worth waits behind the one being answered, or PIPELINED whole ones wait:
        # pausing on every pipelined request would cost a wake-up each.
        limit = self.waiting > self.limits.max_header_bytes or len(self.reader.ready) > PIPELINED
        if limit and self.transport is not None:
            self.transport.pause_reading()
        if self.phase is Phase.BUSY:
            return
        if self.phase is Phase.IDLE:
            self._enter(Phase.READING, self.limits.request_timeout, "deadline")
        self.received = True
        self._process()

    def eof_received(self) -> bool:
        if self.phase in (Phase.READING, Phase.IDLE):
            self.reader.end_of_input()
            if self.reader.ready:
                self.phase = Phase.READING
                self._process()
            else:
                self._close()
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timer()
        self.phase = Phase.CLOSED
        # The transport refers back to this protocol (asyncio's TLS layer keeps its bound methods): dropping
        # it here frees the connection, its TLS state and its buffers at once, by reference counting, instead
        # of whenever the cyclic garbage collector next runs a full collection.
        self.transport = None
        self.handshake = None
        self.after_write = None
        self.reader.close()
        self.owner.forget(self)

    def pause_writing(self) -> None:
        # A client that does not read its answers: bounded like a slow request.
        self.write_paused = True
        self._cancel_timer()
        self.timer = self.loop.call_later(self.limits.request_timeout, self._expire, "write")

    def resume_writing(self) -> None:
        self.write_paused = False
        self._cancel_timer()
        then, self.after_write = self.after_write, None
        if then is not None:
            then()

    # -- what the worker does to a connection --------------------------------------------------------------

    def evict(self) -> None:
        """Make room for a new connection (the worker is at its connection limit)."""
        self.owner.closed_by_server("limit")
        self._drop()

    def drain(self) -> None:
        """The worker is shutting down: close now if idle, otherwise after the answer in progress.

        An idle connection gets our TLS close_notify but its client's is not waited for: a kept-alive
        client answers only when it next reads, and the worker would wait the TLS shutdown timeout for
        each such connection before it could exit."""
        if self.phase in (Phase.IDLE, Phase.LINGER):
            self._close()
            self._drop()
        elif self.phase is Phase.HANDSHAKE:
            self._drop()

    def abort(self) -> None:
        self._drop()

    # -- reading -------------------------------------------------------------------------------------------

    def _enter(self, phase: Phase, timeout: float | None, reason: str = "") -> None:
        self.phase = phase
        self.since = self.loop.time()
        self._cancel_timer()
        if timeout is not None:
            self.timer = self.loop.call_later(timeout, self._expire, reason)

    def _read_next(self, first: bool = False) -> None:
        self.waiting = 0
        queued = bool(self.reader.ready)
        if first or queued or self.reader.in_message:
            self._enter(Phase.READING, self.limits.request_timeout, "deadline")
            self.received = queued or self.reader.in_message
        else:
            self._enter(Phase.IDLE, self.limits.keepalive, "idle")
        assert self.transport is not None
        if len(self.reader.ready) <= PIPELINED:
            self.transport.resume_reading()
        if queued:
            # Next turn of the loop: an answer given on the loop lands here from _process, and a client's
            # pipelined requests would otherwise nest one call deeper each.
            self.loop.call_soon(self._process)
        else:
            self._process()

    def _process(self) -> None:
        if self.phase is not Phase.READING:
            return
        if self.reader.ready:
            item = self.reader.ready.popleft()
            if isinstance(item, Refusal):
                self._refuse(item.status, item.message, "protocol")
            else:
                self._dispatch(item)
        elif self.reader.awaiting_continue:
            self.reader.awaiting_continue = False
            self._write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _expire(self, reason: str) -> None:
        self.timer = None
        if self.phase is Phase.LINGER:
            self._close()
        elif self.phase is Phase.IDLE:
            self.owner.closed_by_server("idle")
            self._close()
        elif self.phase is Phase.READING and self.received:
            self._refuse(408, f"request: not complete within {self.limits.request_timeout:g} s", "deadline")
        elif self.phase is Phase.READING:
            self.owner.closed_by_server("silent")
            self._drop()
        elif reason == "write":
            self.owner.closed_by_server("write")
            self._drop()

    # -- answering -----------------------------------------------------------------------------------------

    def _dispatch(self, request: Request) -> None:
        assert self.transport is not None
        self._enter(Phase.BUSY, None)
        self.keep_alive = request.keep_alive
        started = time.perf_counter()
        try:
            answer = self.owner.answer_now(request)
        except Exception:
            answer = INTERNAL_ERROR
            log.exception(
                "unexpected error answering %s %s", request.method.decode("ascii"), request_path(request)
            )
        if answer is not None:
            self._finish(request.method.decode("ascii"), request_path(request), answer, started)
            return
        environ = request_environ(
            request,
            self.scheme,
            self.transport.get_extra_info("sockname"),
            self.transport.get_extra_info("peername"),
        )
        task = self.loop.create_task(self._answer(environ, started))
        task.add_done_callback(_log_crash)

    async def _answer(self, environ: dict[str, Any], started: float) -> None:
        try:
            answer = await self.owner.run_app(environ)
        except Exception:
            log.exception("unexpected error answering %s %s", environ["REQUEST_METHOD"], environ["PATH_INFO"])
            answer = INTERNAL_ERROR
        self._finish(environ["REQUEST_METHOD"], environ["PATH_INFO"], answer, started)

    def _finish(self, method: str, path: str, answer: Answer, started: float) -> None:
        if self.phase is Phase.CLOSED:
            return
        status, headers, body = answer
        self._send(status, headers, body, method == "HEAD")
        if self.owner.access_log:
            peer = self.transport.get_extra_info("peername") if self.transport is not None else None
            access_log.info(
                '%s "%s %s" %s %d %.1fms',
                peer[0] if peer else "-",
                method,
                path,
                status.split(" ", 1)[0],
                len(body),
                (time.perf_counter() - started) * 1000,
            )

    def _send(self, status: str, headers: list[tuple[str, str]], body: bytes, head: bool) -> None:
        again = self.keep_alive and not self.owner.draining
        lines = [f"HTTP/1.1 {status}\r\n"]
        lines.extend(
            f"{name}: {value}\r\n"
            for name, value in headers
            if name.lower() not in ("connection", "content-length")
        )
        lines.append(f"Content-Length: {len(body)}\r\n")
        if not again:
            lines.append("Connection: close\r\n")
        head_text = "".join(lines)
        if head_text.count("\n") != len(lines) or head_text.count("\r") != len(lines):
            # A header of ours with a line break in it: a bug, and the client still gets one line.
            log.error("cannot send the answer: a line break in its status or headers: %r", head_text)
            self._write(error_response(500, "internal error"))
            self._close()
            return
        self._write(head_text.encode("latin-1") + b"\r\n" + (b"" if head else body))
        if again:
            if self.write_paused:
                self.after_write = self._read_next
            else:
                self._read_next()
        else:
            self._close()

    def _refuse(self, status: int, message: str, reason: str) -> None:
        """Answer an error that no request may follow, then close."""
        self.owner.closed_by_server(reason)
        self._write(error_response(status, message))
        self._enter(Phase.LINGER, LINGER_SECONDS, "linger")
        if self.transport is not None:
            self.transport.resume_reading()

    # -- closing -------------------------------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def _close(self) -> None:
        """Close after what was written is sent (TLS close_notify included)."""
        self._cancel_timer()
        if self.transport is not None:
            self.phase = Phase.CLOSED if self.phase is not Phase.BUSY else self.phase
            self.transport.close()
        elif self.handshake is not None:
            self.handshake.cancel()

    def _drop(self) -> None:
        """Close at once, discarding anything unsent."""
        self._cancel_timer()
        if self.transport is not None:
            self.transport.abort()
        elif self.handshake is not None:
            self.handshake.cancel()

    def _cancel_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


def _log_crash(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("connection task failed", exc_info=task.exception())
