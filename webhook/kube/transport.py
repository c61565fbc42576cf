"""What a transport gives webhook.kube.rest, and the three ways a request gets no usable answer from it.

Two transports carry the project's requests. In a pod, the service account's own pool of HTTPS
connections on the standard library (webhook.kube.incluster, webhook.kube.https_pool); with a kubeconfig,
the official client's urllib3 pool (webhook.kube.apiclient), loaded only then. Both hand back an `Answer`
and raise only the errors below, so that nothing above them knows which one carried a request.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

Timeout = float | tuple[float, float]  # total, or (connect, read), in seconds


@dataclass(frozen=True)
class Request:
    """One request as webhook.kube.rest hands it to a transport, which adds the credentials."""

    method: str
    path: str
    query: Mapping[str, str] | None
    headers: Mapping[str, str]
    body: bytes | None
    timeout: Timeout
    retry: bool  # False: no retry by the transport (a watch: the reflector has its own backoff)


class RestError(Exception):
    """A request that did not give a usable answer."""


class Unreachable(RestError):
    """No answer. `kind` names what failed underneath (`ConnectionRefusedError`, `SSLCertVerificationError`,
    urllib3's `MaxRetryError`, ...)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message or kind)
        self.kind = kind


class ReadTimeout(Unreachable):
    """The server stopped sending before the answer was complete, for longer than the read timeout."""


class Broken(Unreachable):
    """The connection broke (closed or reset by the peer) before the answer was complete."""


class Answer(Protocol):
    """An answer whose head has arrived and whose body is still on its connection."""

    status: int
    reason: str

    def read(self) -> bytes:
        """The rest of the body, whole."""

    def chunks(self) -> Iterator[bytes]:
        """The rest of the body as it arrives (a watch), until the server ends it."""

    def release(self) -> None:
        """Give the connection back for reuse if the body was read to its end, else close it."""

    def shutdown(self) -> None:
        """Unblock a reader on another thread; the reader then gets an error or the end."""
