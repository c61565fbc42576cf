"""Marshmallow schemas for the AdmissionReview envelope and the object fields the decisions read.

Only the fields we read are declared (unknown ones are excluded, not copied), so validating a large pod
costs no more than validating a small one.
"""

from __future__ import annotations

import json
from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, fields, validate

from webhook.k8s import INT32_MAX, INT32_MIN, OPERATIONS
from webhook.review.fastpath import API_VERSIONS, qualified_resource
from webhook.review.shapes import POD, POD_GROUP, PRIORITY_CLASS

__all__ = ["API_VERSIONS", "OBJECT_SCHEMAS", "REVIEW_SCHEMA", "first_error", "qualified_resource"]


class StrictInt(fields.Integer):
    """A JSON integer: no floats, no numeric strings, no booleans."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(strict=True, validate=validate.Range(INT32_MIN, INT32_MAX), **kwargs)

    def _deserialize(self, value: Any, attr: Any, data: Any, **kwargs: Any) -> int:
        if isinstance(value, bool):
            raise self.make_error("invalid")
        return super()._deserialize(value, attr, data, **kwargs)


class _Loose(Schema):
    class Meta:
        unknown = EXCLUDE


class GroupVersionResource(_Loose):
    group = fields.String(load_default="")
    version = fields.String()
    resource = fields.String(required=True)


class AdmissionRequestSchema(_Loose):
    uid = fields.String(required=True, validate=validate.Length(min=1))
    resource = fields.Nested(GroupVersionResource, required=True)
    subResource = fields.String(load_default="")
    operation = fields.String(required=True, validate=validate.OneOf(OPERATIONS))
    namespace = fields.String(load_default="")
    name = fields.String(load_default="")
    object = fields.Dict(allow_none=True, load_default=None)
    oldObject = fields.Dict(allow_none=True, load_default=None)
    dryRun = fields.Boolean(load_default=False)
    # Read only for an eviction's node claim, defensively (handler._user_extra): any shape loads.
    userInfo = fields.Raw(load_default=None, allow_none=True)


class AdmissionReviewSchema(_Loose):
    apiVersion = fields.String(required=True, validate=validate.OneOf(API_VERSIONS))
    kind = fields.String(required=True, validate=validate.Equal("AdmissionReview"))
    request = fields.Nested(AdmissionRequestSchema, required=True)


class ObjectMeta(_Loose):
    name = fields.String()
    generateName = fields.String()
    namespace = fields.String()
    annotations = fields.Dict(keys=fields.String(), values=fields.String(), allow_none=True)


class PodSpec(_Loose):
    priority = StrictInt(allow_none=True)
    priorityClassName = fields.String(allow_none=True)
    preemptionPolicy = fields.String(allow_none=True)


class PodSchema(_Loose):
    metadata = fields.Nested(ObjectMeta, allow_none=True)
    spec = fields.Nested(PodSpec, allow_none=True)


class PodGroupSpec(_Loose):
    priority = StrictInt(allow_none=True)
    priorityClassName = fields.String(allow_none=True)


class PodGroupSchema(_Loose):
    metadata = fields.Nested(ObjectMeta, allow_none=True)
    spec = fields.Nested(PodGroupSpec, allow_none=True)


class PriorityClassSchema(_Loose):
    metadata = fields.Nested(ObjectMeta, allow_none=True)
    value = StrictInt()
    globalDefault = fields.Boolean(allow_none=True)
    preemptionPolicy = fields.String(allow_none=True)
    description = fields.String(allow_none=True)


# By shape (`routes.Route.shape`), as `shapes.CHECKS`.
OBJECT_SCHEMAS: dict[str, Schema] = {
    POD: PodSchema(),
    PRIORITY_CLASS: PriorityClassSchema(),
    POD_GROUP: PodGroupSchema(),
}
REVIEW_SCHEMA = AdmissionReviewSchema()


# A field name taken from the input (an annotation key) is quoted beyond this length or when unprintable,
# so that the error stays one short line whatever the client sent.
MAX_FIELD_NAME = 64


def _field_name(key: Any) -> str:
    name = str(key)
    if name.isprintable() and len(name) <= MAX_FIELD_NAME:
        return name
    short = name[:MAX_FIELD_NAME]
    return json.dumps(short) + ("..." if len(name) > len(short) else "")


def first_error(err: ValidationError, prefix: str = "") -> str:
    """Marshmallow's nested error dict as one line naming the first offending field."""
    messages: Any = err.messages
    path = [prefix] if prefix else []
    while isinstance(messages, dict) and messages:
        key = sorted(messages, key=str)[0]
        path.append(_field_name(key))
        messages = messages[key]
    if isinstance(messages, list) and messages:
        messages = messages[0]
        while isinstance(messages, dict) and messages:  # errors inside a list or dict element
            key = sorted(messages, key=str)[0]
            path.append(_field_name(key))
            messages = messages[key]
            if isinstance(messages, list) and messages:
                messages = messages[0]
    path = [p for p in path if p != "_schema"]  # marshmallow's key for "the value itself"
    return f"{'.'.join(path)}: {messages}" if path else str(messages)
