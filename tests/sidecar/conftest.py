"""A test API server with the eviction subresource, and sidecars run against it with the real client."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client import REGISTRY

from testkit.kubeapi import KubeAPIServer
from testkit.kubeapi.eviction import EvictionRecorder, install
from tests.sidecar.fixtures import NODE, node
from webhook.sidecar.actions import Settings
from webhook.sidecar.agent import Sidecar


@dataclass
class Cluster:
    api: KubeAPIServer
    evictions: EvictionRecorder

    def add(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        meta.pop("uid", None)  # the server assigns uids
        meta.pop("creationTimestamp", None)
        return self.api.create("pods", obj, meta.get("namespace", "default"))

    def pod(self, name: str, namespace: str = "default") -> dict[str, Any] | None:
        return self.api.get("pods", name, namespace)

    def events(self, name: str, reason: str | None = None) -> list[dict[str, Any]]:
        return [
            e
            for e in self.api.list("events")
            if e["involvedObject"]["name"] == name and (reason is None or e["reason"] == reason)
        ]

    def finish(self, name: str, namespace: str = "default") -> None:
        """What the kubelet does once a terminating pod's containers have stopped: remove it."""
        self.api.delete("pods", name, namespace, grace_period=0)


@pytest.fixture(autouse=True)
def single_process_metrics() -> None:
    """The sidecar is one process with the default registry. A test that ran the webhook server in this
    process may have left prometheus_client on multiprocess storage after removing its directory
    (`webhook.server.gunicorn.metrics_dir`); pick the storage again from the environment, as at import."""
    from prometheus_client import values

    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        values.ValueClass = values.get_value_class()


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    # As the chart runs the sidecar: in a pod, over TLS with its service account's token.
    with KubeAPIServer(
        graceful_pods=True, bookmark_interval=0.2, tls=True, token=secrets.token_urlsafe(16)
    ) as api:
        recorder = install(api)
        api.create("nodes", node())
        api.create("nodes", node("node-b"))
        yield Cluster(api, recorder)


@pytest.fixture
def sidecar(cluster: Cluster) -> Iterator[Callable[..., Sidecar]]:
    """Start a sidecar for NODE (stopped at teardown); keyword arguments go to Settings and Sidecar."""
    started: list[Sidecar] = []

    def start(**kw: Any) -> Sidecar:
        settings_kw = {k: kw.pop(k) for k in list(kw) if k in Settings.__dataclass_fields__}
        settings = Settings(node_name=NODE, **settings_kw)
        kw.setdefault("backoff_initial", 0.05)
        kw.setdefault("backoff_max", 0.2)
        kw.setdefault("resync_seconds", 0.2)
        kw.setdefault("reflector_options", {"backoff_initial": 0.05, "backoff_max": 0.2})
        agent = Sidecar(cluster.api.service_account(), settings, **kw)
        agent.start()
        started.append(agent)
        assert agent.wait_ready(10), "sidecar did not sync"
        return agent

    yield start
    for agent in started:
        agent.stop()


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0
