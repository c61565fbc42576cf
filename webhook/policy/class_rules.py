"""PriorityClass rules: the plugin's one-default check plus the API's own validation and delete refusal.

Upstream: admission.go (validatePriorityClass), pkg/apis/scheduling/validation/validation.go,
pkg/registry/scheduling/priorityclass/storage/storage.go. The API server enforces its part itself; we
check it too so that `review` answers offline exactly as a cluster would.
"""

from __future__ import annotations

import contextlib
from typing import Any

from webhook.k8s import (
    CREATE,
    DELETE,
    HIGHEST_USER_DEFINABLE_PRIORITY,
    SYSTEM_PRIORITY_CLASS_PREFIX,
    UPDATE,
    InvalidObject,
)
from webhook.policy.class_model import SYSTEM_CLASSES_BY_NAME, ClassSet, PriorityClass
from webhook.policy.decision import ALLOW, Decision, Request, forbidden, object_name
from webhook.policy.namespace_access import annotation_problems


def validate_priority_class(request: Request, classes: ClassSet) -> Decision:
    if request.sub_resource:
        return ALLOW
    if request.operation == DELETE:
        return _validate_delete(request)
    if request.operation not in (CREATE, UPDATE) or request.object is None:
        return ALLOW
    try:
        pc = PriorityClass.from_object(request.object)
    except InvalidObject as err:
        return _invalid(request, [str(err)])
    errors = _api_errors(pc, request.object) + _annotation_errors(request.object)
    if request.operation == UPDATE and request.old_object is not None:
        # A stored object we cannot read is the API server's business, not this update's.
        with contextlib.suppress(InvalidObject):
            errors += _update_errors(pc, PriorityClass.from_object(request.old_object))
    if errors:
        return _invalid(request, errors)
    if pc.global_default:
        default = classes.default()
        if default is not None and (request.operation == CREATE or default.name != pc.name):
            return forbidden(
                request,
                f"PriorityClass {default.name} is already marked as default. Only one default can exist",
            )
    return ALLOW


def _api_errors(pc: PriorityClass, obj: dict[str, Any]) -> list[str]:
    """ValidatePriorityClass, minus object-meta checks the API server does on every object anyway."""
    errors = []
    if pc.name.startswith(SYSTEM_PRIORITY_CLASS_PREFIX):
        problem = _system_class_problem(pc)
        if problem:
            errors.append(
                "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for "
                f"system use only. error: {problem}"
            )
    elif pc.value > HIGHEST_USER_DEFINABLE_PRIORITY:
        errors.append(
            "value: Forbidden: maximum allowed value of a user defined priority is "
            f"{HIGHEST_USER_DEFINABLE_PRIORITY}"
        )
    if (obj.get("metadata") or {}).get("namespace"):
        errors.append("metadata.namespace: Forbidden: not allowed on this type")
    return errors


def _annotation_errors(obj: dict[str, Any]) -> list[str]:
    """Our own annotations (webhook.policy.namespace_access): a rule that cannot be read is refused when
    written, never stored to be ignored."""
    annotations = (obj.get("metadata") or {}).get("annotations")
    return annotation_problems(annotations) if isinstance(annotations, dict) else []


def _system_class_problem(pc: PriorityClass) -> str:
    """IsKnownSystemPriorityClass."""
    known = SYSTEM_CLASSES_BY_NAME.get(pc.name)
    if known is None:
        return f"{pc.name} is not a known system priority class"
    if known.value != pc.value:
        return f"value of {pc.name} PriorityClass must be {known.value}"
    if known.global_default != pc.global_default:
        return f"globalDefault of {pc.name} PriorityClass must be {str(known.global_default).lower()}"
    return ""


def _update_errors(new: PriorityClass, old: PriorityClass) -> list[str]:
    """ValidatePriorityClassUpdate: value and preemptionPolicy are immutable (compared after defaulting)."""
    errors = []
    if new.value != old.value:
        errors.append("value: Forbidden: may not be changed in an update.")
    if new.preemption_policy != old.preemption_policy:
        errors.append(f'preemptionPolicy: Invalid value: "{new.preemption_policy}": field is immutable')
    return errors


def _invalid(request: Request, errors: list[str]) -> Decision:
    """The API's field-error form: `PriorityClass.scheduling.k8s.io "x" is invalid: <err>` (or `[a, b]`)."""
    detail = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    name = object_name(request)
    return Decision(
        allowed=False,
        code=403,
        reason="Forbidden",
        message=f'PriorityClass.scheduling.k8s.io "{name}" is invalid: {detail}',
    )


def _validate_delete(request: Request) -> Decision:
    name = request.name or ((request.old_object or {}).get("metadata") or {}).get("name", "")
    if name in SYSTEM_CLASSES_BY_NAME:
        return forbidden(request, "this is a system priority class and cannot be deleted")
    return ALLOW
