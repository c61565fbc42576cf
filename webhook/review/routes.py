"""Which rules answer which resource: one table, read by the handler, the fast path, the schemas, the
server's metric labels and `review`, and held to the chart's webhook rules by the chart tests.

A row names a resource as an AdmissionReview does (API group, resource, sub-resource) with its kind and
the API versions the chart registers, then its rule per stage (`mutate`, `validate`; None allows) and the
shape of object those rules read (`shapes.CHECKS`, `schema.OBJECT_SCHEMAS`; None: objects unread). A new
resource is a new row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from webhook.k8s import (
    CREATE,
    POD_GROUP_GROUP,
    POD_GROUP_VERSIONS,
    PRIORITY_CLASS_GVR,
)
from webhook.objects.workloads import WORKLOADS
from webhook.policy.class_model import ClassSet
from webhook.policy.class_rules import validate_priority_class
from webhook.policy.decision import ALLOW, Decision, Request, combine
from webhook.policy.eviction_rules import EVICTION, NO_CLUSTER, PodNodes, decide_eviction
from webhook.policy.namespace_access import NO_NAMESPACES, NamespaceLabels, object_access
from webhook.policy.pod_group_rules import admit_pod_group
from webhook.policy.pod_rules import DEFAULT_POD_OPTIONS, PodOptions, admit_pod, validate_pod
from webhook.review.shapes import POD, POD_GROUP, PRIORITY_CLASS
from webhook.review.workload_check import check_workload


@dataclass(frozen=True, slots=True)
class Context:
    """What the rules decide with besides the request: the classes, the options, the pod lookup, the
    namespaces' labels (read only for a class with an allowed-namespaces rule)."""

    classes: ClassSet
    options: PodOptions = DEFAULT_POD_OPTIONS
    pods: PodNodes | None = None  # an evicted pod's node (cluster mode only)
    namespaces: NamespaceLabels = NO_NAMESPACES


Rule = Callable[[Request, Context], Decision]


@dataclass(frozen=True, slots=True)
class Route:
    kind: str
    group: str
    resource: str
    versions: tuple[str, ...]  # the API versions served for it, oldest first (the chart's rules)
    mutate: Rule | None = None
    validate: Rule | None = None
    shape: str | None = None  # the objects' fields the rules read (checked before they run)
    sub_resource: str = ""
    namespaced: bool = True

    @property
    def qualified(self) -> str:
        """`pods`, `priorityclasses.scheduling.k8s.io`: the name upstream's messages and `Request` use."""
        return f"{self.resource}.{self.group}" if self.group else self.resource

    @property
    def label(self) -> str:
        """The metric label: the qualified resource, `/sub-resource` appended."""
        return f"{self.qualified}/{self.sub_resource}" if self.sub_resource else self.qualified


def _eviction(request: Request, ctx: Context) -> Decision:
    """The sidecar's eviction of a pod: allowed only on the node its token names. Needs the pod's node,
    so a webhook with no cluster refuses (it cannot know); PodLookupError propagates (no answer)."""
    if request.operation != CREATE:
        return ALLOW
    if not request.node_claim:
        return decide_eviction("", request.namespace, request.name, None)
    if ctx.pods is None:
        return Decision(allowed=False, code=403, reason="Forbidden", message=NO_CLUSTER)
    node = ctx.pods.node_of(request.namespace, request.name)
    return decide_eviction(request.node_claim, request.namespace, request.name, node)


ROUTES: tuple[Route, ...] = (
    Route(
        "Pod",
        "",
        "pods",
        ("v1",),
        mutate=lambda r, c: admit_pod(r, c.classes, c.options),
        validate=lambda r, c: combine(
            validate_pod(r, c.classes, c.options), object_access(r, c.classes, c.namespaces)
        ),
        shape=POD,
    ),
    Route("Eviction", "", "pods", ("v1",), validate=_eviction, sub_resource=EVICTION),
    Route(
        "PriorityClass",
        PRIORITY_CLASS_GVR[0],
        PRIORITY_CLASS_GVR[2],
        (PRIORITY_CLASS_GVR[1],),
        validate=lambda r, c: validate_priority_class(r, c.classes),
        shape=PRIORITY_CLASS,
        namespaced=False,
    ),
    Route(
        "PodGroup",
        POD_GROUP_GROUP,
        "podgroups",
        POD_GROUP_VERSIONS,
        mutate=lambda r, c: combine(admit_pod_group(r, c.classes), object_access(r, c.classes, c.namespaces)),
        shape=POD_GROUP,
    ),
    *(
        Route(
            kind,
            group,
            resource,
            ("v1",),
            validate=lambda r, c: check_workload(r, c.classes, c.options, c.namespaces),
        )
        for kind, (group, resource, _) in WORKLOADS.items()
    ),
)

_BY_RESOURCE: dict[tuple[str, str], Route] = {(r.qualified, r.sub_resource): r for r in ROUTES}
BY_KIND: dict[str, Route] = {r.kind: r for r in ROUTES if not r.sub_resource}
LABELS: frozenset[str] = frozenset(r.label for r in ROUTES)


def route_of(resource: str, sub_resource: str = "") -> Route | None:
    """The row for a qualified resource and sub-resource, None for what we do not admit."""
    return _BY_RESOURCE.get((resource, sub_resource))
