"""Upstream TestPriorityClassAdmission, TestDefaultPriority and the API's PriorityClass validation tests."""

from __future__ import annotations

import pytest

from tests.admission.fixtures import class_request, default1, default2, nondefault1, system_test
from webhook.policy.class_model import ClassSet, PriorityClass
from webhook.policy.class_rules import validate_priority_class

ONE_DEFAULT = (
    'priorityclasses.scheduling.k8s.io "default2" is forbidden: '
    "PriorityClass default1 is already marked as default. Only one default can exist"
)


def obj(pc: PriorityClass) -> dict:
    return pc.to_object()


@pytest.mark.parametrize(
    ("name", "existing", "new", "operation", "message"),
    [
        ("create operator with default class", [], default1, "CREATE", ""),
        ("create operator with one existing default class", [default1], default2, "CREATE", ONE_DEFAULT),
        # upstream's plugin does not check names/values; the API validation we add does
        ("update operator with default class", [], default1, "UPDATE", ""),
        ("update operator with one existing default class", [default1], default2, "UPDATE", ONE_DEFAULT),
        ("update operator with different default classes", [default1], default2, "UPDATE", ONE_DEFAULT),
        ("delete operation with default class", [], default1, "DELETE", ""),
    ],
)
def test_priority_class_admission(name, existing, new, operation, message):
    decision = validate_priority_class(class_request(obj(new), operation), ClassSet(existing))
    assert decision.allowed is (message == "")
    assert decision.message == message
    if message:
        assert (decision.code, decision.reason) == (403, "Forbidden")


def test_system_name_with_wrong_value_is_refused_by_api_validation():
    # Upstream cases 3 and 6 pass the plugin; the API server then rejects them. We answer as the cluster does.
    decision = validate_priority_class(class_request(obj(system_test), "CREATE"), ClassSet())
    assert decision.message == (
        'PriorityClass.scheduling.k8s.io "system-test" is invalid: metadata.name: Forbidden: priority class '
        "names with 'system-' prefix are reserved for system use only. error: system-test is not a known "
        "system priority class"
    )


def test_resaving_the_default_is_allowed():
    assert validate_priority_class(
        class_request(obj(default1), "UPDATE", obj(default1)), ClassSet([default1])
    ).allowed


def test_unsetting_global_default_is_always_allowed():
    new = PriorityClass("default1", 1000, False, None)
    assert validate_priority_class(
        class_request(obj(new), "UPDATE", obj(default1)), ClassSet([default1])
    ).allowed


def test_update_of_the_higher_of_two_defaults_is_forbidden_as_upstream():
    decision = validate_priority_class(
        class_request(obj(default2), "UPDATE", obj(default2)), ClassSet([default1, default2])
    )
    assert decision.message == ONE_DEFAULT


@pytest.mark.parametrize(
    ("name", "before", "change", "expect_before", "expect_after"),
    [
        ("simple resolution with a default class", [default1], None, ("default1", 1000), ("default1", 1000)),
        ("add a default class", [nondefault1], ("CREATE", default1), ("", 0), ("default1", 1000)),
        (
            "multiple default classes resolves to the minimum value among them",
            [default1, default2],
            ("DELETE", default1),
            ("default1", 1000),
            ("default2", 2000),
        ),
        ("delete default priority class", [default1], ("DELETE", default1), ("default1", 1000), ("", 0)),
        (
            "update default class and remove its global default",
            [default1],
            ("UPDATE", PriorityClass("default1", 1000, False, None)),
            ("default1", 1000),
            ("", 0),
        ),
    ],
)
def test_default_priority(name, before, change, expect_before, expect_after):
    def resolved(classes: ClassSet) -> tuple[str, int]:
        d = classes.default()
        return (d.name, d.value) if d else ("", 0)

    classes = ClassSet(before)
    assert resolved(classes) == expect_before
    if change:
        operation, pc = change
        old = classes.get(pc.name)
        request = class_request(
            obj(pc) if operation != "DELETE" else None, operation, obj(old) if old else None, pc.name
        )
        assert validate_priority_class(request, classes).allowed
        classes = classes.without(pc.name) if operation == "DELETE" else classes.with_class(pc)
    assert resolved(classes) == expect_after


def tier1(value=100, **extra) -> dict:
    o = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "tier1"},
        "value": value,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    o.update(extra)
    return o


@pytest.mark.parametrize(
    ("name", "new", "message"),
    [
        ("no description", tier1(100), ""),
        ("with description", tier1(200, description="Used for the highest priority pods."), ""),
        ("system node critical", {"metadata": {"name": "system-node-critical"}, "value": 2000001000}, ""),
        ("max user value", tier1(1000000000), ""),
        ("negative value", tier1(-5), ""),
        (
            "with namespace",
            {**tier1(), "metadata": {"name": "tier1", "namespace": "foo"}},
            "metadata.namespace: Forbidden: not allowed on this type",
        ),
        (
            "incorrect system class name",
            {"metadata": {"name": "system-node-critical"}, "value": 0},
            "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use "
            "only. error: value of system-node-critical PriorityClass must be 2000001000",
        ),
        (
            "incorrect system class value",
            {"metadata": {"name": "system-something"}, "value": 2000001000},
            "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use "
            "only. error: system-something is not a known system priority class",
        ),
        (
            "system class as default",
            {"metadata": {"name": "system-cluster-critical"}, "value": 2000000000, "globalDefault": True},
            "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use "
            "only. error: globalDefault of system-cluster-critical PriorityClass must be false",
        ),
        (
            "value above the user limit",
            tier1(1000000001),
            "value: Forbidden: maximum allowed value of a user defined priority is 1000000000",
        ),
        (
            "unsupported preemption policy",
            tier1(preemptionPolicy="Sometimes"),
            "preemptionPolicy: must be Never or PreemptLowerPriority, got 'Sometimes'",
        ),
    ],
)
def test_create_validation(name, new, message):
    decision = validate_priority_class(class_request(new, "CREATE"), ClassSet())
    assert decision.allowed is (message == "")
    if message:
        pc_name = new["metadata"]["name"]
        assert decision.message == f'PriorityClass.scheduling.k8s.io "{pc_name}" is invalid: {message}'


@pytest.mark.parametrize(
    ("name", "new", "message"),
    [
        ("no change", tier1(), ""),
        ("change description", tier1(description="new"), ""),
        ("change globalDefault", tier1(globalDefault=True), ""),
        ("change value", tier1(101), "value: Forbidden: may not be changed in an update."),
        (
            "change preemptionPolicy",
            tier1(preemptionPolicy="Never"),
            'preemptionPolicy: Invalid value: "Never": field is immutable',
        ),
        (
            "omitted policy defaults to the old one",
            {k: v for k, v in tier1().items() if k != "preemptionPolicy"},
            "",
        ),
        (
            "both",
            tier1(101, preemptionPolicy="Never"),
            '[value: Forbidden: may not be changed in an update., preemptionPolicy: Invalid value: "Never": '
            "field is immutable]",
        ),
    ],
)
def test_update_validation(name, new, message):
    decision = validate_priority_class(class_request(new, "UPDATE", tier1()), ClassSet())
    assert decision.allowed is (message == "")
    if message:
        assert decision.message == f'PriorityClass.scheduling.k8s.io "tier1" is invalid: {message}'


@pytest.mark.parametrize("name", ["system-node-critical", "system-cluster-critical"])
def test_system_classes_cannot_be_deleted(name):
    decision = validate_priority_class(
        class_request(None, "DELETE", {"metadata": {"name": name}}, name), ClassSet()
    )
    assert decision.message == (
        f'priorityclasses.scheduling.k8s.io "{name}" is forbidden: this is a system priority class and cannot be '
        "deleted"
    )


def test_user_classes_can_be_deleted():
    assert validate_priority_class(class_request(None, "DELETE", tier1(), "tier1"), ClassSet()).allowed
