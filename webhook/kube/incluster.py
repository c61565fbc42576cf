"""The pod's service account as a connection to the API server, without the official client.

A pod reaches the API server the way the kubelet set it up: the address in `KUBERNETES_SERVICE_HOST` and
`KUBERNETES_SERVICE_PORT`, the cluster CA and a bearer token in files under
/var/run/secrets/kubernetes.io/serviceaccount. That is all the client's in-cluster loader reads, but
importing the client costs a sidecar most of its memory (about 530 modules and 35 MiB) for an `ApiClient`
whose only part used here is urllib3's pool; so this module reads the same files and variables and sends
webhook.kube.rest's requests on a pool of its own verifying the server against that CA
(webhook.kube.https_pool: the standard library's http.client, not urllib3, for the same reason).

The kubelet rotates the projected token (about hourly, long before it expires): the file is read again at
most once a minute, as the client and client-go do, so a rotated token is used within a minute and most
requests read no file.
"""

from __future__ import annotations

import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from urllib.parse import urlencode, urlsplit

from webhook import __version__
from webhook.kube import ConfigError
from webhook.kube.https_pool import ConnectionPool, PooledAnswer, SocketOption, host_port
from webhook.kube.transport import Request

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
HOST_ENV = "KUBERNETES_SERVICE_HOST"
PORT_ENV = "KUBERNETES_SERVICE_PORT"
TOKEN_REREAD_SECONDS = 60.0
USER_AGENT = f"priority-webhook/{__version__}"
# Connections kept per pool: a sidecar holds two watches and makes one request at a time beside them; a
# worker one watch and a pod lookup per concurrent eviction review.
POOL_SIZE = 10
# TCP keep-alive as client-go asks the kernel for it (idle 30 s, then 9 probes 15 s apart): a watch on a
# connection that died silently is noticed in minutes, not hours.
KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_COUNT = 30, 15, 9


def _socket_options() -> list[SocketOption]:
    options = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]  # http.client sets TCP_NODELAY itself
    for name, value in (
        ("TCP_KEEPIDLE", KEEPALIVE_IDLE),
        ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL),
        ("TCP_KEEPCNT", KEEPALIVE_COUNT),
    ):
        if hasattr(socket, name):
            options.append((socket.IPPROTO_TCP, getattr(socket, name), value))
    return options


class ServiceAccount:
    """The API server at `server` (https://host:port), trusted by `ca_file`, as the bearer of the token in
    `token_file`. Thread-safe: the reflectors' threads and the sidecar's loop share one."""

    def __init__(
        self,
        server: str,
        token_file: Path,
        ca_file: Path,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.server = server
        self.token_file = Path(token_file)
        self.ca_file = Path(ca_file)
        self._clock = clock
        self._lock = threading.Lock()
        self._token = self._read_token()
        self._read_at = clock()
        address = urlsplit(server)
        self._pool = ConnectionPool(
            address.hostname or "",
            address.port or 443,
            self._tls_context,
            maxsize=POOL_SIZE,
            socket_options=_socket_options(),
        )

    def _tls_context(self) -> ssl.SSLContext:
        """TLS 1.2 or newer, the server verified against the mounted CA (read again for each connection:
        the kubelet updates the file when the cluster's CA bundle changes)."""
        context = ssl.create_default_context(cafile=str(self.ca_file))
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        return context

    @classmethod
    def from_environment(
        cls, environ: Mapping[str, str] = os.environ, directory: Path | None = None
    ) -> ServiceAccount:
        """The pod's own (`directory`: where the kubelet mounts it, by default); a ConfigError (one line)
        outside a pod or with a file missing or empty."""
        directory = SERVICE_ACCOUNT_DIR if directory is None else directory
        host, port = environ.get(HOST_ENV), environ.get(PORT_ENV)
        if host is None or port is None:
            raise ConfigError(f"in-cluster service account: {HOST_ENV} and {PORT_ENV} are not set")
        if not host or not port:
            raise ConfigError(f"in-cluster service account: {HOST_ENV} or {PORT_ENV} is empty")
        if not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
            raise ConfigError(f"in-cluster service account: {PORT_ENV} is not a port number: {port!r}")
        ca_file = directory / "ca.crt"
        try:
            if not ca_file.read_bytes().strip():
                raise ConfigError(f"in-cluster service account: {ca_file} is empty")
        except OSError as err:
            raise ConfigError(f"in-cluster service account: {ca_file}: {err.strerror or err}") from None
        return cls(f"https://{host_port(host, port)}", directory / "token", ca_file)

    def _read_token(self) -> str:
        try:
            token = self.token_file.read_text(encoding="utf-8").strip()
        except OSError as err:
            raise ConfigError(
                f"in-cluster service account: {self.token_file}: {err.strerror or err}"
            ) from None
        if not token:
            raise ConfigError(f"in-cluster service account: {self.token_file} is empty")
        return token

    def token(self) -> str:
        """The current token: read again once a minute has passed; the last one read while the file is
        briefly missing or empty (the kubelet swaps it in with a rename)."""
        with self._lock:
            now = self._clock()
            if now - self._read_at >= TOKEN_REREAD_SECONDS:
                try:
                    self._token = self._read_token()
                except ConfigError:
                    pass  # keep the last good one; the next request tries the file again
                else:
                    self._read_at = now
            return self._token

    def send(self, request: Request) -> PooledAnswer:
        """The request with the token of the moment and our user agent (webhook.kube.rest)."""
        target = f"{request.path}?{urlencode(request.query)}" if request.query else request.path
        credentials = {"Authorization": f"Bearer {self.token()}", "User-Agent": USER_AGENT}
        return self._pool.request(
            request.method,
            target,
            headers={**request.headers, **credentials},
            body=request.body,
            timeout=request.timeout,
            retry=request.retry,
        )

    def close(self) -> None:
        self._pool.clear()

    def __enter__(self) -> ServiceAccount:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
