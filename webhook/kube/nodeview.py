"""One node as the kubelet sees it, read live: the Node and every pod bound to it (any phase).

The same objects `kubectl get node N -o json` and `kubectl get pods -A --field-selector spec.nodeName=N`
print, kept as dicts (the decisions read dicts, not the client's model classes). Plain GETs through
`webhook.kube.rest`: importing the client's generated CoreV1Api alone costs seconds.
"""

from __future__ import annotations

from typing import Any

from webhook.files.documents import InputError
from webhook.kube import rest

READ_TIMEOUT = 30.0


def read_node_view(client: rest.Client, node: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(Node, pods bound to it). A missing node or a refused read is an InputError naming it."""
    try:
        node_obj = rest.call_json(
            client, "GET", rest.named(rest.collection(rest.CORE_V1, "nodes"), node), timeout=READ_TIMEOUT
        )
        pods = rest.call_json(
            client,
            "GET",
            rest.collection(rest.CORE_V1, "pods"),
            query={"fieldSelector": f"spec.nodeName={node}"},
            timeout=READ_TIMEOUT,
        )
    except rest.ApiError as err:
        if err.status == 404:
            raise InputError(f'node "{node}": not found') from None
        raise InputError(f'node "{node}": {err.status} {err.http_reason}') from None
    except rest.Unreachable as err:  # no server at the address, TLS refused, ...
        raise InputError(f"cannot reach the cluster: {str(err).splitlines()[0]}") from None
    except rest.NotJSON as err:
        raise InputError(f'node "{node}": {err}') from None
    node_obj.setdefault("kind", "Node")
    node_obj.setdefault("apiVersion", "v1")
    items = pods.get("items") or []
    for pod in items:
        pod.setdefault("kind", "Pod")
        pod.setdefault("apiVersion", "v1")
    return node_obj, items


def read_priority_classes(client: rest.Client) -> list[dict[str, Any]]:
    """The cluster's PriorityClasses (`kubectl get priorityclasses -o json`), so that a pod's class is
    resolved as the cluster's own admission would resolve it."""
    try:
        listed = rest.call_json(
            client, "GET", rest.collection(rest.SCHEDULING_V1, "priorityclasses"), timeout=READ_TIMEOUT
        )
    except rest.ApiError as err:
        raise InputError(f"priorityclasses: {err.status} {err.http_reason}") from None
    except rest.NotJSON as err:
        raise InputError(f"priorityclasses: {err}") from None
    except rest.Unreachable as err:
        raise InputError(f"cannot reach the cluster: {str(err).splitlines()[0]}") from None
    items = listed.get("items") or []
    for pc in items:
        pc.setdefault("kind", "PriorityClass")
        pc.setdefault("apiVersion", "scheduling.k8s.io/v1")
    return items
