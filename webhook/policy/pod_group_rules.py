"""PodGroup priority: the Priority plugin's `admitPodGroup`, for workload-aware preemption.

From 1.36 (scheduling.k8s.io/v1alpha2, gate WorkloadAwarePreemption; v1beta1 in 1.37) a PodGroup names a
PriorityClass and the plugin resolves it to `spec.priority`, as for pods, so that the scheduler can
preempt for the group as a whole. Upstream: plugin/pkg/admission/priority/admission_test.go
(`TestAdmitPodGroup`); the rules are those the table asserts:
- CREATE only: an UPDATE is a no-op (the API server's validation keeps the fields immutable);
- no class named: the global default class (its name is set too), else priority 0 and no name;
- a class that does not exist is refused (`no PriorityClass with name ... was found`, as for pods);
- a client-set `spec.priority` is accepted only when it equals the class's value.
No `preemptionPolicy` is set: PodGroup's is a separate alpha field (`PodGroupPreemptionPolicy`, 1.37).
"""

from __future__ import annotations

from typing import Any

from webhook.k8s import CREATE, DEFAULT_PRIORITY_WHEN_NO_DEFAULT_CLASS, section
from webhook.policy.class_model import ClassSet
from webhook.policy.decision import ALLOW, Decision, Request, forbidden, spec_decision


def admit_pod_group(request: Request, classes: ClassSet) -> Decision:
    """Resolve and set `spec.priority` (and the default class's name) on CREATE."""
    obj = request.object
    if request.operation != CREATE or request.sub_resource or obj is None:
        return ALLOW
    spec = section(obj, "spec")
    class_name: str = spec.get("priorityClassName") or ""
    fields: dict[str, Any] = {}
    if class_name:
        pc = classes.get(class_name)
        if pc is None:
            return forbidden(request, f"no PriorityClass with name {class_name} was found")
        priority = pc.value
    else:
        default = classes.default()
        if default is None:
            priority = DEFAULT_PRIORITY_WHEN_NO_DEFAULT_CLASS
        else:
            priority = default.value
            fields["priorityClassName"] = default.name
    given = spec.get("priority")
    if given is not None and given != priority:
        return forbidden(
            request,
            f"the integer value of priority ({given}) must not be provided in pod group spec; "
            f"priority admission controller computed {priority} from the given PriorityClass name",
        )
    fields["priority"] = priority
    return spec_decision(obj, fields)
