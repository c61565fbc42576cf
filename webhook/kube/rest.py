"""The project's one way to talk to the API server: JSON in and out, quoted paths, typed errors.

A request goes to a `Client`: in a pod, the service account (webhook.kube.incluster: its token, the
cluster CA and a pool of HTTPS connections on the standard library, without loading the official client or
urllib3); with a kubeconfig, the official client's `ApiClient`, whose Configuration (host, bearer token with
its refresh hook, client certificates, CA, proxies) builds the URL and headers and whose urllib3 pool sends
them (webhook.kube.apiclient). Either way the request itself is made here: bodies and answers stay plain
JSON (dicts and lists, encoded and decoded by webhook.json_codec), since the client's model classes cost
more than the work done with them.

Errors come in three kinds, all `RestError`:

- `ApiError`: the server answered with a non-2xx status; its Status object's reason and message are kept.
- `Unreachable`: no answer (connection refused or reset, TLS refused, a timeout); `ReadTimeout` when the
  server went silent mid-answer, `Broken` when the connection broke mid-answer (webhook.kube.transport).
- `NotJSON`: a 2xx answer that is not JSON.

`stream` opens an answer to be read as it comes (a watch), with the same URL, headers and errors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias
from urllib.parse import quote

from webhook import json_codec
from webhook.kube import list_items
from webhook.kube.incluster import ServiceAccount
from webhook.kube.transport import Answer, Request, Timeout
from webhook.kube.transport import Broken as Broken  # the transports' errors, raised through here
from webhook.kube.transport import ReadTimeout as ReadTimeout
from webhook.kube.transport import RestError as RestError
from webhook.kube.transport import Unreachable as Unreachable

if TYPE_CHECKING:  # the official client is loaded only where a kubeconfig is (webhook.kube.config)
    from kubernetes.client import ApiClient

Client: TypeAlias = "ServiceAccount | ApiClient"

DEFAULT_TIMEOUT = 10.0

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
            body = json_codec.loads(raw) if raw else {}
        except json_codec.DecodeError:
            message = raw[:200].decode("utf-8", "replace").strip()
        else:
            if isinstance(body, dict):
                reason = str(body.get("reason") or "")
                message = str(body.get("message") or "")
        return cls(status, reason, message, http_reason)


class NotJSON(RestError):
    """A 2xx answer whose body is not JSON."""


# -- requests -----------------------------------------------------------------------------------------------
def _send(
    client: Client,
    method: str,
    path: str,
    *,
    query: Mapping[str, str] | None = None,
    body: Any = None,
    content_type: str | None = None,
    timeout: Timeout,
    retry: bool = True,
) -> Answer:
    """Send on the client's transport; the answer's head has arrived, its body is the caller's."""
    headers = {"Accept": "application/json"}
    if content_type:
        headers["Content-Type"] = content_type
    payload = None if body is None else json_codec.dumps(body)
    request = Request(method, path, query, headers, payload, timeout, retry)
    if isinstance(client, ServiceAccount):
        return client.send(request)
    from webhook.kube import apiclient  # a kubeconfig's client, with its urllib3: never loaded in a pod

    return apiclient.send(client, request)


def _read_and_release(answer: Answer) -> bytes:
    """The whole body; the connection goes back to the pool whatever happens."""
    try:
        return answer.read()
    finally:
        answer.release()


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
    answer = _send(client, method, path, query=query, body=body, content_type=content_type, timeout=timeout)
    raw = _read_and_release(answer)
    if not 200 <= answer.status <= 299:
        raise ApiError.from_answer(answer.status, answer.reason, raw)
    if not raw:
        return None
    try:
        return json_codec.loads(raw)
    except json_codec.DecodeError as err:
        raise NotJSON(f"the answer is not JSON: {err}") from None


class Stream:
    """An answer read as it arrives (a watch's events, or a long list), on a connection of the pool."""

    def __init__(self, answer: Answer) -> None:
        self._answer = answer

    def read_json(self) -> Any:
        """The whole answer, decoded."""
        raw = self._answer.read()
        try:
            return json_codec.loads(raw)
        except json_codec.DecodeError as err:
            raise NotJSON(f"the answer is not JSON: {err}") from None

    def read_list(self, each: Callable[[Any], Any]) -> Any:
        """The whole answer, decoded, a List's items one at a time through `each` (webhook.kube.list_items:
        a long list is never held decoded at once)."""
        raw = self._answer.read()
        try:
            return list_items.decode(raw, each)
        except ValueError as err:
            raise NotJSON(f"the answer is not JSON: {err}") from None

    def lines(self) -> Iterator[bytes]:
        """Non-empty lines (a watch's JSON events: one may span chunks, a chunk may hold several)."""
        buffer = b""
        for chunk in self._answer.chunks():
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if line.strip():
                    yield line
        if buffer.strip():
            yield buffer

    def release(self) -> None:
        """Give the connection back to the pool (or drop it, if the answer was not read to its end)."""
        self._answer.release()

    def shutdown(self) -> None:
        """Unblock a reader on another thread."""
        self._answer.shutdown()


def stream(
    client: Client,
    path: str,
    query: Mapping[str, str],
    *,
    connect_timeout: float,
    read_timeout: float,
) -> Stream:
    """GET path?query, its answer left unread for the caller. Not retried by the transport: the caller (a
    reflector) has its own backoff. A non-200 answer is read, released and raised as ApiError."""
    answer = _send(client, "GET", path, query=query, timeout=(connect_timeout, read_timeout), retry=False)
    if answer.status == 200:
        return Stream(answer)
    raise ApiError.from_answer(answer.status, answer.reason, _read_and_release(answer))
