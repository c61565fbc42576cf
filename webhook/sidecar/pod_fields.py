"""What the sidecar keeps of each pod of its node: the fields its decisions read, not the whole object.

The pod cache is the sidecar's one structure that grows with the node (up to 110 pods, or the node's
`maxPods`), and a pod as the API server returns it is mostly what no decision here reads: managedFields
(often a third of the object), each container's environment, mounts, probes and command, the volumes.
Like client-go's informer transforms, the reflector hands the cache a copy without them.

Kept: all of metadata but managedFields (names, uid, resourceVersion, labels, annotations with the
record, owner references, deletion), the status, and the spec but `volumes`; of each container (init,
ephemeral and regular) everything but the fields dropped below. Everything the node-side module, the
lifecycle, the record and the events read is among what is kept: a pod passed through `kept_fields`
gets the same decisions as the whole pod.
"""

from __future__ import annotations

from typing import Any

DROPPED_SPEC = ("volumes",)
DROPPED_CONTAINER = (
    "env",
    "envFrom",
    "volumeMounts",
    "volumeDevices",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "command",
    "args",
    "workingDir",
    "terminationMessagePath",
    "terminationMessagePolicy",
)
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def _container(container: Any) -> Any:
    if not isinstance(container, dict):
        return container
    return {k: v for k, v in container.items() if k not in DROPPED_CONTAINER}


def kept_fields(pod: dict[str, Any]) -> dict[str, Any]:
    """A copy of `pod` without the fields no decision of the sidecar reads (the input is not changed)."""
    slim = dict(pod)
    meta = pod.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        slim["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    spec = pod.get("spec")
    if isinstance(spec, dict):
        spec = {k: v for k, v in spec.items() if k not in DROPPED_SPEC}
        for key in CONTAINER_LISTS:
            containers = spec.get(key)
            if isinstance(containers, list):
                spec[key] = [_container(c) for c in containers]
        slim["spec"] = spec
    return slim
