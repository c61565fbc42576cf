"""The project's one way to talk to the API server: JSON in and out, quoted paths, typed errors.

A request goes to a `Client`: in a pod, the service account (webhook.kube.incluster: its token, the
cluster CA and a urllib3 pool, without loading the official client); with a kubeconfig, the official
client's `ApiClient`, whose Configuration (host, bearer token with its refresh hook, client certificates,
CA, proxies) builds the URL and headers and whose pool sends them. Either way the request itself is sent
here, on that pool: bodies and answers stay plain JSON (dicts and lists, encoded and decoded with orjson),
since the client's model classes cost more than the work done with them.

Errors come in three kinds, all `RestError`:

- `ApiError`: the server answered with a non-2xx status; its Status object's reason and message are kept.
- `Unreachable`: no answer (connection refused or reset, TLS refused, a timeout); `ReadTimeout` when the
  server went silent mid-answer.
- `NotJSON`: a 2xx answer that is not JSON.

`stream` opens an answer to be read as it comes (a watch), with the same URL, headers and errors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias
from urllib.parse import quote

import orjson
import urllib3

from webhook.kube import list_items
from webhook.kube.incluster import ServiceAccount

if TYPE_CHECKING:  # the official client is loaded only where a kubeconfig is (webhook.kube.config)
    from kubernetes.client import ApiClient

Client: TypeAlias = "ServiceAccount | ApiClient"

DEFAULT_TIMEOUT = 10.0
Timeout = float | tuple[float, float]  # total, or (connect, read), in seconds

CORE_V1 = "/api/v1"
ADMISSIONREGISTRATION_V1 = "/apis/admissionregistration.k8s.io/v1"
POLICY_V1 = "/apis/policy/v1"
SCHEDULING_V1 = "/apis/scheduling.k8s.io/v1"


# -- paths --------------------------------------------------------------------------------------------------
def collection(api: str, plural: str, namespace: str | None = None) -> str:
    """`/api/v1/namespaces/<namespace>/pods`, or the cluster-wide `/api/v1/pods` without a namespace."""
    if namespace is None:
        return f"{api}/{plural}"
    return f"{api}/namespaces/{quote(namespace, safe='')}/{plural}"


def named(collection_path: str, name: str, subresource: str | None = None) -> str:
    """One object of a collection (its name quoted: a name never reaches the URL as path syntax)."""
    path = f"{collection_path}/{quote(name, safe='')}"
    return f"{path}/{subresource}" if subresource else path


def pod_path(namespace: str, name: str, subresource: str | None = None) -> str:
    return named(collection(CORE_V1, "pods", namespace), name, subresource)


# -- errors -------------------------------------------------------------------------------------------------
class RestError(Exception):
    """A request that did not give a usable answer."""


class ApiError(RestError):
    """A non-2xx answer. `reason` is the Status reason (`NotFound`, `TooManyRequests`; when the answer has
    none, `InternalError` for 5xx and `HTTP<status>` otherwise), `message` the Status message (or the start
    of a body that is not a Status), `http_reason` the HTTP reason phrase."""

    def __init__(self, status: int, reason: str = "", message: str = "", http_reason: str = "") -> None:
        self.status = status
        self.reason = reason or ("InternalError" if status >= 500 else f"HTTP{status}")
        self.message = message
        self.http_reason = http_reason
        super().__init__(f"HTTP {status}: {self.summary}")

    @property
    def summary(self) -> str:
        """The first line of the Status message, else the HTTP reason phrase."""
        text = self.message or self.http_reason
        return text.splitlines()[0] if text else ""

    @classmethod
    def from_answer(cls, status: int, http_reason: str, raw: bytes) -> ApiError:
        reason = message = ""
        try:
            body = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError:
            message = raw[:200].decode("utf-8", "replace").strip()
        else:
            if isinstance(body, dict):
                reason = str(body.get("reason") or "")
                message = str(body.get("message") or "")
        return cls(status, reason, message, http_reason)


class Unreachable(RestError):
    """No answer. `kind` names what failed underneath (`MaxRetryError`, `SSLError`, ...)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message or kind)
        self.kind = kind

    @classmethod
    def of(cls, err: Exception) -> Unreachable:
        kind = ReadTimeout if isinstance(err, urllib3.exceptions.ReadTimeoutError) else cls
        return kind(str(err), type(err).__name__)


class ReadTimeout(Unreachable):
    """The server stopped sending before the answer was complete, for longer than the read timeout."""


class NotJSON(RestError):
    """A 2xx answer whose body is not JSON."""


TRANSPORT_ERRORS = (urllib3.exceptions.HTTPError, OSError)


# -- requests -----------------------------------------------------------------------------------------------
def _prepare(
    client: Client, method: str, path: str, query: Mapping[str, str] | None, content_type: str | None
) -> tuple[urllib3.PoolManager, str, dict[str, str]]:
    """The pool to send on, the URL, and the headers with the credentials of the moment."""
    headers = {"Accept": "application/json"}
    if content_type:
        headers["Content-Type"] = content_type
    if isinstance(client, ServiceAccount):
        return client.pool_manager, client.target(path, query, headers), headers
    _, url, headers_, _, _ = client.param_serialize(
        method,
        path,
        query_params=list((query or {}).items()) or None,
        header_params=headers,
        auth_settings=["BearerToken"],
    )
    config = client.configuration
    if not any(key.lower() == "authorization" for key in headers_) and (config.username or config.password):
        headers_.update(urllib3.make_headers(basic_auth=f"{config.username}:{config.password}"))
    return client.rest_client.pool_manager, url, headers_


def _timeout(timeout: Timeout) -> urllib3.Timeout:
    if isinstance(timeout, tuple):
        return urllib3.Timeout(connect=timeout[0], read=timeout[1])
    return urllib3.Timeout(total=timeout)


def call_json(
    client: Client,
    method: str,
    path: str,
    body: Any = None,
    *,
    query: Mapping[str, str] | None = None,
    content_type: str = "application/json",
    timeout: Timeout = DEFAULT_TIMEOUT,
) -> Any:
    """One request with a JSON body (None: no body); the decoded JSON answer (None when empty)."""
    pool, url, headers = _prepare(client, method, path, query, content_type)
    try:
        response = pool.request(
            method,
            url,
            body=None if body is None else orjson.dumps(body),
            headers=headers,
            timeout=_timeout(timeout),
            preload_content=False,
        )
        try:
            raw = response.read()
        finally:
            response.release_conn()
    except TRANSPORT_ERRORS as err:
        raise Unreachable.of(err) from None
    if not 200 <= response.status <= 299:
        raise ApiError.from_answer(response.status, str(response.reason or ""), raw or b"")
    if not raw:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        raise NotJSON(f"the answer is not JSON: {err}") from None


class Stream:
    """An answer read as it arrives (a watch's events, or a long list), on a connection of the pool."""

    def __init__(self, response: urllib3.BaseHTTPResponse) -> None:
        self._response = response

    def read_json(self) -> Any:
        """The whole answer, decoded."""
        try:
            raw = self._response.read()
        except TRANSPORT_ERRORS as err:
            raise Unreachable.of(err) from None
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as err:
            raise NotJSON(f"the answer is not JSON: {err}") from None

    def read_list(self, each: Callable[[Any], Any]) -> Any:
        """The whole answer, decoded, a List's items one at a time through `each` (webhook.kube.list_items:
        a long list is never held decoded at once)."""
        try:
            raw = self._response.read()
        except TRANSPORT_ERRORS as err:
            raise Unreachable.of(err) from None
        try:
            return list_items.decode(raw, each)
        except ValueError as err:
            raise NotJSON(f"the answer is not JSON: {err}") from None

    def lines(self) -> Iterator[bytes]:
        """Non-empty lines (a watch's JSON events: one may span chunks, a chunk may hold several)."""
        buffer = b""
        try:
            for chunk in self._response.stream(amt=None, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield line
        except TRANSPORT_ERRORS as err:
            raise Unreachable.of(err) from None
        if buffer.strip():
            yield buffer

    def release(self) -> None:
        """Give the connection back to the pool (or drop it, if the answer was not read to its end)."""
        self._response.release_conn()

    def shutdown(self) -> None:
        """Unblock a reader on another thread (urllib3 >= 2.3 has shutdown(); close() is the fallback)."""
        if hasattr(self._response, "shutdown"):
            self._response.shutdown()
        else:
            self._response.close()


def stream(
    client: Client,
    path: str,
    query: Mapping[str, str],
    *,
    connect_timeout: float,
    read_timeout: float,
) -> Stream:
    """GET path?query, its answer left unread for the caller. Not retried by the pool: the caller (a
    reflector) has its own backoff. A non-200 answer is read, released and raised as ApiError."""
    pool, url, headers = _prepare(client, "GET", path, query, None)
    try:
        response = pool.request(
            "GET",
            url,
            headers=headers,
            preload_content=False,
            retries=False,
            timeout=urllib3.Timeout(connect=connect_timeout, read=read_timeout),
        )
    except TRANSPORT_ERRORS as err:
        raise Unreachable.of(err) from None
    if response.status == 200:
        return Stream(response)
    try:
        raw = response.read()
    except TRANSPORT_ERRORS as err:
        raise Unreachable.of(err) from None
    finally:
        response.release_conn()
    raise ApiError.from_answer(response.status, str(response.reason or ""), raw)
