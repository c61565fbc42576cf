"""Where a serving process gets its PriorityClasses from: the one place that wires a ClassStore.

A cluster-backed store holds a watch connection and a thread, which do not survive a fork: every gunicorn
worker opens its own after forking (`open_store` in the worker) and closes it when the worker exits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from webhook.policy.class_model import ClassStore
from webhook.policy.eviction_rules import PodNodes


@dataclass(frozen=True)
class StoreSpec:
    classes: Sequence[str] = ()
    kubeconfig: str | None = None
    in_cluster: bool = False

    @property
    def cluster(self) -> bool:
        return bool(self.kubeconfig or self.in_cluster)


def open_store(spec: StoreSpec) -> ClassStore:
    """A started store: the cluster's list/watch cache, or the built-in system classes plus class files."""
    if spec.cluster:
        # Imported here: the cluster modules load only when a cluster is used (the kubernetes client only
        # for a kubeconfig).
        from webhook.kube.class_store import ClusterClassStore
        from webhook.kube.config import api_client

        store = ClusterClassStore(api_client(spec.kubeconfig, spec.in_cluster))
        store.start()
        return store
    from webhook.files.class_files import static_store  # class files are YAML: its parser only then

    return static_store(spec.classes)


class NamespaceCache(Protocol):
    """The cluster's namespace labels (webhook.kube.namespace_store), as the server reads them."""

    def labels_of(self, namespace: str) -> Mapping[str, str] | None: ...

    def wait_for(self, namespace: str, timeout: float) -> Mapping[str, str] | None: ...

    def ready(self) -> bool: ...

    def wait_ready(self, timeout: float) -> bool: ...

    def failure(self) -> str | None: ...


def open_namespaces(spec: StoreSpec) -> NamespaceCache | None:
    """A started Namespace cache, with a cluster only: without one, no namespace's labels are known.

    Started with the class cache, so that a class that gains a rule finds the labels already listed, but
    never waited for: readiness and every review whose class has no rule depend on the classes alone, and
    a webhook whose role may not list namespaces serves them all (webhook.server.endpoint)."""
    if not spec.cluster:
        return None
    from webhook.kube.config import api_client
    from webhook.kube.namespace_store import ClusterNamespaceStore

    store = ClusterNamespaceStore(api_client(spec.kubeconfig, spec.in_cluster))
    store.start()
    return store


def close_store(store: ClassStore | NamespaceCache | None) -> None:
    stop = getattr(store, "stop", None)
    if callable(stop):
        stop()


def open_pod_nodes(spec: StoreSpec) -> PodNodes | None:
    """The pod lookup of the eviction check, with a cluster only: without one /validate refuses evictions."""
    if not spec.cluster:
        return None
    from webhook.kube.config import api_client
    from webhook.kube.pod_nodes import ClusterPodNodes

    return ClusterPodNodes(api_client(spec.kubeconfig, spec.in_cluster))


def close_pod_nodes(pods: PodNodes | None) -> None:
    close = getattr(pods, "close", None)
    if callable(close):
        close()
