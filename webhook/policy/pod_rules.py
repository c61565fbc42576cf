"""Pod priority: the mutating `Admit` of upstream's Priority plugin, and a final-state validating pass.

Upstream: plugin/pkg/admission/priority/admission.go (admitPod, getDefaultPriority).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from webhook.k8s import (
    CREATE,
    CRITICAL_POD_ANNOTATION,
    DEFAULT_PRIORITY_WHEN_NO_DEFAULT_CLASS,
    LEGACY_CRITICAL_NAMESPACE,
    PREEMPT_LOWER_PRIORITY,
    SYSTEM_CLUSTER_CRITICAL,
    UPDATE,
)
from webhook.policy.class_model import ClassSet
from webhook.policy.decision import ALLOW, Decision, Request, forbidden, spec_decision


@dataclass(frozen=True, slots=True)
class PodOptions:
    # The ≤1.15 mapping of `scheduler.alpha.kubernetes.io/critical-pod: ""` in kube-system.
    legacy_critical_annotation: bool = True
    # Workloads (Deployment, Job, ...) whose pods would be forbidden: denied instead of warned about.
    deny_unadmittable_workloads: bool = False
    # Namespaces served by fail-open entries (the chart's `admission.systemNamespaces`): there a pod may reach
    # the final check unmutated (its /mutate call timed out or failed) and must still be admitted.
    system_namespaces: frozenset[str] = frozenset({LEGACY_CRITICAL_NAMESPACE})


DEFAULT_POD_OPTIONS = PodOptions()


def admit_pod(request: Request, classes: ClassSet, options: PodOptions = DEFAULT_POD_OPTIONS) -> Decision:
    """Resolve and set priority, preemptionPolicy (and the class name) on CREATE; carry over on UPDATE."""
    if request.sub_resource or request.object is None:
        return ALLOW
    if request.operation == UPDATE:
        return _carry_over(request.object, request.old_object or {})
    if request.operation != CREATE:
        return ALLOW
    return _resolve(request, classes, options)


def validate_pod(request: Request, classes: ClassSet, options: PodOptions = DEFAULT_POD_OPTIONS) -> Decision:
    """The pod as finally stored must be what priority admission made of it.

    Catches a mutating webhook that ran after ours and changed or dropped the priority: on a pod in its
    final state, `admit_pod` is a no-op (it is idempotent), so any patch it would make is a discrepancy.

    Decided once: /mutate ran earlier, maybe on another worker, with the classes as they were then. A pod
    that is a no-op for one of the sets `classes` replaced recently (`classes.recent`) is what /mutate
    decided before a class change (a default class appeared, a class was re-created with another value):
    it is admitted as the in-tree plugin, which decides once, would have admitted it.

    In a system namespace (fail-open entries) a pod without `spec.priority` had its mutation skipped (a
    timeout or an outage): it is admitted with a warning and `unresolved` set, so the server counts it.
    """
    if request.operation != CREATE or request.sub_resource or request.object is None:
        return ALLOW
    if request.namespace in options.system_namespaces and _spec(request.object).get("priority") is None:
        return Decision(
            unresolved=True,
            warnings=(
                f"spec.priority is not set: priority admission was skipped (webhook timeout or outage); "
                f"admitted in system namespace {request.namespace} without it",
            ),
        )
    decision = admit_pod(request, classes, options)
    if decision.allowed and not decision.spec_changes:
        return decision
    for earlier in classes.recent:
        before = admit_pod(request, earlier, options)
        if before.allowed and not before.spec_changes:
            return before
    changes = decision.spec_changes
    if not decision.allowed:
        return decision
    field = "priority" if decision.new_spec else next(iter(changes))
    return forbidden(request, f"spec.{field} is not set; priority admission requires {changes[field]!s}")


def _spec(pod: dict[str, Any]) -> dict[str, Any]:
    return pod.get("spec") or {}


def _set(pod: dict[str, Any], fields: dict[str, Any], warnings: tuple[str, ...] = ()) -> Decision:
    return spec_decision(pod, fields, warnings)


def _carry_over(pod: dict[str, Any], old: dict[str, Any]) -> Decision:
    """On UPDATE upstream only restores what a client's PUT dropped; API validation forbids real changes."""
    spec, old_spec = _spec(pod), _spec(old)
    fields = {
        k: old_spec[k]
        for k in ("priority", "preemptionPolicy")
        if spec.get(k) is None and old_spec.get(k) is not None
    }
    return _set(pod, fields)


def _is_legacy_critical(request: Request, pod: dict[str, Any]) -> bool:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return request.namespace == LEGACY_CRITICAL_NAMESPACE and annotations.get(CRITICAL_POD_ANNOTATION) == ""


def _resolve(request: Request, classes: ClassSet, options: PodOptions) -> Decision:
    pod = request.object or {}
    spec = _spec(pod)
    class_name: str = spec.get("priorityClassName") or ""
    warnings: list[str] = []
    legacy = False
    if not class_name and options.legacy_critical_annotation and _is_legacy_critical(request, pod):
        class_name, legacy = SYSTEM_CLUSTER_CRITICAL, True
        warnings.append(f"legacy annotation {CRITICAL_POD_ANNOTATION} mapped to {SYSTEM_CLUSTER_CRITICAL}")

    fields: dict[str, Any] = {}
    if class_name:
        pc = classes.get(class_name)
        if pc is None:
            return forbidden(request, f"no PriorityClass with name {class_name} was found")
        priority, policy = pc.value, pc.preemption_policy
        if legacy:
            fields["priorityClassName"] = class_name
    else:
        default = classes.default()
        if default is None:
            priority, policy = DEFAULT_PRIORITY_WHEN_NO_DEFAULT_CLASS, PREEMPT_LOWER_PRIORITY
        else:
            priority, policy = default.value, default.preemption_policy
            fields["priorityClassName"] = default.name

    client_priority, client_policy = spec.get("priority"), spec.get("preemptionPolicy")
    if legacy and _set_by_in_tree_plugin(client_priority, client_policy, classes):
        # The in-tree plugin ran first and gave the unnamed pod the no-default values; the annotation
        # states the intent, so it wins over those (not over a value the client chose).
        client_priority = client_policy = None
        warnings.append("spec.priority 0 set by the in-tree Priority plugin was replaced")
    if client_priority is not None and client_priority != priority:
        return _client_set(request, "the integer value of priority", client_priority, priority)
    fields["priority"] = priority
    if policy is not None:
        if client_policy is not None and client_policy != policy:
            return _client_set(request, "the string value of PreemptionPolicy", client_policy, policy)
        fields["preemptionPolicy"] = policy
    return _set(pod, fields, tuple(warnings))


def _client_set(request: Request, what: str, given: Any, computed: Any) -> Decision:
    """A client-set field that differs from what the class gives: upstream's refusal, word for word."""
    return forbidden(
        request,
        f"{what} ({given}) must not be provided in pod spec; "
        f"priority admission controller computed {computed} from the given PriorityClass name",
    )


def _set_by_in_tree_plugin(priority: Any, policy: Any, classes: ClassSet) -> bool:
    """What the in-tree plugin leaves on a pod that names no class when no default exists: priority 0 *and*
    PreemptLowerPriority (it always sets both). A pod with priority 0 alone got it from its client."""
    return (
        classes.default() is None
        and priority == DEFAULT_PRIORITY_WHEN_NO_DEFAULT_CLASS
        and policy == PREEMPT_LOWER_PRIORITY
    )
