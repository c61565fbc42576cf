"""The server's TLS settings, and certificate rotation without a restart.

The serving worker (webhook.server.worker) asks gunicorn's `ssl_context` hook for a context on every
accepted connection (as gunicorn's own workers do), so rotation needs no SNI trick: the hook returns the
current context of a `ReloadingContext`, which re-reads `tls.crt`/`tls.key` when their identity changed.
Connections already open keep the context they were wrapped with, so nothing in flight is disturbed.

The expiry of the certificate in use is exported by the process that serves with it (a gunicorn worker,
on its first connection and after each reload), never by the master, which serves nothing: a stale
value there would hide a rotation.
"""

from __future__ import annotations

import logging
import os
import socket
import ssl
import threading
import time
from pathlib import Path
from typing import Any

from cryptography import x509

log = logging.getLogger(__name__)

# How often the files are looked at, at most: a stat per connection would be cheap, but a second of
# delay is invisible next to how certificates are rotated (a secret volume updates within a minute).
CHECK_INTERVAL = 1.0


# How often each worker re-checks the files even without new connections (see ReloadingContext.watch).
WATCH_INTERVAL = 5.0

# A client must finish the TLS handshake and send its first request line and headers within this long.
HANDSHAKE_TIMEOUT = 10.0


class ClientSilent(ssl.SSLEOFError, TimeoutError):
    """A read timed out. As an SSL EOF, gunicorn closes the connection quietly (a plain timeout is logged
    with a traceback per client); as a TimeoutError, every `except TimeoutError` still sees it."""


class _QuietTimeoutSocket(ssl.SSLSocket):
    def do_handshake(self, block: bool = False) -> None:
        try:
            super().do_handshake(block)
        except TimeoutError as err:
            raise ClientSilent(ssl.SSL_ERROR_EOF, f"client silent during the TLS handshake: {err}") from None

    def read(self, len: int = 1024, buffer: Any = None) -> Any:
        try:
            return super().read(len, buffer)
        except TimeoutError as err:
            raise ClientSilent(ssl.SSL_ERROR_EOF, f"client silent: {err}") from None


class BoundedServerContext(ssl.SSLContext):
    """An SSLContext whose server sockets start with a timeout (for gunicorn's gthread worker, kept for
    comparisons; the serving worker handshakes on its event loop under its own deadline).

    gunicorn's gthread worker hands a new connection to a pool thread once its first bytes arrive, then
    handshakes and reads the request headers on a blocking socket with no timeout: a client that sends one
    byte and goes quiet would hold that thread for good, and a handful of them every thread. The timeout
    set here bounds each read of the handshake and of the first request's headers and body
    (a stalled body is refused in webhook.server.app.read_body).
    """

    handshake_timeout: float = HANDSHAKE_TIMEOUT
    sslsocket_class = _QuietTimeoutSocket

    def wrap_socket(self, sock: socket.socket, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        sock.settimeout(self.handshake_timeout)
        return super().wrap_socket(sock, *args, **kwargs)


def server_context(
    cert_file: str | os.PathLike[str],
    key_file: str | os.PathLike[str],
    handshake_timeout: float = HANDSHAKE_TIMEOUT,
) -> ssl.SSLContext:
    """TLS 1.2+ server context with Python's default (modern, forward-secret) cipher selection."""
    context = BoundedServerContext(ssl.PROTOCOL_TLS_SERVER)
    context.handshake_timeout = handshake_timeout
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    context.load_cert_chain(cert_file, key_file)
    return context


def not_after(cert_file: str | os.PathLike[str]) -> float:
    """Unix time at which the first certificate in the PEM file expires."""
    with open(cert_file, "rb") as f:
        cert = x509.load_pem_x509_certificate(f.read())
    return cert.not_valid_after_utc.timestamp()


def _identity(path: Path) -> tuple[int, int, int, int]:
    # stat() follows symlinks, so the Kubernetes secret volume's `..data` symlink swap shows up as a
    # new inode; an in-place rewrite shows up in mtime/size.
    st = path.stat()
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


class ReloadingContext:
    """An SSLContext that follows the certificate files: `current()` is called once per connection."""

    def __init__(
        self,
        cert_file: Path,
        key_file: Path,
        *,
        interval: float = CHECK_INTERVAL,
        handshake_timeout: float = HANDSHAKE_TIMEOUT,
    ) -> None:
        self.cert_file, self.key_file, self.interval = Path(cert_file), Path(key_file), interval
        self.handshake_timeout = handshake_timeout
        self._lock = threading.Lock()
        self._identity = self._files_identity()
        self._context = server_context(self.cert_file, self.key_file, handshake_timeout)
        self.not_after = not_after(self.cert_file)
        self._exported_by = 0  # pid of the process that last exported the expiry
        self._next_check = time.monotonic() + interval

    def export_expiry(self) -> None:
        """Put the expiry of the certificate in use into this process's metrics."""
        self._exported_by = os.getpid()
        try:
            from webhook.server import metrics

            metrics.set_certificate_not_after(str(self.cert_file), self.not_after)
        except Exception as err:  # a metric must never stop a connection
            log.warning("certificate expiry not exported: %s", err)

    def _files_identity(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return (_identity(self.cert_file), _identity(self.key_file))

    def watch(self, interval: float = WATCH_INTERVAL) -> None:
        """Export the expiry now and re-check the files every `interval` seconds in this process, on a
        daemon thread: the API server and Prometheus keep their connections open for long, so without it
        a rotation would reach this process (and its expiry metric) only with its next new connection."""
        self.current()

        def run() -> None:
            while True:
                time.sleep(interval)  # a periodic check, nothing to wait on
                self.current()

        threading.Thread(target=run, name="tls-watch", daemon=True).start()

    def current(self) -> ssl.SSLContext:
        if self._exported_by != os.getpid():  # first connection in this (forked) process
            self.export_expiry()
        now = time.monotonic()
        if now < self._next_check:
            return self._context
        with self._lock:
            if now >= self._next_check:
                self._next_check = now + self.interval
                self._maybe_reload()
        return self._context

    def _maybe_reload(self) -> None:
        try:
            identity = self._files_identity()
            if identity == self._identity:
                return
            context = server_context(self.cert_file, self.key_file, self.handshake_timeout)
            expiry = not_after(self.cert_file)
        except (OSError, ssl.SSLError, ValueError) as err:
            # Between writing the key and the certificate the pair does not match, or a file is briefly
            # missing: keep serving the last good pair and look again at the next check.
            log.warning("TLS certificate not reloaded (keeping the current one): %s", err)
            return
        self._identity, self._context, self.not_after = identity, context, expiry
        self.export_expiry()
        log.info("TLS certificate reloaded from %s", self.cert_file)
