"""PriorityClasses as the admission decisions see them, and immutable snapshots of a class set.

A `ClassSet` is a frozen snapshot: readers hold one for a whole decision, writers (the static loader, the
list/watch cache) build a new one and swap it in. That keeps lookups lock-free and O(1).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from webhook.k8s import (
    INT32_MAX,
    INT32_MIN,
    PREEMPT_LOWER_PRIORITY,
    PREEMPTION_POLICIES,
    SYSTEM_CLUSTER_CRITICAL,
    SYSTEM_CRITICAL_PRIORITY,
    SYSTEM_NODE_CRITICAL,
    InvalidObject,
)
from webhook.policy.namespace_access import NamespaceRule, read_rule


@dataclass(frozen=True, slots=True)
class PriorityClass:
    name: str
    value: int
    global_default: bool = False
    # None models an un-defaulted class (upstream unit-test fixtures); the v1 API always defaults it.
    preemption_policy: str | None = PREEMPT_LOWER_PRIORITY
    description: str = ""
    # Who may use the class (priority-webhook.io/allowed-namespaces), None for everyone.
    namespace_rule: NamespaceRule | None = None

    @classmethod
    def from_object(cls, obj: Any) -> PriorityClass:
        """Read a `scheduling.k8s.io/v1` PriorityClass dict, applying v1 defaulting."""
        if not isinstance(obj, Mapping):
            raise InvalidObject("a PriorityClass must be an object")
        meta = obj.get("metadata")
        if not isinstance(meta, Mapping):
            raise InvalidObject("metadata: must be an object")
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidObject("metadata.name: must be a non-empty string")
        value = obj.get("value", 0)
        if not is_int(value) or not INT32_MIN <= value <= INT32_MAX:
            raise InvalidObject(f"value: must be a 32-bit integer, got {value!r}")
        global_default = obj.get("globalDefault", False)
        if not isinstance(global_default, bool):
            raise InvalidObject(f"globalDefault: must be a boolean, got {global_default!r}")
        policy = obj.get("preemptionPolicy", PREEMPT_LOWER_PRIORITY)
        if policy is None:
            policy = PREEMPT_LOWER_PRIORITY
        if policy not in PREEMPTION_POLICIES:
            raise InvalidObject(f"preemptionPolicy: must be Never or PreemptLowerPriority, got {policy!r}")
        description = obj.get("description") or ""
        if not isinstance(description, str):
            raise InvalidObject("description: must be a string")
        annotations = meta.get("annotations")
        rule = read_rule(annotations) if isinstance(annotations, Mapping) else None
        return cls(name, value, global_default, policy, description, rule)

    def to_object(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": self.name},
            "value": self.value,
        }
        if self.global_default:
            obj["globalDefault"] = True
        if self.description:
            obj["description"] = self.description
        if self.preemption_policy is not None:
            obj["preemptionPolicy"] = self.preemption_policy
        if self.namespace_rule is not None:
            obj["metadata"]["annotations"] = self.namespace_rule.annotations()
        return obj


def is_int(value: Any) -> bool:
    """JSON integers only: bool is an int subclass in Python but never a Kubernetes integer."""
    return isinstance(value, int) and not isinstance(value, bool)


SYSTEM_CLASSES: tuple[PriorityClass, ...] = (
    PriorityClass(
        SYSTEM_NODE_CRITICAL,
        SYSTEM_CRITICAL_PRIORITY + 1000,
        description="Used for system critical pods that must not be moved from their current node.",
    ),
    PriorityClass(
        SYSTEM_CLUSTER_CRITICAL,
        SYSTEM_CRITICAL_PRIORITY,
        description="Used for system critical pods that must run in the cluster, "
        "but can be moved to another node if necessary.",
    ),
)
SYSTEM_CLASSES_BY_NAME: Mapping[str, PriorityClass] = {pc.name: pc for pc in SYSTEM_CLASSES}


def pick_default(classes: Iterable[PriorityClass]) -> PriorityClass | None:
    """The global default as upstream picks it: the lowest value among `globalDefault` classes.

    Upstream leaves equal values to lister order; we break that tie by name so the answer is stable.
    """
    defaults = [pc for pc in classes if pc.global_default]
    return min(defaults, key=lambda pc: (pc.value, pc.name)) if defaults else None


class ClassSet(Mapping[str, PriorityClass]):
    """An immutable set of PriorityClasses by name, with its default precomputed.

    `recent`: the sets this one replaced a short while ago, newest first (each without a `recent` of its
    own). The API server calls /mutate and /validate separately, possibly on different workers; the final
    check accepts a pod that /mutate resolved with one of these (webhook/policy/pod_rules.py).
    """

    __slots__ = ("_by_name", "_default", "recent")

    def __init__(self, classes: Iterable[PriorityClass] = (), recent: tuple[ClassSet, ...] = ()) -> None:
        self._by_name: dict[str, PriorityClass] = {pc.name: pc for pc in classes}
        self._default = pick_default(self._by_name.values())
        self.recent = recent

    def __getitem__(self, name: str) -> PriorityClass:
        return self._by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def __repr__(self) -> str:
        return f"ClassSet({sorted(self._by_name)!r})"

    def default(self) -> PriorityClass | None:
        return self._default

    def with_class(self, pc: PriorityClass) -> ClassSet:
        return ClassSet([*(c for c in self._by_name.values() if c.name != pc.name), pc])

    def without(self, name: str) -> ClassSet:
        return ClassSet(c for c in self._by_name.values() if c.name != name)

    def alone(self) -> ClassSet:
        """The same classes without `recent` (what a history keeps, so that sets never chain)."""
        return ClassSet(self._by_name.values()) if self.recent else self


class ClassStore(Protocol):
    """Where the webhook reads classes from: a static set, or the cluster's list/watch cache."""

    def snapshot(self) -> ClassSet:
        """The current classes; cheap, never blocks on I/O."""
        ...

    def ready(self) -> bool:
        """True once the classes reflect their source (for a cluster store: the first LIST has landed)."""
        ...

    def wait_ready(self, timeout: float) -> bool:
        """Block up to `timeout` seconds for `ready()`; what it then is."""
        ...


class StaticClassStore:
    """The embedded default: the built-in system classes plus classes from files, fixed for the process."""

    def __init__(self, classes: Iterable[PriorityClass] = (), *, with_system_classes: bool = True) -> None:
        extra = list(classes)
        base = [pc for pc in SYSTEM_CLASSES if with_system_classes]
        self._classes = ClassSet([*base, *extra])

    def snapshot(self) -> ClassSet:
        return self._classes

    def ready(self) -> bool:
        return True

    def wait_ready(self, timeout: float) -> bool:
        return True
