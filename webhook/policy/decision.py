"""What an admission check returns, and the request it decides on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True, slots=True)
class Request:
    """The parts of an AdmissionReview request that the decisions read (already type-checked)."""

    operation: str
    resource: str  # "pods" or "priorityclasses.scheduling.k8s.io" (group-qualified, as upstream)
    object: dict[str, Any] | None = None
    old_object: dict[str, Any] | None = None
    namespace: str = ""
    name: str = ""
    sub_resource: str = ""
    # request.userInfo.extra["authentication.kubernetes.io/node-name"]: the node of a pod-bound token.
    node_claim: str = ""


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool = True
    message: str = ""
    code: int = 200
    reason: str = ""
    warnings: tuple[str, ...] = field(default=())
    # What admission sets on the pod: the spec fields whose value differs, in the order it sets them, and
    # whether the pod has no spec object to set them in. Decisions read these; the wire form is `patch`.
    spec_changes: Mapping[str, Any] = field(default_factory=dict)
    new_spec: bool = False
    # Admitted without priority: a pod in a system namespace whose mutation was skipped (fail-open entry).
    unresolved: bool = False
    # The class whose allowed-namespaces rule refused this (not allowed) or warned about it (audit).
    rule_class: str = ""

    @property
    def patch(self) -> tuple[dict[str, Any], ...]:
        """The changes as JSONPatch `add` operations (`add` also replaces an existing member)."""
        if not self.spec_changes:
            return ()
        if self.new_spec:
            return ({"op": "add", "path": "/spec", "value": dict(self.spec_changes)},)
        return tuple({"op": "add", "path": f"/spec/{k}", "value": v} for k, v in self.spec_changes.items())


ALLOW = Decision()


def combine(first: Decision, then: Decision) -> Decision:
    """Two checks of one object as one answer: the first refusal, else `first`'s changes with the warnings
    of both (and the class of a rule that warned)."""
    if not first.allowed:
        return first
    if not then.allowed:
        return then
    if not then.warnings and not then.rule_class:
        return first
    return replace(
        first, warnings=first.warnings + then.warnings, rule_class=first.rule_class or then.rule_class
    )


def spec_decision(
    obj: Mapping[str, Any], fields: Mapping[str, Any], warnings: tuple[str, ...] = ()
) -> Decision:
    """Allow, setting in `spec` the fields whose value differs (warnings only go with a change)."""
    raw = obj.get("spec")
    spec: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
    changed = {k: v for k, v in fields.items() if spec.get(k) != v or k not in spec}
    if not changed:
        return ALLOW
    return Decision(spec_changes=changed, new_spec=not isinstance(raw, dict), warnings=warnings)


def object_name(request: Request) -> str:
    """The name upstream puts in a Forbidden message: metadata.name, then generateName, then the request's."""
    for obj in (request.object, request.old_object):
        meta = (obj or {}).get("metadata") or {}
        for key in ("name", "generateName"):
            if meta.get(key):
                return str(meta[key])
    return request.name or "Unknown"


def forbidden(request: Request, err: str) -> Decision:
    """`admission.NewForbidden`: 403, reason Forbidden, `<resource> "<name>" is forbidden: <err>`."""
    return Decision(
        allowed=False,
        code=403,
        reason="Forbidden",
        message=f'{request.resource} "{object_name(request)}" is forbidden: {err}',
    )
