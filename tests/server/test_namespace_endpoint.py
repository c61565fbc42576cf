"""The review endpoint with a Namespace cache: a namespace the cache has not seen is never waited for on
the event loop (the review goes to a thread, which waits a moment for it), an unsynced cache holds back
only the reviews of classes with a rule (answered at once when the cache knows why it cannot list, after a
moment otherwise), and the rule's verdicts are counted by class."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest
from prometheus_client import REGISTRY

from testkit.reviews import pod, review
from webhook.policy.class_model import PriorityClass, StaticClassStore
from webhook.policy.namespace_access import ALLOWED_NAMESPACES, ENFORCEMENT
from webhook.review import Stage
from webhook.server.endpoint import NAMESPACE_WAIT, NOT_LISTED, ReviewEndpoint

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
        failure: str | None = None,
    ) -> None:
        self.known, self.late, self.synced, self.cause = dict(known), dict(late or {}), synced, failure
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

    def failure(self) -> str | None:
        return self.cause


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


def test_an_unsynced_namespace_cache_holds_back_no_review_whose_class_has_no_rule() -> None:
    for cache in (Cache({}, synced=False), Cache({}, synced=False, failure="HTTP 403")):
        endpoint = ReviewEndpoint(Stage.VALIDATE, STORE, ready_wait=0.01, namespaces=cache)
        answer = endpoint.answer_on_loop(JSON, pod_body("free", "team"))
        assert answer is not None and answer[0] == 200
        assert json.loads(answer[1])["response"]["allowed"] is True
        assert cache.ready_waits == [] and cache.waits == []


def test_a_cache_that_cannot_list_answers_a_rule_at_once_with_the_cause() -> None:
    """Deny names the cause; audit admits saying the rule was not checked; neither waits."""
    cause = "the webhook may not list namespaces (HTTP 403 Forbidden)"
    cache = Cache({}, synced=False, failure=cause)
    endpoint = ReviewEndpoint(Stage.VALIDATE, STORE, namespaces=cache)
    answer = endpoint.answer_on_loop(JSON, pod_body("gold", "team"))
    assert answer is not None and answer[0] == 200
    response = json.loads(answer[1])["response"]
    assert response["allowed"] is False and response["status"]["code"] == 403
    assert response["status"]["message"] == (
        'pods "p" is forbidden: PriorityClass gold may not be used in namespace team: '
        f'{ALLOWED_NAMESPACES}: "tier=gold" cannot be checked: {cause}'
    )
    answer = endpoint.answer_on_loop(JSON, pod_body("watched", "team"))
    assert answer is not None
    response = json.loads(answer[1])["response"]
    assert response["allowed"] is True
    assert response["warnings"] == [
        f'audit: PriorityClass watched: {ALLOWED_NAMESPACES}: "tier=gold" was not checked for namespace '
        f"team: {cause}"
    ]
    assert cache.ready_waits == [] and cache.waits == []


def test_a_first_list_not_answered_yet_is_waited_for_a_moment_off_the_loop() -> None:
    cache = Cache({}, synced=False)
    endpoint = ReviewEndpoint(Stage.VALIDATE, STORE, namespaces=cache)
    data = pod_body("gold", "team")
    assert endpoint.answer_on_loop(JSON, data) is None
    status, answer = endpoint.answer(JSON, lambda: data)
    response = json.loads(answer)["response"]
    assert status == 200 and response["allowed"] is False
    assert response["status"]["message"].endswith(f"cannot be checked: {NOT_LISTED}")
    assert cache.ready_waits == [NAMESPACE_WAIT]
