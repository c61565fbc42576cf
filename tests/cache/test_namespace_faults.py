"""`serve --kubeconfig` (real gunicorn, real TLS) against an API server that will not give it namespaces:
the LIST refused (403: a role without the grant), not found (404), or never answered (stalled).

The webhook must not wait on what it does not need: it is ready as soon as its PriorityClasses are listed,
every review whose class has no allowed-namespaces rule is answered exactly as the decision code answers it
with no namespace at hand, and a class with a rule, created while the fault lasts, does not make it
unready: its pods are refused with the cause (enforcement deny) or admitted with a warning that the rule
was not checked (audit). Once the API server gives the namespaces, the rule is evaluated again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from testkit.kubeapi import KubeAPIServer, RequestRecord
from testkit.reviews import PC_GVR, pod, priority_class, review
from testkit.server import WebhookServer, webhook_server
from testkit.wait import wait_for
from tests.cache.test_webhook_namespaces import gated, namespace, pod_review, validate
from webhook.kube.class_store import PRIORITY_CLASSES_PATH
from webhook.kube.namespace_store import NAMESPACES_PATH, describe_failure
from webhook.kube.rest import ApiError
from webhook.policy.class_model import ClassSet, PriorityClass
from webhook.policy.namespace_access import ALLOWED_NAMESPACES
from webhook.review import Stage, handle_review
from webhook.server.endpoint import NOT_LISTED

pytestmark = pytest.mark.timeout(120)
# Ready once the class LIST is answered, whatever the namespaces do: each fault lasts the whole test (a stall
# never ends), so being ready at all shows that readiness does not wait on namespaces. The deadline is only
# how long a loaded machine may take (it takes well under a second on a quiet one); not a limit under test.
READY_AFTER_CLASSES = 15.0


def _namespaces(record: RequestRecord) -> bool:
    return record.path == NAMESPACES_PATH


def _refused(status: int) -> Callable[[KubeAPIServer], AbstractContextManager[None]]:
    return lambda api: api.failing(status, match=_namespaces)


# (fault on the namespace LIST and WATCH, the cause a rule's review names, the metric's failure kind or "")
FAULTS = {
    "forbidden": (_refused(403), describe_failure(ApiError(403, "Forbidden")), "forbidden"),
    "not-found": (_refused(404), describe_failure(ApiError(404, "NotFound")), "not_found"),
    "stalled": (lambda api: api.stalled(match=_namespaces), NOT_LISTED, ""),
}


class NoLookup:
    """A namespace source for the expected answers that must never be asked."""

    def labels_of(self, namespace: str) -> Mapping[str, str] | None:
        raise AssertionError(f"a review without a rule looked up namespace {namespace}")


def unruled_reviews() -> list[tuple[Stage, dict[str, Any]]]:
    """Reviews whose class carries no rule, through both paths: a named class, the default, a system
    class, a class that does not exist, and PriorityClass writes (one of them adding a rule)."""
    bodies: list[tuple[Stage, dict[str, Any]]] = []
    for class_name, value, ns in (
        ("free", 5, "team"),
        (None, 100, "team"),
        ("system-node-critical", 2000001000, "kube-system"),
        ("missing", 0, "team"),
    ):
        for stage, spec in ((Stage.MUTATE, {}), (Stage.VALIDATE, {"priority": value})):
            obj = pod(name="p", class_name=class_name, **spec)
            obj["metadata"]["namespace"] = ns
            body = review(obj)
            body["request"]["namespace"] = ns
            bodies.append((stage, body))
    bodies.append((Stage.VALIDATE, review(priority_class("new", 7), gvr=PC_GVR)))
    bodies.append((Stage.VALIDATE, review(gated("ruled", 9, "tier=gold"), gvr=PC_GVR)))
    bodies.append((Stage.VALIDATE, review(priority_class("again", 8, globalDefault=True), gvr=PC_GVR)))
    return bodies


def expected(api: KubeAPIServer, stage: Stage, body: dict[str, Any]) -> dict[str, Any]:
    classes = ClassSet(PriorityClass.from_object(obj) for obj in api.list("priorityclasses"))
    answer, _, _ = handle_review(json.loads(json.dumps(body)), stage, classes, namespaces=NoLookup())
    return answer


def readyz(server: WebhookServer) -> tuple[int, dict[str, Any]]:
    answer = server.session.get(server.url + "/readyz", timeout=5)
    return answer.status_code, answer.json()


def metric(server: WebhookServer, name: str, **labels: str) -> float | None:
    text = server.session.get(server.url + "/metrics", timeout=5).text
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    found = re.search(rf"^{name}(?:{{{re.escape(wanted)}}})? (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else None


@pytest.fixture
def api() -> Iterator[KubeAPIServer]:
    with KubeAPIServer(bookmark_interval=0.2) as server:
        server.create("priorityclasses", priority_class("free", 5))
        server.create("priorityclasses", priority_class("everyone", 100, globalDefault=True))
        # Labels that the rules below would admit, were they known: every refusal is for want of them.
        server.create("namespaces", namespace("team", tier="gold"))
        yield server


@pytest.mark.parametrize("fault", FAULTS)
def test_ready_and_serving_without_namespaces(api: KubeAPIServer, tmp_path: Path, fault: str) -> None:
    inject, cause, kind = FAULTS[fault]
    kubeconfig = api.kubeconfig(tmp_path / "kubeconfig")
    with inject(api), webhook_server(tmp_path, "--kubeconfig", kubeconfig, "--workers", "1") as server:
        wait_for(
            lambda: any(r.path == PRIORITY_CLASSES_PATH and r.status == 200 for r in list(api.requests)),
            timeout=30,
            what="the class LIST answered",
        )
        wait_for(
            lambda: readyz(server)[0] == 200, timeout=READY_AFTER_CLASSES, what="ready after the class LIST"
        )
        wait_for(lambda: any(_namespaces(r) for r in list(api.requests)), what="the namespace LIST asked")
        if kind:
            wait_for(
                lambda: (
                    metric(server, "priority_webhook_cache_failing", reflector="namespaces", reason=kind)
                    == 1.0
                ),
                what=f"the cache reported {kind}",
            )
        status, body = readyz(server)
        assert status == 200
        assert body == {"status": "ready", "namespaces": f"not synced: {cause}" if kind else "not synced yet"}
        assert metric(server, "priority_webhook_cache_synced", reflector="namespaces") == 0.0
        assert metric(server, "priority_webhook_namespace_rule_classes") == 0.0

        for stage, sent in unruled_reviews():
            answer = server.review(f"/{stage.value}", sent)
            assert answer.status_code == 200, answer.text
            assert answer.json() == expected(api, stage, sent), sent

        # A class gains a rule: the webhook stays ready; the rule cannot be evaluated, and says why.
        api.create("priorityclasses", gated("gold", 5000, "tier=gold"))
        api.create("priorityclasses", gated("watched", 4000, "tier=gold", "audit"))
        wait_for(lambda: metric(server, "priority_webhook_namespace_rule_classes") == 2.0, what="rules seen")
        assert readyz(server)[0] == 200
        selector = f'{ALLOWED_NAMESPACES}: "tier=gold"'
        denied = validate(server, pod_review("gold", "team"))
        assert denied["allowed"] is False and denied["status"]["code"] == 403
        assert denied["status"]["message"] == (
            f'pods "p" is forbidden: PriorityClass gold may not be used in namespace team: {selector} '
            f"cannot be checked: {cause}"
        )
        warned = validate(server, pod_review("watched", "team"))
        assert warned["allowed"] is True
        assert warned["warnings"] == [
            f"audit: PriorityClass watched: {selector} was not checked for namespace team: {cause}"
        ]

    # The fault ends (a fresh server for the forbidden and missing cases, the same LIST for the stalled
    # one): the rule is evaluated again, on the labels.
    with webhook_server(tmp_path, "--kubeconfig", kubeconfig, "--workers", "1") as server:
        wait_for(
            lambda: readyz(server) == (200, {"status": "ready", "namespaces": "synced"}),
            timeout=30,
            what="ready with the namespaces listed",
        )
        assert validate(server, pod_review("gold", "team"))["allowed"] is True
        assert "warnings" not in validate(server, pod_review("watched", "team"))
        assert (
            metric(server, "priority_webhook_cache_failing", reflector="namespaces", reason="forbidden") == 0
        )


def test_a_namespace_list_refused_after_the_cache_synced_keeps_the_last_labels(
    api: KubeAPIServer, tmp_path: Path
) -> None:
    """A role that loses the grant while the webhook runs: the labels it has keep deciding, as with any
    broken watch, and the metric says the cache is refused."""
    api.create("priorityclasses", gated("gold", 5000, "tier=gold"))
    kubeconfig = api.kubeconfig(tmp_path / "kubeconfig")
    with webhook_server(tmp_path, "--kubeconfig", kubeconfig, "--workers", "1") as server:
        wait_for(lambda: readyz(server)[1].get("namespaces") == "synced", timeout=30, what="synced")
        with api.failing(403, match=_namespaces):
            api.drop_watches()
            wait_for(
                lambda: (
                    metric(
                        server, "priority_webhook_cache_failing", reflector="namespaces", reason="forbidden"
                    )
                    == 1.0
                ),
                what="the re-watch refused",
            )
            assert readyz(server) == (200, {"status": "ready", "namespaces": "synced"})
            assert validate(server, pod_review("gold", "team"))["allowed"] is True
