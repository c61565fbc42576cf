"""The Flask app in-process: the HTTP contract of /mutate, /validate, /healthz, /readyz, /metrics."""

from __future__ import annotations

import io
import json
from typing import Any

import jsonpatch
import pytest
from prometheus_client import REGISTRY

from testkit.reviews import PC_GVR, eviction_review, patch_ops, pod, priority_class, review
from webhook.policy.class_model import ClassSet, StaticClassStore
from webhook.policy.eviction_rules import PodLookupError
from webhook.policy.pod_rules import PodOptions
from webhook.server.app import MAX_BODY_BYTES, create_app

pytestmark = pytest.mark.usefixtures("single_process_metrics")


@pytest.fixture()
def client(store: Any) -> Any:
    return create_app(store).test_client()


def post(client: Any, path: str, body: Any) -> Any:
    return client.post(path, data=json.dumps(body), content_type="application/json")


def test_mutate_sets_priority_from_class(client: Any) -> None:
    obj = pod(class_name="high")
    resp = post(client, "/mutate", review(obj, uid="abc-1"))
    assert resp.status_code == 200
    assert resp.mimetype == "application/json"
    out = resp.get_json()
    assert out["apiVersion"] == "admission.k8s.io/v1" and out["kind"] == "AdmissionReview"
    assert out["response"]["uid"] == "abc-1" and out["response"]["allowed"] is True
    mutated = jsonpatch.apply_patch(obj, patch_ops(out))
    assert mutated["spec"]["priority"] == 100000
    assert mutated["spec"]["preemptionPolicy"] == "PreemptLowerPriority"


def test_mutate_applies_global_default(client: Any) -> None:
    obj = pod(class_name=None)
    out = post(client, "/mutate", review(obj)).get_json()
    mutated = jsonpatch.apply_patch(obj, patch_ops(out))
    assert mutated["spec"]["priorityClassName"] == "default" and mutated["spec"]["priority"] == 1000


def test_v1beta1_is_answered_in_v1beta1(client: Any) -> None:
    out = post(client, "/mutate", review(pod(), version="admission.k8s.io/v1beta1", uid="b1")).get_json()
    assert out["apiVersion"] == "admission.k8s.io/v1beta1"
    assert out["response"]["uid"] == "b1"


def test_mutate_denial_is_403_forbidden(client: Any) -> None:
    out = post(client, "/mutate", review(pod(class_name="nope"))).get_json()["response"]
    assert out["allowed"] is False
    assert out["status"]["code"] == 403 and out["status"]["reason"] == "Forbidden"
    assert out["status"]["message"] == 'pods "web" is forbidden: no PriorityClass with name nope was found'
    assert "patch" not in out


def test_validate_returns_no_patch_and_checks_final_state(client: Any) -> None:
    # Mutated, then another webhook changed the priority: the validating webhook catches it.
    ok = post(client, "/validate", review(pod(priority=100000, preemptionPolicy="PreemptLowerPriority")))
    assert ok.get_json()["response"] == {"uid": ok.get_json()["response"]["uid"], "allowed": True}
    bad = post(client, "/validate", review(pod(priority=5, preemptionPolicy="PreemptLowerPriority")))
    status = bad.get_json()["response"]["status"]
    assert bad.status_code == 200 and status["code"] == 403 and "priority" in status["message"]


def test_validate_priority_class_rules(client: Any) -> None:
    second_default = priority_class("another-default", 5, globalDefault=True)
    out = post(client, "/validate", review(second_default, gvr=PC_GVR)).get_json()["response"]
    assert out["allowed"] is False
    assert "default is already marked as default" in out["status"]["message"]
    assert post(client, "/validate", review(priority_class("fine", 5), gvr=PC_GVR)).get_json()["response"][
        "allowed"
    ]


def test_legacy_annotation_option_reaches_the_decision(store: Any) -> None:
    obj = pod(class_name=None)
    obj["metadata"].update(
        namespace="kube-system", annotations={"scheduler.alpha.kubernetes.io/critical-pod": ""}
    )
    body = review(obj)
    body["request"]["namespace"] = "kube-system"
    on = post(create_app(store).test_client(), "/mutate", body).get_json()
    off = post(create_app(store, PodOptions(legacy_critical_annotation=False)).test_client(), "/mutate", body)
    assert jsonpatch.apply_patch(obj, patch_ops(on))["spec"]["priorityClassName"] == "system-cluster-critical"
    assert jsonpatch.apply_patch(obj, patch_ops(off.get_json()))["spec"]["priorityClassName"] == "default"


def _without(path: str) -> dict[str, Any]:
    body = review(pod())
    parent, _, key = path.rpartition(".")
    node: Any = body
    for part in filter(None, parent.split(".")):
        node = node[part]
    del node[key]
    return body


def _with(path: str, value: Any) -> dict[str, Any]:
    body = review(pod())
    *parents, key = path.split(".")
    node: Any = body
    for part in parents:
        node = node[part]
    node[key] = value
    return body


JSON = "application/json"
MALFORMED = [
    # (id, content type, body bytes, the start of the one-line error)
    ("not-json", JSON, b"{not json", "body: not valid JSON"),
    ("empty", JSON, b"", "body: empty"),
    ("not-utf8", JSON, b'{"a": "\xff"}', "body: not UTF-8"),
    ("too-deep", JSON, b"[" * 100_000 + b"]" * 100_000, "body: JSON nested too deeply"),
    ("array", JSON, b"[]", "body: must be a JSON object"),
    ("string", JSON, b'"AdmissionReview"', "body: must be a JSON object"),
    ("a-pod", JSON, json.dumps(pod()).encode(), "apiVersion:"),
    ("wrong-kind", JSON, json.dumps(_with("kind", "Pod")).encode(), "kind:"),
    ("wrong-version", JSON, json.dumps(_with("apiVersion", "admission.k8s.io/v2")).encode(), "apiVersion:"),
    ("no-request", JSON, json.dumps(_without("request")).encode(), "request: Missing data"),
    ("no-uid", JSON, json.dumps(_without("request.uid")).encode(), "request.uid: Missing data"),
    ("empty-uid", JSON, json.dumps(_with("request.uid", "")).encode(), "request.uid:"),
    ("uid-int", JSON, json.dumps(_with("request.uid", 7)).encode(), "request.uid: Not a valid string"),
    ("no-operation", JSON, json.dumps(_without("request.operation")).encode(), "request.operation:"),
    ("bad-operation", JSON, json.dumps(_with("request.operation", "PATCH")).encode(), "request.operation:"),
    ("no-resource", JSON, json.dumps(_without("request.resource")).encode(), "request.resource:"),
    ("object-list", JSON, json.dumps(_with("request.object", [])).encode(), "request.object:"),
    (
        "priority-string",
        JSON,
        json.dumps(_with("request.object.spec.priority", "1")).encode(),
        "request.object.spec.priority:",
    ),
    (
        "priority-float",
        JSON,
        json.dumps(_with("request.object.spec.priority", 1.5)).encode(),
        "request.object.spec.priority:",
    ),
    (
        "class-int",
        JSON,
        json.dumps(_with("request.object.spec.priorityClassName", 3)).encode(),
        "request.object.spec.priorityClassName:",
    ),
    (
        "text-plain",
        "text/plain",
        json.dumps(review(pod())).encode(),
        "Content-Type: must be application/json",
    ),
    ("form", "application/x-www-form-urlencoded", b"a=b", "Content-Type: must be application/json"),
    ("no-content-type", None, json.dumps(review(pod())).encode(), "Content-Type: must be application/json"),
]


@pytest.mark.parametrize("path", ["/mutate", "/validate"])
@pytest.mark.parametrize(
    ("content_type", "data", "error"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED]
)
def test_malformed_request_is_400_with_one_line_naming_the_field(
    client: Any, path: str, content_type: str | None, data: bytes, error: str
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    resp = client.post(path, data=data, headers=headers)
    assert resp.status_code == 400
    assert resp.mimetype == "application/json"
    message = resp.get_json()["error"]
    assert message.startswith(error), message
    assert "\n" not in message and "Traceback" not in message


def test_json_content_type_with_charset_is_accepted(client: Any) -> None:
    resp = client.post(
        "/mutate", data=json.dumps(review(pod())), content_type="application/json; charset=utf-8"
    )
    assert resp.status_code == 200


def test_declared_oversized_body_is_refused_without_reading_it(client: Any) -> None:
    class Unreadable(io.RawIOBase):
        def read(self, size: int = -1) -> bytes:
            raise AssertionError("the body was read")

    resp = client.post(
        "/mutate",
        content_type="application/json",
        environ_overrides={"wsgi.input": Unreadable(), "CONTENT_LENGTH": str(MAX_BODY_BYTES + 1)},
    )
    assert resp.status_code == 400
    assert (
        resp.get_json()["error"]
        == f"body: {MAX_BODY_BYTES + 1} bytes is over the {MAX_BODY_BYTES}-byte limit"
    )


def test_body_at_the_limit_is_read(client: Any) -> None:
    body = review(pod())
    body["request"]["object"]["metadata"]["annotations"] = {"pad": ""}
    size = len(json.dumps(body))
    body["request"]["object"]["metadata"]["annotations"]["pad"] = "x" * (MAX_BODY_BYTES - size)
    data = json.dumps(body).encode()
    assert len(data) == MAX_BODY_BYTES
    assert client.post("/mutate", data=data, content_type="application/json").status_code == 200


@pytest.mark.parametrize(("method", "path"), [("GET", "/mutate"), ("PUT", "/validate"), ("POST", "/healthz")])
def test_wrong_method_is_405_json(client: Any, method: str, path: str) -> None:
    resp = client.open(path, method=method)
    assert resp.status_code == 405
    assert resp.get_json() == {"error": f"405 Method Not Allowed: {method} {path}"}
    assert "Allow" in resp.headers


def test_unknown_path_is_404_json(client: Any) -> None:
    resp = client.get("/nope")
    assert resp.status_code == 404 and resp.get_json()["error"].startswith("404 Not Found")


class BrokenStore:
    def snapshot(self) -> ClassSet:
        raise RuntimeError("secret internal detail")

    def ready(self) -> bool:
        return True

    def wait_ready(self, timeout: float) -> bool:
        return True


def test_unexpected_error_is_500_one_line_without_traceback(caplog: pytest.LogCaptureFixture) -> None:
    before = (
        REGISTRY.get_sample_value(
            "priority_webhook_admission_requests_total",
            {"webhook": "mutate", "operation": "unknown", "resource": "unknown", "result": "error"},
        )
        or 0
    )
    resp = post(create_app(BrokenStore()).test_client(), "/mutate", review(pod()))
    assert resp.status_code == 500
    assert resp.get_json() == {"error": "internal error"}
    assert "secret internal detail" in caplog.text  # logged server-side, with its traceback
    after = REGISTRY.get_sample_value(
        "priority_webhook_admission_requests_total",
        {"webhook": "mutate", "operation": "unknown", "resource": "unknown", "result": "error"},
    )
    assert after == before + 1


class UnsyncedStore:
    """A cluster store before its first LIST: not ready (its set is what the cluster will have)."""

    def __init__(self) -> None:
        self.synced = False
        self.waited: list[float] = []

    def snapshot(self) -> ClassSet:
        return StaticClassStore().snapshot()

    def ready(self) -> bool:
        return self.synced

    def wait_ready(self, timeout: float) -> bool:
        self.waited.append(timeout)
        return self.synced


def test_readyz_follows_the_store_and_reviews_wait_for_it() -> None:
    store = UnsyncedStore()
    client = create_app(store, ready_wait=0.25).test_client()
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 503
    for path in ("/mutate", "/validate"):
        resp = post(client, path, review(pod(class_name="system-node-critical")))
        assert resp.status_code == 503 and "not synced" in resp.get_json()["error"]
    assert store.waited == [0.25, 0.25]
    store.synced = True
    assert client.get("/readyz").status_code == 200
    resp = post(client, "/mutate", review(pod(class_name="system-node-critical")))
    assert resp.status_code == 200 and resp.get_json()["response"]["allowed"] is True


def test_metrics_count_by_labels(client: Any) -> None:
    def value(webhook: str, operation: str, resource: str, result: str) -> float:
        labels = {"webhook": webhook, "operation": operation, "resource": resource, "result": result}
        return REGISTRY.get_sample_value("priority_webhook_admission_requests_total", labels) or 0.0

    def count(webhook: str, operation: str, resource: str, result: str) -> float:
        labels = {"webhook": webhook, "operation": operation, "resource": resource, "result": result}
        return REGISTRY.get_sample_value("priority_webhook_admission_duration_seconds_count", labels) or 0.0

    keys = [
        ("mutate", "CREATE", "pods", "allowed"),
        ("mutate", "CREATE", "pods", "denied"),
        ("validate", "CREATE", "priorityclasses.scheduling.k8s.io", "allowed"),
        ("validate", "unknown", "unknown", "error"),
        ("mutate", "CREATE", "other", "allowed"),
    ]
    before = {k: (value(*k), count(*k)) for k in keys}
    post(client, "/mutate", review(pod()))
    post(client, "/mutate", review(pod()))
    post(client, "/mutate", review(pod(class_name="nope")))
    post(client, "/validate", review(priority_class("x", 1), gvr=PC_GVR))
    client.post("/validate", data=b"{", content_type="application/json")
    post(
        client,
        "/mutate",
        review({"metadata": {"name": "d"}}, gvr={"group": "", "version": "v1", "resource": "services"}),
    )
    deltas = {k: (value(*k) - before[k][0], count(*k) - before[k][1]) for k in keys}
    assert deltas == {keys[0]: (2, 2), keys[1]: (1, 1), keys[2]: (1, 1), keys[3]: (1, 1), keys[4]: (1, 1)}
    text = client.get("/metrics").get_data(as_text=True)
    assert (
        'priority_webhook_admission_requests_total{operation="CREATE",resource="pods",result="denied"' in text
    )


@pytest.mark.parametrize(
    "namespace, options, admitted",
    [
        ("kube-system", PodOptions(), True),
        ("default", PodOptions(), False),
        ("platform", PodOptions(system_namespaces=frozenset({"kube-system", "platform"})), True),
        ("platform", PodOptions(), False),
    ],
)
def test_a_system_pod_whose_mutation_was_skipped_is_admitted_warned_and_counted(
    store: Any, namespace: str, options: PodOptions, admitted: bool
) -> None:
    """A fail-open /mutate entry timed out: the pod reaches /validate as its client sent it."""
    client = create_app(store, options).test_client()
    body = review(pod(class_name="high"))
    body["request"]["namespace"] = body["request"]["object"]["metadata"]["namespace"] = namespace
    before = REGISTRY.get_sample_value("priority_webhook_unresolved_pods_total") or 0.0
    out = post(client, "/validate", body).get_json()["response"]
    counted = (REGISTRY.get_sample_value("priority_webhook_unresolved_pods_total") or 0.0) - before
    assert out["allowed"] is admitted and "patch" not in out
    if admitted:
        assert out["warnings"] == [
            "spec.priority is not set: priority admission was skipped (webhook timeout or outage); "
            f"admitted in system namespace {namespace} without it"
        ]
        assert counted == 1
    else:
        assert out["status"]["message"] == (
            'pods "web" is forbidden: spec.priority is not set; priority admission requires 100000'
        )
        assert counted == 0
    assert "priority_webhook_unresolved_pods_total" in client.get("/metrics").get_data(as_text=True)


class _PodNodes:
    """Answers of the eviction check's pod lookup: a node, None (no pod), or a failure."""

    def __init__(self, answer: str | Exception | None) -> None:
        self.answer = answer

    def node_of(self, namespace: str, name: str) -> str | None:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.mark.parametrize(
    ("pods", "claim", "status", "allowed", "result"),
    [
        (_PodNodes("node-a"), "node-a", 200, True, "allowed"),
        (_PodNodes("node-b"), "node-a", 200, False, "denied"),
        (_PodNodes("node-a"), None, 200, False, "denied"),
        (None, "node-a", 200, False, "denied"),  # no cluster: cannot know the pod's node
        (_PodNodes(PodLookupError("reading pod ns/web: HTTP 500")), "node-a", 503, None, "unavailable"),
    ],
)
def test_validate_checks_the_sidecars_evictions(
    store: Any, pods: Any, claim: str | None, status: int, allowed: bool | None, result: str
) -> None:
    labels = {"webhook": "validate", "operation": "CREATE", "resource": "pods/eviction", "result": result}
    before = REGISTRY.get_sample_value("priority_webhook_admission_requests_total", labels) or 0.0
    resp = post(create_app(store, pods=pods).test_client(), "/validate", eviction_review(claim))
    assert resp.status_code == status
    if allowed is None:
        assert resp.get_json() == {"error": "reading pod ns/web: HTTP 500"}
    else:
        answer = resp.get_json()["response"]
        assert answer["allowed"] is allowed and "patch" not in answer
    after = REGISTRY.get_sample_value("priority_webhook_admission_requests_total", labels) or 0.0
    assert after - before == 1


def test_a_pod_group_is_resolved_over_http_and_counted_under_its_resource(client: Any) -> None:
    """The PodGroup route through the server: fast path, decision, patch, metric label."""
    labels = {
        "webhook": "mutate",
        "operation": "CREATE",
        "resource": "podgroups.scheduling.k8s.io",
        "result": "allowed",
    }
    before = REGISTRY.get_sample_value("priority_webhook_admission_requests_total", labels) or 0.0
    group = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "gang", "namespace": "default"},
        "spec": {"priorityClassName": "high", "schedulingPolicy": {"gang": {"minCount": 2}}},
    }
    gvr = {"group": "scheduling.k8s.io", "version": "v1beta1", "resource": "podgroups"}
    out = post(client, "/mutate", review(group, gvr=gvr)).get_json()
    mutated = jsonpatch.apply_patch(group, patch_ops(out))
    assert mutated["spec"]["priority"] == 100000 and "preemptionPolicy" not in mutated["spec"]
    after = REGISTRY.get_sample_value("priority_webhook_admission_requests_total", labels) or 0.0
    assert after - before == 1
