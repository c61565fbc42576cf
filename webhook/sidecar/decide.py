"""The sidecar's decisions: from the node view to a list of actions. Pure: no I/O, no clock, no threads.

For each rejected critical pod (see `trigger`), in creation order:

1. No record yet: ask the node-side preemption module which pods to evict, with the current view (the
   rejected pod left out, every pod that is not terminated counted as using its requests). If the pod fits
   already, mark it done, whatever else is terminating (a pod held by a finalizer may never finish); else,
   if it would fit once the pods already terminating are gone, wait. Otherwise write the record (victims
   chosen) and then evict the victims. A rejection older than `max_rejection_age` starts nothing.
2. Record `preempting`: evict recorded victims that are still running (never one already terminating or
   whose eviction was just accepted), then wait. Only when every recorded victim has terminated or is gone
   is the pod evaluated again (a new round, up to `max_rounds`), so a slow victim never causes a second set
   of evictions. While nothing is left to evict, a pod that fits with the outstanding victims still
   counted is marked done.
3. Record `done` / `abandoned`: nothing more.

One demand makes room once: a controller's replacement not yet admitted is left out of its rejected pod's
view, a rejected pod waits while a sibling's preemption is open, and a rejected pod whose controller runs
another pod on the node is left alone (a ReplicaSet replaces a kubelet-rejected pod at once, repeatedly).

Safety is enforced here, not left to the module's ordering: terminating, critical (for the sidecar's
threshold), static and mirror pods, and pods of priority >= the preemptor's are passed to the module as
non-preemptable (their requests still count as used), and every victim it returns is checked again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from webhook.preemption.node.admission import admit_to_node
from webhook.sidecar import record as rec
from webhook.sidecar.actions import (
    Action,
    AdmitFn,
    DryRun,
    Hints,
    Pod,
    Settings,
    WriteRecord,
    controller_uid,
    uid,
)
from webhook.sidecar.lifecycle import ACTIVE, lifecycle_state
from webhook.sidecar.trigger import Rejection, rejection
from webhook.sidecar.victims import Pass, once


def _creation_key(pod: Pod) -> tuple[str, str, str]:
    meta = pod.get("metadata") or {}
    return (
        str(meta.get("creationTimestamp") or ""),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )


def decide(
    node: Pod | None,
    pods: Sequence[Pod],
    settings: Settings,
    hints: Hints,
    admit: AdmitFn | None = None,
) -> list[Action]:
    """The actions to take now; empty while the node is unknown."""
    if node is None:
        return []
    if admit is None:
        admit = admit_to_node
    rejections = _rejections(pods, settings)
    if not rejections:
        return []
    records = _records(rejections)
    claimed = _claimed(records)
    open_owners = _open_owners(rejections, records)
    pass_ = Pass(
        node, pods, {uid(p): p for p in pods}, settings, hints, admit, hints.eviction_budget, claimed
    )
    actions: list[Action] = []
    for r in rejections:
        found = records[uid(r.pod)]
        if isinstance(found, rec.BadRecord):
            actions += once(
                hints, r.pod, f"bad-record/{uid(r.pod)}", "Warning", "PreemptionSkipped", str(found)
            )
        elif found is None and controller_uid(r.pod) in open_owners:
            continue  # a sibling's preemption (same controller) is making the room: one at a time
        elif not _settled(r, found, settings, hints):
            outstanding = pass_.outstanding(found) if found and found.state == rec.PREEMPTING else []
            if found is not None and outstanding:
                actions += pass_.follow_up(r, found, outstanding)
            else:  # no record yet, or every recorded victim gone: evaluate (again)
                step = pass_.evaluate(r, found)
                owner = controller_uid(r.pod)
                if owner is not None and any(_opens(a) for a in step):
                    open_owners.add(owner)  # opened in this pass: its siblings wait from now on
                actions += step
    return actions


def _opens(action: Action) -> bool:
    """The action starts a preemption (or, in a dry run, would)."""
    if isinstance(action, WriteRecord):
        return action.record.state == rec.PREEMPTING
    return isinstance(action, DryRun)


def _settled(r: Rejection, found: rec.Record | None, settings: Settings, hints: Hints) -> bool:
    """Nothing more to do: a final record, or a rejection too old to start a preemption for."""
    if found is None:
        return _too_old(r.pod, settings, hints)
    return found.state in rec.FINAL_STATES


def _rejections(pods: Sequence[Pod], settings: Settings) -> list[Rejection]:
    """Step 1: the rejected critical pods the sidecar acts for, oldest first, less those superseded."""
    found = sorted(
        (r for p in pods if (r := rejection(p, settings.node_name, settings.critical_priority))),
        key=lambda r: _creation_key(r.pod),
    )
    return [r for r in found if not _superseded(r.pod, pods, settings)]  # oldest first: one at a time


def _superseded(pod: Pod, pods: Sequence[Pod], settings: Settings) -> bool:
    """Its controller already runs another pod on this node (a ReplicaSet replaces a rejected pod at once,
    and the kubelet admitted a replacement): the demand is met, room made now would serve nobody."""
    owner = controller_uid(pod)
    if owner is None:
        return False
    return any(
        controller_uid(other) == owner
        and uid(other) != uid(pod)
        and (other.get("spec") or {}).get("nodeName") == settings.node_name
        and lifecycle_state(other) == ACTIVE
        for other in pods
    )


def _records(rejections: Sequence[Rejection]) -> dict[str, rec.Record | rec.BadRecord | None]:
    """Step 2: each rejected pod's record (None: none yet; BadRecord: unreadable, reported)."""
    records: dict[str, rec.Record | rec.BadRecord | None] = {}
    for r in rejections:
        try:
            records[uid(r.pod)] = rec.read(r.pod)
        except rec.BadRecord as err:
            records[uid(r.pod)] = err
    return records


def _open_owners(
    rejections: Sequence[Rejection], records: Mapping[str, rec.Record | rec.BadRecord | None]
) -> set[str | None]:
    """Step 3: controllers with a preemption under way for one of their rejected pods."""
    owners: set[str | None] = set()
    for r in rejections:
        found = records[uid(r.pod)]
        if isinstance(found, rec.Record) and found.state == rec.PREEMPTING and controller_uid(r.pod):
            owners.add(controller_uid(r.pod))
    return owners


def _claimed(records: Mapping[str, rec.Record | rec.BadRecord | None]) -> set[str]:
    """Step 4: victims of every open preemption: never chosen again for another pod."""
    claimed: set[str] = set()
    for found in records.values():
        if isinstance(found, rec.Record) and found.state == rec.PREEMPTING:
            claimed.update(v.uid for v in found.victims)
    return claimed


def rejected_at(pod: Pod) -> float | None:
    """When the kubelet rejected the pod: `status.startTime` (the status manager sets it with the
    rejection), else the creation time; None if neither parses."""
    for value in (
        (pod.get("status") or {}).get("startTime"),
        (pod.get("metadata") or {}).get("creationTimestamp"),
    ):
        if isinstance(value, str):
            try:
                return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return None


def _too_old(pod: Pod, settings: Settings, hints: Hints) -> bool:
    if hints.wall_time is None:
        return False
    when = rejected_at(pod)
    return when is not None and hints.wall_time - when > settings.max_rejection_age
