"""Workloads: the objects whose pod template becomes pods (Kyverno calls checking them auto-generation).

The template is what a controller will send to the API server, so it gets the decision its pods will
get; these are the places the template lives and the resources the API server names them by.
"""

from __future__ import annotations

from typing import Any

from webhook.k8s import section

# kind -> (API group, resource, path of the pod template).
WORKLOADS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "Deployment": ("apps", "deployments", ("spec", "template")),
    "ReplicaSet": ("apps", "replicasets", ("spec", "template")),
    "StatefulSet": ("apps", "statefulsets", ("spec", "template")),
    "DaemonSet": ("apps", "daemonsets", ("spec", "template")),
    "Job": ("batch", "jobs", ("spec", "template")),
    "CronJob": ("batch", "cronjobs", ("spec", "jobTemplate", "spec", "template")),
    "ReplicationController": ("", "replicationcontrollers", ("spec", "template")),
    "PodTemplate": ("", "podtemplates", ("template",)),
}

# Group-qualified resource (as `qualified_resource` names it) -> kind.
WORKLOAD_RESOURCES: dict[str, str] = {
    (f"{resource}.{group}" if group else resource): kind for kind, (group, resource, _) in WORKLOADS.items()
}


def template_path(kind: str) -> tuple[str, ...]:
    return WORKLOADS[kind][2]


def pod_template(obj: Any, kind: str) -> Any:
    """The pod template of a workload, or None where it is absent or not an object on the way."""
    value = obj
    for key in template_path(kind):
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value if isinstance(value, dict) else None


def with_template(obj: dict[str, Any], kind: str, template: dict[str, Any]) -> dict[str, Any]:
    """A copy of `obj` with its pod template replaced (the maps on the way copied, the rest shared)."""
    path = template_path(kind)
    out = dict(obj)
    holder = out
    for key in path[:-1]:
        holder[key] = dict(holder.get(key) or {})
        holder = holder[key]
    holder[path[-1]] = template
    return out


def template_pod(template: dict[str, Any], namespace: str) -> dict[str, Any]:
    """The pod a controller makes of the template: its metadata and spec, in the workload's namespace."""
    meta = section(template, "metadata")
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {k: v for k, v in meta.items() if k in ("labels", "annotations")}
        | {"namespace": namespace},
    }
    if "spec" in template:
        pod["spec"] = template["spec"]
    return pod
