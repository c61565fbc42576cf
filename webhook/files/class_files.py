"""`--classes FILE`: PriorityClasses for the embedded (cluster-less) default."""

from __future__ import annotations

from collections.abc import Iterable

from webhook.files.documents import InputError, load_objects
from webhook.k8s import CREATE, PRIORITY_CLASS_RESOURCE, InvalidObject
from webhook.policy.class_model import ClassSet, PriorityClass, StaticClassStore
from webhook.policy.class_rules import validate_priority_class
from webhook.policy.decision import Request


def load_classes(paths: Iterable[str]) -> list[PriorityClass]:
    """Every PriorityClass in the files, held to the API's own rules (reserved names, value range)."""
    classes: dict[str, PriorityClass] = {}
    for source, obj in load_objects(paths):
        if not isinstance(obj, dict) or obj.get("kind") != "PriorityClass":
            kind = obj.get("kind") if isinstance(obj, dict) else type(obj).__name__
            raise InputError(f"{source}: expected kind PriorityClass, got {kind!r}")
        try:
            pc = PriorityClass.from_object(obj)
        except InvalidObject as err:
            raise InputError(f"{source}: {err}") from None
        # The API's field rules; the one-default rule is not applied to files (a dump of a cluster that
        # hit the upstream race may list two defaults, and the lowest value wins as it does there).
        decision = validate_priority_class(Request(CREATE, PRIORITY_CLASS_RESOURCE, obj), ClassSet())
        if not decision.allowed:
            raise InputError(f"{source}: {decision.message}")
        if pc.name in classes:
            raise InputError(f"{source}: PriorityClass {pc.name} is defined twice")
        classes[pc.name] = pc
    return list(classes.values())


def static_store(paths: Iterable[str]) -> StaticClassStore:
    return StaticClassStore(load_classes(paths))
