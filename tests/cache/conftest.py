"""Fixtures: a test API server per test, reached by each transport in turn (a pod's service account, and a
kubeconfig's client), cluster class and Namespace stores tuned for fast recovery, and a ready webhook
reading from a test API server."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from testkit.kubeapi import KubeAPIServer
from testkit.server import WebhookServer, webhook_server
from testkit.wait import wait_for
from webhook.kube import rest
from webhook.kube.class_store import ClusterClassStore
from webhook.kube.namespace_store import ClusterNamespaceStore

# Fast enough for tests, still exponential and capped.
FAST = {"backoff_initial": 0.02, "backoff_max": 0.3, "read_timeout": 2.0, "timeout_seconds": 30}
S = TypeVar("S", ClusterClassStore, ClusterNamespaceStore)


# In a pod (what the chart runs): the service account's own HTTPS pool on http.client. With a kubeconfig:
# the official client's urllib3 pool. The same requests, answers and errors either way.
TRANSPORTS = ("in-cluster", "kubeconfig")


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def new_api(transport: str) -> Callable[..., KubeAPIServer]:
    """Test API servers (not started) as the transport under test finds them: a pod's over TLS with a
    bearer token."""

    def make(**kwargs: Any) -> KubeAPIServer:
        if transport == "in-cluster":
            kwargs = {"tls": True, "token": secrets.token_urlsafe(16), **kwargs}
        return KubeAPIServer(**kwargs)

    return make


@pytest.fixture
def connect(transport: str) -> Callable[[KubeAPIServer], rest.Client]:
    """The transport under test's client of a server."""
    if transport == "in-cluster":
        return KubeAPIServer.service_account
    return KubeAPIServer.api_client


@pytest.fixture
def api(new_api: Callable[..., KubeAPIServer]) -> Iterator[KubeAPIServer]:
    with new_api(bookmark_interval=0.2) as server:
        yield server


@pytest.fixture
def client(api: KubeAPIServer, connect: Callable[[KubeAPIServer], rest.Client]) -> rest.Client:
    return connect(api)


def _started(client: rest.Client, store_type: Callable[..., S]) -> Iterator[Callable[..., S]]:
    """Make started stores of `store_type` on `client`; all are stopped at the end of the test."""
    stores: list[S] = []

    def make(**kwargs: Any) -> S:
        store = store_type(client, **{**FAST, **kwargs})
        store.start()
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.stop()


@pytest.fixture
def class_store(client: rest.Client) -> Iterator[Callable[..., ClusterClassStore]]:
    yield from _started(client, ClusterClassStore)


@pytest.fixture
def namespace_store(client: rest.Client) -> Iterator[Callable[..., ClusterNamespaceStore]]:
    yield from _started(client, ClusterNamespaceStore)


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
