"""Room for one rejected pod: its view of the node, the node-side module's answer, the victims checked
again against the safety rules, the record and the evictions. Pure: no I/O, no clock, no threads.

`Pass` is one pass of `decide` over the node; it spends the pass's eviction budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from webhook.k8s import TERMINAL_PHASES
from webhook.preemption.node.admission import Admission
from webhook.preemption.pods import priority_of
from webhook.sidecar import record as rec
from webhook.sidecar.actions import (
    Action,
    AdmitFn,
    Announce,
    DryRun,
    Evict,
    Hints,
    Pod,
    Recreate,
    Report,
    Settings,
    WriteRecord,
    controller_uid,
    has_controller,
    uid,
)
from webhook.sidecar.lifecycle import (
    DESIRED,
    TERMINATED,
    TERMINATING,
    holds_resources,
    is_static,
    lifecycle_state,
    phase,
)
from webhook.sidecar.trigger import Rejection


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
    if prio is None:
        if (victim.get("spec") or {}).get("priorityClassName"):
            # Its class was never resolved (admission skipped its namespace or timed out): its priority is
            # unknown, and may be the preemptor's or above. Upstream's 0 for nil assumes no class was named.
            return False
        prio = 0  # the kubelet's GetPodPriority: created when no class was named and no default existed
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


@dataclass(slots=True)
class Pass:
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
        return once(
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
            return once(
                self.hints,
                pod,
                f"error/{key}/{admission.error}",
                "Warning",
                "PreemptionFailed",
                f"Cannot make room for this pod: {admission.error}",
            )
        if not admission.admit:
            reasons = "; ".join(getattr(x, "message", str(x)) for x in admission.reasons) or "unknown reason"
            return once(
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
            return once(
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


def once(hints: Hints, pod: Pod, key: str, type_: str, reason: str, message: str) -> list[Action]:
    if key in hints.reported:
        return []
    return [Report(pod=pod, key=key, type=type_, reason=reason, message=message)]
