"""Fixtures: a test API server per test, cluster class and Namespace stores tuned for fast recovery, and a
ready webhook reading from a test API server."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from testkit.kubeapi import KubeAPIServer
from testkit.server import WebhookServer, webhook_server
from testkit.wait import wait_for
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


@contextlib.contextmanager
def ready_webhook(api: KubeAPIServer, tmp_path: Path) -> Iterator[WebhookServer]:
    """`serve --kubeconfig` on `api` (a single worker), once its /readyz answers 200."""
    kubeconfig = api.kubeconfig(tmp_path / "kubeconfig")
    with webhook_server(tmp_path, "--kubeconfig", kubeconfig, "--workers", "1") as server:
        wait_for(
            lambda: server.session.get(server.url + "/readyz", timeout=5).status_code == 200,
            timeout=20,
            what="/readyz 200",
        )
        yield server


def pc(name: str, value: int, **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **fields,
    }
