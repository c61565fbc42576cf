"""Kept-alive HTTPS connections to one server, shared by threads: a pod's way to its API server.

In a pod the project talks to one server, over TLS verified against the cluster CA. The standard
library's http.client does that with what each process loads anyway (the sidecar's health server and
prometheus_client's exposition import it); urllib3 and its imports would add about 2 MiB to every process,
the sidecar's on every node (docs/performance.md). What a pool adds to http.client, as urllib3 and Go's
net/http do it:

- Idle connections are kept (up to `maxsize`; more are opened when all are busy) and reused. One the
  server closed while idle is dropped before reuse: readable at rest means a close or bytes nobody asked
  for.
- A reused connection that fails before any byte of the answer arrives is tried once more on a new one
  (keep-alive's race with the server's idle timeout) when nothing was sent or the method is idempotent,
  Go's rule: an eviction that may have reached the server is never sent twice. A new connection's
  failure is the caller's to retry, with its own backoff.
- The TLS context is made again for each new connection, so a CA file the kubelet updated is read.
- A float timeout bounds the connect and then each read by what remains of it; (connect, read) sets the
  two apart, each read waiting at most `read` (a watch's silence).
"""

from __future__ import annotations

import contextlib
import http.client
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence

from webhook.kube.transport import Broken, ReadTimeout, Timeout, Unreachable

IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"})
CHUNK_BYTES = 64 * 1024
SocketOption = tuple[int, int, int]
# What a read or a request raises when the connection fails under it (ssl.SSLError is an OSError).
FAILURES = (http.client.HTTPException, OSError)


def host_port(host: str, port: str | int) -> str:
    """`host:port`, an IPv6 address in brackets (Go's net.JoinHostPort)."""
    return f"[{host}]:{port}" if ":" in host or "%" in host else f"{host}:{port}"


class _Connection(http.client.HTTPSConnection):
    """http.client's connection with the pool's socket options, set once connected."""

    def __init__(
        self, host: str, port: int, context: ssl.SSLContext, timeout: float, options: Sequence[SocketOption]
    ) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._options = options

    def connect(self) -> None:
        super().connect()
        for option in self._options:
            self.sock.setsockopt(*option)


class _NothingAnswered(Exception):
    """The request failed before any byte of the answer: `sent` tells whether it left whole."""

    def __init__(self, cause: BaseException, sent: bool) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.sent = sent


class ConnectionPool:
    """Connections to `host`:`port`, TLS by `context()` (called for each new connection)."""

    def __init__(
        self,
        host: str,
        port: int,
        context: Callable[[], ssl.SSLContext],
        *,
        maxsize: int,
        socket_options: Sequence[SocketOption] = (),
    ) -> None:
        self.host = host
        self.port = port
        self.address = host_port(host, port)
        self._context = context
        self._maxsize = maxsize
        self._options = tuple(socket_options)
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()

    def request(
        self,
        method: str,
        target: str,
        *,
        headers: Mapping[str, str],
        body: bytes | None,
        timeout: Timeout,
        retry: bool = True,
    ) -> PooledAnswer:
        """Send `method target` and wait for the answer's head; the body is left for the caller to read."""
        connect_timeout, read_timeout = timeout if isinstance(timeout, tuple) else (timeout, timeout)
        reused = self._take()
        if reused is not None:
            try:
                return self._exchange(reused, method, target, headers, body, read_timeout)
            except _NothingAnswered as failed:
                reused.close()
                if not retry or (failed.sent and method not in IDEMPOTENT):
                    raise _broken(failed.cause) from None
        started = time.monotonic()
        conn = self._connect(connect_timeout)
        if not isinstance(timeout, tuple):  # a total: what the connect left of it
            read_timeout = max(timeout - (time.monotonic() - started), 0.001)
        try:
            return self._exchange(conn, method, target, headers, body, read_timeout)
        except _NothingAnswered as failed:
            conn.close()
            raise _broken(failed.cause) from None

    def clear(self) -> None:
        """Close the idle connections; the pool stays usable (as urllib3's clear(): connections in use still
        come back to it when released)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _take(self) -> _Connection | None:
        while True:
            with self._lock:
                if not self._idle:
                    return None
                conn = self._idle.pop()
            if _still_open(conn):
                return conn
            conn.close()

    def _give_back(self, conn: _Connection) -> None:
        with self._lock:
            if len(self._idle) < self._maxsize:
                self._idle.append(conn)
                return
        conn.close()

    def _connect(self, timeout: float) -> _Connection:
        where = self.address
        try:
            conn = _Connection(self.host, self.port, self._context(), timeout, self._options)
        except (OSError, ValueError) as err:  # the CA file unreadable or not PEM
            raise Unreachable(f"TLS for {where}: {err}", type(err).__name__) from None
        try:
            conn.connect()
        except TimeoutError:
            conn.close()
            message = f"connecting to {where}: timed out after {timeout:g} s"
            raise Unreachable(message, "ConnectTimeout") from None
        except OSError as err:  # refused, unreachable, no such host, the TLS handshake refused
            conn.close()
            raise Unreachable(f"connecting to {where}: {err}", type(err).__name__) from None
        return conn

    def _exchange(
        self,
        conn: _Connection,
        method: str,
        target: str,
        headers: Mapping[str, str],
        body: bytes | None,
        read_timeout: float,
    ) -> PooledAnswer:
        sent = False
        try:
            conn.sock.settimeout(read_timeout)
            conn.request(method, target, body=body, headers=dict(headers))
            sent = True
            response = conn.getresponse()
        except TimeoutError:
            conn.close()
            message = f"no answer from {self.address} in {read_timeout:g} s"
            raise ReadTimeout(message, "ReadTimeout") from None
        except FAILURES as err:
            raise _NothingAnswered(err, sent) from None
        return PooledAnswer(self, conn, response)


class PooledAnswer:
    """An answer on its pooled connection (webhook.kube.transport.Answer)."""

    def __init__(self, pool: ConnectionPool, conn: _Connection, response: http.client.HTTPResponse) -> None:
        self.status = response.status
        self.reason = response.reason or ""
        self._pool = pool
        self._conn: _Connection | None = conn
        self._sock = conn.sock
        self._response = response

    def read(self) -> bytes:
        with _mid_answer():
            return self._response.read()

    def chunks(self) -> Iterator[bytes]:
        while True:
            with _mid_answer():
                chunk = self._response.read1(CHUNK_BYTES)
            if not chunk:
                return
            yield chunk

    def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._response.isclosed() and not self._response.will_close:
            self._pool._give_back(conn)
        else:
            conn.close()

    def shutdown(self) -> None:
        # The plain socket's shutdown on the TLS socket's descriptor: SSLSocket.shutdown would also drop
        # its TLS state under the reading thread's feet.
        with contextlib.suppress(OSError):  # already closed
            socket.socket.shutdown(self._sock, socket.SHUT_RDWR)


def _still_open(conn: _Connection) -> bool:
    """Not closed by the server while idle: a socket readable at rest holds an end or stray bytes."""
    if conn.sock is None:
        return False
    poller = select.poll()
    poller.register(conn.sock, select.POLLIN)
    try:
        return not poller.poll(0)
    except OSError:
        return False


@contextlib.contextmanager
def _mid_answer() -> Iterator[None]:
    """A read of the body failing: the transport's errors."""
    try:
        yield
    except TimeoutError:
        raise ReadTimeout("the server went silent mid-answer", "ReadTimeout") from None
    except FAILURES as err:
        raise _broken(err) from None


def _broken(err: BaseException) -> Broken:
    detail = str(err) or type(err).__name__
    return Broken(f"connection broken: {detail}", type(err).__name__)
