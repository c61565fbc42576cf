"""Evaluate a Kubernetes label selector the way the API server does for a webhook's namespaceSelector."""

from __future__ import annotations

from typing import Any


def matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """An absent or empty selector matches everything; expressions are ANDed."""
    selector = selector or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, operator, values = expr["key"], expr["operator"], expr.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def namespace_labels(name: str) -> dict[str, str]:
    """The labels every namespace carries since Kubernetes 1.21."""
    return {"kubernetes.io/metadata.name": name}
