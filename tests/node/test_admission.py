"""Admission through the chart's Service on a real node, with the in-tree Priority plugin on and off (the
`node` fixture's two modes): `kubectl --dry-run=server` (as the README tells users to try it) and real
creations, the class's priority and policy, a client-set priority refused with upstream's words, the legacy
critical-pod annotation in kube-system, and a workload whose pods could never be admitted (a warning).

The API server calls the webhook at the Service's endpoints (`--enable-aggregator-routing`); that the
webhook answered, and not only the in-tree plugin, is read from the replicas' own request counters (through
the API server's pod proxy, as no other route to a pod exists from outside the node).
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from testkit.cluster_webhook import priority_class
from testkit.node import Node
from testkit.wait import wait_for
from tests.node.release import Release, pod

CLASS = "node-e2e-high"
VALUE = 100000
NEVER = "node-e2e-never"


@pytest.fixture
def classes(real_node: Node, release: Release) -> Iterator[Release]:
    """The session's release in its known state (conftest), and this module's classes."""
    real_node.kubectl("apply", "-f", "-", input=json.dumps(priority_class(CLASS, VALUE)))
    real_node.kubectl("apply", "-f", "-", input=json.dumps(priority_class(NEVER, 10, policy="Never")))
    yield release
    real_node.kubectl("delete", "priorityclass", CLASS, NEVER, "--ignore-not-found")


@pytest.fixture
def ns(real_node: Node) -> Iterator[str]:
    name = real_node.control.new_namespace("adm")
    yield name
    real_node.kubectl("delete", "namespace", name, "--wait=false", check=False)


def reviews_answered(release: Release) -> float:
    """The pod reviews the webhook's replicas have answered so far."""
    return release.replica_metric("priority_webhook_admission_requests_total", 'resource="pods"')


def in_tree(node: Node) -> bool:
    return node.in_tree_priority


def test_kubectl_run_dry_run_through_the_service_gets_the_class(
    real_node: Node, classes: Release, ns: str
) -> None:
    release = classes
    before = reviews_answered(release)
    done = real_node.kubectl(
        "run",
        "p",
        f"--image={real_node.project_image}",
        "-n",
        ns,
        "--dry-run=server",
        "-o",
        "json",
        f"--overrides={json.dumps({'spec': {'priorityClassName': CLASS}})}",
    )
    spec = json.loads(done.stdout)["spec"]
    assert (spec["priority"], spec["preemptionPolicy"]) == (VALUE, "PreemptLowerPriority")
    assert real_node.kubectl("get", "pod", "p", "-n", ns, check=False).returncode != 0, "a dry run stored it"
    wait_for(
        lambda: reviews_answered(release) > before,
        timeout=30,
        interval=0.5,
        what="the webhook's own count of pod reviews to move",
    )


def test_dry_run_latency_through_the_service(
    real_node: Node, classes: Release, ns: str, figure: Callable[[str, str], None]
) -> None:
    """Server-side dry-run creations of a pod of the class, through the API server and the webhook's
    Service, interleaved with the same creation in the release's namespace (never sent to the webhook): the
    baseline of the same run. A figure, not a limit; every one must get the class's priority."""
    rounds = 200
    release_ns = classes.namespace
    timings: dict[str, list[float]] = {ns: [], release_ns: []}
    with real_node.control.session() as session:
        for n in range(rounds):
            for target in (ns, release_ns):
                body = pod(f"lat-{n}", target, real_node.project_image, priorityClassName=CLASS)
                url = f"{real_node.control.url}/api/v1/namespaces/{target}/pods?dryRun=All"
                started = time.perf_counter()
                answer = session.post(url, json=body, timeout=30)
                timings[target].append(time.perf_counter() - started)
                assert answer.status_code == 201, answer.text
                if target == ns:
                    assert answer.json()["spec"].get("priority") == VALUE, answer.text
    served, baseline = (statistics.quantiles(timings[t], n=100) for t in (ns, release_ns))
    figure(
        "dry-run creation through the Service, p50 / p99",
        f"{served[49] * 1000:.1f} / {served[98] * 1000:.1f} ms; without the webhook "
        f"{baseline[49] * 1000:.1f} / {baseline[98] * 1000:.1f} ms "
        f"({served[49] / baseline[49]:.2f}x at p50), {rounds} each",
    )


def test_real_creations_store_the_class_priority_and_policy(
    real_node: Node, classes: Release, ns: str
) -> None:
    for name, klass, expected in (
        ("high", CLASS, (VALUE, "PreemptLowerPriority")),
        ("never", NEVER, (10, "Never")),
        ("none", None, (0, "PreemptLowerPriority")),
    ):
        body = pod(name, ns, real_node.project_image, **({"priorityClassName": klass} if klass else {}))
        stored = json.loads(
            real_node.kubectl("create", "-o", "json", "-f", "-", input=json.dumps(body)).stdout
        )
        assert (stored["spec"]["priority"], stored["spec"]["preemptionPolicy"]) == expected, name
    wait_for(
        lambda: all(
            p["status"].get("phase") == "Running"
            for p in real_node.control.get_json("pods", "-n", ns)["items"]
        ),
        timeout=120,
        interval=0.5,
        what="the pods to run on the node",
    )


def test_a_client_set_priority_is_refused_with_upstreams_words(
    real_node: Node, classes: Release, ns: str
) -> None:
    name = f"given-{uuid.uuid4().hex[:4]}"
    body = pod(name, ns, real_node.project_image, priorityClassName=CLASS, priority=5)
    refused = real_node.kubectl("create", "-f", "-", input=json.dumps(body), check=False)
    words = (
        f"the integer value of priority (5) must not be provided in pod spec; "
        f"priority admission controller computed {VALUE} from the given PriorityClass name"
    )
    assert refused.returncode != 0 and words in refused.stderr, refused.stderr
    if not in_tree(real_node):
        # With the plugin off the refusal is ours, through the Service, in upstream's words and form.
        assert (
            f'admission webhook "pods.priority-webhook.io" denied the request: pods "{name}" is forbidden: '
            + words
        ) in refused.stderr, refused.stderr


def test_the_legacy_critical_annotation_in_kube_system(real_node: Node, classes: Release) -> None:
    name = f"legacy-{uuid.uuid4().hex[:4]}"
    body = pod(name, "kube-system", real_node.project_image)
    body["metadata"]["annotations"] = {"scheduler.alpha.kubernetes.io/critical-pod": ""}
    stored = json.loads(
        real_node.kubectl(
            "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(body)
        ).stdout
    )
    assert stored["spec"]["priorityClassName"] == "system-cluster-critical"
    assert stored["spec"]["priority"] == 2000000000


def test_a_workload_whose_pods_would_be_refused_gets_a_warning(
    real_node: Node, classes: Release, ns: str
) -> None:
    template = pod("web", ns, real_node.project_image, priorityClassName="no-such-class")
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": template["spec"]},
        },
    }
    applied = real_node.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(deployment))
    assert (
        f"Warning: pods created by Deployment {ns}/web will be forbidden: "
        "no PriorityClass with name no-such-class was found"
    ) in applied.stderr
