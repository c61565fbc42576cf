"""Turn an AdmissionReview into the response the webhook sends, for one stage of admission.

`mutate` and `validate` are the two webhook endpoints; `admit` is both in order (mutate, apply the patch,
validate the result), which is what the cluster does overall and what the `review` command reports.
"""

from __future__ import annotations

import base64
import enum
from dataclasses import replace
from typing import Any

import jsonpatch

from webhook import json_codec
from webhook.policy.class_model import ClassSet
from webhook.policy.decision import ALLOW, Decision, Request, combine
from webhook.policy.eviction_rules import PodNodes, node_claim
from webhook.policy.namespace_access import NO_NAMESPACES, NamespaceLabels
from webhook.policy.pod_rules import DEFAULT_POD_OPTIONS, PodOptions
from webhook.review.fastpath import qualified_resource, well_formed
from webhook.review.routes import Context, route_of


class Stage(enum.StrEnum):
    MUTATE = "mutate"
    VALIDATE = "validate"
    ADMIT = "admit"


class MalformedReview(ValueError):
    """The body is not an AdmissionReview we can answer; the message is one line naming the field."""


def parse_review(body: Any) -> tuple[str, str, Request]:
    """Check the envelope and the object fields we read; return (apiVersion, uid, request)."""
    if not isinstance(body, dict):
        raise MalformedReview("body: must be a JSON object (an AdmissionReview)")
    if well_formed(body):
        api_version, req = body["apiVersion"], body["request"]
    else:
        api_version, req = _load(body)
    request = Request(
        operation=req["operation"],
        resource=qualified_resource(req["resource"]),
        object=req.get("object"),
        old_object=req.get("oldObject"),
        namespace=req.get("namespace", ""),
        name=req.get("name", ""),
        sub_resource=req.get("subResource", ""),
        node_claim=node_claim(_user_extra(req)),
    )
    return api_version, req["uid"], request


def _user_extra(req: dict[str, Any]) -> Any:
    """request.userInfo.extra, or None: read for evictions only, never required (a review may omit it)."""
    user = req.get("userInfo")
    return user.get("extra") if isinstance(user, dict) else None


def _load(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The schemas' verdict: the loaded review, or MalformedReview naming the first bad field."""
    from marshmallow import ValidationError  # only off the fast path: loading marshmallow is most of

    from webhook.review.schema import OBJECT_SCHEMAS, REVIEW_SCHEMA, first_error  # `review`'s start-up

    try:
        review = REVIEW_SCHEMA.load(body)
    except ValidationError as err:
        raise MalformedReview(first_error(err)) from None
    req = review["request"]
    route = route_of(qualified_resource(req["resource"]), req["subResource"])
    schema = OBJECT_SCHEMAS[route.shape] if route is not None and route.shape is not None else None
    if schema is not None:
        for key in ("object", "oldObject"):
            if req[key] is not None:
                errors = schema.validate(req[key])
                if errors:
                    raise MalformedReview(first_error(ValidationError(errors), f"request.{key}"))
    return review["apiVersion"], req


def decide_request(
    request: Request,
    stage: Stage,
    classes: ClassSet,
    options: PodOptions,
    pods: PodNodes | None = None,
    namespaces: NamespaceLabels = NO_NAMESPACES,
) -> Decision:
    """The decision of one stage: the request's route's rule (routes.ROUTES), ALLOW where it has none."""
    if stage is Stage.ADMIT:
        mutated = decide_request(request, Stage.MUTATE, classes, options, pods, namespaces)
        if not mutated.allowed:
            return mutated
        obj = request.object
        if mutated.patch and obj is not None:
            obj = jsonpatch.apply_patch(obj, list(mutated.patch))
        validated = decide_request(
            replace(request, object=obj), Stage.VALIDATE, classes, options, pods, namespaces
        )
        return combine(mutated, validated)
    route = route_of(request.resource, request.sub_resource)
    rule = None if route is None else route.mutate if stage is Stage.MUTATE else route.validate
    return ALLOW if rule is None else rule(request, Context(classes, options, pods, namespaces))


def response_review(api_version: str, uid: str, decision: Decision, *, with_patch: bool) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "allowed": decision.allowed}
    if decision.patch and with_patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json_codec.dumps(decision.patch)).decode()
    if not decision.allowed:
        response["status"] = {
            "status": "Failure",
            "code": decision.code,
            "reason": decision.reason,
            "message": decision.message,
        }
    if decision.warnings:
        response["warnings"] = list(decision.warnings)
    return {"apiVersion": api_version, "kind": "AdmissionReview", "response": response}


def handle_review(
    body: Any,
    stage: Stage,
    classes: ClassSet,
    options: PodOptions = DEFAULT_POD_OPTIONS,
    pods: PodNodes | None = None,
    namespaces: NamespaceLabels = NO_NAMESPACES,
) -> tuple[dict[str, Any], Request, Decision]:
    """Answer one AdmissionReview; raises MalformedReview for a body that is not one. `pods` looks up an
    evicted pod's node (cluster mode only); its PodLookupError propagates. `namespaces` gives the labels
    an allowed-namespaces rule needs."""
    api_version, uid, request = parse_review(body)
    decision = decide_request(request, stage, classes, options, pods, namespaces)
    # A validating webhook may not return a patch (the API server rejects the response).
    review = response_review(api_version, uid, decision, with_patch=stage is not Stage.VALIDATE)
    return review, request, decision
