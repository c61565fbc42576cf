"""The resource types the test API server knows, and the per-type defaulting the real API server applies."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Defaulter = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class ResourceType:
    """One REST resource: where it lives in the URL space and what its objects look like."""

    plural: str
    kind: str
    group: str = ""  # "" is the core group, served under /api/v1
    version: str = "v1"
    namespaced: bool = True
    defaulter: Defaulter | None = field(default=None, compare=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def prefix(self) -> str:
        """The URL prefix of the resource's API group version."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def collection_path(self, namespace: str | None = None) -> str:
        if self.namespaced and namespace:
            return f"{self.prefix}/namespaces/{namespace}/{self.plural}"
        return f"{self.prefix}/{self.plural}"


def _default_priority_class(obj: dict[str, Any]) -> None:
    """v1 defaulting: preemptionPolicy defaults to PreemptLowerPriority, value to 0."""
    obj.setdefault("value", 0)
    if obj.get("preemptionPolicy") is None:
        obj["preemptionPolicy"] = "PreemptLowerPriority"


def _default_pod(obj: dict[str, Any]) -> None:
    """The pod fields that the project's code reads and the API server always fills in."""
    obj.setdefault("spec", {})
    status = obj.setdefault("status", {})
    status.setdefault("phase", "Pending")


def _default_namespace(obj: dict[str, Any]) -> None:
    """The label the API server sets on every namespace, on create and update (its name, immutable)."""
    meta = obj.setdefault("metadata", {})
    labels = meta.get("labels") or {}
    meta["labels"] = {**labels, "kubernetes.io/metadata.name": meta.get("name", "")}


# What `serve --ca-secret` reads and writes (webhook.kube.rotator): its CA Secret and the two webhook
# configurations whose caBundle it keeps. Not served by default; `register_resource` each, or start the
# server with `resources=(*DEFAULT_RESOURCES, *ROTATION_RESOURCES)`.
ROTATION_RESOURCES: tuple[ResourceType, ...] = (
    ResourceType("secrets", "Secret"),
    ResourceType(
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        "admissionregistration.k8s.io",
        namespaced=False,
    ),
    ResourceType(
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        "admissionregistration.k8s.io",
        namespaced=False,
    ),
)

DEFAULT_RESOURCES: tuple[ResourceType, ...] = (
    ResourceType(
        "priorityclasses",
        "PriorityClass",
        "scheduling.k8s.io",
        namespaced=False,
        defaulter=_default_priority_class,
    ),
    ResourceType("pods", "Pod", defaulter=_default_pod),
    ResourceType("nodes", "Node", namespaced=False),
    ResourceType("namespaces", "Namespace", namespaced=False, defaulter=_default_namespace),
    ResourceType("events", "Event"),
    ResourceType("events", "Event", "events.k8s.io"),
    ResourceType("poddisruptionbudgets", "PodDisruptionBudget", "policy"),
)

# What the API server creates at start-up (pkg/apis/scheduling: SystemPriorityClasses()).
SYSTEM_PRIORITY_CLASSES: tuple[dict[str, Any], ...] = (
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "system-node-critical"},
        "value": 2000001000,
        "description": "Used for system critical pods that must not be moved from their current node.",
    },
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "system-cluster-critical"},
        "value": 2000000000,
        "description": "Used for system critical pods that must run in the cluster, "
        "but can be moved to another node if necessary.",
    },
)
