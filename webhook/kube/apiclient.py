"""Requests through the official client's `ApiClient`, where a kubeconfig is given.

Its Configuration builds the URL and the headers (the bearer token with its refresh hook, basic
credentials) and its urllib3 pool (client certificates, the cluster CA, proxies) sends them. Imported only
by webhook.kube.rest for such a client: a pod, which never has a kubeconfig, loads no urllib3.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import urllib3

from webhook.kube.transport import Broken, ReadTimeout, Request, Unreachable

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

FAILURES = (urllib3.exceptions.HTTPError, OSError)


def send(client: ApiClient, request: Request) -> Urllib3Answer:
    """The request on the client's pool, with the credentials its Configuration gives."""
    _, url, headers, _, _ = client.param_serialize(
        request.method,
        request.path,
        query_params=list((request.query or {}).items()) or None,
        header_params=dict(request.headers),
        auth_settings=["BearerToken"],
    )
    config = client.configuration
    if not any(key.lower() == "authorization" for key in headers) and (config.username or config.password):
        headers.update(urllib3.make_headers(basic_auth=f"{config.username}:{config.password}"))
    pool: urllib3.PoolManager = client.rest_client.pool_manager
    timeout = request.timeout
    limits = (
        urllib3.Timeout(connect=timeout[0], read=timeout[1])
        if isinstance(timeout, tuple)
        else urllib3.Timeout(total=timeout)
    )
    try:
        response = pool.request(
            request.method,
            url,
            body=request.body,
            headers=headers,
            timeout=limits,
            preload_content=False,
            retries=None if request.retry else False,  # None: the pool's default
        )
    except FAILURES as err:
        raise _unreachable(err) from None
    return Urllib3Answer(response)


class Urllib3Answer:
    """An answer on the client's pool (webhook.kube.transport.Answer)."""

    def __init__(self, response: urllib3.BaseHTTPResponse) -> None:
        self.status = response.status
        self.reason = str(response.reason or "")
        self._response = response

    def read(self) -> bytes:
        try:
            return self._response.read()
        except FAILURES as err:
            raise _unreachable(err) from None

    def chunks(self) -> Iterator[bytes]:
        try:
            yield from self._response.stream(amt=None, decode_content=True)
        except FAILURES as err:
            raise _unreachable(err) from None

    def release(self) -> None:
        self._response.release_conn()

    def shutdown(self) -> None:
        """urllib3 >= 2.3 has shutdown(); close() is the fallback."""
        if hasattr(self._response, "shutdown"):
            self._response.shutdown()
        else:
            self._response.close()


def _unreachable(err: Exception) -> Unreachable:
    kind = (
        ReadTimeout
        if isinstance(err, urllib3.exceptions.ReadTimeoutError)
        else Broken
        if isinstance(err, urllib3.exceptions.ProtocolError)
        else Unreachable
    )
    return kind(str(err), type(err).__name__)
