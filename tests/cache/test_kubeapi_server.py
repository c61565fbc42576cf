"""The test API server keeps the API server's contract: resourceVersions, selectors, watch, 410, faults."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import kubernetes.client
import pytest
import requests

from testkit.kubeapi import ApiError, KubeAPIServer, Request
from testkit.wait import wait_for
from tests.cache.conftest import pc

PCS = "/apis/scheduling.k8s.io/v1/priorityclasses"
PODS = "/api/v1/pods"


@pytest.fixture
def api() -> Iterator[KubeAPIServer]:
    """The test server itself, over plain HTTP: its own behaviour does not depend on a client's transport."""
    with KubeAPIServer(bookmark_interval=0.2) as server:
        yield server


def pod(
    name: str,
    node: str = "",
    phase: str = "Running",
    namespace: str = "default",
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {"nodeName": node, "containers": [{"name": "c"}]},
        "status": {"phase": phase},
    }


def get(api: KubeAPIServer, path: str, **params: Any) -> requests.Response:
    return requests.get(api.url + path, params=params, timeout=5)


@contextmanager
def watch(api: KubeAPIServer, path: str, **params: Any) -> Iterator[Iterator[dict[str, Any]]]:
    """A watch stream as decoded events; a read that waits more than 3 s fails the test."""
    params = {"watch": "1", **params}
    with requests.get(api.url + path, params=params, stream=True, timeout=(3, 3)) as response:
        assert response.status_code == 200, response.text
        yield (json.loads(line) for line in response.iter_lines() if line)


def names(items: list[dict[str, Any]]) -> list[str]:
    return [item["metadata"]["name"] for item in items]


# -- LIST, GET and resourceVersion -------------------------------------------------------------------------
def test_starts_with_the_system_priority_classes_like_the_real_api_server(api: KubeAPIServer) -> None:
    body = get(api, PCS).json()
    assert body["kind"] == "PriorityClassList"
    assert {i["metadata"]["name"]: i["value"] for i in body["items"]} == {
        "system-cluster-critical": 2000000000,
        "system-node-critical": 2000001000,
    }
    assert all(i["preemptionPolicy"] == "PreemptLowerPriority" for i in body["items"])


def test_namespaces_carry_their_name_label_like_the_real_api_server(api: KubeAPIServer) -> None:
    created = api.create("namespaces", {"metadata": {"name": "team", "labels": {"tier": "gold"}}})
    assert created["metadata"]["labels"] == {"tier": "gold", "kubernetes.io/metadata.name": "team"}
    created["metadata"]["labels"] = {"kubernetes.io/metadata.name": "other"}
    updated = api.update("namespaces", created)
    assert updated["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team"}


def test_every_write_bumps_one_global_resource_version(api: KubeAPIServer) -> None:
    before = int(get(api, PCS).json()["metadata"]["resourceVersion"])
    created = api.create("priorityclasses", pc("a", 1))
    api.create("pods", pod("p"))
    updated = api.update("priorityclasses", {**created, "description": "x"})
    assert int(created["metadata"]["resourceVersion"]) == before + 1
    assert int(updated["metadata"]["resourceVersion"]) == before + 3
    listed = get(api, PCS).json()
    assert listed["metadata"]["resourceVersion"] == str(before + 3)
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]


def test_put_with_a_stale_resource_version_is_a_conflict(api: KubeAPIServer) -> None:
    created = api.create("priorityclasses", pc("a", 1))
    api.update("priorityclasses", {**created, "description": "first"})
    answer = requests.put(f"{api.url}{PCS}/a", json={**created, "description": "second"}, timeout=5)
    assert answer.status_code == 409
    assert answer.json()["reason"] == "Conflict"


def test_errors_are_status_objects(api: KubeAPIServer) -> None:
    missing = get(api, PCS + "/nope")
    assert missing.status_code == 404
    assert missing.json()["reason"] == "NotFound"
    assert missing.json()["message"] == 'priorityclasses.scheduling.k8s.io "nope" not found'
    api.create("priorityclasses", pc("a", 1))
    dup = requests.post(api.url + PCS, json=pc("a", 2), timeout=5)
    assert (dup.status_code, dup.json()["reason"]) == (409, "AlreadyExists")
    assert get(api, "/api/v1/nothings").status_code == 404


def test_the_real_client_reads_and_writes(api: KubeAPIServer) -> None:
    client = api.api_client()
    core = kubernetes.client.CoreV1Api(client)
    core.create_namespaced_pod("team", pod("web", namespace="team"))
    core.patch_namespaced_pod("web", "team", {"metadata": {"labels": {"app": "web"}}})
    assert core.read_namespaced_pod("web", "team").metadata.labels == {"app": "web"}
    core.delete_namespaced_pod("web", "team")
    assert api.get("pods", "web", "team") is None
    client.close()


# -- selectors ---------------------------------------------------------------------------------------------
FIELD_SELECTORS = [
    ("spec.nodeName=n1", ["a", "b"]),
    ("spec.nodeName==n1", ["a", "b"]),
    ("spec.nodeName!=n1", ["c", "d"]),
    ("spec.nodeName=", ["d"]),
    ("spec.nodeName=n1,status.phase=Running", ["a"]),
    ("spec.nodeName=n1,status.phase!=Running", ["b"]),
    ("metadata.name=c", ["c"]),
    ("metadata.namespace=other", ["d"]),
    ("status.phase!=Succeeded,status.phase!=Failed", ["a", "c", "d"]),
]


@pytest.mark.parametrize(("selector", "expected"), FIELD_SELECTORS)
def test_field_selectors_on_list(api: KubeAPIServer, selector: str, expected: list[str]) -> None:
    api.create("pods", pod("a", "n1"))
    api.create("pods", pod("b", "n1", "Succeeded"))
    api.create("pods", pod("c", "n2"))
    api.create("pods", pod("d", "", "Pending", namespace="other"))
    assert sorted(names(get(api, PODS, fieldSelector=selector).json()["items"])) == expected


LABEL_SELECTORS = [
    ("app=web", ["a", "b"]),
    ("app==web,tier=front", ["a"]),
    ("app!=web", ["c", "d"]),
    ("tier", ["a", "c"]),
    ("!tier", ["b", "d"]),
    ("tier in (front,back)", ["a", "c"]),
    ("tier notin (front)", ["b", "c", "d"]),
]


@pytest.mark.parametrize(("selector", "expected"), LABEL_SELECTORS)
def test_label_selectors_on_list(api: KubeAPIServer, selector: str, expected: list[str]) -> None:
    api.create("pods", pod("a", labels={"app": "web", "tier": "front"}))
    api.create("pods", pod("b", labels={"app": "web"}))
    api.create("pods", pod("c", labels={"app": "db", "tier": "back"}))
    api.create("pods", pod("d"))
    assert sorted(names(get(api, PODS, labelSelector=selector).json()["items"])) == expected


def test_a_malformed_selector_is_a_bad_request(api: KubeAPIServer) -> None:
    answer = get(api, PODS, fieldSelector="spec.nodeName")
    assert answer.status_code == 400
    assert "spec.nodeName" in answer.json()["message"]


# -- WATCH -------------------------------------------------------------------------------------------------
def test_watch_replays_history_after_the_resource_version(api: KubeAPIServer) -> None:
    start = get(api, PCS).json()["metadata"]["resourceVersion"]
    a = api.create("priorityclasses", pc("a", 1))
    api.update("priorityclasses", {**a, "description": "changed"})
    api.delete("priorityclasses", "a")
    with watch(api, PCS, resourceVersion=start) as events:
        seen = [
            (e["type"], e["object"]["metadata"]["name"], e["object"].get("description"))
            for e in (next(events) for _ in range(3))
        ]
    assert seen == [("ADDED", "a", None), ("MODIFIED", "a", "changed"), ("DELETED", "a", "changed")]


def test_watch_without_resource_version_starts_with_the_current_state(api: KubeAPIServer) -> None:
    with watch(api, PCS, resourceVersion="0") as events:
        first = [next(events) for _ in range(2)]
        api.create("priorityclasses", pc("late", 5))
        later = next(events)
    assert {(e["type"], e["object"]["metadata"]["name"]) for e in first} == {
        ("ADDED", "system-cluster-critical"),
        ("ADDED", "system-node-critical"),
    }
    assert (later["type"], later["object"]["metadata"]["name"]) == ("ADDED", "late")


def test_watch_sends_bookmarks_with_the_current_resource_version(api: KubeAPIServer) -> None:
    start = get(api, PCS).json()["metadata"]["resourceVersion"]
    api.create("pods", pod("other-resource"))  # moves the global revision, not this collection
    with watch(api, PCS, resourceVersion=start, allowWatchBookmarks="true") as events:
        event = next(events)
    assert event["type"] == "BOOKMARK"
    assert event["object"]["kind"] == "PriorityClass"
    assert int(event["object"]["metadata"]["resourceVersion"]) == int(start) + 1


def test_watch_without_bookmarks_sends_none(api: KubeAPIServer) -> None:
    start = get(api, PCS).json()["metadata"]["resourceVersion"]
    with watch(api, PCS, resourceVersion=start, timeoutSeconds="1") as events:
        assert list(events) == []  # the stream ends cleanly at timeoutSeconds, with no bookmark


def test_watch_ends_cleanly_after_timeout_seconds(api: KubeAPIServer) -> None:
    start = get(api, PCS).json()["metadata"]["resourceVersion"]
    with watch(api, PCS, resourceVersion=start, timeoutSeconds="1", allowWatchBookmarks="1") as events:
        assert {e["type"] for e in events} <= {"BOOKMARK"}
    wait_for(lambda: api.open_watches == 0)


def test_watch_from_a_compacted_version_gets_an_error_event_with_410(api: KubeAPIServer) -> None:
    start = get(api, PCS).json()["metadata"]["resourceVersion"]
    api.create("priorityclasses", pc("a", 1))
    api.compact()
    with watch(api, PCS, resourceVersion=start) as events:
        event = next(events)
        assert list(events) == []  # and the stream ends
    assert event["type"] == "ERROR"
    assert event["object"]["code"] == 410
    assert event["object"]["reason"] == "Expired"
    assert event["object"]["message"].startswith(f"too old resource version: {start} (")


def test_watch_from_the_compaction_point_is_fine(api: KubeAPIServer) -> None:
    head = api.compact()
    with watch(api, PCS, resourceVersion=str(head)) as events:
        api.create("priorityclasses", pc("a", 1))
        assert next(events)["type"] == "ADDED"


def test_gone_as_http_answers_410() -> None:
    with KubeAPIServer(gone_as_http=True) as api:
        api.create("priorityclasses", pc("a", 1))
        api.compact()
        answer = get(api, PCS, watch="1", resourceVersion="1")
        assert answer.status_code == 410
        assert answer.json()["reason"] == "Expired"


def test_watch_field_selector_turns_entering_into_added_and_leaving_into_deleted(api: KubeAPIServer) -> None:
    """k8s.io/apiserver cacher: the selector is applied to both the old and the new object."""
    p = api.create("pods", pod("p", "n2"))
    start = p["metadata"]["resourceVersion"]
    with watch(api, PODS, resourceVersion=start, fieldSelector="spec.nodeName=n1") as events:
        moved = api.update("pods", {**p, "spec": {**p["spec"], "nodeName": "n1"}})
        relabel = api.update("pods", {**moved, "metadata": {**moved["metadata"], "labels": {"x": "y"}}})
        left = api.update("pods", {**relabel, "spec": {**relabel["spec"], "nodeName": "n3"}})
        api.update("pods", {**left, "metadata": {**left["metadata"], "labels": {"x": "z"}}})  # not seen
        api.create("pods", pod("q", "n1"))
        seen = [next(events) for _ in range(4)]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in seen] == [
        ("ADDED", "p"),
        ("MODIFIED", "p"),
        ("DELETED", "p"),
        ("ADDED", "q"),
    ]
    deleted = seen[2]["object"]
    assert deleted["spec"]["nodeName"] == "n1"  # the last content that matched...
    assert (
        deleted["metadata"]["resourceVersion"] == left["metadata"]["resourceVersion"]
    )  # ...at the event's rv


def test_namespaced_watch_sees_only_its_namespace(api: KubeAPIServer) -> None:
    start = get(api, PODS).json()["metadata"]["resourceVersion"]
    api.create("pods", pod("x", namespace="other"))
    api.create("pods", pod("y", namespace="mine"))
    with watch(api, "/api/v1/namespaces/mine/pods", resourceVersion=start) as events:
        assert next(events)["object"]["metadata"]["name"] == "y"


# -- deletion ----------------------------------------------------------------------------------------------
def test_finalizers_hold_a_deleted_object_until_they_are_removed(api: KubeAPIServer) -> None:
    api.create("pods", {**pod("f"), "metadata": {"name": "f", "finalizers": ["x/y"]}})
    marked = api.delete("pods", "f", "default")
    assert marked["metadata"]["deletionTimestamp"]
    assert api.get("pods", "f", "default") is not None
    api.update("pods", {**marked, "metadata": {**marked["metadata"], "finalizers": []}})
    assert api.get("pods", "f", "default") is None


def test_graceful_pods_wait_for_a_zero_grace_delete() -> None:
    with KubeAPIServer(graceful_pods=True) as api:
        api.create("pods", pod("g", "n1"))
        marked = api.delete("pods", "g", "default")
        assert marked["metadata"]["deletionGracePeriodSeconds"] == 30
        assert api.get("pods", "g", "default") is not None
        api.delete("pods", "g", "default", grace_period=0)
        assert api.get("pods", "g", "default") is None
        api.create("pods", pod("unbound"))
        api.delete("pods", "unbound", "default")
        assert api.get("pods", "unbound", "default") is None


def test_delete_preconditions(api: KubeAPIServer) -> None:
    api.create("priorityclasses", pc("a", 1))
    answer = requests.delete(f"{api.url}{PCS}/a", json={"preconditions": {"uid": "other"}}, timeout=5)
    assert answer.status_code == 409
    assert api.get("priorityclasses", "a") is not None


# -- faults and hooks --------------------------------------------------------------------------------------
def test_a_hung_up_request_is_recorded_and_gets_no_answer(api: KubeAPIServer) -> None:
    api.hang_up_next(1)
    with pytest.raises(requests.ConnectionError):
        get(api, "/api/v1/pods")
    assert get(api, "/api/v1/pods").status_code == 200  # only the next one
    assert [r.path for r in api.requests] == ["/api/v1/pods"] * 2


def test_close_idle_connections_spares_open_watches(api: KubeAPIServer) -> None:
    with requests.Session() as idle, requests.Session() as watching:
        assert idle.get(f"{api.url}/api/v1/pods", timeout=5).status_code == 200
        with watching.get(f"{api.url}/api/v1/pods?watch=1", stream=True, timeout=5):
            wait_for(lambda: api.open_watches == 1)
            assert api.close_idle_connections() == 1
            assert api.open_watches == 1
            assert idle.get(f"{api.url}/api/v1/pods", timeout=5).status_code == 200  # on a new connection
    assert api.connections_accepted == 3


def test_fail_next_fails_exactly_n_requests(api: KubeAPIServer) -> None:
    api.fail_next(2, 503)
    assert [get(api, PCS).status_code for _ in range(3)] == [503, 503, 200]
    assert [r.status for r in api.requests[-3:]] == [503, 503, 200]


def test_faults_can_target_some_requests_only(api: KubeAPIServer) -> None:
    with api.failing(410, match=lambda record: record.watch):
        assert get(api, PCS).status_code == 200
        gone = get(api, PCS, watch="1")
        assert (gone.status_code, gone.json()["reason"]) == (410, "Expired")
    assert get(api, PCS, watch="1", timeoutSeconds="1").status_code == 200


def test_drop_watches_breaks_the_stream(api: KubeAPIServer) -> None:
    start = get(api, PCS).json()["metadata"]["resourceVersion"]
    with (
        pytest.raises(requests.exceptions.ChunkedEncodingError),
        watch(api, PCS, resourceVersion=start) as events,
    ):
        api.create("priorityclasses", pc("a", 1))
        next(events)
        wait_for(lambda: api.open_watches == 1)
        assert api.drop_watches() == 1
        next(events)


def test_expire_watches_ends_open_streams_with_410(api: KubeAPIServer) -> None:
    start = get(api, PCS).json()["metadata"]["resourceVersion"]
    with watch(api, PCS, resourceVersion=start) as events:
        api.create("priorityclasses", pc("a", 1))
        next(events)
        api.expire_watches()
        event = next(events)
        assert list(events) == []
    assert (event["type"], event["object"]["code"]) == ("ERROR", 410)


def test_stall_holds_answers_until_release(api: KubeAPIServer) -> None:
    api.stall()
    with pytest.raises(requests.exceptions.ReadTimeout):
        requests.get(api.url + PCS, timeout=(2, 0.3))
    api.release()
    assert get(api, PCS).status_code == 200


def test_bearer_token_is_required_when_configured(tmp_path: Any) -> None:
    with KubeAPIServer(token="s3cret") as api:
        assert get(api, PCS).status_code == 401
        scheduling = kubernetes.client.SchedulingV1Api(api.api_client())
        assert len(scheduling.list_priority_class().items) == 2
        assert "s3cret" in (tmp_path / "kc").read_text() if api.kubeconfig(tmp_path / "kc") else False


def test_subresource_handlers_are_registered_per_resource_and_method(api: KubeAPIServer) -> None:
    def evict(request: Request) -> tuple[int, Any]:
        if request.body.get("kind") != "Eviction":
            raise ApiError(400, "BadRequest", "not an Eviction")
        request.server.delete("pods", request.name, request.namespace)
        return 201, {"kind": "Status", "apiVersion": "v1", "status": "Success"}

    api.register_subresource("pods", "eviction", "POST", evict)
    api.create("pods", pod("victim", "n1"))
    url = f"{api.url}/api/v1/namespaces/default/pods/victim/eviction"
    assert requests.post(url, json={"kind": "Other"}, timeout=5).status_code == 400
    assert requests.post(url, json={"kind": "Eviction"}, timeout=5).status_code == 201
    assert api.get("pods", "victim", "default") is None
    assert requests.get(url, timeout=5).status_code == 404  # GET is not registered
