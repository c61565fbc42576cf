"""The cluster-backed class store: the PriorityClasses of the cluster, kept current by list + watch.

Like the in-tree plugin's informer lister, every review reads memory, never the API server. Each change
builds a new immutable ClassSet (with its global default precomputed: the lowest value among
`globalDefault` classes, ties by name) and swaps the reference, so `snapshot()` is one attribute read:
O(1), lock-free, and a review holds one consistent set for its whole decision.

The built-in system classes come from the cluster like any other class (the API server creates them);
nothing is merged in locally, so a cluster view and a review agree. Until the first LIST lands the set
is empty and `ready()` is False (the server answers /readyz 503). While the watch is broken the last
known set keeps being served; the reflector's last-activity metric tells how old it may be.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import kubernetes.client

from webhook.k8s import InvalidObject
from webhook.kube.reflector import Reflector
from webhook.policy.class_model import ClassSet, PriorityClass

log = logging.getLogger(__name__)

PRIORITY_CLASSES_PATH = "/apis/scheduling.k8s.io/v1/priorityclasses"


class ClusterClassStore:
    """A `webhook.policy.class_model.ClassStore` fed by a PriorityClass reflector."""

    def __init__(self, api_client: kubernetes.client.ApiClient, **reflector_kwargs: Any) -> None:
        reflector_kwargs.setdefault("name", "priorityclasses")
        self._classes = ClassSet()
        self._by_name: dict[str, PriorityClass] = {}
        self._lock = threading.Lock()  # serialises writers only; readers never take it
        self.reflector = Reflector(api_client, PRIORITY_CLASSES_PATH, self, **reflector_kwargs)

    # -- ClassStore -----------------------------------------------------------------------------------
    def snapshot(self) -> ClassSet:
        return self._classes

    def ready(self) -> bool:
        return self.reflector.synced

    def start(self) -> None:
        self.reflector.start()

    def stop(self) -> None:
        """Stop the watch. A LIST blocked on an unresponsive API server cannot be interrupted; the thread is
        a daemon, so after a short join it is left to die with the process rather than delay shutdown."""
        self.reflector.stop(timeout=1.0)

    def wait_ready(self, timeout: float) -> bool:
        return self.reflector.wait_synced(timeout)

    # -- ObjectStore (called by the reflector's thread) -----------------------------------------------
    def replace(self, objects: list[dict], resource_version: str) -> None:
        by_name = {}
        for obj in objects:
            pc = _read(obj)
            if pc is not None:
                by_name[pc.name] = pc
        with self._lock:
            self._by_name = by_name
            self._classes = ClassSet(by_name.values())

    def apply(self, event_type: str, obj: dict) -> None:
        with self._lock:
            if event_type == "DELETED":
                name = (obj.get("metadata") or {}).get("name")
                if not isinstance(name, str) or self._by_name.pop(name, None) is None:
                    return
            else:
                pc = _read(obj)
                if pc is None:
                    return
                self._by_name[pc.name] = pc
            self._classes = ClassSet(self._by_name.values())

    def __len__(self) -> int:
        return len(self._classes)


def _read(obj: dict) -> PriorityClass | None:
    """The API server validated the object; one we still cannot read is skipped, not fatal."""
    try:
        return PriorityClass.from_object(obj)
    except InvalidObject as err:
        log.warning("ignoring unreadable PriorityClass: %s", err)
        return None
