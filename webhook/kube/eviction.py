"""Removing pods through the API: the Eviction subresource (honours PodDisruptionBudgets) or a plain delete.

Bodies and answers stay dicts: requests go through the real client's `ApiClient` (configuration, auth,
TLS, connection pool) with a raw JSON body, so no model classes are built on the hot path. Every call
carries a UID precondition, so a pod recreated under the same name is never removed by mistake.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

DEFAULT_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a removal went. `reason` is the API Status reason (e.g. TooManyRequests for a PDB refusal)."""

    ok: bool
    status: int
    reason: str
    message: str

    @property
    def gone(self) -> bool:
        """The pod no longer exists (404), or is another pod by now (UID precondition failed)."""
        return self.status in (404, 409) and self.reason in ("NotFound", "Conflict")

    @property
    def blocked_by_pdb(self) -> bool:
        return self.status == 429


def call_json(
    api_client: ApiClient,
    method: str,
    path: str,
    body: Any = None,
    *,
    query: dict[str, str] | None = None,
    content_type: str = "application/json",
    timeout: float = DEFAULT_TIMEOUT,
) -> Any:
    """One request with a JSON body; the decoded JSON answer, or ApiException for a non-2xx status."""
    method_, url, headers, body_, post = api_client.param_serialize(
        method,
        path,
        query_params=list((query or {}).items()) or None,
        header_params={"Accept": "application/json", "Content-Type": content_type},
        body=body,
        auth_settings=["BearerToken"],
    )
    response = api_client.call_api(method_, url, headers, body_, post, _request_timeout=timeout)
    response.read()
    if not 200 <= response.status <= 299:
        raise ApiException.from_response(
            http_resp=response, body=(response.data or b"").decode("utf-8", "replace"), data=None
        )
    return json.loads(response.data) if response.data else None


def failure(err: ApiException) -> Outcome:
    """The Status reason and message of a refused request (kept to one line for logs and events)."""
    reason, message = "", ""
    try:
        status = json.loads(err.body) if err.body else {}
        if isinstance(status, dict):
            reason = str(status.get("reason") or "")
            message = str(status.get("message") or "")
    except ValueError:
        message = str(err.body)[:200]
    code = int(err.status or 0)
    if not reason:
        reason = "Timeout" if code == 0 else ("InternalError" if code >= 500 else f"HTTP{code}")
    return Outcome(
        ok=False, status=code, reason=reason, message=" ".join((message or str(err.reason)).split())
    )


def pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"


def evict(
    api_client: ApiClient, namespace: str, name: str, uid: str, *, timeout: float = DEFAULT_TIMEOUT
) -> Outcome:
    """POST a policy/v1 Eviction: the API server checks the pod's PodDisruptionBudget (429 if it forbids)."""
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
        "deleteOptions": {"preconditions": {"uid": uid}},
    }
    return _attempt(api_client, "POST", pod_path(namespace, name) + "/eviction", body, timeout, "Evicted")


def delete(
    api_client: ApiClient,
    namespace: str,
    name: str,
    uid: str,
    *,
    grace_period_seconds: int | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> Outcome:
    """DELETE the pod (no PDB check), with `grace_period_seconds` or else the pod's own grace period."""
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}
    if grace_period_seconds is not None:
        body["gracePeriodSeconds"] = grace_period_seconds
    return _attempt(api_client, "DELETE", pod_path(namespace, name), body, timeout, "Deleted")


def _attempt(api_client: ApiClient, method: str, path: str, body: Any, timeout: float, done: str) -> Outcome:
    try:
        call_json(api_client, method, path, body, timeout=timeout)
    except ApiException as err:
        return failure(err)
    except (OSError, HTTPError, ValueError) as err:  # connection refused or reset, timeouts, bad answers
        return Outcome(ok=False, status=0, reason="Unreachable", message=" ".join(str(err).split())[:200])
    return Outcome(ok=True, status=201 if method == "POST" else 200, reason=done, message="")


def own_grace_period(pod: dict[str, Any]) -> int | None:
    """The pod's own `terminationGracePeriodSeconds` (None lets the API server apply its default, 30)."""
    value = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    return value if isinstance(value, int) and not isinstance(value, bool) else None
