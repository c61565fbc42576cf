"""Fixtures: a test API server per test, and cluster class stores tuned for fast recovery."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from testkit.kubeapi import KubeAPIServer
from webhook.kube.class_store import ClusterClassStore

# Fast enough for tests, still exponential and capped.
FAST = {"backoff_initial": 0.02, "backoff_max": 0.3, "read_timeout": 2.0, "timeout_seconds": 30}


@pytest.fixture
def api() -> Iterator[KubeAPIServer]:
    with KubeAPIServer(bookmark_interval=0.2) as server:
        yield server


@pytest.fixture
def class_store(api: KubeAPIServer) -> Iterator[Callable[..., ClusterClassStore]]:
    """Make started ClusterClassStores on `api`; all are stopped at the end of the test."""
    stores: list[ClusterClassStore] = []

    def make(**kwargs: Any) -> ClusterClassStore:
        store = ClusterClassStore(api.api_client(), **{**FAST, **kwargs})
        store.start()
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.stop()


def pc(name: str, value: int, **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **fields,
    }
