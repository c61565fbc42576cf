"""Who may use which class: a PriorityClass's `priority-webhook.io/allowed-namespaces` rule.

The annotation holds a label selector (webhook.policy.label_selector); a pod, a workload's pod template or
a PodGroup that resolves to the class (by name, or as the global default) in a namespace whose labels do
not match is refused, or only warned about when the class says `priority-webhook.io/enforcement: audit`.
No annotation, no rule. A class whose annotations cannot be read (written while the webhook was not
checking classes) refuses: a rule nobody can read must not turn into no rule. Likewise a rule that cannot be
evaluated because no namespace's labels can be had (the webhook may not list namespaces, or has not yet)
refuses under `deny`, naming the cause, and is reported as not checked under `audit`.

Only CREATE is decided: a pod's and a PodGroup's class cannot change afterwards, so an UPDATE (a label, a
finalizer, a status) of an object admitted before a namespace was relabelled is never blocked by it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from webhook.k8s import CREATE
from webhook.policy.decision import ALLOW, Decision, Request, forbidden
from webhook.policy.label_selector import Selector, SelectorError, parse_selector

if TYPE_CHECKING:  # class_model reads rules with this module: the import goes one way at run time
    from webhook.policy.class_model import ClassSet

ALLOWED_NAMESPACES = "priority-webhook.io/allowed-namespaces"
ENFORCEMENT = "priority-webhook.io/enforcement"
DENY, AUDIT = "deny", "audit"
ENFORCEMENTS = (DENY, AUDIT)


class NamespaceLabels(Protocol):
    """Where the labels of a namespace come from: the cluster's Namespace cache, or `review`'s input."""

    def labels_of(self, namespace: str) -> Mapping[str, str] | None:
        """The namespace's labels; None when they are not known (no such namespace seen)."""
        ...


class LabelsUnavailable(Exception):
    """Raised by `NamespaceLabels.labels_of` when no namespace's labels can be known now (the source cannot
    list namespaces, or has not yet): the rule cannot be evaluated. The message is the cause, one line."""


class NoNamespaces:
    """No source of namespace labels (a webhook without a cluster): every namespace is unknown."""

    def labels_of(self, namespace: str) -> Mapping[str, str] | None:
        return None


NO_NAMESPACES = NoNamespaces()


@dataclass(frozen=True, slots=True)
class NamespaceRule:
    """A class's rule as read from its annotations. `problem` is set, and `selector` None, when they
    cannot be read: such a rule refuses every namespace (audit only when the enforcement says so)."""

    text: str
    selector: Selector | None
    audit: bool = False
    problem: str = ""

    def annotations(self) -> dict[str, str]:
        """The annotations that state this rule."""
        return {ALLOWED_NAMESPACES: self.text, ENFORCEMENT: AUDIT if self.audit else DENY}


def annotation_problems(annotations: Mapping[str, Any]) -> list[str]:
    """The API's field errors for the two annotations (what a class write is refused with), or []."""
    problems = []
    text = annotations.get(ALLOWED_NAMESPACES)
    if text is not None and not isinstance(text, str):
        problems.append(f"{_field(ALLOWED_NAMESPACES)}: Invalid value: must be a string")
    elif text is not None:
        try:
            parse_selector(text)
        except SelectorError as err:
            problems.append(f"{_field(ALLOWED_NAMESPACES)}: Invalid value: {_quoted(text)}: {err}")
    enforcement = annotations.get(ENFORCEMENT)
    if enforcement is not None and enforcement not in ENFORCEMENTS:
        problems.append(
            f"{_field(ENFORCEMENT)}: Unsupported value: {_quoted(str(enforcement))}: "
            f'supported values: "{DENY}", "{AUDIT}"'
        )
    return problems


def read_rule(annotations: Mapping[str, Any]) -> NamespaceRule | None:
    """The rule a class's annotations state; None when there is none (no allowed-namespaces annotation).
    An unreadable enforcement value denies: only an explicit `audit` relaxes a rule."""
    text = annotations.get(ALLOWED_NAMESPACES)
    if text is None:
        return None
    problems = annotation_problems(annotations)
    audit = annotations.get(ENFORCEMENT) == AUDIT
    if problems or not isinstance(text, str):
        return NamespaceRule(str(text), None, audit, "; ".join(problems))
    return NamespaceRule(text, parse_selector(text), audit)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a namespace may not use a class: the one-line reason, and whether the class only audits."""

    reason: str
    audit: bool


def check_namespace(
    class_name: str, rule: NamespaceRule | None, namespace: str, namespaces: NamespaceLabels
) -> Refusal | None:
    """None if `namespace` may use the class; else the refusal, naming class, namespace and selector.
    Labels are looked up only for a class with a rule (a lookup may have to wait, see the server)."""
    if rule is None:
        return None
    if rule.selector is not None and not rule.selector.requirements:
        return None  # the empty selector matches every namespace: no lookup needed
    labels: Mapping[str, str] | None = None
    unavailable: LabelsUnavailable | None = None
    if rule.selector is not None:
        try:
            labels = namespaces.labels_of(namespace)
        except LabelsUnavailable as err:
            unavailable = err
        if labels is not None and rule.selector.matches(labels):
            return None  # the common case: nothing below (the messages) is built
    where = f"PriorityClass {class_name} may not be used in namespace {namespace}"
    selector = f"{ALLOWED_NAMESPACES}: {_quoted(rule.text)}"
    if rule.selector is None:
        return Refusal(f"{where}: its annotations cannot be read ({rule.problem})", rule.audit)
    if unavailable is not None:
        if rule.audit:
            return Refusal(
                f"PriorityClass {class_name}: {selector} was not checked for namespace {namespace}: "
                f"{unavailable}",
                audit=True,
            )
        return Refusal(f"{where}: {selector} cannot be checked: {unavailable}", audit=False)
    if labels is None:
        return Refusal(
            f"{where}: the namespace's labels are unknown, so they cannot be checked against {selector}",
            rule.audit,
        )
    return Refusal(f"{where}: its labels do not match {selector}", rule.audit)


def access_decision(
    request: Request, class_name: str, classes: ClassSet, namespaces: NamespaceLabels
) -> Decision:
    """The rule for an object of `request` that names `class_name` ("": the global default applies):
    ALLOW, a refusal, or under audit an allowance with a warning. `rule_class` says which class spoke.
    A class that does not exist is not this rule's business (the priority rules refuse it)."""
    pc = classes.get(class_name) if class_name else classes.default()
    if pc is None:
        return ALLOW
    refusal = check_namespace(pc.name, pc.namespace_rule, request.namespace, namespaces)
    if refusal is None:
        return ALLOW
    if refusal.audit:
        return Decision(warnings=(f"{AUDIT}: {refusal.reason}",), rule_class=pc.name)
    denied = forbidden(request, refusal.reason)
    return Decision(False, denied.message, denied.code, denied.reason, rule_class=pc.name)


def object_access(request: Request, classes: ClassSet, namespaces: NamespaceLabels) -> Decision:
    """A pod's or a PodGroup's CREATE: the class its `spec.priorityClassName` names, else the default."""
    obj = request.object
    if request.operation != CREATE or request.sub_resource or not isinstance(obj, dict):
        return ALLOW
    spec = obj.get("spec")
    class_name = spec.get("priorityClassName") if isinstance(spec, dict) else None
    return access_decision(request, class_name or "", classes, namespaces)


def _field(annotation: str) -> str:
    return f"metadata.annotations[{annotation}]"


MAX_QUOTED = 256  # characters of an annotation value quoted in a message


def _quoted(text: str) -> str:
    """A value quoted on one line, whatever it holds (an annotation may span lines), and cut to MAX_QUOTED
    characters so that a message stays short whatever was written."""
    cut = text[:MAX_QUOTED]
    escaped = cut.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"' + ("..." if len(text) > MAX_QUOTED else "")
