"""A cheap type check that accepts a review only where the marshmallow schemas surely would.

Marshmallow is the authority on what a well-formed review is and words every error; running it on each
review, though, costs more than the decision itself. Reviews from an API server are always well formed,
so they take this path, and anything it is unsure of goes to the schemas (tests hold the two together).
"""

from __future__ import annotations

from typing import Any

from webhook.k8s import OPERATIONS
from webhook.review.routes import route_of
from webhook.review.shapes import ABSENT, CHECKS, optional

# Defined here, not in `schema`, so that a well-formed review never loads marshmallow (start-up time).
API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")


def qualified_resource(gvr: dict[str, Any]) -> str:
    """`pods`, `priorityclasses.scheduling.k8s.io`: the name upstream's messages and our checks use."""
    group = gvr.get("group") or ""
    return f"{gvr['resource']}.{group}" if group else gvr["resource"]


def well_formed(body: dict[str, Any]) -> bool:
    """True only if the schemas would accept `body` as it is (no coercion, no defaults beyond absence)."""
    if body.get("apiVersion") not in API_VERSIONS or body.get("kind") != "AdmissionReview":
        return False
    req = body.get("request")
    if type(req) is not dict:
        return False
    uid, gvr = req.get("uid"), req.get("resource")
    if type(uid) is not str or not uid or type(gvr) is not dict or type(gvr.get("resource")) is not str:
        return False
    if not (
        optional(gvr.get("group", ABSENT), str, nullable=False)
        and optional(gvr.get("version", ABSENT), str, nullable=False)
    ):
        return False
    if type(req.get("operation")) is not str or req["operation"] not in OPERATIONS:
        return False
    for key in ("subResource", "namespace", "name"):
        if not optional(req.get(key, ABSENT), str, nullable=False):
            return False
    if not optional(req.get("dryRun", ABSENT), bool, nullable=False):
        return False
    objects = (req.get("object"), req.get("oldObject"))
    if any(obj is not None and type(obj) is not dict for obj in objects):
        return False
    route = route_of(qualified_resource(gvr), req.get("subResource") or "")
    if route is None or route.shape is None:
        return True
    check = CHECKS[route.shape]
    return all(obj is None or check(obj) for obj in objects)
