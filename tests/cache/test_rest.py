"""The REST layer against the test API server: quoted paths, JSON in and out, typed errors, streams, on
both transports (tests/cache/conftest.py)."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import pytest

from testkit.kubeapi import KubeAPIServer
from testkit.wait import wait_for
from webhook import json_codec
from webhook.kube import rest


def pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }


@pytest.mark.parametrize(
    ("path", "want"),
    [
        (rest.collection(rest.CORE_V1, "pods"), "/api/v1/pods"),
        (rest.collection(rest.CORE_V1, "pods", "ns"), "/api/v1/namespaces/ns/pods"),
        (rest.pod_path("ns", "web"), "/api/v1/namespaces/ns/pods/web"),
        (rest.pod_path("ns", "web", "eviction"), "/api/v1/namespaces/ns/pods/web/eviction"),
        (rest.pod_path("a/b", "c?d"), "/api/v1/namespaces/a%2Fb/pods/c%3Fd"),
        (rest.pod_path("ns", ".."), "/api/v1/namespaces/ns/pods/.."),
        (
            rest.named(rest.collection(rest.SCHEDULING_V1, "priorityclasses"), "high #1"),
            "/apis/scheduling.k8s.io/v1/priorityclasses/high%20%231",
        ),
    ],
)
def test_paths_quote_every_name(path: str, want: str) -> None:
    assert path == want


def test_json_in_and_out(api: KubeAPIServer, client: rest.Client) -> None:
    created = rest.call_json(client, "POST", rest.collection(rest.CORE_V1, "pods", "ns"), pod("web"))
    assert created["metadata"]["uid"]
    read = rest.call_json(client, "GET", rest.pod_path("ns", "web"))
    assert read["metadata"]["uid"] == created["metadata"]["uid"]
    listed = rest.call_json(
        client, "GET", rest.collection(rest.CORE_V1, "pods"), query={"fieldSelector": "metadata.name=web"}
    )
    assert [p["metadata"]["name"] for p in listed["items"]] == ["web"]
    assert api.requests[-1].query == {"fieldSelector": "metadata.name=web"}


def test_a_name_never_becomes_path_syntax(api: KubeAPIServer, client: rest.Client) -> None:
    api.create("pods", pod("web"), namespace="ns")
    with pytest.raises(rest.ApiError) as caught:
        rest.call_json(client, "GET", rest.pod_path("ns", "web/status"))
    assert caught.value.status == 404
    assert api.requests[-1].path == "/api/v1/namespaces/ns/pods/web%2Fstatus"


@pytest.mark.parametrize(
    ("status", "reason", "http_reason"),
    [
        (403, "Forbidden", "Forbidden"),
        (429, "TooManyRequests", "Too Many Requests"),
        (410, "Expired", "Gone"),
        (503, "InternalError", "Service Unavailable"),
    ],
)
def test_a_refusal_is_an_api_error_with_the_status_fields(
    api: KubeAPIServer, client: rest.Client, status: int, reason: str, http_reason: str
) -> None:
    api.fail_next(1, status)
    with pytest.raises(rest.ApiError) as caught:
        rest.call_json(client, "GET", rest.collection(rest.CORE_V1, "pods"))
    err = caught.value
    assert (err.status, err.reason, err.http_reason) == (status, reason, http_reason)
    assert err.message == f"injected fault: HTTP {status}"
    assert str(err) == f"HTTP {status}: injected fault: HTTP {status}"


def test_missing_object_is_not_found(api: KubeAPIServer, client: rest.Client) -> None:
    with pytest.raises(rest.ApiError) as caught:
        rest.call_json(client, "GET", rest.pod_path("ns", "nobody"))
    assert (caught.value.status, caught.value.reason) == (404, "NotFound")
    assert caught.value.summary == 'pods "nobody" not found'


@pytest.mark.parametrize(
    ("status", "raw", "reason", "message"),
    [
        (500, b"", "InternalError", ""),
        (418, b"", "HTTP418", ""),
        (502, b"<html>bad gateway</html>", "InternalError", "<html>bad gateway</html>"),
        (409, b'{"kind":"Status","reason":"AlreadyExists","message":"x"}', "AlreadyExists", "x"),
    ],
)
def test_answers_without_a_status_still_give_a_reason(
    status: int, raw: bytes, reason: str, message: str
) -> None:
    err = rest.ApiError.from_answer(status, "Reason Phrase", raw)
    assert (err.reason, err.message) == (reason, message)
    assert err.summary == (message or "Reason Phrase")


def nowhere(api: KubeAPIServer, transport: str) -> rest.Client:
    """A client of the transport under test for the discard port, where nothing listens."""
    if transport == "in-cluster":
        return api.service_account("https://127.0.0.1:9")
    client = api.api_client()
    client.configuration.host = "http://127.0.0.1:9"
    return client


def test_no_server_is_unreachable(api: KubeAPIServer, transport: str) -> None:
    client = nowhere(api, transport)
    with pytest.raises(rest.Unreachable) as caught:
        rest.call_json(client, "GET", rest.collection(rest.CORE_V1, "pods"), timeout=2)
    assert caught.value.kind and not isinstance(caught.value, rest.ReadTimeout)
    with pytest.raises(rest.Unreachable):
        rest.stream(client, "/api/v1/pods", {}, connect_timeout=2, read_timeout=2)


def test_a_silent_server_is_a_read_timeout_on_a_stream(api: KubeAPIServer, client: rest.Client) -> None:
    with api.stalled(), pytest.raises(rest.ReadTimeout):
        rest.stream(client, "/api/v1/pods", {}, connect_timeout=2, read_timeout=0.3)


def test_a_stream_gives_the_watch_events_line_by_line(api: KubeAPIServer, client: rest.Client) -> None:
    listed = rest.call_json(client, "GET", rest.collection(rest.CORE_V1, "pods"))
    version = listed["metadata"]["resourceVersion"]
    api.create("pods", pod("one"), namespace="ns")
    api.create("pods", pod("two"), namespace="ns")
    watch = rest.stream(
        client,
        rest.collection(rest.CORE_V1, "pods"),
        {"watch": "1", "resourceVersion": version, "timeoutSeconds": "1"},
        connect_timeout=2,
        read_timeout=5,
    )
    try:
        events = [json_codec.loads(line) for line in watch.lines()]
    finally:
        watch.release()
    added = [e["object"]["metadata"]["name"] for e in events if e["type"] == "ADDED"]
    assert added == ["one", "two"]


def test_a_refused_stream_is_an_api_error(api: KubeAPIServer, client: rest.Client) -> None:
    api.fail_next(1, 410)
    with pytest.raises(rest.ApiError) as caught:
        rest.stream(client, "/api/v1/pods", {"watch": "1"}, connect_timeout=2, read_timeout=2)
    assert (caught.value.status, caught.value.reason) == (410, "Expired")


# -- connections: kept alive, found closed, cut, never a request sent twice ----------------------------------
PODS = rest.collection(rest.CORE_V1, "pods")


def test_requests_share_one_kept_alive_connection(api: KubeAPIServer, client: rest.Client) -> None:
    for _ in range(5):
        rest.call_json(client, "GET", PODS)
    assert api.connections_accepted == 1


def test_a_kept_alive_connection_the_server_closed_while_idle_is_not_an_error(
    api: KubeAPIServer, client: rest.Client
) -> None:
    rest.call_json(client, "GET", PODS)
    assert api.close_idle_connections() == 1
    created = rest.call_json(client, "POST", rest.collection(rest.CORE_V1, "pods", "ns"), pod("after"))
    assert created["metadata"]["name"] == "after"
    assert [r.method for r in api.requests] == ["GET", "POST"]  # sent once, on a new connection
    assert api.connections_accepted == 2


def test_a_read_cut_as_it_arrives_on_a_kept_alive_connection_is_sent_again(
    api: KubeAPIServer, client: rest.Client
) -> None:
    rest.call_json(client, "GET", PODS)
    api.hang_up_next(1)  # the server closes the connection as the next request arrives
    assert rest.call_json(client, "GET", PODS)["items"] == []
    assert [r.method for r in api.requests] == ["GET", "GET", "GET"]


def test_an_eviction_the_server_may_have_received_is_never_sent_twice(
    api: KubeAPIServer, client: rest.Client
) -> None:
    api.create("pods", pod("victim"), namespace="ns")
    rest.call_json(client, "GET", PODS)  # a kept-alive connection to reuse
    api.hang_up_next(1)
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "victim", "namespace": "ns"},
    }
    with pytest.raises(rest.Broken):
        rest.call_json(client, "POST", rest.pod_path("ns", "victim", "eviction"), eviction)
    assert [r.method for r in api.requests] == ["GET", "POST"]
    assert api.get("pods", "victim", "ns") is not None


def test_a_watch_cut_mid_stream_is_broken(api: KubeAPIServer, client: rest.Client) -> None:
    watch = rest.stream(client, PODS, {"watch": "1"}, connect_timeout=2, read_timeout=5)
    try:
        wait_for(lambda: api.open_watches == 1)
        api.drop_watches()
        with pytest.raises(rest.Broken):
            list(watch.lines())
    finally:
        watch.release()
    assert rest.call_json(client, "GET", PODS)["items"] == []  # the pool goes on with a new connection


def test_shutdown_ends_a_read_waiting_on_another_thread(api: KubeAPIServer, client: rest.Client) -> None:
    watch = rest.stream(client, PODS, {"watch": "1"}, connect_timeout=2, read_timeout=60)
    ended = threading.Event()

    def read() -> None:
        with contextlib.suppress(rest.RestError):
            list(watch.lines())
        ended.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    wait_for(lambda: api.open_watches == 1)
    watch.shutdown()
    assert ended.wait(5), "the read went on after shutdown()"
    watch.release()
