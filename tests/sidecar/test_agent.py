"""The sidecar against the test API server: real client over HTTP, real watches, real evictions."""

from __future__ import annotations

import json

from testkit.wait import wait_for
from tests.sidecar.conftest import sample
from tests.sidecar.fixtures import pod, record_of, rejected
from webhook.sidecar import record as rec

PREEMPTED = "Preempted in order to admit critical pod"


def state_of(cluster, name: str) -> str | None:
    found = cluster.pod(name)
    record = record_of(found) if found else None
    return record["state"] if record else None


def deleting(cluster, name: str) -> bool:
    found = cluster.pod(name)
    return found is not None and bool(found["metadata"].get("deletionTimestamp"))


def test_rejection_evicts_exactly_the_expected_victims_and_records_events(cluster, sidecar):
    agent = sidecar()
    for p in (
        pod("low", cpu="400m", priority=0),
        pod("mid", cpu="300m", priority=100),
        pod("high", cpu="300m", priority=1000),
    ):
        cluster.add(p)
    before = sample("priority_webhook_sidecar_preemptions_total", resource="cpu")
    cluster.add(rejected("crit", cpu="600m"))

    wait_for(lambda: state_of(cluster, "crit") == rec.PREEMPTING, what="preemption recorded")
    wait_for(lambda: deleting(cluster, "low") and deleting(cluster, "mid"), what="victims terminating")
    assert cluster.evictions.evicted() == ["default/low", "default/mid"]
    assert not deleting(cluster, "high")
    record = record_of(cluster.pod("crit"))
    assert [v["name"] for v in record["victims"]] == ["low", "mid"]
    assert record["resource"] == "cpu" and record["round"] == 1
    for victim in ("low", "mid"):
        (event,) = cluster.events(victim, "Preempting")
        assert (event["type"], event["message"]) == ("Warning", PREEMPTED)
        assert event["source"] == {"component": "priority-webhook-sidecar", "host": "node-a"}
        assert event["involvedObject"]["uid"] == cluster.pod(victim)["metadata"]["uid"]
    (announce,) = cluster.events("crit", "Preempting")
    assert "default/low" in announce["message"] and "default/mid" in announce["message"]
    wait_for(
        lambda: sample("priority_webhook_sidecar_preemptions_total", resource="cpu") == before + 2,
        what="preemptions counted",
    )

    # the kubelet finishes the victims: room is made, the preemption is done, nothing else is evicted
    cluster.finish("low")
    cluster.finish("mid")
    wait_for(lambda: state_of(cluster, "crit") == rec.DONE, what="preemption done")
    steps = agent.steps
    wait_for(lambda: agent.steps >= steps + 3, what="more sidecar passes")
    assert cluster.evictions.evicted() == ["default/low", "default/mid"]
    assert cluster.pod("crit") is not None  # no --recreate-rejected


def test_pdb_refusal_is_retried_with_backoff_and_reported(cluster, sidecar):
    cluster.api.create(
        "poddisruptionbudgets",
        {
            "metadata": {"name": "guard", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 1},
            "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1},
        },
        "default",
    )
    cluster.add(pod("web", cpu="800m", labels={"app": "web"}))
    failures = sample("priority_webhook_sidecar_eviction_failures_total", reason="TooManyRequests")
    sidecar()
    cluster.add(rejected("crit"))

    wait_for(lambda: len(cluster.evictions.evicted(429)) >= 3, what="refused evictions retried")
    assert not deleting(cluster, "web")
    attempt = next(a for a in cluster.evictions.attempts if a.status == 429)
    assert attempt.body["kind"] == "Eviction" and attempt.body["apiVersion"] == "policy/v1"
    wait_for(
        lambda: (
            sample("priority_webhook_sidecar_eviction_failures_total", reason="TooManyRequests")
            >= failures + 3
        ),
        what="refusals counted",
    )
    (reported,) = cluster.events("crit", "EvictionFailed")
    assert "default/web" in reported["message"] and "disruption budget" in reported["message"]
    assert len(cluster.events("web", "Preempting")) == 1  # one event per victim, not one per retry

    # the budget allows a disruption again: the next retry succeeds and consumes it
    pdb = cluster.api.get("poddisruptionbudgets", "guard", "default")
    pdb["status"]["disruptionsAllowed"] = 1
    cluster.api.update("poddisruptionbudgets", pdb, "default")
    wait_for(lambda: deleting(cluster, "web"), what="eviction once the PDB allows it")
    assert cluster.evictions.evicted() == ["default/web"]
    assert cluster.api.get("poddisruptionbudgets", "guard", "default")["status"]["disruptionsAllowed"] == 0


def test_ignore_pdb_deletes_with_the_victims_own_grace_period(cluster, sidecar):
    cluster.api.create(
        "poddisruptionbudgets",
        {
            "metadata": {"name": "guard", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
            "status": {"disruptionsAllowed": 0},
        },
        "default",
    )
    cluster.add(pod("web", cpu="800m", labels={"app": "web"}, grace=7))
    sidecar(ignore_pdb=True)
    cluster.add(rejected("crit"))

    wait_for(lambda: deleting(cluster, "web"), what="victim deleted")
    assert cluster.pod("web")["metadata"]["deletionGracePeriodSeconds"] == 7
    assert cluster.evictions.attempts == []  # no Eviction API call at all
    assert len(cluster.events("web", "Preempting")) == 1


def test_dry_run_evicts_nothing_and_reports(cluster, sidecar):
    cluster.add(pod("low", cpu="800m"))
    before = sample("priority_webhook_sidecar_dry_run_victims_total", resource="cpu")
    agent = sidecar(dry_run=True)
    cluster.add(rejected("crit"))

    wait_for(lambda: cluster.events("crit", "PreemptionDryRun"), what="dry-run event")
    (event,) = cluster.events("crit", "PreemptionDryRun")
    assert "would preempt 1 pod(s)" in event["message"] and "default/low" in event["message"]
    assert sample("priority_webhook_sidecar_dry_run_victims_total", resource="cpu") == before + 1
    steps = agent.steps
    wait_for(lambda: agent.steps >= steps + 3, what="more sidecar passes")
    assert cluster.evictions.attempts == []
    assert not deleting(cluster, "low")
    assert record_of(cluster.pod("crit")) is None
    assert cluster.events("low") == []
    assert len(cluster.events("crit", "PreemptionDryRun")) == 1  # reported once


def test_terminating_pods_are_never_evicted_again(cluster, sidecar):
    cluster.add(pod("old", cpu="300m", priority=0))
    cluster.api.delete("pods", "old", "default")  # already shutting down (graceful): holds its cpu
    cluster.add(pod("next", cpu="700m", priority=10))
    agent = sidecar()
    cluster.add(rejected("crit", cpu="500m"))  # "old" leaving is not enough: "next" must go

    wait_for(lambda: deleting(cluster, "next"), what="the running pod evicted")
    steps = agent.steps
    wait_for(lambda: agent.steps >= steps + 5, what="more sidecar passes")
    assert cluster.evictions.evicted() == ["default/next"]  # never "old", and "next" only once
    assert [a.name for a in cluster.evictions.attempts] == ["next"]
    assert state_of(cluster, "crit") == rec.PREEMPTING  # waiting for "next" to terminate


def test_restart_mid_preemption_evicts_nothing_twice(cluster, sidecar):
    for name in ("a", "b", "c"):
        cluster.add(pod(name, cpu="300m"))
    first = sidecar(max_evictions_per_minute=1)
    cluster.add(rejected("crit", cpu="800m"))
    wait_for(lambda: len(cluster.evictions.evicted()) == 1, what="first eviction")
    chosen = [v["name"] for v in record_of(cluster.pod("crit"))["victims"]]
    assert len(chosen) == 3
    steps = first.steps
    wait_for(lambda: first.steps >= steps + 3, what="more sidecar passes")
    assert len(cluster.evictions.attempts) == 1  # the rate limit held the others back
    first.stop()

    # a fresh process: no memory, a full budget; it reads the record and only finishes the job
    sidecar()
    wait_for(lambda: len(cluster.evictions.evicted()) == 3, what="remaining evictions")
    assert sorted(a.name for a in cluster.evictions.attempts) == sorted(chosen)
    assert [v["name"] for v in record_of(cluster.pod("crit"))["victims"]] == chosen


def test_other_nodes_and_non_critical_rejections_are_ignored(cluster, sidecar):
    cluster.add(pod("mine", cpu="900m"))
    cluster.add(pod("theirs", cpu="900m", node_name="node-b"))
    cluster.add(rejected("crit-b", node_name="node-b"))
    cluster.add(rejected("ordinary", priority=1000))
    cluster.add(rejected("affinity", reason="NodeAffinity"))
    agent = sidecar()
    wait_for(lambda: agent.steps >= 5, what="sidecar passes")
    assert cluster.evictions.attempts == []
    for name in ("crit-b", "ordinary", "affinity"):
        assert record_of(cluster.pod(name)) is None
        assert cluster.events(name) == []


def test_api_dropping_watches_during_a_preemption(cluster, sidecar):
    cluster.add(pod("a", cpu="500m"))
    cluster.add(pod("b", cpu="500m", priority=5))
    sidecar()
    cluster.add(rejected("crit", cpu="900m"))
    wait_for(lambda: deleting(cluster, "a") and deleting(cluster, "b"), what="victims terminating")

    # the watches break and the history is compacted while the kubelet finishes the victims
    cluster.api.drop_watches()
    cluster.finish("a")
    cluster.api.expire_watches()
    cluster.finish("b")
    wait_for(lambda: state_of(cluster, "crit") == rec.DONE, what="done after re-listing")
    assert sorted(cluster.evictions.evicted()) == ["default/a", "default/b"]
    assert len(cluster.evictions.attempts) == 2


def test_recreate_rejected_deletes_the_controller_owned_pod(cluster, sidecar):
    cluster.add(pod("low", cpu="800m"))
    sidecar(recreate_rejected=True)
    cluster.add(rejected("crit", controller=True))
    wait_for(lambda: deleting(cluster, "low"), what="victim evicted")
    cluster.finish("low")
    wait_for(lambda: cluster.pod("crit") is None, what="rejected pod deleted for its controller")
    assert cluster.events("crit", "Recreating")


def test_eviction_server_errors_are_counted_and_retried(cluster, sidecar):
    cluster.add(pod("low", cpu="800m"))
    cluster.evictions.fail_next(2, 500)
    before = sample("priority_webhook_sidecar_eviction_failures_total", reason="InternalError")
    sidecar()
    cluster.add(rejected("crit"))
    wait_for(lambda: deleting(cluster, "low"), what="eviction after two failures")
    assert [a.status for a in cluster.evictions.attempts] == [500, 500, 201]
    wait_for(
        lambda: (
            sample("priority_webhook_sidecar_eviction_failures_total", reason="InternalError") == before + 2
        ),
        what="failures counted",
    )


def test_pod_state_metric(cluster, sidecar):
    cluster.add(pod("run", cpu="100m"))
    cluster.add(pod("wait", cpu="100m", phase="Pending", running=False))
    cluster.add(pod("static", cpu="100m", mirror=True))
    cluster.add(rejected("gone", priority=0))
    sidecar()

    def counts():
        return {
            (s, st): sample("priority_webhook_sidecar_pods", state=s, static=st)
            for s in ("desired", "active", "terminating", "terminated")
            for st in ("true", "false")
        }

    wait_for(lambda: counts()[("active", "true")] == 1, what="metric updated")
    got = counts()
    assert got[("active", "false")] == 1 and got[("desired", "false")] == 1
    assert got[("terminated", "false")] == 1 and got[("terminating", "false")] == 0


def test_record_written_on_a_stale_view_is_refused(cluster, sidecar):
    """The record write carries a resourceVersion test: a pod changed since the view is not written."""
    from webhook.sidecar.actions import Settings
    from webhook.sidecar.agent import Sidecar

    crit = cluster.add(rejected("crit"))
    agent = Sidecar(cluster.api.service_account(), Settings(node_name="node-a"))
    stale = json.loads(json.dumps(crit))
    crit["metadata"]["labels"]["touched"] = "yes"
    cluster.api.update("pods", crit, "default")
    assert not agent.executor.write_record(stale, rec.Record(rec.DONE))
    assert record_of(cluster.pod("crit")) is None
    fresh = cluster.pod("crit")
    assert agent.executor.write_record(fresh, rec.Record(rec.DONE))
    assert record_of(cluster.pod("crit"))["state"] == rec.DONE


def test_forbidden_record_write_evicts_nothing_and_says_so_once(cluster, sidecar):
    """Without RBAC patch on pods the record cannot be written, so nothing may be evicted."""
    cluster.add(pod("low", cpu="800m"))
    cluster.api.fail_next(1 << 30, 403, match=lambda request: request.method == "PATCH")
    agent = sidecar()
    cluster.add(rejected("crit"))
    wait_for(lambda: cluster.events("crit", "PreemptionFailed"), what="forbidden reported")
    steps = agent.steps
    wait_for(lambda: agent.steps >= steps + 3, what="more sidecar passes")
    assert cluster.evictions.attempts == []
    (event,) = cluster.events("crit", "PreemptionFailed")
    assert "may not patch pods" in event["message"]


def test_replaced_rejected_pod_does_not_start_a_second_preemption(cluster, sidecar):
    """A DaemonSet deletes its failed pod and makes a new one, which the kubelet rejects again while the
    first preemption's victims are still terminating: the room is on its way, so nothing more is evicted."""
    cluster.add(pod("a", cpu="500m"))
    cluster.add(pod("b", cpu="500m", priority=5))
    agent = sidecar()
    cluster.add(rejected("first", cpu="900m", controller=True))
    wait_for(lambda: deleting(cluster, "a") and deleting(cluster, "b"), what="victims terminating")
    cluster.api.delete("pods", "first", "default")  # the controller replaces its failed pod
    cluster.add(rejected("second", cpu="900m", controller=True))
    steps = agent.steps
    wait_for(lambda: agent.steps >= steps + 5, what="more sidecar passes")
    assert sorted(cluster.evictions.evicted()) == ["default/a", "default/b"]
    assert record_of(cluster.pod("second")) is None  # waiting, not preempting
    cluster.finish("a")
    cluster.finish("b")
    wait_for(lambda: state_of(cluster, "second") == rec.DONE, what="room made for the replacement")
    assert len(cluster.evictions.attempts) == 2


def test_memory_of_departed_pods_is_dropped():
    """What the process remembers about pods (backoff, reports, events sent) is bounded by the node's pods."""
    from webhook.sidecar.memory import EVICTING_TTL, Memory

    memory = Memory()
    memory.blocked = {"here": (1.0, 1), "gone": (1.0, 1)}
    memory.victim_evented = {"here", "gone"}
    memory.reported = {"k1": "here", "k2": "gone"}
    memory.written = {"gone": {}}
    memory.evicting = {"here": 0.0, "fresh": 100.0}
    memory.forget_gone({"here", "fresh"}, now=100.0)
    assert set(memory.blocked) == {"here"} and memory.victim_evented == {"here"}
    assert memory.reported == {"k1": "here"} and memory.written == {}
    assert set(memory.evicting) == {"here", "fresh"}
    memory.forget_gone({"here", "fresh"}, now=EVICTING_TTL + 1)
    assert set(memory.evicting) == {"fresh"}  # accepted long ago, never shown terminating: look again


def test_lists_its_node_and_pods_from_the_watch_cache(cluster, sidecar):
    """A DaemonSet of agents must not make etcd scan every pod of the cluster on each start: the LISTs ask
    for resourceVersion "0" (served from the API server's watch cache), as the kubelet's do."""
    sidecar()
    paths = ("/api/v1/nodes", "/api/v1/pods")
    wait_for(lambda: all(cluster.api.list_count(path) for path in paths), what="both LISTs made")
    lists = [r for r in cluster.api.requests if r.path in paths and not r.watch]
    assert {(r.path, r.query.get("resourceVersion")) for r in lists} == {(p, "0") for p in paths}
