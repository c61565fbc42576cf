"""The cluster-backed class store: snapshots, the global default, readiness, the object cache."""

from __future__ import annotations

from typing import Any

import pytest

from testkit.kubeapi import KubeAPIServer
from testkit.wait import wait_for
from tests.cache.conftest import pc
from webhook.k8s import InvalidObject
from webhook.kube import ConfigError
from webhook.kube.cache import ObjectCache
from webhook.kube.class_store import read_fields
from webhook.kube.config import api_client
from webhook.policy.class_model import ClassSet, PriorityClass
from webhook.policy.namespace_access import ALLOWED_NAMESPACES, AUDIT, ENFORCEMENT


def test_serves_the_clusters_classes_including_the_system_ones(api: KubeAPIServer, class_store) -> None:
    api.create("priorityclasses", pc("high", 1000, preemptionPolicy="Never", description="d"))
    store = class_store()
    assert store.wait_ready(5)
    assert store.ready()
    classes = store.snapshot()
    assert sorted(classes) == ["high", "system-cluster-critical", "system-node-critical"]
    assert classes["high"] == PriorityClass("high", 1000, False, "Never", "d")
    assert classes["system-node-critical"].value == 2000001000


def test_without_system_classes_in_the_cluster_none_are_invented(new_api, connect) -> None:
    with new_api(system_priority_classes=False) as empty:
        from webhook.kube.class_store import ClusterClassStore

        store = ClusterClassStore(connect(empty), backoff_initial=0.02)
        store.start()
        try:
            assert store.wait_ready(5)
            assert len(store.snapshot()) == 0
        finally:
            store.stop()


def test_changes_swap_in_a_new_snapshot_and_old_ones_stay_intact(api: KubeAPIServer, class_store) -> None:
    store = class_store()
    assert store.wait_ready(5)
    before = store.snapshot()
    created = api.create("priorityclasses", pc("a", 10, description="one"))
    wait_for(lambda: "a" in store.snapshot())
    api.update("priorityclasses", {**created, "description": "two"})
    wait_for(lambda: store.snapshot()["a"].description == "two")
    api.delete("priorityclasses", "a")
    wait_for(lambda: "a" not in store.snapshot())
    assert "a" not in before
    assert isinstance(store.snapshot(), ClassSet)


@pytest.mark.parametrize(
    ("defaults", "expected"),
    [
        ([("default-a", 1000), ("default-b", 2000)], "default-a"),  # the upstream race: lower value wins
        ([("default-b", 2000), ("default-a", 1000)], "default-a"),  # whatever the creation order
        ([("zeta", 5), ("alpha", 5)], "alpha"),  # equal values: by name (our deterministic choice)
        ([("negative", -10), ("zero", 0)], "negative"),
    ],
)
def test_two_global_defaults_the_lower_value_wins(
    api: KubeAPIServer, class_store, defaults, expected
) -> None:
    store = class_store()
    assert store.wait_ready(5)
    for name, value in defaults:  # straight to storage: as if both creates raced past admission
        api.create("priorityclasses", pc(name, value, globalDefault=True))
    wait_for(lambda: all(name in store.snapshot() for name, _ in defaults))
    assert store.snapshot().default().name == expected


def test_deleting_the_winning_default_falls_back_to_the_other(api: KubeAPIServer, class_store) -> None:
    api.create("priorityclasses", pc("low", 1, globalDefault=True))
    api.create("priorityclasses", pc("high", 9, globalDefault=True))
    store = class_store()
    assert store.wait_ready(5)
    assert store.snapshot().default().name == "low"
    api.delete("priorityclasses", "low")
    wait_for(lambda: store.snapshot().default() is not None and store.snapshot().default().name == "high")


def test_not_ready_until_the_first_list_lands(api: KubeAPIServer, class_store) -> None:
    with api.failing(500):
        store = class_store()
        wait_for(lambda: api.list_count() >= 2, what="LIST retried")
        assert not store.ready()
        assert len(store.snapshot()) == 0
    wait_for(store.ready)
    assert "system-node-critical" in store.snapshot()


def test_an_unreadable_class_is_skipped_not_fatal(api: KubeAPIServer, class_store) -> None:
    api.create("priorityclasses", pc("broken", "not-a-number"))
    store = class_store()
    assert store.wait_ready(5)
    api.create("priorityclasses", pc("fine", 1))
    wait_for(lambda: "fine" in store.snapshot())
    assert "broken" not in store.snapshot()


def test_object_cache_lookups_and_resync_listener() -> None:
    cache = ObjectCache()
    events: list[tuple[str, str | None, str | None]] = []

    def name(obj):
        return obj and obj["metadata"]["name"]

    cache.add_listener(lambda ev, old, new: events.append((ev, name(old), name(new))))
    pod = {"metadata": {"name": "p", "namespace": "ns", "resourceVersion": "5"}}
    cache.replace([pod], "7")
    assert cache.get("ns", "p") is pod
    assert cache.get("", "p") is None
    assert cache.resource_version == "7"
    cache.apply("MODIFIED", {"metadata": {"name": "q", "namespace": "ns", "resourceVersion": "8"}})
    cache.apply("DELETED", {"metadata": {"name": "missing", "namespace": "ns"}})  # not there: no event
    cache.apply("DELETED", pod)
    assert events == [("RESYNC", None, None), ("ADDED", None, "q"), ("DELETED", "p", None)]
    assert [o["metadata"]["name"] for o in cache.list()] == ["q"]
    assert len(cache) == 1


def test_api_client_reads_a_kubeconfig(api: KubeAPIServer, tmp_path) -> None:
    client = api_client(api.kubeconfig(tmp_path / "kubeconfig"), False)
    assert client.configuration.host == api.url


@pytest.mark.parametrize(
    ("content", "in_cluster"),
    [(None, False), ("not: [valid", False), ("apiVersion: v1\nkind: Config\n", False), (None, True)],
    ids=["missing-file", "bad-yaml", "no-context", "not-in-a-pod"],
)
def test_api_client_errors_are_one_line_config_errors(tmp_path, monkeypatch, content, in_cluster) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    path = tmp_path / "kubeconfig"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError) as err:  # the command line reports it like bad input
        api_client(str(path), in_cluster)
    assert "\n" not in str(err.value)
    assert ("in-cluster" in str(err.value)) == in_cluster


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_each_snapshot_remembers_the_sets_it_replaced_for_a_while(api: KubeAPIServer, class_store) -> None:
    """What /validate checks a pod against: the current set and those replaced within history_seconds."""
    clock = FakeClock()
    store = class_store(history_seconds=60, clock=clock)
    assert store.wait_ready(5)
    assert store.snapshot().recent == ()  # the empty set before the first LIST was never served
    api.create("priorityclasses", pc("a", 10))
    wait_for(lambda: "a" in store.snapshot())
    clock.now += 30
    api.delete("priorityclasses", "a")
    api.create("priorityclasses", pc("a", 20, globalDefault=True))
    wait_for(lambda: store.snapshot().get("a") == PriorityClass("a", 20, True))
    # newest first: before the re-creation (no "a"), with a = 10, without "a" (the first LIST)
    recent = store.snapshot().recent
    assert [state.get("a") for state in recent] == [None, PriorityClass("a", 10), None]
    assert all(state.recent == () for state in recent)  # sets never chain
    clock.now += 31  # the first replacement is more than 60 s old: forgotten at the next read
    assert [state.get("a") for state in store.snapshot().recent] == [None, PriorityClass("a", 10)]
    clock.now += 30
    assert store.snapshot().recent == ()
    assert store.snapshot().default() == PriorityClass("a", 20, True)


MANAGED = [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:value": {}}}]
AS_READ_BACK = {
    "a class as the API server returns it": {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "tier-1", "uid": "u", "resourceVersion": "7", "managedFields": MANAGED},
        "value": 1000,
        "globalDefault": True,
        "preemptionPolicy": "Never",
        "description": "tier one",
    },
    "with a namespace rule": {
        "metadata": {
            "name": "ruled",
            "labels": {"team": "a"},
            "annotations": {ALLOWED_NAMESPACES: "team-a,team-b", ENFORCEMENT: AUDIT, "other": "x"},
        },
        "value": 5,
    },
    "defaults only": {"metadata": {"name": "bare"}},
    "a null policy": {"metadata": {"name": "n"}, "value": 1, "preemptionPolicy": None},
    "no metadata": {"value": 1},
    "metadata not an object": {"metadata": ["x"], "value": 1},
    "no name": {"metadata": {"annotations": {}}, "value": 1},
    "a value out of range": {"metadata": {"name": "big"}, "value": 2**31},
    "a bad policy": {"metadata": {"name": "p"}, "preemptionPolicy": "Sometimes"},
    "a bad description": {"metadata": {"name": "d"}, "description": 3},
    "a bad rule": {"metadata": {"name": "r", "annotations": {ENFORCEMENT: "maybe"}}},
}


@pytest.mark.parametrize("obj", AS_READ_BACK.values(), ids=AS_READ_BACK.keys())
def test_a_class_reads_the_same_from_the_fields_the_cache_keeps(obj: dict[str, Any]) -> None:
    def read(candidate: dict[str, Any]) -> PriorityClass | str:
        try:
            return PriorityClass.from_object(candidate)
        except InvalidObject as err:
            return f"invalid: {err}"

    slim = read_fields(obj)
    assert "managedFields" not in (slim.get("metadata") or {})
    assert read(slim) == read(obj)
