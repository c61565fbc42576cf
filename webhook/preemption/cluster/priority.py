"""A pod's priority and preemption policy as the scheduler would see them after admission.

The scheduler reads `spec.priority` (nil counts as 0) and `spec.preemptionPolicy` (nil counts as
PreemptLowerPriority). A pod written by hand for a what-if usually has neither, only a class name: for
such a pod we run the webhook's own admission decision, so `plan` and the cluster never disagree on what
a class means.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.k8s import (
    CREATE,
    INT32_MAX,
    INT32_MIN,
    POD_RESOURCE,
    PREEMPT_LOWER_PRIORITY,
    PREEMPTION_POLICIES,
)
from webhook.policy.class_model import ClassSet, is_int
from webhook.policy.decision import Request
from webhook.policy.pod_rules import DEFAULT_POD_OPTIONS, PodOptions, admit_pod


class UnresolvablePriority(ValueError):
    """Admission would reject the pod (e.g. its class does not exist); the message is admission's."""


def resolve_priority(
    pod: Mapping[str, Any],
    namespace: str,
    classes: ClassSet,
    options: PodOptions = DEFAULT_POD_OPTIONS,
    *,
    what_if: bool = False,
) -> tuple[int, str]:
    """(priority, preemptionPolicy): the pod's own fields when it has a priority, else what admission sets.

    `what_if` is for the pod being planned: a class that is known and says otherwise than a leftover
    `spec.priority` is an error (the question is "what if it had this class"), and an unset policy is the
    class's.
    """
    spec = pod.get("spec") or {}
    priority = spec.get("priority")
    policy = spec.get("preemptionPolicy")
    class_name = spec.get("priorityClassName")
    if what_if and priority is not None and isinstance(class_name, str) and class_name in classes:
        pc = classes[class_name]
        if is_int(priority) and priority != pc.value:
            raise UnresolvablePriority(
                f"spec.priority {priority} does not match PriorityClass {class_name} ({pc.value}); "
                "remove spec.priority to plan with the class"
            )
        if policy is None:
            policy = pc.preemption_policy
    if priority is None:
        meta = pod.get("metadata") or {}
        request = Request(CREATE, POD_RESOURCE, dict(pod), namespace=namespace, name=meta.get("name") or "")
        decision = admit_pod(request, classes, options)
        if not decision.allowed:
            raise UnresolvablePriority(decision.message)
        priority = decision.spec_changes.get("priority", 0)
        policy = decision.spec_changes.get("preemptionPolicy", policy)
    if not is_int(priority) or not INT32_MIN <= priority <= INT32_MAX:
        raise UnresolvablePriority(f"spec.priority: must be a 32-bit integer, got {priority!r}")
    if policy is None:
        policy = PREEMPT_LOWER_PRIORITY
    if policy not in PREEMPTION_POLICIES:
        raise UnresolvablePriority(
            f"spec.preemptionPolicy: must be Never or PreemptLowerPriority, got {policy!r}"
        )
    return priority, policy
