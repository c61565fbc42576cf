"""The cluster-backed class store: the PriorityClasses of the cluster, kept current by list + watch.

Like the in-tree plugin's informer lister, every review reads memory, never the API server. Each change
builds a new immutable ClassSet (with its global default precomputed: the lowest value among
`globalDefault` classes, ties by name) and swaps the reference, so `snapshot()` is one attribute read:
O(1), lock-free, and a review holds one consistent set for its whole decision.

The built-in system classes come from the cluster like any other class (the API server creates them);
nothing is merged in locally, so a cluster view and a review agree. Until the first LIST lands the set
is empty and `ready()` is False (the server answers /readyz 503). While the watch is broken the last
known set keeps being served; the reflector's last-activity metric tells how old it may be.

Each set also carries the sets it replaced in the last `history_seconds` (`ClassSet.recent`): the final
check of a pod (/validate) accepts what /mutate decided with one of them, so a class change between the
API server's two calls never denies a pod (see docs/admission.md, "Decided once").
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from webhook.k8s import InvalidObject
from webhook.kube import metrics, rest
from webhook.kube.reflector import ReflectedStore, Reflector
from webhook.policy.class_model import ClassSet, PriorityClass

log = logging.getLogger(__name__)

PRIORITY_CLASSES_PATH = "/apis/scheduling.k8s.io/v1/priorityclasses"
# How long a replaced set is remembered: longer than one pod creation can take between /mutate and
# /validate (the API server's request timeout, 60 s by default, bounds every webhook call of a request),
# plus a worker's cache lagging behind another's.
HISTORY_SECONDS = 120.0
# At most this many replaced sets are kept (a burst of class writes keeps the newest).
HISTORY_LIMIT = 64
# What PriorityClass.from_object reads of a class; the rest (managedFields, labels) is dropped as each class
# of a LIST is decoded (the reflector's transform), so a LIST of hundreds is never held whole.
READ_FIELDS = ("value", "globalDefault", "preemptionPolicy", "description")
READ_METADATA = ("name", "annotations")


class ClusterClassStore(ReflectedStore):
    """A `webhook.policy.class_model.ClassStore` fed by a PriorityClass reflector."""

    def __init__(
        self,
        api_client: rest.Client,
        *,
        history_seconds: float = HISTORY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        **reflector_kwargs: Any,
    ) -> None:
        reflector_kwargs.setdefault("name", "priorityclasses")
        reflector_kwargs.setdefault("transform", read_fields)
        self._classes = ClassSet()
        self._by_name: dict[str, PriorityClass] = {}
        self._lock = threading.Lock()  # serialises writers only; readers never take it
        self._history_seconds = history_seconds
        self._clock = clock
        self._replaced: deque[tuple[float, ClassSet]] = deque(
            maxlen=HISTORY_LIMIT
        )  # (when, set), oldest first
        self._forget_at = float("inf")  # when the oldest replaced set expires
        self.reflector = Reflector(api_client, PRIORITY_CLASSES_PATH, self, **reflector_kwargs)

    # -- ClassStore -----------------------------------------------------------------------------------
    def snapshot(self) -> ClassSet:
        """One attribute read, and a comparison; only when a replaced set has expired is the set rebuilt."""
        if self._clock() >= self._forget_at:
            with self._lock:
                self._publish(self._classes)
        return self._classes

    # -- ObjectStore (called by the reflector's thread) -----------------------------------------------
    def replace(self, objects: list[dict[str, Any]], resource_version: str) -> None:
        by_name = {}
        for obj in objects:
            pc = _read(obj)
            if pc is not None:
                by_name[pc.name] = pc
        with self._lock:
            self._by_name = by_name
            self._publish(ClassSet(by_name.values()), replaced=True)
            _count_rules(by_name)

    def apply(self, event_type: str, obj: dict[str, Any]) -> None:
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
            self._publish(ClassSet(self._by_name.values()), replaced=True)
            _count_rules(self._by_name)

    def _publish(self, classes: ClassSet, *, replaced: bool = False) -> None:
        """Swap in `classes` (lock held), remembering the set it replaces and forgetting expired ones."""
        now = self._clock()
        if replaced and self.reflector.synced:  # the empty set before the first LIST was never served
            self._replaced.append((now, self._classes.alone()))
        while self._replaced and self._replaced[0][0] + self._history_seconds <= now:
            self._replaced.popleft()
        self._forget_at = self._replaced[0][0] + self._history_seconds if self._replaced else float("inf")
        recent = tuple(state for _, state in reversed(self._replaced))
        self._classes = ClassSet(classes.values(), recent) if recent or classes.recent else classes

    def __len__(self) -> int:
        return len(self._classes)


def _count_rules(by_name: dict[str, PriorityClass]) -> None:
    """How many classes need the Namespace cache: its alert fires only while some do."""
    metrics.NAMESPACE_RULE_CLASSES.set(sum(1 for pc in by_name.values() if pc.namespace_rule is not None))


def read_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """A copy of the class with only what it is read for: `_read` reads the same class from either."""
    slim = {key: obj[key] for key in READ_FIELDS if key in obj}
    meta = obj.get("metadata")
    slim["metadata"] = {k: meta[k] for k in READ_METADATA if k in meta} if isinstance(meta, dict) else meta
    return slim


def _read(obj: dict[str, Any]) -> PriorityClass | None:
    """The API server validated the object; one we still cannot read is skipped, not fatal."""
    try:
        return PriorityClass.from_object(obj)
    except InvalidObject as err:
        log.warning("ignoring unreadable PriorityClass: %s", err)
        return None
