"""What the sidecar's decisions read and return: its settings, the process's hints, and the actions the
agent carries out. Pure: no I/O, no clock, no threads.

`decide` (which rejected pods, in which order, in which state) and `victims` (room for one rejected pod)
share these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from webhook.k8s import SYSTEM_CRITICAL_PRIORITY
from webhook.preemption.node.admission import Admission
from webhook.sidecar import record as rec

Pod = Mapping[str, Any]
DEFAULT_MAX_ROUNDS = 3
DEFAULT_MAX_REJECTION_AGE = 600.0  # seconds


@dataclass(frozen=True, slots=True)
class Settings:
    node_name: str
    critical_priority: int = SYSTEM_CRITICAL_PRIORITY
    order: str = "priority"
    dry_run: bool = False
    recreate_rejected: bool = False
    max_rounds: int = DEFAULT_MAX_ROUNDS
    # A rejection older than this starts no new preemption: its replacement has long been made elsewhere
    # (a ReplicaSet's failed pods linger until garbage-collected), so room made now would serve nobody.
    max_rejection_age: float = DEFAULT_MAX_REJECTION_AGE


@dataclass(frozen=True, slots=True)
class Hints:
    """What the running process remembers; losing it on restart is safe because the record is in the API.

    `evicting`: victims whose eviction the API accepted but that the view does not show terminating yet.
    `blocked_until`: victim uid -> clock reading before which a refused eviction is not retried (backoff).
    `reported`: keys of reports already made, so a waiting pod does not spam events. After a restart the
    events themselves keep them single: each is created under a name derived from its key (kube.events).
    """

    now: float = 0.0
    eviction_budget: int = 1 << 30
    evicting: frozenset[str] = frozenset()
    blocked_until: Mapping[str, float] = field(default_factory=dict)
    reported: frozenset[str] = frozenset()
    wall_time: float | None = None  # Unix time, for the rejection age; None: no age limit


# Actions, carried out in order by the agent. `pod` is always the rejected pod the action serves; the agent
# skips the rest of a pod's actions when writing its record fails.


@dataclass(frozen=True, slots=True)
class WriteRecord:
    pod: Pod
    record: rec.Record


@dataclass(frozen=True, slots=True)
class Announce:
    """Event on the rejected pod naming the victims (and one histogram observation)."""

    pod: Pod
    victims: tuple[Pod, ...]
    resource: str


@dataclass(frozen=True, slots=True)
class Evict:
    """Event `Preempting` on the victim, then evict it (or delete it with --ignore-pdb)."""

    pod: Pod
    victim: Pod
    resource: str


@dataclass(frozen=True, slots=True)
class DryRun:
    pod: Pod
    victims: tuple[Pod, ...]
    resource: str
    key: str


@dataclass(frozen=True, slots=True)
class Report:
    """A log line and an event on the rejected pod, made once per key."""

    pod: Pod
    key: str
    type: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Recreate:
    """Delete the rejected pod so its controller's replacement is admitted without waiting for backoff."""

    pod: Pod


Action = WriteRecord | Announce | Evict | DryRun | Report | Recreate


class AdmitFn(Protocol):
    """The node-side module's admission (`admit_to_node`); tests pass their own."""

    def __call__(
        self,
        pod: Pod,
        node: Pod,
        pods: Sequence[Pod],
        *,
        order: str,
        critical_priority: int,
    ) -> Admission: ...


def uid(pod: Pod) -> str:
    return str((pod.get("metadata") or {}).get("uid") or "")


def ref(pod: Pod) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def has_controller(pod: Pod) -> bool:
    refs = (pod.get("metadata") or {}).get("ownerReferences") or ()
    return any(isinstance(r, Mapping) and r.get("controller") is True for r in refs)


def controller_uid(pod: Pod) -> str | None:
    for owner in (pod.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(owner, Mapping) and owner.get("controller") is True:
            return str(owner.get("uid") or "") or None
    return None
