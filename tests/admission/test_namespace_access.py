"""Who may use which class: the allowed-namespaces rule through the one decision path (handle_review).

Each row is a request (pod, PodGroup, workload, PriorityClass; CREATE or UPDATE), the classes, the
namespaces' labels as a cache or `review` would give them, the stage, and what must come out.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from testkit.reviews import priority_class
from webhook.policy.class_model import SYSTEM_CLASSES, ClassSet, PriorityClass
from webhook.policy.decision import Decision
from webhook.policy.namespace_access import ALLOWED_NAMESPACES, ENFORCEMENT
from webhook.policy.pod_rules import PodOptions
from webhook.review import Stage, handle_review


def klass(
    name: str, value: int, selector: str | None = None, enforcement: str | None = None, **kw: Any
) -> dict:
    annotations = {}
    if selector is not None:
        annotations[ALLOWED_NAMESPACES] = selector
    if enforcement is not None:
        annotations[ENFORCEMENT] = enforcement
    return priority_class(name, value, metadata={"name": name, "annotations": annotations}, **kw)


GOLD = klass("gold", 5000, "tier in (gold,silver)")
GOLD_AUDIT = klass("gold", 5000, "tier in (gold,silver)", "audit")
PLATFORM = klass("platform", 9000, "kubernetes.io/metadata.name=platform")
NOT_SANDBOX = klass("batch", 100, "!sandbox")
EVERYWHERE = klass("everywhere", 10, "")
FREE = klass("free", 10)
DEFAULT_GOLD = klass("default-gold", 50, "tier=gold", globalDefault=True)
BROKEN = klass("broken", 70, "tier in gold")  # stored while nothing checked classes
BROKEN_ENFORCEMENT = klass("loose", 70, "tier=gold", "warn")

NAMESPACES = {
    "team-gold": {"kubernetes.io/metadata.name": "team-gold", "tier": "gold"},
    "team-silver": {"kubernetes.io/metadata.name": "team-silver", "tier": "silver"},
    "team-bronze": {"kubernetes.io/metadata.name": "team-bronze", "tier": "bronze"},
    "platform": {"kubernetes.io/metadata.name": "platform"},
    "sandbox-1": {"kubernetes.io/metadata.name": "sandbox-1", "sandbox": ""},
}


@dataclass
class Labels:
    """NamespaceLabels from a dict, recording which namespaces were looked up."""

    known: Mapping[str, Mapping[str, str]]
    asked: list[str] = field(default_factory=list)

    def labels_of(self, namespace: str) -> Mapping[str, str] | None:
        self.asked.append(namespace)
        return self.known.get(namespace)


def classes(*objs: dict) -> ClassSet:
    return ClassSet([*SYSTEM_CLASSES, *(PriorityClass.from_object(o) for o in objs)])


def pod(class_name: str = "", namespace: str = "team-gold") -> dict:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if class_name:
        spec["priorityClassName"] = class_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": namespace},
        "spec": spec,
    }


def pod_group(class_name: str = "", namespace: str = "team-gold") -> dict:
    spec: dict[str, Any] = {"schedulingPolicy": {"basic": {}}}
    if class_name:
        spec["priorityClassName"] = class_name
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": namespace},
        "spec": spec,
    }


def deployment(class_name: str = "", namespace: str = "team-gold") -> dict:
    template = pod(class_name, namespace)
    del template["apiVersion"], template["kind"]
    template["metadata"] = {"labels": {"app": "web"}}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template},
    }


RESOURCES = {
    "Pod": ("", "v1", "pods"),
    "PodGroup": ("scheduling.k8s.io", "v1alpha2", "podgroups"),
    "Deployment": ("apps", "v1", "deployments"),
    "PriorityClass": ("scheduling.k8s.io", "v1", "priorityclasses"),
}


def review(obj: dict, operation: str = "CREATE", old: dict | None = None) -> dict:
    group, version, resource = RESOURCES[obj["kind"]]
    request: dict[str, Any] = {
        "uid": "u-1",
        "kind": {"group": group, "version": version, "kind": obj["kind"]},
        "resource": {"group": group, "version": version, "resource": resource},
        "operation": operation,
        "name": obj["metadata"]["name"],
        "object": obj,
        "oldObject": old,
    }
    namespace = obj["metadata"].get("namespace")
    if namespace:
        request["namespace"] = namespace
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def decide(
    body: dict, known: tuple[dict, ...], stage: Stage = Stage.ADMIT, labels: Labels | None = None
) -> Decision:
    _, _, decision = handle_review(
        body, stage, classes(*known), PodOptions(), namespaces=labels or Labels(NAMESPACES)
    )
    return decision


@dataclass(frozen=True)
class Case:
    name: str
    body: dict
    known: tuple[dict, ...]
    allowed: bool
    says: tuple[str, ...] = ()  # in the refusal, or in the one warning when allowed
    warned: bool = False
    rule_class: str = ""
    stage: Stage = Stage.ADMIT
    labels: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: NAMESPACES)


def _upd(obj: dict) -> dict:
    return review(obj, "UPDATE", copy.deepcopy(obj))


SELECTOR = 'priority-webhook.io/allowed-namespaces: "tier in (gold,silver)"'
CASES = [
    # selector forms
    Case("in: matching value", review(pod("gold", "team-gold")), (GOLD,), True),
    Case("in: the other value", review(pod("gold", "team-silver")), (GOLD,), True),
    Case(
        "in: no match",
        review(pod("gold", "team-bronze")),
        (GOLD,),
        False,
        ('pods "p" is forbidden: PriorityClass gold may not be used in namespace team-bronze', SELECTOR),
        rule_class="gold",
    ),
    Case(
        "in: label absent",
        review(pod("gold", "platform")),
        (GOLD,),
        False,
        ("namespace platform",),
        rule_class="gold",
    ),
    Case("name label: its namespace", review(pod("platform", "platform")), (PLATFORM,), True),
    Case(
        "name label: another namespace",
        review(pod("platform", "team-gold")),
        (PLATFORM,),
        False,
        ('"kubernetes.io/metadata.name=platform"', "team-gold"),
        rule_class="platform",
    ),
    Case("!key: label absent", review(pod("batch", "team-gold")), (NOT_SANDBOX,), True),
    Case(
        "!key: label present",
        review(pod("batch", "sandbox-1")),
        (NOT_SANDBOX,),
        False,
        ('"!sandbox"',),
        rule_class="batch",
    ),
    Case("empty selector: everyone", review(pod("everywhere", "nowhere")), (EVERYWHERE,), True),
    Case("no annotation: no rule", review(pod("free", "nowhere")), (FREE,), True),
    # the global default class
    Case("default: matching", review(pod("", "team-gold")), (DEFAULT_GOLD,), True),
    Case(
        "default: not matching",
        review(pod("", "team-silver")),
        (DEFAULT_GOLD,),
        False,
        ("PriorityClass default-gold may not be used in namespace team-silver", '"tier=gold"'),
        rule_class="default-gold",
    ),
    Case("default: a class named instead", review(pod("free", "team-silver")), (DEFAULT_GOLD, FREE), True),
    Case(
        "system namespace, mutation skipped: the default's rule still holds at /validate",
        review(pod("", "kube-system")),
        (DEFAULT_GOLD,),
        False,
        ("PriorityClass default-gold may not be used in namespace kube-system",),
        rule_class="default-gold",
        stage=Stage.VALIDATE,
        labels={"kube-system": {"kubernetes.io/metadata.name": "kube-system"}},
    ),
    Case(
        "pod at /mutate: not its stage", review(pod("gold", "team-bronze")), (GOLD,), True, stage=Stage.MUTATE
    ),
    Case(
        "system namespace: exempt from failure, not from the rule",
        review(pod("gold", "kube-system")),
        (GOLD,),
        False,
        ("kube-system",),
        rule_class="gold",
        labels={"kube-system": {"kubernetes.io/metadata.name": "kube-system"}},
    ),
    # UPDATE never decides: the class cannot change
    Case("pod UPDATE", _upd(pod("gold", "team-bronze")), (GOLD,), True, stage=Stage.VALIDATE),
    Case("PodGroup UPDATE", _upd(pod_group("gold", "team-bronze")), (GOLD,), True, stage=Stage.MUTATE),
    # PodGroups
    Case("PodGroup: matching", review(pod_group("gold", "team-gold")), (GOLD,), True),
    Case(
        "PodGroup: not matching",
        review(pod_group("gold", "team-bronze")),
        (GOLD,),
        False,
        ('podgroups.scheduling.k8s.io "g" is forbidden: PriorityClass gold', SELECTOR),
        rule_class="gold",
        stage=Stage.MUTATE,
    ),
    Case(
        "PodGroup: default",
        review(pod_group("", "team-silver")),
        (DEFAULT_GOLD,),
        False,
        ("default-gold",),
        rule_class="default-gold",
    ),
    # workloads' pod templates: refused by the rule (not only warned about)
    Case(
        "Deployment: matching", review(deployment("gold", "team-gold")), (GOLD,), True, stage=Stage.VALIDATE
    ),
    Case(
        "Deployment: not matching",
        review(deployment("gold", "team-bronze")),
        (GOLD,),
        False,
        ("pods created by Deployment team-bronze/web will be forbidden: PriorityClass gold", SELECTOR),
        rule_class="gold",
        stage=Stage.VALIDATE,
    ),
    Case(
        "Deployment: default class",
        review(deployment("", "team-bronze")),
        (DEFAULT_GOLD,),
        False,
        ("default-gold",),
        rule_class="default-gold",
        stage=Stage.VALIDATE,
    ),
    Case(
        "Deployment: audit",
        review(deployment("gold", "team-bronze")),
        (GOLD_AUDIT,),
        True,
        ("audit: pods created by Deployment team-bronze/web will be forbidden", SELECTOR),
        warned=True,
        rule_class="gold",
        stage=Stage.VALIDATE,
    ),
    Case(
        "Deployment UPDATE, class unchanged",
        _upd(deployment("gold", "team-bronze")),
        (GOLD,),
        True,
        stage=Stage.VALIDATE,
    ),
    Case(
        "Deployment UPDATE to a refused class",
        review(deployment("gold", "team-bronze"), "UPDATE", deployment("free", "team-bronze")),
        (GOLD, FREE),
        False,
        ("gold",),
        rule_class="gold",
        stage=Stage.VALIDATE,
    ),
    # audit
    Case(
        "audit: admitted with a warning",
        review(pod("gold", "team-bronze")),
        (GOLD_AUDIT,),
        True,
        ("audit: PriorityClass gold may not be used in namespace team-bronze", SELECTOR),
        warned=True,
        rule_class="gold",
    ),
    Case("audit: matching, nothing said", review(pod("gold", "team-gold")), (GOLD_AUDIT,), True),
    # labels unknown (a namespace the cache or the input does not know)
    Case(
        "unknown namespace: refused",
        review(pod("gold", "team-new")),
        (GOLD,),
        False,
        ("team-new", "labels are unknown", SELECTOR),
        rule_class="gold",
    ),
    Case(
        "unknown namespace, audit: warned",
        review(pod("gold", "team-new")),
        (GOLD_AUDIT,),
        True,
        ("unknown",),
        warned=True,
        rule_class="gold",
    ),
    # a stored class whose annotations cannot be read refuses, never allows
    Case(
        "malformed selector in a stored class",
        review(pod("broken", "team-gold")),
        (BROKEN,),
        False,
        ("PriorityClass broken", "cannot be read", "'gold'"),
        rule_class="broken",
    ),
    Case(
        "malformed enforcement in a stored class: deny",
        review(pod("loose", "team-bronze")),
        (BROKEN_ENFORCEMENT,),
        False,
        ("loose",),
        rule_class="loose",
    ),
    # the class writes themselves
    Case(
        "class CREATE: malformed selector",
        review(klass("new", 10, "tier in gold")),
        (),
        False,
        (
            'PriorityClass.scheduling.k8s.io "new" is invalid: '
            'metadata.annotations[priority-webhook.io/allowed-namespaces]: Invalid value: "tier in gold"',
        ),
        stage=Stage.VALIDATE,
    ),
    Case(
        "class CREATE: malformed enforcement",
        review(klass("new", 10, "tier=gold", "Audit")),
        (),
        False,
        (
            'metadata.annotations[priority-webhook.io/enforcement]: Unsupported value: "Audit"',
            '"deny", "audit"',
        ),
        stage=Stage.VALIDATE,
    ),
    Case(
        "class CREATE: a bad key",
        review(klass("new", 10, "Tier.Example.com/x=1")),
        (),
        False,
        ("prefix",),
        stage=Stage.VALIDATE,
    ),
    Case(
        "class UPDATE to a malformed selector",
        review(klass("gold", 5000, "tier in (gold"), "UPDATE", GOLD),
        (GOLD,),
        False,
        ("is invalid", "the end"),
        stage=Stage.VALIDATE,
    ),
    Case(
        "class CREATE: well formed",
        review(klass("new", 10, "tier in (gold), !sandbox", "audit")),
        (),
        True,
        stage=Stage.VALIDATE,
    ),
    Case(
        "class UPDATE fixing a malformed selector",
        review(klass("broken", 70, "tier in (gold)"), "UPDATE", BROKEN),
        (BROKEN,),
        True,
        stage=Stage.VALIDATE,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_rule(case: Case) -> None:
    decision = decide(case.body, case.known, case.stage, Labels(case.labels))
    assert decision.allowed is case.allowed
    assert decision.rule_class == case.rule_class
    text = decision.message if not case.allowed else " ".join(decision.warnings)
    for part in case.says:
        assert part in text
    if not case.allowed:
        assert decision.code == 403 and decision.reason == "Forbidden"
        assert "\n" not in decision.message
    else:
        assert bool(decision.warnings) is case.warned


def test_labels_are_read_only_for_a_class_with_a_rule() -> None:
    labels = Labels(NAMESPACES)
    assert decide(review(pod("free", "team-bronze")), (FREE, GOLD), labels=labels).allowed
    assert decide(review(pod("everywhere", "team-bronze")), (EVERYWHERE,), labels=labels).allowed
    assert labels.asked == []
    assert not decide(review(pod("gold", "team-bronze")), (FREE, GOLD), labels=labels).allowed
    assert labels.asked == ["team-bronze"]


def test_a_relabelled_namespace_decides_the_next_pod() -> None:
    known = {"team": {"tier": "bronze"}}
    body = review(pod("gold", "team"))
    assert not decide(body, (GOLD,), labels=Labels(known)).allowed
    known["team"] = {"tier": "gold"}
    assert decide(body, (GOLD,), labels=Labels(known)).allowed


def test_the_refused_pod_gets_no_patch_and_the_admitted_one_its_priority() -> None:
    _, _, decision = handle_review(
        review(pod("gold", "team-gold")), Stage.MUTATE, classes(GOLD), namespaces=Labels(NAMESPACES)
    )
    assert decision.spec_changes == {"priority": 5000, "preemptionPolicy": "PreemptLowerPriority"}
    refused, _, _ = handle_review(
        review(pod("gold", "team-bronze")), Stage.VALIDATE, classes(GOLD), namespaces=Labels(NAMESPACES)
    )
    assert refused["response"]["allowed"] is False
    assert refused["response"]["status"]["code"] == 403
    assert "patch" not in refused["response"]


@pytest.mark.parametrize(
    "selector",
    ["tier in (" + "a," * 100_000 + "b", "x" * 300_000, "tier=gold\n  - x=1", "tier=gold,\u00e9=1"],
    ids=["huge list", "huge key", "two lines", "non-ascii key"],
)
def test_a_class_write_refused_for_any_value_gets_one_short_line(selector: str) -> None:
    decision = decide(review(klass("new", 10, selector)), (), Stage.VALIDATE)
    assert not decision.allowed
    assert "\n" not in decision.message
    assert len(decision.message) < 1000
    assert decision.message.startswith(
        'PriorityClass.scheduling.k8s.io "new" is invalid: metadata.annotations['
    )
