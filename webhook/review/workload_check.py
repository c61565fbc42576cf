"""Workload admission: a Deployment, Job, ... gets the decision its pods will get, as a warning or a denial.

A workload whose pods can never be admitted (a PriorityClass that does not exist, a priority that
contradicts its class) is otherwise accepted, and the failure shows up later, only as FailedCreate events
of a ReplicaSet or Job. Checking the pod template at `kubectl apply` says so where the user is looking.
By default the answer is a warning (kubectl prints it, the object is stored): the pods' own admission
still enforces everything, so a workload check must never be what blocks a rollout.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from webhook.k8s import CREATE, POD_RESOURCE, UPDATE, section
from webhook.objects.workloads import WORKLOAD_RESOURCES, pod_template, template_pod
from webhook.policy.class_model import ClassSet
from webhook.policy.decision import ALLOW, Decision, Request
from webhook.policy.namespace_access import AUDIT, NO_NAMESPACES, NamespaceLabels, check_namespace
from webhook.policy.pod_rules import DEFAULT_POD_OPTIONS, PodOptions, admit_pod
from webhook.review.shapes import pod_ok


def workload_kind(resource: str) -> str | None:
    return WORKLOAD_RESOURCES.get(resource)


def check_workload(
    request: Request,
    classes: ClassSet,
    options: PodOptions = DEFAULT_POD_OPTIONS,
    namespaces: NamespaceLabels = NO_NAMESPACES,
) -> Decision:
    """The pods' decision for a workload CREATE/UPDATE: ALLOW, a warning, or (opted in) a denial.

    The class's allowed-namespaces rule is the exception: the contract refuses pod templates as it
    refuses pods (a warning under audit), whatever `deny_unadmittable_workloads` says."""
    kind = workload_kind(request.resource)
    if kind is None or request.sub_resource or request.operation not in (CREATE, UPDATE):
        return ALLOW
    template = pod_template(request.object, kind)
    if template is None:
        return ALLOW
    if request.operation == UPDATE and _priority_view(template) == _priority_view(
        pod_template(request.old_object, kind)
    ):
        return ALLOW  # the pods' priority is unchanged: nothing new to say (and nothing to block)
    err = template_error(template, request.namespace, classes, options)
    if err is None:
        return _namespace_rule(request, kind, template, classes, options, namespaces)
    message = workload_message(kind, request.namespace, workload_name(request), err)
    if options.deny_unadmittable_workloads:
        return forbidden_workload(message)
    return Decision(warnings=(message,))


def template_error(
    template: dict[str, Any], namespace: str, classes: ClassSet, options: PodOptions
) -> str | None:
    """Why a pod made from `template` in `namespace` would be forbidden, or None if it would be admitted."""
    pod = template_pod(template, namespace)
    if not pod_ok(pod):
        return None  # fields of the wrong type: the API server's own validation of the workload reports them
    decision = admit_pod(Request(CREATE, POD_RESOURCE, object=pod, namespace=namespace), classes, options)
    if decision.allowed:
        return None
    return decision.message.split(" is forbidden: ", 1)[-1]


def _namespace_rule(
    request: Request,
    kind: str,
    template: dict[str, Any],
    classes: ClassSet,
    options: PodOptions,
    namespaces: NamespaceLabels,
) -> Decision:
    """The rule of the class the pods will resolve to (named, the default, or the legacy mapping)."""
    pod = template_pod(template, request.namespace)
    namespace = request.namespace
    admitted = admit_pod(Request(CREATE, POD_RESOURCE, object=pod, namespace=namespace), classes, options)
    name = admitted.spec_changes.get("priorityClassName") or section(pod, "spec").get("priorityClassName")
    pc = classes.get(name) if isinstance(name, str) and name else None
    if pc is None:
        return ALLOW
    refusal = check_namespace(pc.name, pc.namespace_rule, namespace, namespaces)
    if refusal is None:
        return ALLOW
    message = workload_message(kind, namespace, workload_name(request), refusal.reason)
    if refusal.audit:
        return Decision(warnings=(f"{AUDIT}: {message}",), rule_class=pc.name)
    return replace(forbidden_workload(message), rule_class=pc.name)


def workload_name(request: Request) -> str:
    meta = (request.object or {}).get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return str(request.name or meta.get("name") or meta.get("generateName") or "Unknown")


def workload_message(kind: str, namespace: str, name: str, err: str) -> str:
    """`pods created by Deployment shop/web will be forbidden: <why>`: the same words offline and served."""
    return f"pods created by {kind} {namespace}/{name} will be forbidden: {err}"


def forbidden_workload(message: str) -> Decision:
    """403 Forbidden with the workload message (kubectl prints it after `admission webhook ... denied`)."""
    return Decision(allowed=False, code=403, reason="Forbidden", message=message)


def _priority_view(template: Any) -> Any:
    """What the pods' priority depends on: the class, the priority fields, and the legacy annotation."""
    if not isinstance(template, dict):
        return None
    spec = section(template, "spec")
    meta = section(template, "metadata")
    annotations = section(meta, "annotations")
    return (
        spec.get("priorityClassName"),
        spec.get("priority"),
        spec.get("preemptionPolicy"),
        annotations.get("scheduler.alpha.kubernetes.io/critical-pod"),
    )
