"""PodDisruptionBudgets as kube-scheduler preemption sees them (`filterPodsWithPDBViolation`).

The scheduler never recomputes a budget: it reads `status.disruptionsAllowed` and `status.disruptedPods`
as the disruption controller left them, and it deletes victims rather than evicting them, so a PDB is a
preference when choosing victims and nodes, never a hard limit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

# `LabelSelectorOperator` values of metav1.LabelSelectorRequirement.
IN, NOT_IN, EXISTS, DOES_NOT_EXIST = "In", "NotIn", "Exists", "DoesNotExist"
OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST)


class InvalidPdb(ValueError):
    """A PodDisruptionBudget whose fields cannot be read; the message names the field."""


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == EXISTS:
            return self.key in labels
        if self.operator == DOES_NOT_EXIST:
            return self.key not in labels
        if self.operator == IN:
            return self.key in labels and labels[self.key] in self.values
        return self.key not in labels or labels[self.key] not in self.values  # NotIn


@dataclass(frozen=True, slots=True)
class Selector:
    """A parsed metav1.LabelSelector; `requirements` empty means the empty selector `{}`."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)


@dataclass(frozen=True, slots=True)
class Pdb:
    namespace: str
    name: str
    selector: Selector | None  # None: no selector at all, which matches nothing in every version
    disruptions_allowed: int
    disrupted_pods: frozenset[str]

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Pdb:
        """Read a `policy/v1` (or v1beta1) PodDisruptionBudget dict."""
        meta = _mapping(obj.get("metadata"), "metadata")
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidPdb("metadata.name: must be a non-empty string")
        namespace = meta.get("namespace") or "default"
        if not isinstance(namespace, str):
            raise InvalidPdb("metadata.namespace: must be a string")
        spec = _mapping(obj.get("spec"), "spec")
        status = _mapping(obj.get("status"), "status")
        allowed = status.get("disruptionsAllowed", 0)
        if allowed is None:
            allowed = 0
        if not isinstance(allowed, int) or isinstance(allowed, bool):
            raise InvalidPdb(f"status.disruptionsAllowed: must be an integer, got {allowed!r}")
        disrupted = _mapping(status.get("disruptedPods"), "status.disruptedPods")
        raw_selector = spec.get("selector")
        selector = None if raw_selector is None else parse_selector(raw_selector, "spec.selector")
        return cls(namespace, name, selector, allowed, frozenset(disrupted))


def parse_selector(raw: Any, field: str) -> Selector:
    """`metav1.LabelSelectorAsSelector`, strict: a malformed selector is an input error, not skipped."""
    sel = _mapping(raw, field)
    requirements: list[Requirement] = []
    labels = _mapping(sel.get("matchLabels"), f"{field}.matchLabels")
    for key, value in labels.items():
        if not isinstance(value, str):
            raise InvalidPdb(f"{field}.matchLabels.{key}: must be a string")
        requirements.append(Requirement(key, IN, frozenset((value,))))
    expressions = sel.get("matchExpressions")
    if expressions is None:
        expressions = []
    if not isinstance(expressions, list):
        raise InvalidPdb(f"{field}.matchExpressions: must be a list")
    for i, expr in enumerate(expressions):
        where = f"{field}.matchExpressions[{i}]"
        expr = _mapping(expr, where)
        raw_key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if not isinstance(raw_key, str) or not raw_key:
            raise InvalidPdb(f"{where}.key: must be a non-empty string")
        if op not in OPERATORS:
            raise InvalidPdb(f"{where}.operator: must be one of {', '.join(OPERATORS)}, got {op!r}")
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise InvalidPdb(f"{where}.values: must be a list of strings")
        if op in (IN, NOT_IN) and not values:
            raise InvalidPdb(f"{where}.values: must be non-empty for operator {op}")
        if op in (EXISTS, DOES_NOT_EXIST) and values:
            raise InvalidPdb(f"{where}.values: must be empty for operator {op}")
        requirements.append(Requirement(raw_key, op, frozenset(values)))
    return Selector(tuple(requirements))


def _mapping(value: Any, field: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidPdb(f"{field}: must be an object")
    return value


class LabeledPod(Protocol):
    """What the PDB split reads of a pod (read-only, so a dataclass with a `dict` of labels fits)."""

    @property
    def namespace(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def labels(self) -> Mapping[str, str]: ...


V = TypeVar("V", bound=LabeledPod)


class PdbIndex:
    """The PDBs of a snapshot, indexed so that finding a pod's PDBs costs a few dict lookups.

    Classic rules (kube-scheduler v1.19 to v1.35, the default): unlabeled pods and the empty selector
    `{}` match nothing, and every matching PDB is decremented. `empty_selector_matches_all` selects the
    newer rules (#141785): `{}` matches every pod of the namespace (unlabeled ones too), and a pod stops
    at the first PDB it drives below zero, so later PDBs in list order are not decremented for it.
    A nil selector matches nothing under both rules.
    """

    __slots__ = ("_by_label", "_unindexed", "newest", "pdbs")

    def __init__(self, pdbs: Sequence[Pdb], *, empty_selector_matches_all: bool = False) -> None:
        self.pdbs = list(pdbs)
        self.newest = empty_selector_matches_all
        # A selector with an `In` requirement of one value can only match pods carrying that label; the
        # flag says whether other requirements remain to be checked once that label matched.
        self._by_label: dict[tuple[str, str, str], list[tuple[int, bool]]] = {}
        self._unindexed: dict[str, list[int]] = {}
        for i, pdb in enumerate(self.pdbs):
            if pdb.selector is None or (not self.newest and not pdb.selector.requirements):
                continue
            requirements = pdb.selector.requirements
            anchor = next((r for r in requirements if r.operator == IN and len(r.values) == 1), None)
            if anchor is None:
                self._unindexed.setdefault(pdb.namespace, []).append(i)
            else:
                (value,) = anchor.values
                key = (pdb.namespace, anchor.key, value)
                self._by_label.setdefault(key, []).append((i, len(requirements) > 1))

    def matching(self, pod: LabeledPod) -> list[int]:
        """Indices (in list order) of the PDBs whose selector matches the pod."""
        labels = pod.labels
        if not labels and not self.newest:
            return []
        ns = pod.namespace
        pdbs = self.pdbs
        unindexed = self._unindexed.get(ns)
        found = [i for i in unindexed if pdbs[i].selector.matches(labels)] if unindexed else []  # type: ignore[union-attr]
        by_label = self._by_label
        for key, value in labels.items():
            hits = by_label.get((ns, key, value))
            if hits:
                for i, check in hits:
                    if not check or pdbs[i].selector.matches(labels):  # type: ignore[union-attr]
                        found.append(i)
        if len(found) > 1:
            found = sorted(set(found))
        return found


def split_by_pdb_violation(victims: Sequence[V], index: PdbIndex) -> tuple[list[V], list[V]]:
    """(violating, non-violating), each keeping the input (importance) order.

    Budgets are taken from `disruptionsAllowed` afresh for every call (upstream: per node), and consumed in
    the given order BEFORE any reprieve, so a pod that is later kept still used up budget (upstream
    #91492): that over-count is upstream behaviour and kept. A pod listed in `disruptedPods` (eviction
    already approved) neither counts nor consumes budget.
    """
    pdbs = index.pdbs
    newest = index.newest
    consumed: dict[int, int] = {}
    violating: list[V] = []
    ok: list[V] = []
    for victim in victims:
        violated = False
        for i in index.matching(victim):
            pdb = pdbs[i]
            if victim.name in pdb.disrupted_pods:
                continue
            consumed[i] = consumed.get(i, 0) + 1
            if consumed[i] > pdb.disruptions_allowed:
                violated = True
                if newest:
                    break
        (violating if violated else ok).append(victim)
    return violating, ok
