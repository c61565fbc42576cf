"""Fixtures: a test API server per test, and cluster class and Namespace stores tuned for fast recovery."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from testkit.kubeapi import KubeAPIServer
from webhook.kube.class_store import ClusterClassStore
from webhook.kube.namespace_store import ClusterNamespaceStore

# Fast enough for tests, still exponential and capped.
FAST = {"backoff_initial": 0.02, "backoff_max": 0.3, "read_timeout": 2.0, "timeout_seconds": 30}
S = TypeVar("S", ClusterClassStore, ClusterNamespaceStore)


@pytest.fixture
def api() -> Iterator[KubeAPIServer]:
    with KubeAPIServer(bookmark_interval=0.2) as server:
        yield server


def _started(api: KubeAPIServer, store_type: Callable[..., S]) -> Iterator[Callable[..., S]]:
    """Make started stores of `store_type` on `api`; all are stopped at the end of the test."""
    stores: list[S] = []

    def make(**kwargs: Any) -> S:
        store = store_type(api.api_client(), **{**FAST, **kwargs})
        store.start()
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.stop()


@pytest.fixture
def class_store(api: KubeAPIServer) -> Iterator[Callable[..., ClusterClassStore]]:
    yield from _started(api, ClusterClassStore)


@pytest.fixture
def namespace_store(api: KubeAPIServer) -> Iterator[Callable[..., ClusterNamespaceStore]]:
    yield from _started(api, ClusterNamespaceStore)


def pc(name: str, value: int, **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **fields,
    }
