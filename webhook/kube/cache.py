"""A thread-safe object cache fed by a reflector: raw dicts keyed by (namespace, name)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from webhook.kube.reflector import ObjectStore

Listener = Callable[[str, dict[str, Any] | None, dict[str, Any] | None], None]

RESYNC = "RESYNC"


def object_key(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


class ObjectCache(ObjectStore):
    """An ObjectStore that keeps the latest version of each object, for lookups and listeners.

    Writers (the reflector's thread) take the lock; `get` is a single dict read and takes none.

    Listeners are called with (event, old, new) after each change, in event order, under the cache's
    lock (so they see changes in order and must be quick): "ADDED" (None, new), "MODIFIED" (old, new),
    "DELETED" (old, None), and "RESYNC" (None, None) after a LIST replaced everything.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._objects: dict[tuple[str, str], dict[str, Any]] = {}
        self._listeners: list[Listener] = []
        self.resource_version = ""

    def replace(self, objects: list[dict[str, Any]], resource_version: str) -> None:
        fresh = {object_key(obj): obj for obj in objects}
        with self._lock:
            self._objects = fresh
            self.resource_version = resource_version
            for listener in self._listeners:
                listener(RESYNC, None, None)

    def apply(self, event_type: str, obj: dict[str, Any]) -> None:
        key = object_key(obj)
        with self._lock:
            old = self._objects.get(key)
            if event_type == "DELETED":
                if self._objects.pop(key, None) is None:
                    return
                new = None
            else:
                self._objects[key] = obj
                new = obj
                event_type = "ADDED" if old is None else "MODIFIED"
            version = (obj.get("metadata") or {}).get("resourceVersion")
            if version:
                self.resource_version = str(version)
            for listener in self._listeners:
                listener(event_type, old, new)

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._objects.get((namespace or "", name))

    def list(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._objects.values())

    def __len__(self) -> int:
        return len(self._objects)

    def add_listener(self, fn: Listener) -> None:
        with self._lock:
            self._listeners.append(fn)
