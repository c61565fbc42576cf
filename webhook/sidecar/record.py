"""The preemption record kept on the rejected pod: the sidecar's only durable state.

Before it evicts anything the sidecar writes, on the rejected pod, which victims it chose. A restarted
sidecar reads the record back from the API instead of choosing again, so it never evicts a second set of
pods for the same rejection, and it waits for exactly the recorded victims to terminate before it
re-evaluates. The value is compact JSON in one annotation, so `kubectl describe pod` shows it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ANNOTATION = "priority-webhook.io/preemption"

PREEMPTING = "preempting"  # victims chosen; waiting for them to be evicted and to terminate
DONE = "done"  # room was made (or already there); nothing more to do for this pod
ABANDONED = "abandoned"  # gave up after the round limit; nothing more to do for this pod
FINAL_STATES = frozenset({DONE, ABANDONED})


@dataclass(frozen=True, slots=True)
class Victim:
    uid: str
    namespace: str
    name: str

    @classmethod
    def of(cls, pod: Mapping[str, Any]) -> Victim:
        meta = pod.get("metadata") or {}
        return cls(
            uid=str(meta.get("uid") or ""),
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
        )

    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Record:
    state: str
    round: int = 0
    resource: str = ""  # the first insufficient resource: the metric label, as the kubelet's
    victims: tuple[Victim, ...] = field(default_factory=tuple)

    def to_annotation(self) -> str:
        return json.dumps(
            {
                "state": self.state,
                "round": self.round,
                "resource": self.resource,
                "victims": [{"uid": v.uid, "namespace": v.namespace, "name": v.name} for v in self.victims],
            },
            separators=(",", ":"),
            sort_keys=True,
        )


class BadRecord(ValueError):
    """An annotation the sidecar cannot read; it is treated as a final state so nothing is evicted."""


def parse(value: str) -> Record:
    try:
        data = json.loads(value)
    except ValueError as err:
        raise BadRecord(f"{ANNOTATION}: not JSON: {err}") from None
    if not isinstance(data, dict):
        raise BadRecord(f"{ANNOTATION}: must be a JSON object")
    state = data.get("state")
    if state not in (PREEMPTING, *FINAL_STATES):
        raise BadRecord(f"{ANNOTATION}: state: unknown value {state!r}")
    rnd = data.get("round", 0)
    if not isinstance(rnd, int) or isinstance(rnd, bool) or rnd < 0:
        raise BadRecord(f"{ANNOTATION}: round: must be a non-negative integer")
    resource = data.get("resource", "")
    if not isinstance(resource, str):
        raise BadRecord(f"{ANNOTATION}: resource: must be a string")
    victims = data.get("victims", [])
    if not isinstance(victims, list):
        raise BadRecord(f"{ANNOTATION}: victims: must be a list")
    out = []
    for i, item in enumerate(victims):
        if not isinstance(item, dict) or not all(
            isinstance(item.get(k), str) for k in ("uid", "namespace", "name")
        ):
            raise BadRecord(f"{ANNOTATION}: victims[{i}]: must have string uid, namespace and name")
        out.append(Victim(uid=item["uid"], namespace=item["namespace"], name=item["name"]))
    return Record(state=state, round=rnd, resource=resource, victims=tuple(out))


def read(pod: Mapping[str, Any]) -> Record | None:
    """The record on `pod`, None if it has none; raises BadRecord for an unreadable one."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRecord(f"{ANNOTATION}: must be a string")
    return parse(value)
