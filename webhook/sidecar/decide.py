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
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from webhook.k8s import SYSTEM_CRITICAL_PRIORITY, TERMINAL_PHASES
from webhook.preemption.node.admission import Admission, admit_to_node
from webhook.preemption.pods import priority_of
from webhook.sidecar import record as rec
from webhook.sidecar.lifecycle import (
    ACTIVE,
    DESIRED,
    TERMINATED,
    TERMINATING,
    holds_resources,
    is_static,
    lifecycle_state,
    phase,
)
from webhook.sidecar.trigger import Rejection, rejection

Pod = Mapping[str, Any]
DEFAULT_MAX_ROUNDS = 3
DEFAULT_MAX_REJECTION_AGE = 600.0  # seconds


@dataclass(frozen=True, slots=True)
class Settings:
    node_name: str
    critical_priority: int = SYSTEM_CRITICAL_PRIORITY
    order: str = "priority"
    dry_run: bool = False
    recreate_rejected: bool = False
    max_rounds: int = DEFAULT_MAX_ROUNDS
    # A rejection older than this starts no new preemption: its replacement has long been made elsewhere
    # (a ReplicaSet's failed pods linger until garbage-collected), so room made now would serve nobody.
    max_rejection_age: float = DEFAULT_MAX_REJECTION_AGE


@dataclass(frozen=True, slots=True)
class Hints:
    """What the running process remembers; losing it on restart is safe because the record is in the API.

    `evicting`: victims whose eviction the API accepted but that the view does not show terminating yet.
    `blocked_until`: victim uid -> clock reading before which a refused eviction is not retried (backoff).
    `reported`: keys of reports already made, so a waiting pod does not spam events. After a restart the
    events themselves keep them single: each is created under a name derived from its key (kube.events).
    """

    now: float = 0.0
    eviction_budget: int = 1 << 30
    evicting: frozenset[str] = frozenset()
    blocked_until: Mapping[str, float] = field(default_factory=dict)
    reported: frozenset[str] = frozenset()
    wall_time: float | None = None  # Unix time, for the rejection age; None: no age limit


# Actions, carried out in order by the agent. `pod` is always the rejected pod the action serves; the agent
# skips the rest of a pod's actions when writing its record fails.


@dataclass(frozen=True, slots=True)
class WriteRecord:
    pod: Pod
    record: rec.Record


@dataclass(frozen=True, slots=True)
class Announce:
    """Event on the rejected pod naming the victims (and one histogram observation)."""

    pod: Pod
    victims: tuple[Pod, ...]
    resource: str


@dataclass(frozen=True, slots=True)
class Evict:
    """Event `Preempting` on the victim, then evict it (or delete it with --ignore-pdb)."""

    pod: Pod
    victim: Pod
    resource: str


@dataclass(frozen=True, slots=True)
class DryRun:
    pod: Pod
    victims: tuple[Pod, ...]
    resource: str
    key: str


@dataclass(frozen=True, slots=True)
class Report:
    """A log line and an event on the rejected pod, made once per key."""

    pod: Pod
    key: str
    type: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Recreate:
    """Delete the rejected pod so its controller's replacement is admitted without waiting for backoff."""

    pod: Pod


Action = WriteRecord | Announce | Evict | DryRun | Report | Recreate


class AdmitFn(Protocol):
    """The node-side module's admission (`admit_to_node`); tests pass their own."""

    def __call__(
        self,
        pod: Pod,
        node: Pod,
        pods: Sequence[Pod],
        *,
        order: str,
        critical_priority: int,
    ) -> Admission: ...


def uid(pod: Pod) -> str:
    return str((pod.get("metadata") or {}).get("uid") or "")


def ref(pod: Pod) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def has_controller(pod: Pod) -> bool:
    refs = (pod.get("metadata") or {}).get("ownerReferences") or ()
    return any(isinstance(r, Mapping) and r.get("controller") is True for r in refs)


def _creation_key(pod: Pod) -> tuple[str, str, str]:
    meta = pod.get("metadata") or {}
    return (
        str(meta.get("creationTimestamp") or ""),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )


def is_candidate(
    victim: Pod, preemptor_priority: int, settings: Settings, hints: Hints, state: str | None = None
) -> bool:
    """May the sidecar evict `victim` for a preemptor of `preemptor_priority`? (the safety rules)

    `state`: the victim's lifecycle state when the caller has it already.
    """
    if (state or lifecycle_state(victim)) in (TERMINATING, TERMINATED) or uid(victim) in hints.evicting:
        return False
    if is_static(victim):
        return False
    prio = priority_of(victim)
    prio = 0 if prio is None else prio
    return prio < settings.critical_priority and prio < preemptor_priority


def _neutralised(pod: Pod, priority: int) -> dict[str, Any]:
    """A copy the module will not pick but whose requests still count as used.

    Critical and at the preemptor's priority, so `Preemptable` is false; a pod in a terminal phase whose
    containers still run (terminating) is shown as Running, since the module drops terminal pods.
    """
    copy: dict[str, Any] = {**pod, "spec": {**(pod.get("spec") or {}), "priority": priority}}
    if lifecycle_state(pod) == TERMINATING and phase(pod) in TERMINAL_PHASES:
        copy["status"] = {**(pod.get("status") or {}), "phase": "Running"}
    return copy


def _as_admitting(pod: Pod) -> dict[str, Any]:
    """The rejected pod as the kubelet saw it when admitting: not yet failed (the QoS class is kept)."""
    status = {k: v for k, v in (pod.get("status") or {}).items() if k == "qosClass"}
    return {**pod, "status": status}


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
    pass_ = _Pass(
        node, pods, {uid(p): p for p in pods}, settings, hints, admit, hints.eviction_budget, claimed
    )
    actions: list[Action] = []
    for r in rejections:
        found = records[uid(r.pod)]
        if isinstance(found, rec.BadRecord):
            actions += _once(
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


def controller_uid(pod: Pod) -> str | None:
    for owner in (pod.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(owner, Mapping) and owner.get("controller") is True:
            return str(owner.get("uid") or "") or None
    return None


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


@dataclass(slots=True)
class _Pass:
    """One pass of decisions over the node: what every step reads, and the eviction budget it spends."""

    node: Pod
    pods: Sequence[Pod]
    by_uid: dict[str, Pod]
    settings: Settings
    hints: Hints
    admit: AdmitFn
    budget: int
    claimed: set[str]

    # -- a pod with an open preemption -----------------------------------------------------------------
    def outstanding(self, found: rec.Record) -> list[Pod]:
        """The recorded victims that still hold resources (none: the pod is evaluated again)."""
        return [
            self.by_uid[v.uid]
            for v in found.victims
            if v.uid in self.by_uid and holds_resources(self.by_uid[v.uid])
        ]

    def follow_up(self, r: Rejection, found: rec.Record, outstanding: list[Pod]) -> list[Action]:
        """Evict the recorded victims still running; done once the pod fits with them still counted."""
        if self.settings.dry_run:  # a dry run never evicts, not even for a record left by a real run
            return []
        step = self._evict(r.pod, outstanding, found.resource, skip_leaving=True)
        if not step and self._fits(r.pod, self._view(r.pod).others):
            # Fits with the outstanding victims still counted (one held by a finalizer, one whose
            # eviction is refused): the room is there, stop waiting for them.
            step = _done(r.pod, found, found.resource, self.settings)
        return step

    # -- a pod without an open preemption --------------------------------------------------------------
    def evaluate(self, r: Rejection, found: rec.Record | None) -> list[Action]:
        """Ask the module; each step below either settles the pod or passes it to the next."""
        pod = r.pod
        view = self._view(pod)
        try:
            admission = self._admit(pod, view.others)
        except ValueError as err:  # an unreadable node or pod (the module names it): report, evict nothing
            return self._cannot_decide(pod, err)
        resource = _first_resource(admission, r)
        if admission.admit and not admission.victims and not admission.error:
            # Fits already, with every pod still holding its requests: nothing to wait for, whatever else
            # is terminating on the node (a pod held by a finalizer may stay Terminating for ever).
            return self._fits_already(pod, found, resource)
        if self._room_on_its_way(pod, view):
            return []
        refused = self._cannot_help(pod, admission)
        if refused is not None:
            return refused
        victims = self._victims(pod, admission, view)
        if isinstance(victims, list):
            return victims  # a report: the module named a protected pod
        if not victims:  # admitted without victims: handled above; kept for an admission that says so oddly
            return self._fits_already(pod, found, resource)
        self.claimed.update(uid(v) for v in victims)
        if self.settings.dry_run:
            return self._dry_run(pod, victims, resource)
        return self._preempt(pod, found, victims, resource)

    def _view(self, pod: Pod) -> _View:
        return _view(pod, self.pods, self.settings, self.hints, self.claimed)

    def _admit(self, pod: Pod, others: Sequence[Pod]) -> Admission:
        return self.admit(
            _as_admitting(pod),
            self.node,
            others,
            order=self.settings.order,
            critical_priority=self.settings.critical_priority,
        )

    def _fits(self, pod: Pod, others: Sequence[Pod]) -> bool:
        """Admitted without evicting anyone (an unreadable object is reported by `evaluate`)."""
        try:
            future = self._admit(pod, others)
        except ValueError:
            return False
        return bool(future.admit and not future.victims)

    def _cannot_decide(self, pod: Pod, err: ValueError) -> list[Action]:
        return _once(
            self.hints,
            pod,
            f"invalid/{uid(pod)}/{err}",
            "Warning",
            "PreemptionFailed",
            f"Cannot decide: {err}",
        )

    def _fits_already(self, pod: Pod, found: rec.Record | None, resource: str) -> list[Action]:
        return [] if self.settings.dry_run else _done(pod, found, resource, self.settings)

    def _room_on_its_way(self, pod: Pod, view: _View) -> bool:
        """Room is already on its way (pods terminating, perhaps a previous preemption for a pod its
        controller has since replaced): evicting more now would be a second set of victims. Wait."""
        return len(view.staying) < len(view.others) and self._fits(pod, view.staying)

    def _cannot_help(self, pod: Pod, admission: Admission) -> list[Action] | None:
        """A report when evicting cannot admit the pod (the module's error, or a non-resource reason)."""
        key = uid(pod)
        if admission.error:
            return _once(
                self.hints,
                pod,
                f"error/{key}/{admission.error}",
                "Warning",
                "PreemptionFailed",
                f"Cannot make room for this pod: {admission.error}",
            )
        if not admission.admit:
            reasons = "; ".join(getattr(x, "message", str(x)) for x in admission.reasons) or "unknown reason"
            return _once(
                self.hints,
                pod,
                f"unfit/{key}/{reasons}",
                "Warning",
                "PreemptionFailed",
                f"Evicting pods would not admit this pod: {reasons}",
            )
        return None

    def _victims(self, pod: Pod, admission: Admission, view: _View) -> tuple[Pod, ...] | list[Action]:
        """The module names victims by summary ({namespace, name, uid, ...}): the view's pods for them, or
        a report if it named a pod the safety rules protect (defence in depth: it must never do so)."""
        victim_uids = [str(v.get("uid") or "") for v in admission.victims]
        stray = [
            f"{v.get('namespace')}/{v.get('name')}"
            for v, u in zip(admission.victims, victim_uids, strict=True)
            if u not in view.candidates
        ]
        if stray:
            return _once(
                self.hints,
                pod,
                f"stray/{uid(pod)}/{stray}",
                "Warning",
                "PreemptionFailed",
                f"Refusing to evict protected pods {', '.join(stray)}",
            )
        return tuple(self.by_uid[u] for u in victim_uids)

    def _dry_run(self, pod: Pod, victims: tuple[Pod, ...], resource: str) -> list[Action]:
        dkey = f"dry-run/{uid(pod)}/{','.join(sorted(uid(v) for v in victims))}"
        if dkey in self.hints.reported:
            return []
        return [DryRun(pod=pod, victims=victims, resource=resource, key=dkey)]

    def _preempt(
        self, pod: Pod, found: rec.Record | None, victims: tuple[Pod, ...], resource: str
    ) -> list[Action]:
        """A new round: record the victims, announce them, evict them; past `max_rounds`, give up."""
        rnd = (found.round if found else 0) + 1
        if rnd > self.settings.max_rounds:
            gave_up = rec.Record(
                state=rec.ABANDONED, round=rnd - 1, resource=resource, victims=found.victims if found else ()
            )
            return [
                WriteRecord(pod=pod, record=gave_up),
                Report(
                    pod=pod,
                    key=f"abandoned/{uid(pod)}",
                    type="Warning",
                    reason="PreemptionFailed",
                    message=f"Still no room after {rnd - 1} rounds of preemption; giving up",
                ),
            ]
        record = rec.Record(
            state=rec.PREEMPTING,
            round=rnd,
            resource=resource,
            victims=tuple(rec.Victim.of(v) for v in victims),
        )
        actions: list[Action] = [
            WriteRecord(pod=pod, record=record),
            Announce(pod=pod, victims=victims, resource=resource),
        ]
        return actions + self._evict(pod, victims, resource, skip_leaving=False)

    def _evict(self, pod: Pod, victims: Sequence[Pod], resource: str, *, skip_leaving: bool) -> list[Action]:
        """Evict each victim not backing off, within the budget; `skip_leaving`: leave alone a victim
        already terminating or evicted a moment ago (wait for it)."""
        preemptor_priority = priority_of(pod) or 0
        actions: list[Action] = []
        for victim in victims:
            if skip_leaving and not is_candidate(victim, preemptor_priority, self.settings, self.hints):
                continue
            if self.hints.blocked_until.get(uid(victim), float("-inf")) > self.hints.now or self.budget <= 0:
                continue
            actions.append(Evict(pod=pod, victim=victim, resource=resource))
            self.budget -= 1
        return actions


@dataclass(slots=True)
class _View:
    """The other pods as the module sees them for one rejected pod."""

    candidates: set[str]  # uids the module may pick
    others: list[dict[str, Any]]  # every pod holding resources (protected ones neutralised)
    staying: list[dict[str, Any]]  # `others` without the pods already on their way out


def _view(pod: Pod, pods: Sequence[Pod], settings: Settings, hints: Hints, claimed: set[str]) -> _View:
    key = uid(pod)
    owner = controller_uid(pod)
    preemptor_priority = priority_of(pod) or 0
    fixed_priority = max(preemptor_priority, settings.critical_priority)
    view = _View(set(), [], [])
    for other in pods:
        other_uid = uid(other)
        if other_uid == key or (other.get("spec") or {}).get("nodeName") != settings.node_name:
            continue
        state = lifecycle_state(other)
        if state == TERMINATED:
            continue  # holds nothing
        if state == DESIRED and owner is not None and controller_uid(other) == owner:
            continue  # the controller's replacement, not yet admitted: the same demand, counted once
        leaving = state == TERMINATING or other_uid in hints.evicting
        if other_uid not in claimed and is_candidate(other, preemptor_priority, settings, hints, state):
            view.candidates.add(other_uid)
            view.others.append(dict(other))
        else:
            view.others.append(_neutralised(other, fixed_priority))
        if not leaving:
            view.staying.append(view.others[-1])
    return view


def _done(pod: Pod, found: rec.Record | None, resource: str, settings: Settings) -> list[Action]:
    """The pod fits: mark it done (and, with --recreate-rejected, have its controller replace it)."""
    done = rec.Record(
        state=rec.DONE,
        round=found.round if found else 0,
        resource=found.resource if found else resource,
        victims=found.victims if found else (),
    )
    actions: list[Action] = [WriteRecord(pod=pod, record=done)]
    if settings.recreate_rejected and has_controller(pod):
        actions.append(Recreate(pod=pod))
    return actions


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


def _first_resource(admission: Any, r: Rejection) -> str:
    """The kubelet labels its preemption metric with the first insufficient resource."""
    for resource, _ in getattr(admission, "requirements", None) or ():
        if resource:
            return str(resource)
    for reason in admission.reasons or ():
        resource = getattr(reason, "resource", None)
        if resource:
            return str(resource)
    return r.resource or ""


def _once(hints: Hints, pod: Pod, key: str, type_: str, reason: str, message: str) -> list[Action]:
    if key in hints.reported:
        return []
    return [Report(pod=pod, key=key, type=type_, reason=reason, message=message)]
