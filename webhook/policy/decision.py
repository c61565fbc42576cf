"""What an admission check returns, and the request it decides on."""

from __future__ import annotations

from dataclasses import dataclass, field
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


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool = True
    patch: tuple[dict[str, Any], ...] = ()
    message: str = ""
    code: int = 200
    reason: str = ""
    warnings: tuple[str, ...] = field(default=())


ALLOW = Decision()


def object_name(request: Request) -> str:
    """The name upstream puts in a Forbidden message: metadata.name, then generateName, then the request's."""
    for obj in (request.object, request.old_object):
        meta = (obj or {}).get("metadata") or {}
        for key in ("name", "generateName"):
            if meta.get(key):
                return meta[key]
    return request.name or "Unknown"


def forbidden(request: Request, err: str) -> Decision:
    """`admission.NewForbidden`: 403, reason Forbidden, `<resource> "<name>" is forbidden: <err>`."""
    return Decision(
        allowed=False,
        code=403,
        reason="Forbidden",
        message=f'{request.resource} "{object_name(request)}" is forbidden: {err}',
    )
