"""The eviction check's pod lookup against the test API server: found, absent, and failures."""

from __future__ import annotations

from typing import Any

import pytest

from testkit.kubeapi import KubeAPIServer
from webhook.kube import rest
from webhook.kube.pod_nodes import ClusterPodNodes
from webhook.policy.eviction_rules import PodLookupError


def pod(name: str, node: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}]}
    if node is not None:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"}, "spec": spec}


@pytest.mark.parametrize(
    ("name", "node"),
    [("on-a", "node-a"), ("pending", ""), ("absent", None)],
)
def test_the_node_of_a_pod(api: KubeAPIServer, client: rest.Client, name: str, node: str | None) -> None:
    api.create("pods", pod("on-a", "node-a"), namespace="ns")
    api.create("pods", pod("pending", None), namespace="ns")
    assert ClusterPodNodes(client).node_of("ns", name) == node


@pytest.mark.parametrize("status", [403, 500, 503])
def test_a_refused_read_is_a_lookup_error(api: KubeAPIServer, client: rest.Client, status: int) -> None:
    api.create("pods", pod("on-a", "node-a"), namespace="ns")
    api.fail_next(1, status)
    with pytest.raises(PodLookupError, match=f"reading pod ns/on-a: HTTP {status}"):
        ClusterPodNodes(client).node_of("ns", "on-a")


def test_a_silent_api_server_is_a_lookup_error_after_the_timeout(
    api: KubeAPIServer, client: rest.Client, transport: str
) -> None:
    api.create("pods", pod("on-a", "node-a"), namespace="ns")
    with api.stalled(), pytest.raises(PodLookupError, match="reading pod ns/on-a: "):
        ClusterPodNodes(client, timeout=0.5).node_of("ns", "on-a")
    # In a pod, one GET: the review fails after the lookup's timeout, well within the webhook's own. A
    # kubeconfig's urllib3 pool sends a GET that timed out three more times (its default retries).
    assert [r.method for r in api.requests] == ["GET"] * (1 if transport == "in-cluster" else 4)
