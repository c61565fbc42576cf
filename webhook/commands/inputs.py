"""One way of reading what `review`, `victims` and `plan` are given, as the API server would take it.

* PriorityClasses: the built-in system classes, then `--classes` files (or the cluster's), then the
  classes found in the input itself, each admitted as a CREATE against the ones before it, so the API
  server's rules hold (one `globalDefault`: a second one is refused with the API server's message).
* A pod to decide on may be a Pod or a workload (its pod template, in the workload's namespace, named as
  its controller names its pods); it gets its priority from its class before any node-side or
  scheduler-side decision, as admission gives it to every pod the cluster stores.
* Refusals are printed as kubectl prints what the API server answers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from webhook.files.class_files import load_classes
from webhook.files.documents import InputError, load_objects
from webhook.k8s import CREATE, PRIORITY_CLASS_RESOURCE, InvalidObject, section
from webhook.objects.defaults import default_priority_class
from webhook.objects.validation import undecodable
from webhook.objects.workloads import WORKLOADS, pod_template, template_pod
from webhook.policy.class_model import ClassSet, PriorityClass, StaticClassStore
from webhook.policy.class_rules import validate_priority_class
from webhook.policy.decision import Request
from webhook.policy.pod_rules import DEFAULT_POD_OPTIONS, PodOptions
from webhook.preemption.cluster.priority import UnresolvablePriority, resolve_priority

# `<Kind>.<group> "<name>" is invalid: <causes>` (the API server's 422 Invalid status message).
_INVALID = re.compile(
    r'(?P<kind>[A-Za-z]+)(?:\.[a-z0-9.-]+)? "(?P<name>[^"]*)" is invalid: (?P<causes>.*)', re.S
)


def kubectl_error(reason: str, message: str) -> str:
    """The line kubectl prints for an API server refusal: `The Pod "x" is invalid: <causes>` for a 422
    Invalid status (whatever the HTTP reason), `Error from server (<reason>): <message>` otherwise."""
    invalid = _INVALID.fullmatch(message)
    if invalid:
        return f'The {invalid["kind"]} "{invalid["name"]}" is invalid: {invalid["causes"]}'
    return f"Error from server ({reason}): {message}"


def base_classes(paths: Iterable[str], live: Iterable[dict[str, Any]] = ()) -> ClassSet:
    """The built-in system classes, the cluster's (`live`), then the `--classes` files (a file wins a
    name: it is the what-if being asked)."""
    cluster = []
    for i, obj in enumerate(live, start=1):
        try:
            cluster.append(PriorityClass.from_object(obj))
        except InvalidObject as err:
            raise InputError(f"priorityclass {i} of the cluster: {err}") from None
    return StaticClassStore([*cluster, *load_classes(paths)]).snapshot()


class ClassRefused(ValueError):
    """The API server would refuse this PriorityClass; the message is the line kubectl prints."""


def admit_class(obj: dict[str, Any], classes: ClassSet) -> tuple[dict[str, Any], ClassSet]:
    """(the class as stored, the classes with it) for a PriorityClass CREATE; ClassRefused otherwise.

    A class of the same name already known (a `--classes` file, the cluster) is replaced, as `kubectl
    apply` would, so it is not its own rival for the one default."""
    obj = default_priority_class(obj)
    try:
        pc = PriorityClass.from_object(obj)
    except InvalidObject as err:
        raise InputError(str(err)) from None
    decision = validate_priority_class(
        Request(CREATE, PRIORITY_CLASS_RESOURCE, obj), classes.without(pc.name)
    )
    if not decision.allowed:
        raise ClassRefused(kubectl_error(decision.reason, decision.message))
    return obj, classes.with_class(pc)


@dataclass(frozen=True)
class PodInput:
    """The pod a command decides on, where it came from, and the classes known once its file is read."""

    pod: dict[str, Any]
    source: str
    classes: ClassSet
    kind: str  # Pod, or the workload kind it was made from


def read_pod_input(path: str, classes: ClassSet, what: str = "Pod") -> PodInput:
    """`--pod FILE`: one Pod or workload, and any PriorityClasses beside it (they count as created first)."""
    found: list[tuple[str, dict[str, Any]]] = []
    docs = load_objects([path])
    if len(docs) == 1:  # one document: named by its file alone, as before
        docs = [(path, docs[0][1])]
    for source, doc in docs:
        if not isinstance(doc, dict):
            raise InputError(f"{source}: expected a Kubernetes object, got {type(doc).__name__}")
        kind = doc.get("kind", "Pod")
        if not isinstance(kind, str):
            raise InputError(f"{source}: expected kind Pod, got {kind!r}")
        if kind == "PriorityClass":
            try:
                _, classes = admit_class(doc, classes)
            except ClassRefused as err:
                raise InputError(f"{source}: {err}") from None
            except InputError as err:
                raise InputError(f"{source}: {err}") from None
        elif kind == "Pod" or kind in WORKLOADS:
            found.append((source, doc))
        else:
            raise InputError(
                f"{source}: expected kind Pod, got {kind!r} (or a workload: Deployment, Job, ...)"
            )
    if len(found) != 1:
        raise InputError(f"{path}: expected one {what} (or workload), found {len(found)}")
    source, obj = found[0]
    kind = obj.get("kind", "Pod")
    pod = as_pod(obj, kind, source)
    message = undecodable({"apiVersion": "v1", **obj, "kind": kind}, pod.get("spec"))
    if message:  # the API server could not even decode it: no pod like this can exist
        raise InputError(f"{source}: {message}")
    return PodInput(pod, source, classes, kind)


def as_pod(obj: dict[str, Any], kind: str, source: str) -> dict[str, Any]:
    """A Pod as is; a workload as the pod its controller creates (template metadata and spec, the
    workload's namespace, `generateName` `<workload>-`)."""
    if kind == "Pod":
        return obj
    template = pod_template(obj, kind)
    if template is None:
        raise InputError(f"{source}: {kind} has no pod template")
    meta = section(obj, "metadata")
    namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) else "default"
    pod = template_pod(template, namespace or "default")
    name = meta.get("name")
    if isinstance(name, str) and name:
        pod["metadata"]["generateName"] = f"{name}-"
    return pod


def with_priority(
    pod: dict[str, Any], source: str, classes: ClassSet, options: PodOptions = DEFAULT_POD_OPTIONS
) -> dict[str, Any]:
    """The pod with `spec.priority` and `spec.preemptionPolicy` as admission sets them from its class (a
    pod that already carries a priority keeps it, as a stored pod does); InputError if admission would
    refuse the pod (a class that does not exist)."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return pod
    meta = section(pod, "metadata")
    namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) else None
    try:
        priority, policy = resolve_priority(pod, namespace or "default", classes, options)
    except UnresolvablePriority as err:
        raise InputError(f"{source}: {err}") from None
    filled = {**spec, "priority": priority}
    if spec.get("priority") is None or spec.get("preemptionPolicy") is None:
        filled["preemptionPolicy"] = policy
    return {**pod, "spec": filled}
