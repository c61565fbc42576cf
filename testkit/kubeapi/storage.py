"""The test API server's storage: objects, one global resourceVersion counter and an event history.

Like etcd behind the real API server, every write of any resource bumps one global revision; an object's
`metadata.resourceVersion` is the revision of its last write and a LIST reports the current revision.
Watches replay the history after a revision; `compact()` forgets the history up to now, so a watch from an
older revision gets `410 Gone` ("too old resource version"), as after an etcd compaction.

Deletion (documented simplification): an object without finalizers is removed at once, whatever the grace
period. An object with finalizers gets `deletionTimestamp` + `deletionGracePeriodSeconds` (a MODIFIED
event) and is removed by the update that empties its finalizers. With `graceful_pods=True`, a pod bound to
a node (`spec.nodeName`) and deleted with a grace period > 0 (default: the pod's
`terminationGracePeriodSeconds`, else 30) is only marked, as the kubelet would finish it; a delete with
`gracePeriodSeconds=0` removes it.
"""

from __future__ import annotations

import bisect
import builtins
import copy
import datetime
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from testkit.kubeapi.resources import ResourceType

Key = tuple[str, str, str, str]  # (group, plural, namespace, name)


class ApiError(Exception):
    """An error the API server answers with a `Status` object."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details or {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def not_found(rt: ResourceType, name: str) -> ApiError:
    resource = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
    return ApiError(
        404,
        "NotFound",
        f'{resource} "{name}" not found',
        {"name": name, "group": rt.group, "kind": rt.plural},
    )


def too_old(requested: int, oldest: int) -> ApiError:
    return ApiError(410, "Expired", f"too old resource version: {requested} ({oldest})")


@dataclass(frozen=True)
class StoredEvent:
    revision: int
    resource: ResourceType
    type: str  # ADDED | MODIFIED | DELETED
    object: dict[str, Any]
    previous: dict[str, Any] | None


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _rt_key(rt: ResourceType) -> tuple[str, str]:
    return (rt.group, rt.plural)


class Storage:
    """Thread-safe object storage with a global revision counter and a watchable history."""

    def __init__(self, *, graceful_pods: bool = False) -> None:
        self.graceful_pods = graceful_pods
        self.changed = threading.Condition()  # notified on every write, compaction and watch fault
        self._objects: dict[Key, dict[str, Any]] = {}
        self._history: list[StoredEvent] = []
        self._revision = 1
        self._compacted = 1  # watches from a revision below this get 410

    # -- reads ----------------------------------------------------------------------------------------
    @property
    def revision(self) -> int:
        with self.changed:
            return self._revision

    @property
    def compacted(self) -> int:
        with self.changed:
            return self._compacted

    def get(self, rt: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        with self.changed:
            obj = self._objects.get(self._key(rt, namespace, name))
            if obj is None:
                raise not_found(rt, name)
            return copy.deepcopy(obj)

    def list(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        predicate: Callable[[dict[str, Any]], bool] | None = None,
    ) -> tuple[list[dict[str, Any]], int]:
        """Matching objects (sorted by namespace/name, as etcd keys are) and the current revision."""
        with self.changed:
            items = [
                copy.deepcopy(obj)
                for key, obj in sorted(self._objects.items())
                if key[:2] == _rt_key(rt)
                and (not namespace or key[2] == namespace)
                and (predicate is None or predicate(obj))
            ]
            return items, self._revision

    def events_after(self, rt: ResourceType, revision: int) -> tuple[builtins.list[StoredEvent], int]:
        """History of `rt` after `revision`, and the revision it runs to; ApiError 410 if compacted."""
        with self.changed:
            if revision < self._compacted:
                raise too_old(revision, self._compacted)
            start = bisect.bisect_right(self._history, revision, key=lambda e: e.revision)
            events = [e for e in self._history[start:] if _rt_key(e.resource) == _rt_key(rt)]
            return events, self._revision

    # -- writes ---------------------------------------------------------------------------------------
    def create(self, rt: ResourceType, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if rt.namespaced:
            namespace = namespace or meta.get("namespace") or "default"
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise ApiError(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does not match the namespace sent on the request",
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if not meta.get("name"):
            if meta.get("generateName"):
                meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
            else:
                raise ApiError(
                    422,
                    "Invalid",
                    f"{rt.kind}: metadata.name: Required value: name or generateName is required",
                )
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        if rt.defaulter:
            rt.defaulter(obj)
        with self.changed:
            key = self._key(rt, meta.get("namespace", ""), meta["name"])
            if key in self._objects:
                resource = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
                raise ApiError(
                    409,
                    "AlreadyExists",
                    f'{resource} "{meta["name"]}" already exists',
                    {"name": meta["name"], "group": rt.group, "kind": rt.plural},
                )
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = _now()
            meta.pop("deletionTimestamp", None)
            return self._write(rt, key, "ADDED", obj, None)

    def update(self, rt: ResourceType, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        """PUT: replace the object; a set `metadata.resourceVersion` must match (optimistic concurrency)."""
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        name = meta.get("name", "")
        namespace = (namespace or meta.get("namespace") or "default") if rt.namespaced else ""
        with self.changed:
            key = self._key(rt, namespace, name)
            old = self._objects.get(key)
            if old is None:
                raise not_found(rt, name)
            wanted = meta.get("resourceVersion")
            if wanted and wanted != old["metadata"]["resourceVersion"]:
                resource = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {resource} "{name}": the '
                    "object has been modified; please apply your changes to the latest version "
                    "and try again",
                    {"name": name, "group": rt.group, "kind": rt.plural},
                )
            return self._replace(rt, key, old, obj)

    def mutate(
        self, rt: ResourceType, namespace: str, name: str, change: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> dict[str, Any]:
        """Read-modify-write under the lock (PATCH): `change` gets a copy and returns the new object."""
        with self.changed:
            key = self._key(rt, namespace, name)
            old = self._objects.get(key)
            if old is None:
                raise not_found(rt, name)
            return self._replace(rt, key, old, change(copy.deepcopy(old)))

    def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        grace_period: int | None = None,
        preconditions: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        with self.changed:
            key = self._key(rt, namespace, name)
            old = self._objects.get(key)
            if old is None:
                raise not_found(rt, name)
            self._check_preconditions(rt, old, preconditions or {})
            meta = old["metadata"]
            if meta.get("finalizers") or self._graceful_pod(rt, old, grace_period):
                if meta.get("deletionTimestamp") and not (grace_period == 0 and not meta.get("finalizers")):
                    return copy.deepcopy(old)
                if not meta.get("finalizers") and grace_period == 0:
                    return self._write(rt, key, "DELETED", copy.deepcopy(old), old)
                marked = copy.deepcopy(old)
                marked["metadata"]["deletionTimestamp"] = _now()
                marked["metadata"]["deletionGracePeriodSeconds"] = self._grace(old, grace_period)
                return self._write(rt, key, "MODIFIED", marked, old)
            return self._write(rt, key, "DELETED", copy.deepcopy(old), old)

    def compact(self) -> int:
        """Forget all history up to now: watches from an older revision will get 410 Gone."""
        with self.changed:
            self._compacted = self._revision
            self._history.clear()
            self.changed.notify_all()
            return self._compacted

    # -- internals ------------------------------------------------------------------------------------
    @staticmethod
    def _key(rt: ResourceType, namespace: str | None, name: str) -> Key:
        return (rt.group, rt.plural, namespace or "" if rt.namespaced else "", name)

    def _replace(
        self, rt: ResourceType, key: Key, old: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        meta = new.setdefault("metadata", {})
        for field in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
            if field in old["metadata"]:
                meta[field] = old["metadata"][field]
            else:
                meta.pop(field, None)
        meta["name"], meta["namespace"] = old["metadata"]["name"], old["metadata"].get("namespace")
        if not rt.namespaced:
            meta.pop("namespace")
        new["apiVersion"], new["kind"] = rt.api_version, rt.kind
        if rt.defaulter:
            rt.defaulter(new)
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and (old["metadata"].get("finalizers") or not self._graceful_pod(rt, old, None))
        ):
            return self._write(rt, key, "DELETED", new, old)
        return self._write(rt, key, "MODIFIED", new, old)

    def _write(
        self, rt: ResourceType, key: Key, kind: str, obj: dict[str, Any], previous: dict[str, Any] | None
    ) -> dict[str, Any]:
        self._revision += 1
        obj["metadata"]["resourceVersion"] = str(self._revision)
        if kind == "DELETED":
            self._objects.pop(key, None)
        else:
            self._objects[key] = obj
        self._history.append(StoredEvent(self._revision, rt, kind, obj, previous))
        self.changed.notify_all()
        return copy.deepcopy(obj)

    def _graceful_pod(self, rt: ResourceType, obj: dict[str, Any], grace_period: int | None) -> bool:
        if not (self.graceful_pods and rt.plural == "pods" and not rt.group):
            return False
        if not (obj.get("spec") or {}).get("nodeName"):
            return False
        if (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return False
        return self._grace(obj, grace_period) > 0

    @staticmethod
    def _grace(obj: dict[str, Any], grace_period: int | None) -> int:
        if grace_period is not None:
            return grace_period
        return int((obj.get("spec") or {}).get("terminationGracePeriodSeconds", 30))

    @staticmethod
    def _check_preconditions(rt: ResourceType, obj: dict[str, Any], preconditions: dict[str, Any]) -> None:
        meta = obj["metadata"]
        for field, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
            wanted = preconditions.get(field)
            if wanted and wanted != meta.get(field):
                raise ApiError(
                    409,
                    "Conflict",
                    f"Precondition failed: {label} in precondition: {wanted}, "
                    f"{label} in object meta: {meta.get(field)}",
                    {"name": meta["name"], "group": rt.group, "kind": rt.plural},
                )

    def snapshot(self) -> Iterator[dict[str, Any]]:
        """Every stored object (a copy), for debugging and assertions."""
        with self.changed:
            return iter(copy.deepcopy(list(self._objects.values())))
