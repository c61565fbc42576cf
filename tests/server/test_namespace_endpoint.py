"""The review endpoint with a Namespace cache: a namespace the cache has not seen is never waited for on
the event loop (the review goes to a thread, which waits a moment for it), an unsynced cache keeps the
endpoint unready, and the rule's verdicts are counted by class."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest
from prometheus_client import REGISTRY

from testkit.reviews import pod, review
from webhook.policy.class_model import PriorityClass, StaticClassStore
from webhook.policy.namespace_access import ALLOWED_NAMESPACES, ENFORCEMENT
from webhook.review import Stage
from webhook.server.endpoint import NAMESPACE_WAIT, ReviewEndpoint

JSON = "application/json"
pytestmark = pytest.mark.usefixtures("single_process_metrics")


def klass(name: str, selector: str, enforcement: str = "deny") -> PriorityClass:
    annotations = {ALLOWED_NAMESPACES: selector, ENFORCEMENT: enforcement}
    return PriorityClass.from_object({"metadata": {"name": name, "annotations": annotations}, "value": 100})


STORE = StaticClassStore(
    [klass("gold", "tier=gold"), klass("watched", "tier=gold", "audit"), PriorityClass("free", 5)]
)


class Cache:
    """A NamespaceCache whose namespaces appear only once waited for (`late`), recording every call."""

    def __init__(
        self,
        known: Mapping[str, Mapping[str, str]],
        late: Mapping[str, Mapping[str, str]] | None = None,
        *,
        synced: bool = True,
    ) -> None:
        self.known, self.late, self.synced = dict(known), dict(late or {}), synced
        self.waits: list[tuple[str, float]] = []
        self.ready_waits: list[float] = []

    def labels_of(self, namespace: str) -> Mapping[str, str] | None:
        return self.known.get(namespace)

    def wait_for(self, namespace: str, timeout: float) -> Mapping[str, str] | None:
        self.waits.append((namespace, timeout))
        return self.late.get(namespace)

    def ready(self) -> bool:
        return self.synced

    def wait_ready(self, timeout: float) -> bool:
        self.ready_waits.append(timeout)
        return self.synced


def pod_body(class_name: str, namespace: str) -> bytes:
    obj = pod(
        name="p",
        class_name=class_name,
        priority=100 if class_name != "free" else 5,
        preemptionPolicy="PreemptLowerPriority",
    )
    obj["metadata"]["namespace"] = namespace
    sent = review(obj)
    sent["request"]["namespace"] = namespace
    return json.dumps(sent).encode()


def counted(class_name: str, result: str) -> float:
    value = REGISTRY.get_sample_value(
        "priority_webhook_namespace_rule_total", {"priority_class": class_name, "result": result}
    )
    return value or 0.0


def test_a_cached_namespace_is_decided_on_the_loop() -> None:
    cache = Cache({"team": {"tier": "gold"}, "other": {"tier": "bronze"}})
    endpoint = ReviewEndpoint(Stage.VALIDATE, STORE, namespaces=cache)
    answer = endpoint.answer_on_loop(JSON, pod_body("gold", "team"))
    assert answer is not None and json.loads(answer[1])["response"]["allowed"] is True
    denied_before = counted("gold", "denied")
    answer = endpoint.answer_on_loop(JSON, pod_body("gold", "other"))
    assert answer is not None and json.loads(answer[1])["response"]["allowed"] is False
    assert counted("gold", "denied") - denied_before == 1
    assert cache.waits == []


def test_a_namespace_not_cached_yet_goes_to_a_thread_which_waits_for_it() -> None:
    cache = Cache({}, late={"new": {"tier": "gold"}})
    endpoint = ReviewEndpoint(Stage.VALIDATE, STORE, namespaces=cache)
    data = pod_body("gold", "new")
    assert endpoint.answer_on_loop(JSON, data) is None
    assert cache.waits == []
    status, answer = endpoint.answer(JSON, lambda: data)
    assert status == 200 and json.loads(answer)["response"]["allowed"] is True
    assert cache.waits == [("new", NAMESPACE_WAIT)]


def test_a_namespace_that_never_comes_is_refused_or_warned_about() -> None:
    endpoint = ReviewEndpoint(Stage.VALIDATE, STORE, namespaces=Cache({}))
    status, answer = endpoint.answer(JSON, lambda: pod_body("gold", "ghost"))
    response = json.loads(answer)["response"]
    assert status == 200 and response["allowed"] is False
    assert "labels are unknown" in response["status"]["message"]
    warned_before = counted("watched", "warned")
    status, answer = endpoint.answer(JSON, lambda: pod_body("watched", "ghost"))
    response = json.loads(answer)["response"]
    assert response["allowed"] is True and "labels are unknown" in response["warnings"][0]
    assert counted("watched", "warned") - warned_before == 1


def test_a_class_without_a_rule_never_asks_for_labels_even_uncached() -> None:
    cache = Cache({})
    endpoint = ReviewEndpoint(Stage.VALIDATE, STORE, namespaces=cache)
    answer = endpoint.answer_on_loop(JSON, pod_body("free", "anywhere"))
    assert answer is not None and json.loads(answer[1])["response"]["allowed"] is True
    assert cache.waits == []


def test_an_unsynced_namespace_cache_is_waited_for_off_the_loop_then_503() -> None:
    cache = Cache({"team": {"tier": "gold"}}, synced=False)
    endpoint = ReviewEndpoint(Stage.VALIDATE, STORE, ready_wait=0.01, namespaces=cache)
    data = pod_body("free", "team")
    assert endpoint.answer_on_loop(JSON, data) is None
    assert cache.ready_waits == []
    status, answer = endpoint.answer(JSON, lambda: data)
    assert status == 503
    assert json.loads(answer)["error"].startswith("Namespaces not synced yet")
    assert len(cache.ready_waits) == 1 and cache.ready_waits[0] <= 0.01
