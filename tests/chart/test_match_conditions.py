"""The mutating entries' matchConditions send a pod UPDATE to the webhook exactly when the webhook would
change it, evaluated with a CEL implementation (cel-python) on the expression the chart renders.

On UPDATE the webhook only copies spec.priority / spec.preemptionPolicy back from the old object when the
new one dropped them (webhook/policy/pod_rules.py); the condition must let through every such UPDATE (or a pod
would lose its priority) and nothing else (or a fail-closed webhook would stand between controllers and
finalizer removals, label changes, ...). CREATE must always be sent.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import celpy
import pytest

from testkit.chart_rendering import FULLNAME, Rendered
from webhook.k8s import CREATE, POD_RESOURCE, UPDATE
from webhook.policy.class_model import ClassSet
from webhook.policy.decision import Request
from webhook.policy.pod_rules import admit_pod

Render = Callable[[dict[str, Any]], Rendered]
ABSENT = object()
PRIORITY_VALUES = [ABSENT, None, 0, 1000, 2000000000]
POLICY_VALUES = [ABSENT, None, "PreemptLowerPriority", "Never"]


def conditions(r: Rendered) -> dict[str, list[dict[str, str]]]:
    return {
        h["name"]: h.get("matchConditions", [])
        for h in r.one("MutatingWebhookConfiguration", FULLNAME)["webhooks"]
    }


def as_stored(pod: dict[str, Any]) -> dict[str, Any]:
    """What CEL sees: the API server decodes into the typed Pod first, so a null field is an absent one."""
    return {"metadata": pod["metadata"], "spec": {k: v for k, v in pod["spec"].items() if v is not None}}


def pod(priority: Any, policy: Any, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}], **extra}
    if priority is not ABSENT:
        spec["priority"] = priority
    if policy is not ABSENT:
        spec["preemptionPolicy"] = policy
    return {
        "metadata": {"name": "p", "namespace": "team-a", "finalizers": ["example.com/keep"]},
        "spec": spec,
    }


@pytest.fixture(scope="module")
def matches(rendered: Render) -> Callable[[str, dict[str, Any], dict[str, Any] | None], bool]:
    """Evaluate every matchCondition of the general pod entry (all must be true, as the API server does)."""
    env = celpy.Environment()
    (found,) = {tuple(c["expression"] for c in conds) for conds in conditions(rendered({})).values()}
    programs = [env.program(env.compile(expression)) for expression in found]

    def evaluate(operation: str, obj: dict[str, Any], old: dict[str, Any] | None) -> bool:
        activation = {
            "request": celpy.json_to_cel({"operation": operation}),
            "object": celpy.json_to_cel(as_stored(obj)),
            "oldObject": celpy.json_to_cel(as_stored(old) if old is not None else None),
        }
        return all(bool(program.evaluate(activation)) for program in programs)

    return evaluate


def webhook_changes(operation: str, obj: dict[str, Any], old: dict[str, Any] | None) -> bool:
    request = Request(
        operation=operation, resource=POD_RESOURCE, object=obj, old_object=old, namespace="team-a"
    )
    return bool(admit_pod(request, ClassSet()).patch)


def test_both_pod_entries_carry_the_same_single_condition(rendered: Render) -> None:
    found = conditions(rendered({}))
    assert set(found) == {"pods.priority-webhook.io", "system-pods.priority-webhook.io"}
    (first, second) = found.values()
    assert first == second and len(first) == 1 and first[0]["name"] == "update-drops-priority-fields"
    validating = rendered({}).one("ValidatingWebhookConfiguration", FULLNAME)["webhooks"]
    assert [h["name"] for h in validating if "matchConditions" in h] == ["evictions.priority-webhook.io"], (
        "CREATE-only and PriorityClass entries need none; the evictions entry takes the sidecar's only"
    )


@pytest.mark.parametrize(
    "old_priority, old_policy, new_priority, new_policy",
    list(itertools.product(PRIORITY_VALUES, POLICY_VALUES, PRIORITY_VALUES, POLICY_VALUES)),
)
def test_an_update_is_sent_exactly_when_the_webhook_would_change_it(
    old_priority: Any, old_policy: Any, new_priority: Any, new_policy: Any, matches: Callable[..., bool]
) -> None:
    old = pod(old_priority, old_policy)
    new = pod(new_priority, new_policy)
    new["metadata"]["finalizers"] = []  # e.g. a controller removing its finalizer
    assert matches(UPDATE, new, old) is webhook_changes(UPDATE, new, old)


@pytest.mark.parametrize("priority, policy", list(itertools.product(PRIORITY_VALUES, POLICY_VALUES)))
def test_every_create_is_sent(priority: Any, policy: Any, matches: Callable[..., bool]) -> None:
    assert matches(CREATE, pod(priority, policy, priorityClassName="x"), None) is True


def test_unrelated_updates_skip_the_webhook(matches: Callable[..., bool]) -> None:
    stored = pod(1000, "PreemptLowerPriority")
    relabelled = pod(1000, "PreemptLowerPriority")
    relabelled["metadata"]["labels"] = {"a": "b"}
    assert matches(UPDATE, relabelled, stored) is False
    dropped = pod(ABSENT, "PreemptLowerPriority")  # a client PUT without the field the server set
    assert matches(UPDATE, dropped, stored) is True
