"""Removing pods through the API: the Eviction subresource (honours PodDisruptionBudgets) or a plain delete.

Bodies and answers stay dicts (webhook.kube.rest), so no model classes are built on the hot path. Every call
carries a UID precondition, so a pod recreated under the same name is never removed by mistake.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from webhook.kube import rest
from webhook.kube.rest import DEFAULT_TIMEOUT


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


def failure(err: rest.ApiError) -> Outcome:
    """The Status reason and message of a refused request (kept to one line for logs and events)."""
    message = err.message or err.http_reason
    return Outcome(ok=False, status=err.status, reason=err.reason, message=" ".join(message.split()))


def evict(
    api_client: rest.Client, namespace: str, name: str, uid: str, *, timeout: float = DEFAULT_TIMEOUT
) -> Outcome:
    """POST a policy/v1 Eviction: the API server checks the pod's PodDisruptionBudget (429 if it forbids)."""
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
        "deleteOptions": {"preconditions": {"uid": uid}},
    }
    return _attempt(api_client, "POST", rest.pod_path(namespace, name, "eviction"), body, timeout, "Evicted")


def delete(
    api_client: rest.Client,
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
    return _attempt(api_client, "DELETE", rest.pod_path(namespace, name), body, timeout, "Deleted")


def _attempt(
    api_client: rest.Client, method: str, path: str, body: Any, timeout: float, done: str
) -> Outcome:
    try:
        rest.call_json(api_client, method, path, body, timeout=timeout)
    except rest.ApiError as err:
        return failure(err)
    except rest.RestError as err:  # connection refused or reset, timeouts, bad answers
        return Outcome(ok=False, status=0, reason="Unreachable", message=" ".join(str(err).split())[:200])
    return Outcome(ok=True, status=201 if method == "POST" else 200, reason=done, message="")


def own_grace_period(pod: dict[str, Any]) -> int | None:
    """The pod's own `terminationGracePeriodSeconds` (None lets the API server apply its default, 30)."""
    value = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    return value if isinstance(value, int) and not isinstance(value, bool) else None
