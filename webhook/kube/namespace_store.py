"""The cluster's Namespaces as the allowed-namespaces rule reads them: name -> labels, kept by list + watch.

The same reflector as the class cache (webhook.kube.class_store): every review reads memory, `ready()` is
False until the first LIST has landed, and while the watch is broken the last known labels keep being
served. Unlike the class cache it never holds the webhook back: only a class with a rule needs it, so the
server neither waits for it to be ready nor refuses other reviews while it is not (webhook.server.endpoint).
Until it is, `failure()` says why in one line (the webhook may not list namespaces, the API server cannot
be reached...), which is what a rule that cannot be evaluated is refused or warned about with.

Only what the rule reads is kept: a namespace's name and its labels, never the object (its annotations,
managed fields and status are most of its size). Label keys and values are interned, so the keys every
namespace carries (`kubernetes.io/metadata.name`, a team or tier label) are stored once for all of them.
docs/performance.md gives the memory per 1,000 namespaces and the time from a relabel to the decision.

A namespace created a moment ago may reach the cache after a pod that is created in it reaches the
webhook; `wait_for` lets a review wait a short while for it instead of calling its labels unknown.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

from webhook.kube import rest
from webhook.kube.reflector import ReflectedStore, Reflector, summary

NAMESPACES_PATH = rest.collection(rest.CORE_V1, "namespaces")
GRANT = 'its ServiceAccount needs "list" and "watch" on namespaces (the chart\'s ClusterRole grants them)'


class ClusterNamespaceStore(ReflectedStore):
    """`webhook.policy.namespace_access.NamespaceLabels` fed by a Namespace reflector."""

    def __init__(self, api_client: rest.Client, **reflector_kwargs: Any) -> None:
        reflector_kwargs.setdefault("name", "namespaces")
        # Replaced whole on a LIST, one entry set or removed per event (a single dict operation, atomic
        # for readers); a reader never takes the lock, which only wakes `wait_for`.
        self._labels: dict[str, Mapping[str, str]] = {}
        self._changed = threading.Condition()
        self.reflector = Reflector(api_client, NAMESPACES_PATH, self, **reflector_kwargs)

    # -- NamespaceLabels ------------------------------------------------------------------------------
    def labels_of(self, namespace: str) -> Mapping[str, str] | None:
        return self._labels.get(namespace)

    def wait_for(self, namespace: str, timeout: float) -> Mapping[str, str] | None:
        """The namespace's labels, waiting up to `timeout` seconds for it to reach the cache."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while namespace not in self._labels:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._changed.wait(left)
            return self._labels[namespace]

    def failure(self) -> str | None:
        """Why the namespaces cannot be listed, one line, while the last LIST or WATCH failed; else None."""
        err = self.reflector.failure
        return None if err is None else describe_failure(err)

    def __len__(self) -> int:
        return len(self._labels)

    # -- ObjectStore (called by the reflector's thread) -----------------------------------------------
    def replace(self, objects: list[dict[str, Any]], resource_version: str) -> None:
        fresh = {}
        for obj in objects:
            entry = _entry(obj)
            if entry is not None:
                fresh[entry[0]] = entry[1]
        with self._changed:
            self._labels = fresh
            self._changed.notify_all()

    def apply(self, event_type: str, obj: dict[str, Any]) -> None:
        entry = _entry(obj)
        if entry is None:
            return
        name, labels = entry
        with self._changed:
            if event_type == "DELETED":
                self._labels.pop(name, None)
            else:
                self._labels[name] = labels
                self._changed.notify_all()


def describe_failure(err: Exception) -> str:
    """The cause of a failed namespace LIST or WATCH as a review's message gives it: the status and what to
    do, never the API server's own text (it names the webhook's identity to whoever creates a pod; the
    reflector's log line has it)."""
    if isinstance(err, rest.ApiError):
        if err.status == 403:
            return f"the webhook may not list namespaces (HTTP 403 Forbidden): {GRANT}"
        if err.status == 401:
            return "the API server refused the webhook's credentials to list namespaces (HTTP 401)"
        if err.status == 404:
            return f"the API server answered HTTP 404 Not Found to LIST {NAMESPACES_PATH}"
        return f"LIST {NAMESPACES_PATH} failed (HTTP {err.status} {err.reason})"
    if isinstance(err, rest.Unreachable):
        return f"the API server cannot be reached to list namespaces ({summary(err)})"
    return f"the namespaces could not be listed ({summary(err)})"


def _entry(obj: dict[str, Any]) -> tuple[str, Mapping[str, str]] | None:
    """(name, labels) with interned strings; None for an object without a name."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return None
    labels = meta.get("labels")
    labels = labels if isinstance(labels, dict) else {}
    kept = {
        sys.intern(key): sys.intern(value)
        for key, value in labels.items()
        if isinstance(key, str) and isinstance(value, str)
    }
    return sys.intern(name), kept
