"""The review endpoint the serving worker calls on its event loop: the same answer as in a thread, or none
at all (the review is handed to a thread) when answering would hold the loop up or wait."""

from __future__ import annotations

import json
from typing import Any

import pytest
from prometheus_client import REGISTRY

from testkit.reviews import PC_GVR, eviction_review, pod, priority_class, review
from webhook.policy.class_model import ClassSet, StaticClassStore
from webhook.review import Stage
from webhook.server.endpoint import ON_LOOP_MAX_BYTES, ReviewEndpoint

JSON = "application/json"


pytestmark = pytest.mark.usefixtures("single_process_metrics")


def answered(stage: str) -> float:
    """Reviews counted for one webhook, whatever their labels."""
    total = 0.0
    for metric in REGISTRY.collect():
        for sample in metric.samples:
            if (
                sample.name == "priority_webhook_admission_requests_total"
                and sample.labels["webhook"] == stage
            ):
                total += sample.value
    return total


def body(document: Any) -> bytes:
    return json.dumps(document).encode()


BODIES = {
    "named class": body(review(pod(class_name="high"))),
    "global default": body(review(pod(class_name=None))),
    "unknown class": body(review(pod(class_name="no-such-class"))),
    "priority set by the client": body(review(pod(class_name="high", priority=7))),
    "PriorityClass": body(review(priority_class("extra", 10, globalDefault=True), gvr=PC_GVR)),
    "not JSON": b"{",
    "not a review": body({"kind": "Pod"}),
    "empty": b"",
}


@pytest.mark.parametrize("stage", [Stage.MUTATE, Stage.VALIDATE])
@pytest.mark.parametrize("name", list(BODIES))
@pytest.mark.parametrize("content_type", [JSON, "text/plain", None])
def test_on_the_loop_the_answer_and_its_count_are_the_threads(
    store: Any, stage: Stage, name: str, content_type: str | None
) -> None:
    endpoint = ReviewEndpoint(stage, store)
    data = BODIES[name]
    before = answered(stage.value)
    on_loop = endpoint.answer_on_loop(content_type, data)
    in_thread = endpoint.answer(content_type, lambda: data)
    assert on_loop == in_thread
    assert answered(stage.value) - before == 2


def test_a_review_over_the_size_bound_is_handed_to_a_thread_uncounted(store: Any) -> None:
    endpoint = ReviewEndpoint(Stage.MUTATE, store)
    obj = pod(class_name="high")
    obj["metadata"]["annotations"] = {"filler": "x" * ON_LOOP_MAX_BYTES}
    data = body(review(obj))
    before = answered("mutate")
    assert endpoint.answer_on_loop(JSON, data) is None
    assert answered("mutate") == before
    status, answer = endpoint.answer(JSON, lambda: data)
    assert status == 200 and json.loads(answer)["response"]["allowed"] is True
    assert answered("mutate") - before == 1


class UnsyncedStore:
    """A cluster store before its first LIST; records every wait (none may happen on the loop)."""

    def __init__(self) -> None:
        self.waited: list[float] = []

    def snapshot(self) -> ClassSet:
        return StaticClassStore().snapshot()

    def ready(self) -> bool:
        return False

    def wait_ready(self, timeout: float) -> bool:
        self.waited.append(timeout)
        return False


def test_a_store_not_synced_yet_is_never_waited_for_on_the_loop() -> None:
    store = UnsyncedStore()
    endpoint = ReviewEndpoint(Stage.MUTATE, store, ready_wait=0.01)
    data = body(review(pod()))
    assert endpoint.answer_on_loop(JSON, data) is None
    assert store.waited == []
    status, answer = endpoint.answer(JSON, lambda: data)
    assert status == 503 and "not synced" in json.loads(answer)["error"]
    assert store.waited == [0.01]


class RecordingPodNodes:
    def __init__(self, node: str) -> None:
        self.node = node
        self.asked: list[tuple[str, str]] = []

    def node_of(self, namespace: str, name: str) -> str | None:
        self.asked.append((namespace, name))
        return self.node


def test_an_eviction_that_needs_its_pods_node_is_looked_up_in_a_thread_only(store: Any) -> None:
    pods = RecordingPodNodes("node-a")
    endpoint = ReviewEndpoint(Stage.VALIDATE, store, pods=pods)
    data = body(eviction_review("node-a"))
    before = answered("validate")
    assert endpoint.answer_on_loop(JSON, data) is None
    assert pods.asked == [] and answered("validate") == before
    status, answer = endpoint.answer(JSON, lambda: data)
    assert status == 200 and json.loads(answer)["response"]["allowed"] is True
    assert pods.asked == [("ns", "web")] and answered("validate") - before == 1


def test_an_eviction_without_a_cluster_is_answered_on_the_loop(store: Any) -> None:
    """Nothing to look up (no cluster: the webhook cannot know the pod's node), so nothing to wait for."""
    endpoint = ReviewEndpoint(Stage.VALIDATE, store)
    answer = endpoint.answer_on_loop(JSON, body(eviction_review("node-a")))
    assert answer is not None and answer[0] == 200
    assert json.loads(answer[1])["response"]["allowed"] is False
