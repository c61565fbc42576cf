"""End to end: allowed-namespaces rules served by `serve --kubeconfig` (real gunicorn, real TLS), with the
namespaces' labels from the test API server's Namespace list/watch.

Every change is made on the API server and observed only through reviews over HTTPS, within a deadline.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from testkit.kubeapi import KubeAPIServer
from testkit.reviews import PC_GVR, pod, priority_class, review
from testkit.server import WebhookServer
from testkit.wait import wait_for
from tests.cache.conftest import ready_webhook
from webhook.policy.namespace_access import ALLOWED_NAMESPACES, ENFORCEMENT

pytestmark = pytest.mark.timeout(120)
# How soon a label change must decide the next review: the watch event's way to the worker's cache.
RELABEL_DEADLINE = 5.0


def gated(name: str, value: int, selector: str, enforcement: str = "deny") -> dict[str, Any]:
    return priority_class(
        name,
        value,
        metadata={"name": name, "annotations": {ALLOWED_NAMESPACES: selector, ENFORCEMENT: enforcement}},
    )


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


VALUES = {"gold": 5000, "watched": 4000, "system-node-critical": 2000001000}


def pod_review(class_name: str, namespace_name: str) -> dict[str, Any]:
    """A pod CREATE as /validate gets it: mutated already (its priority set)."""
    obj = pod(
        name="p", class_name=class_name, priority=VALUES[class_name], preemptionPolicy="PreemptLowerPriority"
    )
    obj["metadata"]["namespace"] = namespace_name
    body = review(obj)
    body["request"]["namespace"] = namespace_name
    return body


def validate(server: WebhookServer, body: dict[str, Any]) -> dict[str, Any]:
    answer = server.review("/validate", body)
    assert answer.status_code == 200, answer.text
    response: dict[str, Any] = answer.json()["response"]
    return response


def relabel(api: KubeAPIServer, name: str, **labels: str) -> None:
    obj = api.get("namespaces", name)
    assert obj is not None
    obj["metadata"]["labels"] = labels
    api.update("namespaces", obj)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KubeAPIServer, WebhookServer]]:
    tmp_path = tmp_path_factory.mktemp("namespaces")
    with KubeAPIServer(bookmark_interval=0.2) as api:
        api.create("priorityclasses", gated("gold", 5000, "tier in (gold)"))
        api.create("priorityclasses", gated("watched", 4000, "tier=gold", "audit"))
        api.create("namespaces", namespace("team", tier="bronze"))
        with ready_webhook(api, tmp_path) as server:
            yield api, server


def test_a_relabelled_namespace_decides_reviews_within_seconds(
    cluster: tuple[KubeAPIServer, WebhookServer],
) -> None:
    """Pods are reviewed without pause while the namespace is relabelled: the decision follows the labels
    within the deadline, and never goes back."""
    api, server = cluster
    body = pod_review("gold", "team")
    assert validate(server, body)["allowed"] is False
    answers: list[tuple[float, bool]] = []
    stop = threading.Event()

    def review_loop() -> None:
        while not stop.is_set():
            answers.append((time.monotonic(), validate(server, body)["allowed"]))

    loop = threading.Thread(target=review_loop)
    loop.start()
    try:
        wait_for(lambda: len(answers) >= 5, what="reviews flowing")
        relabelled = time.monotonic()
        relabel(api, "team", tier="gold")
        wait_for(lambda: answers[-1][1], timeout=RELABEL_DEADLINE, what="allowed after the relabel")
        first_allowed = next(t for t, allowed in answers if t >= relabelled and allowed)
        count = len(answers)
        wait_for(lambda: len(answers) >= count + 20, what="more reviews")
        assert all(allowed for t, allowed in answers if t > first_allowed)

        relabelled = time.monotonic()
        relabel(api, "team", tier="bronze")
        wait_for(lambda: not answers[-1][1], timeout=RELABEL_DEADLINE, what="denied after relabelling back")
    finally:
        stop.set()
        loop.join(30)
    assert not loop.is_alive()


def test_the_refusal_names_class_namespace_and_selector(cluster: tuple[KubeAPIServer, WebhookServer]) -> None:
    api, server = cluster
    relabel(api, "team", tier="bronze")
    wait_for(lambda: not validate(server, pod_review("gold", "team"))["allowed"], what="bronze refused")
    status = validate(server, pod_review("gold", "team"))["status"]
    assert status["code"] == 403 and status["reason"] == "Forbidden"
    assert status["message"] == (
        'pods "p" is forbidden: PriorityClass gold may not be used in namespace team: '
        f'its labels do not match {ALLOWED_NAMESPACES}: "tier in (gold)"'
    )


def test_audit_admits_with_a_warning_and_counts(cluster: tuple[KubeAPIServer, WebhookServer]) -> None:
    api, server = cluster
    relabel(api, "team", tier="bronze")
    wait_for(lambda: not validate(server, pod_review("gold", "team"))["allowed"], what="bronze refused")
    response = validate(server, pod_review("watched", "team"))
    assert response["allowed"] is True
    assert response["warnings"] == [
        f"audit: PriorityClass watched may not be used in namespace team: its labels do not match "
        f'{ALLOWED_NAMESPACES}: "tier=gold"'
    ]
    metrics = server.session.get(server.url + "/metrics", timeout=5).text
    counted = {
        (m["cls"], m["result"]): float(m["n"])
        for m in re.finditer(
            r'priority_webhook_namespace_rule_total\{priority_class="(?P<cls>[^"]+)",'
            r'result="(?P<result>[^"]+)"\} (?P<n>\S+)',
            metrics,
        )
    }
    assert counted[("watched", "warned")] >= 1
    assert counted[("gold", "denied")] >= 1
    assert ("gold", "warned") not in counted


def test_a_namespace_created_just_before_its_pod(cluster: tuple[KubeAPIServer, WebhookServer]) -> None:
    """The pod's review may reach the webhook before the namespace reaches its cache: it waits for it."""
    api, server = cluster
    for i in range(5):
        api.create("namespaces", namespace(f"fresh-{i}", tier="gold"))
        assert validate(server, pod_review("gold", f"fresh-{i}"))["allowed"] is True


def test_an_unparsable_rule_is_refused_when_written(cluster: tuple[KubeAPIServer, WebhookServer]) -> None:
    _, server = cluster
    response = validate(server, review(gated("broken", 10, "tier in gold"), gvr=PC_GVR))
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert message.startswith(
        'PriorityClass.scheduling.k8s.io "broken" is invalid: '
        f'metadata.annotations[{ALLOWED_NAMESPACES}]: Invalid value: "tier in gold": '
    )
    assert "\n" not in message
    response = validate(server, review(gated("loose", 10, "tier=gold", "warn"), gvr=PC_GVR))
    assert response["allowed"] is False
    assert f"metadata.annotations[{ENFORCEMENT}]: Unsupported value" in response["status"]["message"]
