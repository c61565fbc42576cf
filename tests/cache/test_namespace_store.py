"""The Namespace cache on the test API server: labels only, kept current, ready after its first LIST."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from testkit.kubeapi import KubeAPIServer
from testkit.wait import wait_for
from webhook.kube.namespace_store import NAMESPACES_PATH, ClusterNamespaceStore

pytestmark = pytest.mark.timeout(60)
NAME_LABEL = "kubernetes.io/metadata.name"


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {"owner": "x" * 200},
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:metadata": {}}}],
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def test_lists_then_follows_labels(
    api: KubeAPIServer, namespace_store: Callable[..., ClusterNamespaceStore]
) -> None:
    api.create("namespaces", namespace("team-a", tier="gold"))
    store = namespace_store()
    assert store.wait_ready(10)
    assert store.labels_of("team-a") == {NAME_LABEL: "team-a", "tier": "gold"}
    assert store.labels_of("team-b") is None

    api.create("namespaces", namespace("team-b"))
    wait_for(lambda: store.labels_of("team-b") == {NAME_LABEL: "team-b"}, what="created namespace")
    team_a = api.get("namespaces", "team-a")
    team_a["metadata"]["labels"] = {"tier": "silver"}
    api.update("namespaces", team_a)
    wait_for(lambda: store.labels_of("team-a") == {NAME_LABEL: "team-a", "tier": "silver"}, what="relabel")
    api.delete("namespaces", "team-b")
    wait_for(lambda: store.labels_of("team-b") is None, what="deleted namespace")
    assert len(store) == 1


def test_keeps_labels_not_objects(
    api: KubeAPIServer, namespace_store: Callable[..., ClusterNamespaceStore]
) -> None:
    api.create("namespaces", namespace("team-a", tier="gold"))
    api.create("namespaces", namespace("team-b", tier="gold"))
    store = namespace_store()
    assert store.wait_ready(10)
    a, b = store.labels_of("team-a"), store.labels_of("team-b")
    assert a is not None and b is not None
    assert set(a) == {NAME_LABEL, "tier"}  # no annotations, managed fields, spec or status
    key_a = next(k for k in a if k == "tier")
    key_b = next(k for k in b if k == "tier")
    assert key_a is key_b  # one string for a key every namespace carries
    assert a["tier"] is b["tier"]


def test_not_ready_until_the_first_list(
    api: KubeAPIServer, namespace_store: Callable[..., ClusterNamespaceStore]
) -> None:
    with api.failing(403, match=lambda r: r.path == NAMESPACES_PATH):
        store = namespace_store()
        wait_for(
            lambda: any(r.path == NAMESPACES_PATH and r.status == 403 for r in list(api.requests)),
            what="a refused LIST",
        )
        assert not store.ready()
        assert not store.wait_ready(0.2)
    assert store.wait_ready(10)


def test_wait_for_a_namespace_created_meanwhile(
    api: KubeAPIServer, namespace_store: Callable[..., ClusterNamespaceStore]
) -> None:
    store = namespace_store()
    assert store.wait_ready(10)
    assert store.wait_for("late", 0.05) is None
    found: list[Any] = []
    waiter = threading.Thread(target=lambda: found.append(store.wait_for("late", 10)))
    waiter.start()
    api.create("namespaces", namespace("late", tier="gold"))
    waiter.join(15)
    assert found == [{NAME_LABEL: "late", "tier": "gold"}]


def test_a_relist_replaces_everything(
    api: KubeAPIServer, namespace_store: Callable[..., ClusterNamespaceStore]
) -> None:
    api.create("namespaces", namespace("gone"))
    store = namespace_store()
    assert store.wait_ready(10)
    with api.stalled():
        api.delete("namespaces", "gone")
        api.create("namespaces", namespace("new"))
        api.expire_watches()
    wait_for(lambda: store.labels_of("new") is not None and store.labels_of("gone") is None, what="relist")
