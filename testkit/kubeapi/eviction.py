"""The `pods/eviction` subresource (policy/v1 Eviction) for the test API server.

Follows pkg/registry/core/pod/storage/eviction.go closely enough for the sidecar's tests:

* 404 for a missing pod, 400 for a body that is not an Eviction for this pod, 409 for a failed
  `deleteOptions.preconditions.uid`.
* A pod that cannot be disrupted any more (terminal phase, Pending, or already being deleted) is deleted
  without consulting any PodDisruptionBudget.
* Otherwise the PDBs in the pod's namespace whose selector matches the pod decide: more than one is a 500
  (upstream does not support it); `status.disruptionsAllowed` of 0 is a 429 `TooManyRequests` with the
  upstream message and a `DisruptionBudget` cause; otherwise the budget is decremented and the pod is
  recorded in `status.disruptedPods`, as the API server does before the disruption controller catches up.
* The pod is then deleted with the Eviction's `deleteOptions` (grace period, preconditions); with the
  server's `graceful_pods=True` it is marked terminating rather than removed. Success is 201 with a
  `Success` Status.

`install(api)` registers it and returns an `EvictionRecorder` with the evictions seen and a fault hook.
"""

from __future__ import annotations

import datetime
import threading
from dataclasses import dataclass, field
from typing import Any

from testkit.kubeapi import ApiError, KubeAPIServer, Request
from webhook.preemption.cluster.pdb import InvalidPdb, parse_selector

PDB_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."
MULTIPLE_PDBS_MESSAGE = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
)


@dataclass(frozen=True)
class EvictionAttempt:
    namespace: str
    name: str
    status: int
    body: Any


@dataclass
class EvictionRecorder:
    """What the eviction subresource saw; `fail_next(n, status)` injects failures (500 by default)."""

    attempts: list[EvictionAttempt] = field(default_factory=list)
    _fail_count: int = 0
    _fail_status: int = 500
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def fail_next(self, count: int, status: int = 500) -> None:
        with self._lock:
            self._fail_count, self._fail_status = count, status

    def _take_fault(self) -> int | None:
        with self._lock:
            if self._fail_count > 0:
                self._fail_count -= 1
                return self._fail_status
        return None

    def evicted(self, status: int = 201) -> list[str]:
        """`namespace/name` of the attempts that got `status`, in order."""
        return [f"{a.namespace}/{a.name}" for a in list(self.attempts) if a.status == status]


def install(api: KubeAPIServer) -> EvictionRecorder:
    recorder = EvictionRecorder()

    def handler(request: Request) -> tuple[int, Any]:
        status = 500
        try:
            status, answer = _evict(request, recorder)
            return status, answer
        except ApiError as err:
            status = err.code
            raise
        finally:
            recorder.attempts.append(EvictionAttempt(request.namespace, request.name, status, request.body))

    api.register_subresource("pods", "eviction", "POST", handler)
    return recorder


def _evict(request: Request, recorder: EvictionRecorder) -> tuple[int, Any]:
    api, body = request.server, request.body
    fault = recorder._take_fault()
    if fault is not None:
        raise ApiError(
            fault, "InternalError" if fault >= 500 else "TooManyRequests", f"injected fault: {fault}"
        )
    if not isinstance(body, dict) or body.get("kind") != "Eviction":
        raise ApiError(400, "BadRequest", "the body of the request must be an Eviction")
    if (body.get("metadata") or {}).get("name") != request.name:
        raise ApiError(400, "BadRequest", "name in URL does not match name in Eviction object")
    pod = api.storage.get(request.resource, request.namespace, request.name)  # 404 if missing
    options = body.get("deleteOptions") or {}
    preconditions = options.get("preconditions") or {}
    wanted_uid = preconditions.get("uid")
    if wanted_uid and wanted_uid != pod["metadata"]["uid"]:
        raise ApiError(
            409,
            "Conflict",
            f"Precondition failed: UID in precondition: {wanted_uid}, "
            f"UID in object meta: {pod['metadata']['uid']}",
        )
    if not _can_ignore_pdb(pod):
        _consume_budget(api, pod)
    api.storage.delete(
        request.resource, request.namespace, request.name, options.get("gracePeriodSeconds"), preconditions
    )
    return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}


def _can_ignore_pdb(pod: dict[str, Any]) -> bool:
    """Upstream canIgnorePDB: the pod is not running (terminal or Pending) or already being deleted."""
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or bool(pod["metadata"].get("deletionTimestamp"))


def _consume_budget(api: KubeAPIServer, pod: dict[str, Any]) -> None:
    namespace = pod["metadata"]["namespace"]
    labels = pod["metadata"].get("labels") or {}
    matching = []
    for pdb in api.list("poddisruptionbudgets", namespace):
        raw = (pdb.get("spec") or {}).get("selector")
        if raw is None:
            continue
        try:
            if parse_selector(raw, "spec.selector").matches(labels):
                matching.append(pdb)
        except InvalidPdb:
            continue
    if not matching:
        return
    if len(matching) > 1:
        raise ApiError(500, "InternalError", MULTIPLE_PDBS_MESSAGE)
    pdb = matching[0]
    status = pdb.setdefault("status", {})
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed <= 0:
        healthy = int(status.get("currentHealthy") or 0)
        desired = int(status.get("desiredHealthy") or 0)
        raise ApiError(
            429,
            "TooManyRequests",
            PDB_MESSAGE,
            {
                "causes": [
                    {
                        "reason": "DisruptionBudget",
                        "message": f"The disruption budget {pdb['metadata']['name']} needs {desired} healthy pods and has "
                        f"{healthy} currently",
                    }
                ]
            },
        )
    status["disruptionsAllowed"] = allowed - 1
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status.setdefault("disruptedPods", {})[pod["metadata"]["name"]] = now
    api.update("poddisruptionbudgets", pdb, namespace)  # optimistic: conflicts surface as 409
