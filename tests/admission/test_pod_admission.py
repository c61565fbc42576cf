"""Upstream TestPodAdmission, case by case, plus the derived cases the reference lists."""

from __future__ import annotations

import copy

import jsonpatch
import pytest

from tests.admission.fixtures import (
    PODS,
    default1,
    default2,
    nondefault1,
    pod,
    pod_request,
    preemption_policy_class,
    system_cluster_critical,
)
from webhook.policy.class_model import SYSTEM_CLASSES, ClassSet, PriorityClass
from webhook.policy.pod_rules import PodOptions, admit_pod, validate_pod

NONE = object()  # "not asserted" in upstream's table

# name, classes, pod, allowed, priority, class name, policy (None = field absent, NONE = unchecked), message
CASES = [
    ("Pod with priority class", [default1, nondefault1], "p0", True, 1000, "default1", None, ""),
    ("Pod without priority class", [default1], "p1", True, 1000, "default1", None, ""),
    (
        "pod without priority class and no existing priority class",
        [],
        "p1",
        True,
        0,
        NONE,
        "PreemptLowerPriority",
        "",
    ),
    (
        "pod without priority class and no default class",
        [nondefault1],
        "p1",
        True,
        0,
        NONE,
        "PreemptLowerPriority",
        "",
    ),
    (
        "pod with a system priority class",
        [system_cluster_critical],
        "p4",
        True,
        2000000000,
        "system-cluster-critical",
        None,
        "",
    ),
    (
        "Pod with non-existing priority class",
        [default1, nondefault1],
        "p2",
        False,
        0,
        NONE,
        NONE,
        'pods "pod-w-non-existing-priorityclass" is forbidden: no PriorityClass with name non-existing was found',
    ),
    (
        "pod with integer priority",
        [],
        "p3",
        False,
        0,
        NONE,
        NONE,
        'pods "pod-w-integer-priority" is forbidden: no PriorityClass with name default1 was found',
    ),
    (
        "mirror pod with system priority class",
        [system_cluster_critical],
        "p5",
        True,
        2000000000,
        "system-cluster-critical",
        None,
        "",
    ),
    (
        "mirror pod with integer priority",
        [],
        "p6",
        False,
        0,
        NONE,
        NONE,
        'pods "mirror-pod-w-integer-priority" is forbidden: no PriorityClass with name default1 was found',
    ),
    (
        "pod with system critical priority in non-system namespace",
        [system_cluster_critical],
        "p7",
        True,
        2000000000,
        "system-cluster-critical",
        None,
        "",
    ),
    (
        "pod with priority that matches computed priority",
        [nondefault1],
        "p8",
        True,
        0,
        NONE,
        "PreemptLowerPriority",
        "",
    ),
    ("pod with priority that matches default priority", [default2], "p9", True, 2000, "default2", None, ""),
    (
        "pod with priority that matches resolved priority",
        [system_cluster_critical],
        "p10",
        True,
        2000000000,
        "system-cluster-critical",
        None,
        "",
    ),
    (
        "pod with nil preemtpion policy",
        [preemption_policy_class],
        "p11",
        True,
        2000,
        "nopreemptionpolicy",
        "PreemptLowerPriority",
        "",
    ),
    (
        "pod with preemtpion policy that matches resolved preemtpion policy",
        [preemption_policy_class],
        "p12",
        True,
        2000,
        "nopreemptionpolicy",
        "PreemptLowerPriority",
        "",
    ),
    (
        "pod with preemtpion policy that does't matches resolved preemtpion policy",
        [preemption_policy_class],
        "p13",
        False,
        0,
        NONE,
        NONE,
        'pods "pod-preemption-policy-not-matching-resolved-preemption-policy" is forbidden: the string value of '
        "PreemptionPolicy (Never) must not be provided in pod spec; priority admission controller computed "
        "PreemptLowerPriority from the given PriorityClass name",
    ),
]


def admit(classes, obj, **kw):
    """Admit, apply the patch, and admit again (upstream's reinvocation harness)."""
    decision = admit_pod(pod_request(obj, **kw), ClassSet(classes))
    if not decision.allowed:
        return decision, None
    result = jsonpatch.apply_patch(obj, list(decision.patch))
    again = admit_pod(pod_request(result, **kw), ClassSet(classes))
    assert again.allowed and again.patch == (), "the second pass must change nothing"
    return decision, result


@pytest.mark.parametrize(
    ("name", "classes", "pod_key", "allowed", "priority", "class_name", "policy", "message"),
    CASES,
    ids=[c[0] for c in CASES],
)
def test_pod_admission(name, classes, pod_key, allowed, priority, class_name, policy, message):
    obj = copy.deepcopy(PODS[pod_key])
    decision, result = admit(classes, obj)
    assert decision.allowed is allowed
    if not allowed:
        assert (decision.code, decision.reason, decision.message) == (403, "Forbidden", message)
        return
    spec = result["spec"]
    assert spec["priority"] == priority
    if class_name is not NONE:
        assert spec["priorityClassName"] == class_name
    else:
        assert spec.get("priorityClassName", "") == ""
    if policy is not NONE:
        assert spec.get("preemptionPolicy") == policy
    assert obj == PODS[pod_key], "the input object is never modified"


DERIVED = [
    # class found, client priority differs
    (
        [default1],
        pod("p", "ns", "default1", 5),
        "the integer value of priority (5) must not be provided in pod "
        "spec; priority admission controller computed 1000 from the given PriorityClass name",
    ),
    # no class name, a default exists, client priority differs
    (
        [default2],
        pod("p", "ns", priority=7),
        "the integer value of priority (7) must not be provided in pod "
        "spec; priority admission controller computed 2000 from the given PriorityClass name",
    ),
    # no class, no default, preemptionPolicy Never
    (
        [nondefault1],
        pod("p", "ns", policy="Never"),
        "the string value of PreemptionPolicy (Never) must not be "
        "provided in pod spec; priority admission controller computed PreemptLowerPriority from the given "
        "PriorityClass name",
    ),
]


@pytest.mark.parametrize(("classes", "obj", "err"), DERIVED)
def test_derived_denials(classes, obj, err):
    decision, _ = admit(classes, obj)
    assert not decision.allowed
    assert decision.message == f'pods "p" is forbidden: {err}'


def test_system_node_critical_resolves_to_its_value():
    _, result = admit(SYSTEM_CLASSES, pod("p", "ns", "system-node-critical"))
    assert result["spec"]["priority"] == 2000001000
    assert result["spec"]["preemptionPolicy"] == "PreemptLowerPriority"


@pytest.mark.parametrize(
    ("classes", "expected"),
    [
        ([default1, default2], ("default1", 1000)),
        ([default2, default1], ("default1", 1000)),
        # equal values: upstream leaves it to lister order; we choose the lexically first name
        ([PriorityClass("b", 10, True), PriorityClass("a", 10, True)], ("a", 10)),
    ],
)
def test_several_defaults_lowest_value_wins(classes, expected):
    _, result = admit(classes, pod("p", "ns"))
    assert (result["spec"]["priorityClassName"], result["spec"]["priority"]) == expected


def test_class_preemption_policy_is_written():
    never = PriorityClass("batch", 100, False, "Never")
    _, result = admit([never], pod("p", "ns", "batch"))
    assert result["spec"]["preemptionPolicy"] == "Never"


def test_denied_name_falls_back_to_generate_name_then_unknown():
    obj = pod("", "ns", "missing")
    obj["metadata"] = {"generateName": "web-7d9f-", "namespace": "ns"}
    assert admit_pod(pod_request(obj), ClassSet()).message.startswith('pods "web-7d9f-" is forbidden')
    obj["metadata"] = {"namespace": "ns"}
    assert admit_pod(pod_request(obj), ClassSet()).message.startswith('pods "Unknown" is forbidden')


@pytest.mark.parametrize(
    ("old_spec", "new_spec", "expected_patch"),
    [
        (
            {"priority": 10, "preemptionPolicy": "Never"},
            {},
            [
                {"op": "add", "path": "/spec/priority", "value": 10},
                {"op": "add", "path": "/spec/preemptionPolicy", "value": "Never"},
            ],
        ),
        ({"priority": 10}, {"priority": 10}, []),
        ({}, {}, []),
        # UPDATE looks at nothing else: no class lookup, no checks
        (
            {"priority": 10},
            {"priorityClassName": "missing"},
            [{"op": "add", "path": "/spec/priority", "value": 10}],
        ),
    ],
)
def test_update_carries_priority_over(old_spec, new_spec, expected_patch):
    old = {"metadata": {"name": "p", "namespace": "ns"}, "spec": old_spec}
    new = {"metadata": {"name": "p", "namespace": "ns"}, "spec": new_spec}
    decision = admit_pod(pod_request(new, "UPDATE", old), ClassSet())
    assert decision.allowed
    assert list(decision.patch) == expected_patch


@pytest.mark.parametrize("operation", ["DELETE", "CONNECT"])
def test_other_operations_are_ignored(operation):
    assert admit_pod(pod_request(pod("p", "ns", "missing"), operation), ClassSet()).patch == ()


@pytest.mark.parametrize("sub_resource", ["status", "binding", "ephemeralcontainers"])
def test_subresources_are_never_touched(sub_resource):
    decision = admit_pod(pod_request(pod("p", "ns", "missing"), sub_resource=sub_resource), ClassSet())
    assert decision.allowed and decision.patch == ()


def test_pod_without_spec_gets_one():
    obj = {"metadata": {"name": "p", "namespace": "ns"}}
    decision = admit_pod(pod_request(obj), ClassSet([default1]))
    result = jsonpatch.apply_patch(obj, list(decision.patch))
    assert result["spec"] == {"priorityClassName": "default1", "priority": 1000}


class TestLegacyCriticalAnnotation:
    CRITICAL = {"scheduler.alpha.kubernetes.io/critical-pod": ""}

    def test_maps_to_system_cluster_critical(self):
        decision, result = admit(SYSTEM_CLASSES, pod("p", "kube-system", annotations=self.CRITICAL))
        assert result["spec"]["priorityClassName"] == "system-cluster-critical"
        assert result["spec"]["priority"] == 2000000000
        assert any("critical-pod" in w for w in decision.warnings)

    @pytest.mark.parametrize(
        ("namespace", "annotations", "class_name"),
        [
            ("default", {"scheduler.alpha.kubernetes.io/critical-pod": ""}, None),  # kube-system only
            ("kube-system", {"scheduler.alpha.kubernetes.io/critical-pod": "true"}, None),  # value must be ""
            ("kube-system", {"scheduler.alpha.kubernetes.io/critical-pod": ""}, "default1"),  # class wins
        ],
    )
    def test_does_not_apply(self, namespace, annotations, class_name):
        _, result = admit(
            [*SYSTEM_CLASSES, default1], pod("p", namespace, class_name, annotations=annotations)
        )
        assert result["spec"]["priorityClassName"] == "default1"

    def test_switched_off(self):
        obj = pod("p", "kube-system", annotations=self.CRITICAL)
        decision = admit_pod(pod_request(obj), ClassSet(SYSTEM_CLASSES), PodOptions(False))
        result = jsonpatch.apply_patch(obj, list(decision.patch))
        assert result["spec"]["priority"] == 0 and "priorityClassName" not in result["spec"]

    def test_after_the_in_tree_plugin_without_a_default(self):
        # The in-tree plugin ran first: priority 0 and PreemptLowerPriority, no class name.
        obj = pod("p", "kube-system", priority=0, policy="PreemptLowerPriority", annotations=self.CRITICAL)
        _, result = admit(SYSTEM_CLASSES, obj)
        assert result["spec"]["priority"] == 2000000000

    @pytest.mark.parametrize("priority", [5, 0])
    def test_a_client_chosen_priority_still_conflicts(self, priority):
        # 0 without a preemptionPolicy is the client's, not the in-tree plugin's (which sets both): the
        # real plugin, given the pod naming system-cluster-critical, denies it the same way.
        obj = pod("p", "kube-system", priority=priority, annotations=self.CRITICAL)
        decision, _ = admit(SYSTEM_CLASSES, obj)
        assert not decision.allowed
        assert decision.message == (
            f'pods "p" is forbidden: the integer value of priority ({priority}) must not be provided in pod '
            "spec; priority admission controller computed 2000000000 from the given PriorityClass name"
        )


class TestValidatePod:
    def test_final_state_passes(self):
        _, result = admit([default1], pod("p", "ns"))
        assert validate_pod(pod_request(result), ClassSet([default1])).allowed

    def test_later_webhook_changed_priority(self):
        _, result = admit([default1], pod("p", "ns"))
        result["spec"]["priority"] = 99
        decision = validate_pod(pod_request(result), ClassSet([default1]))
        assert not decision.allowed and "(99)" in decision.message and "computed 1000" in decision.message

    def test_later_webhook_dropped_priority(self):
        _, result = admit([default1], pod("p", "ns", "default1"))
        del result["spec"]["priority"]
        decision = validate_pod(pod_request(result), ClassSet([default1]))
        assert not decision.allowed
        assert (
            decision.message
            == 'pods "p" is forbidden: spec.priority is not set; priority admission requires 1000'
        )

    def test_class_deleted_and_no_history(self):
        # Without the earlier set (a worker that never saw it), the final check cannot tell.
        _, result = admit([default1], pod("p", "ns", "default1"))
        assert not validate_pod(pod_request(result), ClassSet()).allowed

    def test_update_is_not_validated(self):
        obj = pod("p", "ns", "missing")
        assert validate_pod(pod_request(obj, "UPDATE", obj), ClassSet()).allowed


# Decided once: /mutate resolved the pod with the classes `at_mutate`; by /validate they are `now`, and the
# store remembers the sets it replaced recently (`recent`, newest first). `later` changes the mutated pod's
# spec the way a later mutating webhook would. Expected: allowed, or the start of the denial's reason.
high = PriorityClass("high", 1000, False)
high_again = PriorityClass("high", 5000, False)
high_never = PriorityClass("high", 1000, False, "Never")
late_default = PriorityClass("late-default", 300, True)
DECIDE_ONCE = [
    # (id, at_mutate, now, recent, pod kwargs, later spec changes, expected)
    ("default appeared", [], [late_default], [[]], {}, {}, True),
    ("default appeared, no history", [], [late_default], [], {}, {}, "the integer value of priority (0)"),
    ("class re-created with another value", [high], [high_again], [[high]], {"class_name": "high"}, {}, True),
    (
        "re-created, then a later webhook sets the new value",
        [high],
        [high_again],
        [[high]],
        {"class_name": "high"},
        {"priority": 5000},
        True,  # what the class gives now: the pod is what /mutate makes of it today
    ),
    (
        "re-created with another policy",
        [high],
        [high_never],
        [[high]],
        {"class_name": "high"},
        {},
        True,
    ),
    ("class deleted in between", [high], [], [[high]], {"class_name": "high"}, {}, True),
    ("default removed in between", [late_default], [], [[late_default]], {}, {}, True),
    (
        "default changed, then an older state",
        [late_default],
        [],
        [[], [late_default]],
        {},
        {},
        True,
    ),
    (
        "a later webhook changes the priority",
        [high],
        [high_again],
        [[high]],
        {"class_name": "high"},
        {"priority": 7},
        "the integer value of priority (7)",
    ),
    (
        "a later webhook drops the priority",
        [high],
        [high],
        [[high_again]],
        {"class_name": "high"},
        {"priority": None},
        "spec.priority is not set",
    ),
    (
        "a later webhook sets a value no state gave",
        [],
        [late_default],
        [[]],
        {},
        {"priority": 300},
        "spec.priorityClassName is not set",
    ),
    (
        "a later webhook changes the policy",
        [high],
        [high],
        [[high]],
        {"class_name": "high"},
        {"preemptionPolicy": "Never"},
        "the string value of PreemptionPolicy (Never)",
    ),
    (
        "a later webhook names another class",
        [high],
        [high, late_default],
        [[high]],
        {"class_name": "high"},
        {"priorityClassName": "late-default"},
        "the integer value of priority (1000)",
    ),
]


@pytest.mark.parametrize(
    "at_mutate, now, recent, kwargs, later, expected",
    [case[1:] for case in DECIDE_ONCE],
    ids=[case[0] for case in DECIDE_ONCE],
)
def test_validate_accepts_what_mutate_decided(at_mutate, now, recent, kwargs, later, expected):
    _, result = admit(at_mutate, pod("p", "ns", **kwargs))
    for key, value in later.items():
        if value is None:
            result["spec"].pop(key, None)
        else:
            result["spec"][key] = value
    classes = ClassSet(now, recent=tuple(ClassSet(state) for state in recent))
    decision = validate_pod(pod_request(result), classes)
    if expected is True:
        assert decision.allowed, decision.message
        assert not decision.unresolved
    else:
        assert not decision.allowed
        assert decision.message.startswith(f'pods "p" is forbidden: {expected}'), decision.message


# A pod reaching the final check without spec.priority: in a system namespace its mutation was skipped (the
# fail-open entries), elsewhere a later webhook dropped it. (namespace, options, pod kwargs, unresolved?)
KUBE_SYSTEM_ONLY = PodOptions()
TWO_SYSTEM = PodOptions(system_namespaces=frozenset({"kube-system", "platform"}))
UNRESOLVED = [
    ("kube-system, no class", "kube-system", KUBE_SYSTEM_ONLY, {}, True),
    ("kube-system, a class named", "kube-system", KUBE_SYSTEM_ONLY, {"class_name": "high"}, True),
    ("kube-system, a missing class", "kube-system", KUBE_SYSTEM_ONLY, {"class_name": "gone"}, True),
    (
        "kube-system, critical annotation",
        "kube-system",
        KUBE_SYSTEM_ONLY,
        {"annotations": {"scheduler.alpha.kubernetes.io/critical-pod": ""}},
        True,
    ),
    ("a configured system namespace", "platform", TWO_SYSTEM, {}, True),
    ("platform, not configured", "platform", KUBE_SYSTEM_ONLY, {}, False),
    ("kube-system, not configured", "kube-system", PodOptions(system_namespaces=frozenset()), {}, False),
    ("an ordinary namespace", "ns", TWO_SYSTEM, {"class_name": "high"}, False),
]


@pytest.mark.parametrize(
    "namespace, options, kwargs, unresolved",
    [case[1:] for case in UNRESOLVED],
    ids=[c[0] for c in UNRESOLVED],
)
def test_a_system_pod_whose_mutation_was_skipped_is_admitted_with_a_warning(
    namespace, options, kwargs, unresolved
):
    obj = pod("p", namespace, **kwargs)  # as the client sent it: no priority, nothing mutated
    decision = validate_pod(pod_request(obj), ClassSet([*SYSTEM_CLASSES, high, late_default]), options)
    assert decision.unresolved is unresolved
    assert decision.allowed is unresolved
    if unresolved:
        assert decision.patch == ()
        assert decision.warnings == (
            "spec.priority is not set: priority admission was skipped (webhook timeout or outage); "
            f"admitted in system namespace {namespace} without it",
        )


@pytest.mark.parametrize("priority, policy", [(7, None), (2000000000, "Never")])
def test_a_system_pod_with_a_wrong_priority_is_still_denied(priority, policy):
    obj = pod("p", "kube-system", "system-cluster-critical", priority=priority, policy=policy)
    decision = validate_pod(pod_request(obj), ClassSet(SYSTEM_CLASSES))
    assert not decision.allowed and not decision.unresolved
