"""The sidecar's pure decisions, table-driven: trigger, victims, safety rules, record states, budget."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.sidecar.fixtures import KUBELET_VERSIONS, node, pod, preempted, rejected
from webhook.sidecar import record as rec
from webhook.sidecar.actions import (
    Announce,
    DryRun,
    Evict,
    Hints,
    Recreate,
    Report,
    Settings,
    WriteRecord,
)
from webhook.sidecar.decide import decide

BASE = Settings(node_name="node-a")
JAN1 = datetime(2026, 1, 1, tzinfo=UTC).timestamp()


def v(name: str) -> rec.Victim:
    return rec.Victim(uid=f"uid-{name}", namespace="default", name=name)


def summary(actions: list[Any]) -> list[tuple[Any, ...]]:
    """Actions as short tuples: what a reader of the table can check at a glance."""
    out: list[tuple[Any, ...]] = []
    for a in actions:
        who = a.pod["metadata"]["name"]
        if isinstance(a, WriteRecord):
            out.append(("write", who, a.record.state, a.record.round, [x.name for x in a.record.victims]))
        elif isinstance(a, Announce):
            out.append(("announce", who, [x["metadata"]["name"] for x in a.victims], a.resource))
        elif isinstance(a, Evict):
            out.append(("evict", who, a.victim["metadata"]["name"], a.resource))
        elif isinstance(a, DryRun):
            out.append(("dry-run", who, [x["metadata"]["name"] for x in a.victims]))
        elif isinstance(a, Report):
            out.append(("report", who, a.reason))
        elif isinstance(a, Recreate):
            out.append(("recreate", who))
    return out


def preempt(who: str, victims: list[str], resource: str = "cpu", rnd: int = 1) -> list[tuple[Any, ...]]:
    return [
        ("write", who, "preempting", rnd, victims),
        ("announce", who, victims, resource),
        *[("evict", who, name, resource) for name in victims],
    ]


CASES: list[tuple[str, list[dict[str, Any]], Settings, Hints, list[tuple[Any, ...]]]] = [
    ("nothing rejected", [pod("a", cpu="500m"), pod("b", cpu="400m")], BASE, Hints(), []),
    (
        "rejected critical pod: the lowest priority pod that frees enough",
        [pod("low", cpu="500m", priority=0), pod("mid", cpu="500m", priority=100), rejected("crit")],
        BASE,
        Hints(),
        preempt("crit", ["low"]),
    ),
    (
        "priority order (default) spares a higher-priority burstable pod that qos order would take",
        [pod("g", cpu="500m", limits=True, priority=0), pod("b", cpu="500m", priority=100), rejected("crit")],
        BASE,
        Hints(),
        preempt("crit", ["g"]),
    ),
    (
        "qos order (upstream) takes the burstable pod whatever its priority",
        [pod("g", cpu="500m", limits=True, priority=0), pod("b", cpu="500m", priority=100), rejected("crit")],
        replace(BASE, order="qos"),
        Hints(),
        preempt("crit", ["b"]),
    ),
    (
        "UnexpectedAdmissionError (the kubelet's own preemption failed) is a trigger too",
        [pod("low", cpu="600m"), rejected("crit", reason="UnexpectedAdmissionError")],
        BASE,
        Hints(),
        preempt("crit", ["low"]),
    ),
    (
        "memory shortfall: the metric label is the first insufficient resource",
        [
            pod("a", cpu="100m", memory="800Mi"),
            rejected("crit", cpu="100m", memory="512Mi", reason="OutOfmemory"),
        ],
        BASE,
        Hints(),
        preempt("crit", ["a"], resource="memory"),
    ),
    (
        "non-critical rejection is ignored",
        [pod("low", cpu="600m"), rejected("x", priority=1000)],
        BASE,
        Hints(),
        [],
    ),
    (
        "a lower --critical-priority makes the same pod a trigger",
        [pod("low", cpu="600m"), rejected("x", priority=1000)],
        replace(BASE, critical_priority=1000),
        Hints(),
        preempt("x", ["low"]),
    ),
    (
        "non-resource rejection (NodeAffinity) is ignored",
        [pod("low", cpu="600m"), rejected("crit", reason="NodeAffinity")],
        BASE,
        Hints(),
        [],
    ),
    (
        "a rejected pod of another node is ignored",
        [pod("low", cpu="600m"), rejected("crit", node_name="node-b")],
        BASE,
        Hints(),
        [],
    ),
    (
        "a rejected pod that is being deleted is ignored",
        [pod("low", cpu="600m"), rejected("crit", deleting=True)],
        BASE,
        Hints(),
        [],
    ),
    (
        "a rejection older than max_rejection_age starts nothing (its replacement is long made)",
        [
            pod("low", cpu="600m"),
            rejected("crit", created="2026-01-01T00:00:00Z", started="2026-01-01T00:00:00Z"),
        ],
        BASE,
        Hints(wall_time=JAN1 + 601),
        [],
    ),
    (
        "a recent rejection (status.startTime) acts",
        [
            pod("low", cpu="600m"),
            rejected("crit", created="2025-12-01T00:00:00Z", started="2026-01-01T00:00:00Z"),
        ],
        BASE,
        Hints(wall_time=JAN1 + 599),
        preempt("crit", ["low"]),
    ),
    (
        "an old rejection with a preemption in flight still finishes it",
        [
            pod("a", cpu="600m"),
            rejected(
                "crit", created="2026-01-01T00:00:00Z", record=rec.Record(rec.PREEMPTING, 1, "cpu", (v("a"),))
            ),
        ],
        BASE,
        Hints(wall_time=JAN1 + 3600),
        [("evict", "crit", "a", "cpu")],
    ),
    (
        "a terminating pod is never a victim but its requests still count",
        [pod("t", cpu="300m", deleting=True), pod("a", cpu="700m", priority=5), rejected("crit")],
        BASE,
        Hints(),
        preempt("crit", ["a"]),
    ),
    (
        "room already on its way (terminating pods would free enough): wait, evict nothing",
        [pod("t", cpu="500m", deleting=True), pod("a", cpu="500m"), rejected("crit")],
        BASE,
        Hints(),
        [],
    ),
    (
        "fits already while another pod is stuck terminating (a finalizer): done, not wait",
        [pod("t", cpu="500m", deleting=True), pod("a", cpu="100m"), rejected("crit", cpu="300m")],
        BASE,
        Hints(),
        [("write", "crit", "done", 0, [])],
    ),
    (
        "the same with --recreate-rejected: the controller-owned pod is recreated",
        [pod("t", cpu="500m", deleting=True), rejected("crit", cpu="300m", controller=True)],
        replace(BASE, recreate_rejected=True),
        Hints(),
        [("write", "crit", "done", 0, []), ("recreate", "crit")],
    ),
    (
        "record preempting, a victim stuck terminating but the pod fits anyway: done",
        [
            pod("a", cpu="300m", deleting=True),
            rejected("crit", cpu="300m", record=rec.Record(rec.PREEMPTING, 1, "cpu", (v("a"),))),
        ],
        BASE,
        Hints(),
        [("write", "crit", "done", 1, ["a"])],
    ),
    (
        "the same for a pod whose eviction was just accepted",
        [pod("t", cpu="500m"), pod("a", cpu="500m"), rejected("crit")],
        BASE,
        Hints(evicting=frozenset({"uid-t"})),
        [],
    ),
    (
        "a victim whose eviction was just accepted is treated as terminating",
        [pod("t", cpu="300m"), pod("a", cpu="700m", priority=5), rejected("crit")],
        BASE,
        Hints(evicting=frozenset({"uid-t"})),
        preempt("crit", ["a"]),
    ),
    (
        "mirror (static) pods are never victims",
        [pod("static", cpu="1", mirror=True, priority=0), rejected("crit")],
        BASE,
        Hints(),
        [("report", "crit", "PreemptionFailed")],
    ),
    (
        "no spec.priority and no class: 0, as upstream's GetPodPriority has it (no default class then): a victim",
        [pod("old", cpu="1", priority=None), rejected("crit")],
        BASE,
        Hints(),
        preempt("crit", ["old"]),
    ),
    (
        "no spec.priority but a class named: admission never resolved it, its priority is unknown: never a victim",
        [
            pod(
                "sidecar",
                cpu="400m",
                priority=None,
                class_name="system-node-critical",
                namespace="priority-system",
            ),
            pod(
                "replica",
                cpu="400m",
                priority=None,
                class_name="system-cluster-critical",
                namespace="priority-system",
            ),
            pod("app", cpu="200m", priority=None, class_name="batch"),
            rejected("crit", priority=2_000_001_000),
        ],
        BASE,
        Hints(),
        [("report", "crit", "PreemptionFailed")],
    ),
    (
        "the chart's own pods, with their class's priority, are never victims of a node-critical pod",
        [
            pod(
                "sidecar",
                cpu="400m",
                priority=2_000_001_000,
                class_name="system-node-critical",
                namespace="priority-system",
            ),
            pod(
                "replica",
                cpu="400m",
                priority=2_000_000_000,
                class_name="system-cluster-critical",
                namespace="priority-system",
            ),
            pod("app", cpu="300m", priority=None),
            rejected("crit", priority=2_000_001_000),
        ],
        BASE,
        Hints(),
        [("report", "crit", "PreemptionFailed")],
    ),
    (
        "pods critical for the sidecar's threshold are never victims, even of lower priority",
        [pod("c", cpu="1", priority=2000), rejected("x", priority=5000)],
        replace(BASE, critical_priority=1000),
        Hints(),
        [("report", "x", "PreemptionFailed")],
    ),
    (
        "a pod of equal priority is never a victim",
        [pod("peer", cpu="1", priority=1000), rejected("x", priority=1000)],
        replace(BASE, critical_priority=1000),
        Hints(),
        [("report", "x", "PreemptionFailed")],
    ),
    (
        "the failure is reported once",
        [pod("static", cpu="1", mirror=True), rejected("crit")],
        BASE,
        Hints(
            reported=frozenset(
                {
                    "error/uid-crit/preemption: error finding a set of pods to preempt: "
                    "no set of running pods found to reclaim resources: [(res: cpu, q: 500), ]"
                }
            )
        ),
        [],
    ),
    (
        "it fits already (room was freed meanwhile): done, nothing evicted",
        [pod("a", cpu="200m"), rejected("crit")],
        BASE,
        Hints(),
        [("write", "crit", "done", 0, [])],
    ),
    (
        "fits and --recreate-rejected: the controller-owned rejected pod is deleted",
        [pod("a", cpu="200m"), rejected("crit", controller=True)],
        replace(BASE, recreate_rejected=True),
        Hints(),
        [("write", "crit", "done", 0, []), ("recreate", "crit")],
    ),
    (
        "--recreate-rejected leaves a pod without a controller alone",
        [pod("a", cpu="200m"), rejected("crit")],
        replace(BASE, recreate_rejected=True),
        Hints(),
        [("write", "crit", "done", 0, [])],
    ),
    (
        "dry run: reports, writes and evicts nothing",
        [pod("low", cpu="600m"), rejected("crit")],
        replace(BASE, dry_run=True),
        Hints(),
        [("dry-run", "crit", ["low"])],
    ),
    (
        "dry run reports once",
        [pod("low", cpu="600m"), rejected("crit")],
        replace(BASE, dry_run=True),
        Hints(reported=frozenset({"dry-run/uid-crit/uid-low"})),
        [],
    ),
    (
        "the eviction budget caps evictions; the record still names every victim",
        [pod("a", cpu="300m"), pod("b", cpu="300m", priority=5), rejected("crit", cpu="900m")],
        BASE,
        Hints(eviction_budget=1),
        [
            ("write", "crit", "preempting", 1, ["a", "b"]),
            ("announce", "crit", ["a", "b"], "cpu"),
            ("evict", "crit", "a", "cpu"),
        ],
    ),
    (
        "record preempting, victim still running: evict it (again), choose nobody new",
        [
            pod("a", cpu="600m"),
            pod("b", cpu="100m"),
            rejected("crit", record=rec.Record(rec.PREEMPTING, 1, "cpu", (v("a"),))),
        ],
        BASE,
        Hints(),
        [("evict", "crit", "a", "cpu")],
    ),
    (
        "dry run never evicts, even for a record a real run left",
        [pod("a", cpu="600m"), rejected("crit", record=rec.Record(rec.PREEMPTING, 1, "cpu", (v("a"),)))],
        replace(BASE, dry_run=True),
        Hints(),
        [],
    ),
    (
        "record preempting, victim backing off after a refusal: wait",
        [pod("a", cpu="600m"), rejected("crit", record=rec.Record(rec.PREEMPTING, 1, "cpu", (v("a"),)))],
        BASE,
        Hints(now=10.0, blocked_until={"uid-a": 12.0}),
        [],
    ),
    (
        "record preempting, backoff over: retry",
        [pod("a", cpu="600m"), rejected("crit", record=rec.Record(rec.PREEMPTING, 1, "cpu", (v("a"),)))],
        BASE,
        Hints(now=13.0, blocked_until={"uid-a": 12.0}),
        [("evict", "crit", "a", "cpu")],
    ),
    (
        "record preempting, victim terminating: wait for it, evict nothing",
        [
            pod("a", cpu="600m", deleting=True),
            pod("b", cpu="600m"),
            rejected("crit", record=rec.Record(rec.PREEMPTING, 1, "cpu", (v("a"),))),
        ],
        BASE,
        Hints(),
        [],
    ),
    (
        "record preempting, victim accepted for eviction but not yet shown terminating: wait",
        [pod("a", cpu="600m"), rejected("crit", record=rec.Record(rec.PREEMPTING, 1, "cpu", (v("a"),)))],
        BASE,
        Hints(evicting=frozenset({"uid-a"})),
        [],
    ),
    (
        "record preempting, victims gone and room made: done",
        [pod("b", cpu="100m"), rejected("crit", record=rec.Record(rec.PREEMPTING, 1, "cpu", (v("a"),)))],
        BASE,
        Hints(),
        [("write", "crit", "done", 1, ["a"])],
    ),
    (
        "record preempting, victim terminated (phase Failed, nothing running) counts as gone",
        [
            pod("a", cpu="600m", phase="Failed", running=False),
            rejected("crit", record=rec.Record(rec.PREEMPTING, 1, "cpu", (v("a"),))),
        ],
        BASE,
        Hints(),
        [("write", "crit", "done", 1, ["a"])],
    ),
    (
        "record preempting, victims gone but a new pod took the room: a second round",
        [pod("new", cpu="900m"), rejected("crit", record=rec.Record(rec.PREEMPTING, 1, "cpu", (v("a"),)))],
        BASE,
        Hints(),
        preempt("crit", ["new"], rnd=2),
    ),
    (
        "after max rounds: abandoned, reported",
        [pod("new", cpu="900m"), rejected("crit", record=rec.Record(rec.PREEMPTING, 3, "cpu", (v("a"),)))],
        BASE,
        Hints(),
        [("write", "crit", "abandoned", 3, ["a"]), ("report", "crit", "PreemptionFailed")],
    ),
    (
        "record done: nothing more",
        [pod("low", cpu="600m"), rejected("crit", record=rec.Record(rec.DONE, 1, "cpu", (v("a"),)))],
        BASE,
        Hints(),
        [],
    ),
    (
        "two rejected pods never share a victim",
        [
            pod("a", cpu="400m"),
            pod("b", cpu="400m"),
            rejected("first", cpu="300m", created="2026-01-01T00:00:01Z"),
            rejected("second", cpu="300m", created="2026-01-01T00:00:02Z"),
        ],
        BASE,
        Hints(),
        # equal pods: the module's upstream tie-break (the last one scanned) gives "b" to the first
        [*preempt("first", ["b"]), *preempt("second", ["a"])],
    ),
    (
        "a victim of another pod's open preemption is not chosen again",
        [
            pod("a", cpu="600m"),
            pod("b", cpu="400m"),
            rejected("first", cpu="300m", record=rec.Record(rec.PREEMPTING, 1, "cpu", (v("a"),))),
            rejected("second", cpu="300m"),
        ],
        BASE,
        Hints(),
        [("evict", "first", "a", "cpu"), *preempt("second", ["b"])],
    ),
    # A ReplicaSet replaces a pod the kubelet rejected at once, with another pod bound to the same node
    # (seen with the real kubelet, tests/e2e/test_kubelet_sidecar.py): one demand, never room made twice.
    (
        "the controller's pending replacement on the node is the same demand: not counted on top",
        [
            pod("low", cpu="300m"),
            pod("mid", cpu="300m", priority=100),
            rejected("crit", controller=True),
            pod("crit-2", cpu="500m", priority=2_000_000_000, phase="Pending", controller=True),
        ],
        BASE,
        Hints(),
        preempt("crit", ["low"]),
    ),
    (
        "a rejected pod whose controller already runs a pod on the node waits: the demand is met",
        [
            pod("low", cpu="600m"),
            rejected("crit", controller=True),
            pod("crit-2", cpu="300m", priority=2_000_000_000, controller=True),
        ],
        BASE,
        Hints(),
        [],
    ),
    (
        "two rejected siblings, no record yet: the older preempts, the newer waits in the same pass",
        [
            pod("low", cpu="400m"),
            pod("low-2", cpu="400m", priority=1),
            rejected("crit", controller=True),
            rejected("crit-2", controller=True),
        ],
        BASE,
        Hints(),
        preempt("crit", ["low"]),
    ),
    (
        "two rejected bare pods are each served (no controller: no siblings)",
        [pod("low", cpu="300m"), pod("low-2", cpu="300m", priority=1), rejected("a"), rejected("b")],
        BASE,
        Hints(),
        [*preempt("a", ["low"]), *preempt("b", ["low-2"])],
    ),
    (
        "a pod of the same controller running on another node does not supersede the rejection",
        [
            pod("low", cpu="600m"),
            rejected("crit", controller=True),
            pod("crit-2", cpu="500m", controller=True, node_name="node-b"),
        ],
        BASE,
        Hints(),
        preempt("crit", ["low"]),
    ),
    (
        "a rejected sibling waits while its controller's preemption for an older sibling is open",
        [
            pod("low", cpu="600m"),
            pod("low-2", cpu="600m", priority=1),
            rejected("crit", controller=True, record=rec.Record(rec.PREEMPTING, 1, "cpu", (v("low"),))),
            rejected("crit-2", controller=True),
        ],
        BASE,
        Hints(),
        [("evict", "crit", "low", "cpu")],
    ),
    (
        "once the room is made the older sibling is done and recreated (the newer follows next pass)",
        [
            pod("low", cpu="600m", phase="Failed", running=False),
            rejected("crit", controller=True, record=rec.Record(rec.PREEMPTING, 1, "cpu", (v("low"),))),
            rejected("crit-2", controller=True),
        ],
        replace(BASE, recreate_rejected=True),
        Hints(),
        [
            ("write", "crit", "done", 1, ["low"]),
            ("recreate", "crit"),
        ],
    ),
    (
        "an unreadable record is reported and nothing is evicted",
        [pod("low", cpu="600m"), rejected("crit")],
        BASE,
        Hints(),
        "BAD",
    ),
]


@pytest.mark.parametrize(
    ("pods", "settings", "hints", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_decide(pods, settings, hints, expected):
    if expected == "BAD":
        pods[-1]["metadata"]["annotations"][rec.ANNOTATION] = "{not json"
        expected = [("report", "crit", "PreemptionSkipped")]
    assert summary(decide(node(), pods, settings, hints)) == expected


def test_unknown_node_decides_nothing():
    assert decide(None, [pod("low", cpu="600m"), rejected("crit")], BASE, Hints()) == []


def test_victims_are_the_view_objects():
    """Evict actions carry the victim as the API served it (uid, resourceVersion) for the eviction call."""
    low = pod("low", cpu="600m")
    low["metadata"]["resourceVersion"] = "42"
    actions = decide(node(), [low, rejected("crit")], BASE, Hints())
    evicts = [a for a in actions if isinstance(a, Evict)]
    assert [a.victim for a in evicts] == [low]


def test_module_choosing_a_protected_pod_is_refused():
    """Defence in depth: a victim list containing a protected pod is never acted on."""

    class Admission:
        admit, fits, error, requirements, reasons = True, False, None, [("cpu", 500)], []
        victims = [{"uid": "uid-static", "namespace": "default", "name": "static"}]

    actions = decide(
        node(),
        [pod("static", cpu="1", mirror=True), rejected("crit")],
        BASE,
        Hints(),
        admit=lambda *a, **k: Admission(),
    )
    assert summary(actions) == [("report", "crit", "PreemptionFailed")]
    assert "static" in actions[0].message


def test_invalid_node_is_reported_not_raised():
    bad = node(cpu="lots")
    actions = decide(bad, [pod("low", cpu="600m"), rejected("crit")], BASE, Hints())
    assert summary(actions) == [("report", "crit", "PreemptionFailed")]
    assert "lots" in actions[0].message


@pytest.mark.parametrize("version", KUBELET_VERSIONS)
def test_statuses_as_each_kubelet_version_writes_them(version):
    """A rejection written as the real kubelet of `version` writes it triggers the preemption; a pod the
    kubelet preempted itself holds nothing and is no rejection (1.24 Failed/Preempting, 1.33 Succeeded
    with DisruptionTarget), whatever its priority."""
    pods = [
        pod("low", cpu="600m"),
        preempted("gone", cpu="900m", priority=2_000_000_000, kubelet_version=version),
        rejected("crit", kubelet_version=version),
    ]
    assert summary(decide(node(), pods, BASE, Hints())) == preempt("crit", ["low"])
    assert summary(decide(node(), pods[:2], BASE, Hints())) == []
