"""Eviction, delete and event calls through the real client against the test API server's subresource."""

from __future__ import annotations

import pytest

from testkit.kubeapi.eviction import MULTIPLE_PDBS_MESSAGE, PDB_MESSAGE
from tests.sidecar.fixtures import pod
from webhook.kube import eviction
from webhook.kube.events import EventRecorder, event_body


def pdb(name: str, allowed: int, labels: dict[str, str] | None = None) -> dict:
    selector = {"matchLabels": labels} if labels is not None else {}
    return {
        "metadata": {"name": name},
        "spec": {"selector": selector},
        "status": {"disruptionsAllowed": allowed, "currentHealthy": 2, "desiredHealthy": 2},
    }


@pytest.fixture
def client(cluster):
    return cluster.api.service_account()


def test_eviction_created_deletes_gracefully(cluster, client):
    victim = cluster.add(pod("web", cpu="100m", grace=12))
    outcome = eviction.evict(client, "default", "web", victim["metadata"]["uid"])
    assert (outcome.ok, outcome.status, outcome.reason) == (True, 201, "Evicted")
    found = cluster.pod("web")
    assert found["metadata"]["deletionTimestamp"] and found["metadata"]["deletionGracePeriodSeconds"] == 12
    (attempt,) = cluster.evictions.attempts
    assert attempt.body["deleteOptions"]["preconditions"]["uid"] == victim["metadata"]["uid"]


def test_eviction_refused_by_pdb_is_429_with_upstream_message(cluster, client):
    cluster.api.create("poddisruptionbudgets", pdb("guard", 0, {"app": "web"}), "default")
    victim = cluster.add(pod("web", cpu="100m", labels={"app": "web"}))
    outcome = eviction.evict(client, "default", "web", victim["metadata"]["uid"])
    assert (outcome.ok, outcome.status, outcome.reason) == (False, 429, "TooManyRequests")
    assert outcome.blocked_by_pdb and not outcome.gone
    assert outcome.message == PDB_MESSAGE
    assert not cluster.pod("web")["metadata"].get("deletionTimestamp")


def test_eviction_consumes_the_budget(cluster, client):
    cluster.api.create("poddisruptionbudgets", pdb("guard", 1, {"app": "web"}), "default")
    first = cluster.add(pod("web-1", cpu="100m", labels={"app": "web"}))
    second = cluster.add(pod("web-2", cpu="100m", labels={"app": "web"}))
    assert eviction.evict(client, "default", "web-1", first["metadata"]["uid"]).ok
    status = cluster.api.get("poddisruptionbudgets", "guard", "default")["status"]
    assert status["disruptionsAllowed"] == 0 and "web-1" in status["disruptedPods"]
    assert eviction.evict(client, "default", "web-2", second["metadata"]["uid"]).status == 429


def test_pdb_of_other_pods_or_namespaces_does_not_apply(cluster, client):
    cluster.api.create("poddisruptionbudgets", pdb("other", 0, {"app": "db"}), "default")
    cluster.api.create("poddisruptionbudgets", pdb("elsewhere", 0, {}), "kube-system")
    victim = cluster.add(pod("web", cpu="100m", labels={"app": "web"}))
    assert eviction.evict(client, "default", "web", victim["metadata"]["uid"]).ok


def test_pending_or_terminating_pods_ignore_the_budget(cluster, client):
    cluster.api.create("poddisruptionbudgets", pdb("all", 0, {}), "default")  # {} selects every pod
    pending = cluster.add(pod("pending", phase="Pending", running=False))
    assert eviction.evict(client, "default", "pending", pending["metadata"]["uid"]).ok
    terminating = cluster.add(pod("terminating"))
    cluster.api.delete("pods", "terminating", "default")  # graceful: marked, still there
    assert eviction.evict(client, "default", "terminating", terminating["metadata"]["uid"]).ok
    running = cluster.add(pod("running"))
    assert eviction.evict(client, "default", "running", running["metadata"]["uid"]).status == 429


def test_more_than_one_pdb_is_an_error(cluster, client):
    cluster.api.create("poddisruptionbudgets", pdb("one", 1, {"app": "web"}), "default")
    cluster.api.create("poddisruptionbudgets", pdb("two", 1, {}), "default")
    victim = cluster.add(pod("web", labels={"app": "web"}))
    outcome = eviction.evict(client, "default", "web", victim["metadata"]["uid"])
    assert (outcome.status, outcome.message) == (500, MULTIPLE_PDBS_MESSAGE)


def test_missing_pod_and_changed_uid_count_as_gone(cluster, client):
    missing = eviction.evict(client, "default", "nobody", "uid-x")
    assert (missing.status, missing.reason, missing.gone) == (404, "NotFound", True)
    cluster.add(pod("web"))
    replaced = eviction.evict(client, "default", "web", "uid-of-an-older-pod")
    assert (replaced.status, replaced.reason, replaced.gone) == (409, "Conflict", True)
    assert not cluster.pod("web")["metadata"].get("deletionTimestamp")


def test_injected_server_error(cluster, client):
    victim = cluster.add(pod("web"))
    cluster.evictions.fail_next(1, 500)
    outcome = eviction.evict(client, "default", "web", victim["metadata"]["uid"])
    assert (outcome.ok, outcome.status, outcome.reason) == (False, 500, "InternalError")
    assert eviction.evict(client, "default", "web", victim["metadata"]["uid"]).ok


def test_unreachable_api_is_an_outcome_not_an_exception(cluster):
    client = cluster.api.service_account("https://127.0.0.1:9")  # nothing listens
    outcome = eviction.evict(client, "default", "web", "u", timeout=2)
    assert (outcome.ok, outcome.status, outcome.reason) == (False, 0, "Unreachable")


def test_delete_uses_the_given_grace_period_and_skips_pdbs(cluster, client):
    cluster.api.create("poddisruptionbudgets", pdb("all", 0, {}), "default")
    victim = cluster.add(pod("web", grace=9))
    outcome = eviction.delete(
        client,
        "default",
        "web",
        victim["metadata"]["uid"],
        grace_period_seconds=eviction.own_grace_period(victim),
    )
    assert (outcome.ok, outcome.reason) == (True, "Deleted")
    assert cluster.pod("web")["metadata"]["deletionGracePeriodSeconds"] == 9
    assert cluster.evictions.attempts == []


def test_events_look_like_the_kubelets(cluster, client):
    victim = cluster.add(pod("web"))
    recorder = EventRecorder(client, component="priority-webhook-sidecar", host="node-a")
    assert recorder.record(victim, "Warning", "Preempting", "Preempted in order to admit critical pod")
    (event,) = cluster.events("web")
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": "default",
        "name": "web",
        "uid": victim["metadata"]["uid"],
        "resourceVersion": victim["metadata"]["resourceVersion"],
    }
    assert (event["type"], event["reason"], event["count"]) == ("Warning", "Preempting", 1)
    assert event["metadata"]["name"].startswith("web.")


def test_event_failure_is_logged_not_raised(cluster, client, caplog):
    recorder = EventRecorder(client, component="c", host="h")
    cluster.api.fail_next(1, 500)
    assert recorder.record(pod("web"), "Normal", "R", "m") is False
    assert "could not record event R on default/web" in caplog.text


def test_long_event_messages_are_truncated():
    body = event_body(pod("web"), "Normal", "R", "x" * 5000, component="c", host="h")
    assert len(body["message"]) == 1024 and body["message"].endswith("...")


def test_a_keyed_event_is_recorded_once_even_by_another_process(cluster, client):
    """The name comes from the key, so a restarted sidecar's second create is refused (409) by the API."""
    victim = cluster.add(pod("web"))
    first = EventRecorder(client, component="priority-webhook-sidecar", host="node-a")
    second = EventRecorder(client, component="priority-webhook-sidecar", host="node-a")
    assert first.record(victim, "Warning", "Preempting", "m", key="preempting/uid-web")
    assert second.record(victim, "Warning", "Preempting", "m", key="preempting/uid-web")
    assert second.record(
        victim, "Warning", "EvictionFailed", "m", key="evict-failed/x/uid-web/TooManyRequests"
    )
    assert sorted(e["reason"] for e in cluster.events("web")) == ["EvictionFailed", "Preempting"]


def test_event_names_stay_valid_for_long_pod_names():
    body = event_body(pod("w" * 253), "Normal", "R", "m", component="c", host="h", key="k")
    assert len(body["metadata"]["name"]) == 253
