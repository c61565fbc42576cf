"""A preemption carried out while the API misbehaves: watches drop and expire, the Eviction API answers
429 (a PodDisruptionBudget, or throttling) and 500. Whatever the mix, exactly the victims the kubelet's
rules choose are evicted, each exactly once, and nothing else is touched.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from testkit.wait import wait_for
from tests.sidecar.fixtures import node, pod, record_of, rejected
from webhook.preemption.node.admission import admit_to_node
from webhook.sidecar import record as rec

pytestmark = pytest.mark.timeout(120)

# 2 CPUs, 1900m used: the critical pod (1300m) needs 1200m freed. The kubelet's rules pick the two
# lowest-QoS pods closest to that need: "guarded" (700m) and "flaky" (600m).
NODE_CPU = "2"
VICTIMS = ["guarded", "flaky"]
BYSTANDERS = ["small", "spare", "node-agent"]


def workload() -> list[dict]:
    return [
        pod("guarded", cpu="700m", labels={"app": "guarded"}),
        pod("flaky", cpu="600m"),
        pod("small", cpu="200m"),
        pod("spare", cpu="300m", priority=100),
        pod("node-agent", cpu="100m", priority=2_000_001_000),  # critical itself: never a victim
    ]


def critical() -> dict:
    """The rejected critical pod, stamped now: the sidecar leaves rejections older than 10 minutes alone, and
    a module-level pod would carry the time the suite was collected."""
    return rejected("crit", cpu="1300m")


@dataclass(frozen=True)
class Faults:
    server_errors: int = 0  # the next N eviction requests get 500
    throttled: int = 0  # then the next N get 429 without a budget cause (API throttling)
    pdb_refusals: int = 0  # "guarded" is behind a PDB allowing no disruption until N refusals were seen
    drop_watches: bool = False  # every watch cut every 50 ms during the preemption, and one 410
    restart: bool = False  # the sidecar is replaced by a fresh one after the first eviction


SCENARIOS = {
    "eviction 500s": Faults(server_errors=3),
    "eviction 429 throttling": Faults(throttled=2),
    "PDB 429 until the budget allows": Faults(pdb_refusals=2),
    "watches dropped and expired": Faults(drop_watches=True),
    "everything at once": Faults(server_errors=2, throttled=1, pdb_refusals=2, drop_watches=True),
    "everything at once, with a restart": Faults(
        server_errors=2, pdb_refusals=2, drop_watches=True, restart=True
    ),
}


@contextmanager
def dropping_watches(cluster, enabled: bool) -> Iterator[None]:
    """Cut every open watch every 50 ms in the background (a fault generator, not a synchronisation)."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(0.05):
            cluster.api.drop_watches()

    thread = threading.Thread(target=run, name="watch-dropper", daemon=True)
    if enabled:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        if enabled:
            thread.join(5)


def guard(cluster, allowed: int) -> dict:
    return cluster.api.create(
        "poddisruptionbudgets",
        {
            "metadata": {"name": "guard", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "guarded"}}, "minAvailable": 1},
            "status": {"disruptionsAllowed": allowed, "currentHealthy": 1, "desiredHealthy": 1},
        },
        "default",
    )


def statuses(cluster, name: str) -> list[int]:
    return [a.status for a in list(cluster.evictions.attempts) if a.name == name]


def deleting(cluster, name: str) -> bool:
    found = cluster.pod(name)
    return found is not None and bool(found["metadata"].get("deletionTimestamp"))


def test_the_scenario_victims_are_what_the_kubelet_rules_choose():
    admission = admit_to_node(critical(), node(cpu=NODE_CPU), workload())
    assert admission.admit and [v["name"] for v in admission.victims] == VICTIMS


@pytest.mark.parametrize("faults", SCENARIOS.values(), ids=SCENARIOS.keys())
def test_exactly_the_victims_are_evicted_once(cluster, sidecar, faults):
    cluster.api.update("nodes", {**cluster.api.get("nodes", "node-a"), **node(cpu=NODE_CPU)})
    for p in workload():
        cluster.add(p)
    if faults.pdb_refusals:
        guard(cluster, allowed=0)
    agent = sidecar()
    cluster.evictions.fail_next(faults.server_errors, 500)

    with dropping_watches(cluster, faults.drop_watches):
        cluster.add(critical())
        if faults.throttled:
            wait_for(lambda: len(cluster.evictions.attempts) >= faults.server_errors, what="500s served")
            cluster.evictions.fail_next(faults.throttled, 429)
        if faults.restart:
            wait_for(
                lambda: any(s == 201 for v in VICTIMS for s in statuses(cluster, v)), what="a first eviction"
            )
            agent.stop()
            agent = sidecar()
        if faults.pdb_refusals:
            wait_for(
                lambda: statuses(cluster, "guarded").count(429) >= faults.pdb_refusals,
                timeout=20,
                what="PDB refusals retried",
            )
            pdb = cluster.api.get("poddisruptionbudgets", "guard", "default")
            pdb["status"]["disruptionsAllowed"] = 1  # the disruption controller sees a replacement up
            cluster.api.update("poddisruptionbudgets", pdb, "default")
        wait_for(lambda: all(deleting(cluster, v) for v in VICTIMS), timeout=30, what="victims terminating")
        if faults.drop_watches:
            cluster.api.expire_watches()  # a 410 while the kubelet finishes the victims
        for victim in VICTIMS:
            cluster.finish(victim)
        wait_for(
            lambda: (record_of(cluster.pod("crit")) or {}).get("state") == rec.DONE,
            timeout=30,
            what="preemption done",
        )

    steps = agent.steps
    wait_for(lambda: agent.steps >= steps + 3, what="more sidecar passes after the preemption")
    evicted = Counter(cluster.evictions.evicted())
    assert evicted == Counter(f"default/{v}" for v in VICTIMS), evicted  # each victim once, nothing else
    assert {a.name for a in cluster.evictions.attempts} == set(VICTIMS)  # bystanders never even tried
    for bystander in BYSTANDERS:
        assert cluster.pod(bystander) is not None and not deleting(cluster, bystander)
    assert [v["name"] for v in record_of(cluster.pod("crit"))["victims"]] == VICTIMS
    failures = Counter(a.status for a in cluster.evictions.attempts if a.status != 201)
    # the faults really were met (and each failure was retried, not abandoned)
    assert failures[500] == faults.server_errors
    assert failures[429] >= max(faults.throttled, faults.pdb_refusals)  # an injected 429 may hit "guarded"
    assert statuses(cluster, "guarded").count(429) >= faults.pdb_refusals
    assert set(failures) <= {500, 429}
