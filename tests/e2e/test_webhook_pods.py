"""Pods through a real kube-apiserver whose in-tree Priority plugin is off: our webhook alone resolves them.

One cluster (`no_priority_plane`) and one registered webhook (the chart's configurations) serve the whole
module. Every case goes through `kubectl create --dry-run=server` and, where stored state matters, a real
create; denials are compared with the exact line kubectl prints.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from testkit.cluster_webhook import (
    CRITICAL_POD,
    RELEASE_NAMESPACE,
    RegisteredWebhook,
    create,
    ensure_namespace,
    kubectl_create,
    kubectl_denial,
    pod,
    priority_class,
    wait_until_resolved,
)
from testkit.envtest import ControlPlane

NS = "e2e-pods"
HIGH, NEVER, DEFAULT = "e2e-pods-high", "e2e-pods-never", "e2e-pods-default"
CLASSES = {HIGH: 1000000, NEVER: 500}
POD_WEBHOOK = "pods.priority-webhook.io"
LEGACY_WARNING = f"Warning: legacy annotation {CRITICAL_POD} mapped to system-cluster-critical"


@pytest.fixture(scope="module")
def hook(
    no_priority_plane: ControlPlane, no_priority_webhook: RegisteredWebhook
) -> Iterator[RegisteredWebhook]:
    cluster = no_priority_plane
    ensure_namespace(cluster, NS)
    cluster.apply(
        priority_class(HIGH, CLASSES[HIGH], description="e2e: high"),
        priority_class(NEVER, CLASSES[NEVER], policy="Never", description="e2e: waits, never preempts"),
    )
    try:
        with cluster.session() as session:
            wait_until_resolved(cluster, session, NS, CLASSES)
        yield no_priority_webhook
    finally:
        cluster.kubectl("delete", "priorityclass", HIGH, NEVER, DEFAULT, "--ignore-not-found", check=False)
        cluster.kubectl("delete", "namespace", NS, "--wait=false", check=False)


@pytest.fixture
def cluster(no_priority_cluster: ControlPlane, hook: RegisteredWebhook) -> ControlPlane:
    return no_priority_cluster


@pytest.fixture
def global_default(cluster: ControlPlane) -> Iterator[int]:
    """A global default class (value 300) for one test; removed, and seen removed, afterwards."""
    cluster.apply(priority_class(DEFAULT, 300, default=True))
    with cluster.session() as session:
        wait_until_resolved(cluster, session, NS, {**CLASSES, DEFAULT: 300}, default=300)
        try:
            yield 300
        finally:
            cluster.kubectl("delete", "priorityclass", DEFAULT)
            wait_until_resolved(cluster, session, NS, {DEFAULT: None}, default=0)


def stored(cluster: ControlPlane, obj: dict, *, dry_run: bool) -> dict:
    """Create through kubectl; the object as the API server stored it (or would have, for a dry run)."""
    result = kubectl_create(cluster, obj, dry_run=dry_run)
    assert result.returncode == 0, result.stderr
    if dry_run:
        return json.loads(result.stdout)
    meta = obj["metadata"]
    return cluster.get_json("pod", meta["name"], "-n", meta["namespace"])


def priority_fields(obj: dict) -> tuple:
    spec = obj["spec"]
    return spec.get("priorityClassName"), spec.get("priority"), spec.get("preemptionPolicy")


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "real"])
@pytest.mark.parametrize(
    ("class_name", "expected"),
    [
        (HIGH, (HIGH, 1000000, "PreemptLowerPriority")),
        (NEVER, (NEVER, 500, "Never")),
        ("system-node-critical", ("system-node-critical", 2000001000, "PreemptLowerPriority")),
        (None, (None, 0, "PreemptLowerPriority")),
    ],
    ids=["user-class", "never-class", "system-class", "no-class-no-default"],
)
def test_the_named_class_or_the_no_default_values_are_stored(cluster, class_name, expected, dry_run) -> None:
    name = f"resolve-{(class_name or 'none')[:20]}-{'dry' if dry_run else 'real'}"
    assert priority_fields(stored(cluster, pod(name, NS, class_name), dry_run=dry_run)) == expected


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "real"])
def test_the_global_default_names_its_class_in_pods_that_name_none(cluster, global_default, dry_run) -> None:
    name = f"default-{'dry' if dry_run else 'real'}"
    assert priority_fields(stored(cluster, pod(name, NS), dry_run=dry_run)) == (
        DEFAULT,
        global_default,
        "PreemptLowerPriority",
    )
    # A named class still wins over the default, and a client value equal to the default is accepted.
    assert priority_fields(stored(cluster, pod(f"{name}-named", NS, NEVER), dry_run=dry_run))[1] == 500
    assert priority_fields(stored(cluster, pod(f"{name}-same", NS, priority=300), dry_run=dry_run))[1] == 300


def test_kubectl_apply_dry_run_shows_the_default_too(cluster, global_default) -> None:
    out = cluster.kubectl(
        "apply", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(pod("apply-default", NS))
    )
    assert priority_fields(json.loads(out.stdout)) == (DEFAULT, 300, "PreemptLowerPriority")


DENIALS = [
    (
        pod("no-such-class", NS, "e2e-nope"),
        'pods "no-such-class" is forbidden: no PriorityClass with name e2e-nope was found',
    ),
    (
        pod("other-priority", NS, HIGH, priority=5),
        'pods "other-priority" is forbidden: '
        "the integer value of priority (5) must not be provided in pod spec; priority admission controller "
        "computed 1000000 from the given PriorityClass name",
    ),
    (
        pod("other-policy", NS, NEVER, policy="PreemptLowerPriority"),
        'pods "other-policy" is forbidden: '
        "the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; "
        "priority admission controller computed Never from the given PriorityClass name",
    ),
    (
        pod("unnamed-priority", NS, priority=7),
        'pods "unnamed-priority" is forbidden: '
        "the integer value of priority (7) must not be provided in pod spec; priority admission controller "
        "computed 0 from the given PriorityClass name",
    ),
    (
        pod("unnamed-never", NS, policy="Never"),
        'pods "unnamed-never" is forbidden: '
        "the string value of PreemptionPolicy (Never) must not be provided in pod spec; priority admission "
        "controller computed PreemptLowerPriority from the given PriorityClass name",
    ),
    (
        pod("both-differ", NS, HIGH, priority=1, policy="Never"),
        'pods "both-differ" is forbidden: '
        "the integer value of priority (1) must not be provided in pod spec; priority admission controller "
        "computed 1000000 from the given PriorityClass name",
    ),
    (
        pod("gen-", NS, "e2e-nope", generate_name=True),
        'pods "gen-" is forbidden: no PriorityClass with name e2e-nope was found',
    ),
]


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "real"])
@pytest.mark.parametrize(
    ("obj", "message"), DENIALS, ids=[d[0]["metadata"].get("name", "generate-name") for d in DENIALS]
)
def test_kubectl_prints_the_upstream_denial_with_the_webhook_prefix(cluster, obj, message, dry_run) -> None:
    result = kubectl_create(cluster, obj, dry_run=dry_run)
    assert result.returncode == 1
    assert result.stderr.strip() == kubectl_denial(POD_WEBHOOK, message)
    if "name" in obj["metadata"]:
        assert (
            "NotFound" in cluster.kubectl("get", "pod", "-n", NS, obj["metadata"]["name"], check=False).stderr
        )


def test_kubectl_apply_prints_the_same_denial(cluster) -> None:
    obj, message = DENIALS[1]
    result = cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(obj), check=False)
    assert result.returncode == 1
    assert result.stderr.strip() == kubectl_denial(POD_WEBHOOK, message)


def test_client_values_equal_to_the_resolved_ones_are_accepted(cluster) -> None:
    obj = pod("same-values", NS, NEVER, priority=500, policy="Never")
    assert priority_fields(stored(cluster, obj, dry_run=True)) == (NEVER, 500, "Never")


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "real"])
def test_the_legacy_critical_annotation_in_kube_system_means_system_cluster_critical(
    cluster, dry_run
) -> None:
    name = f"e2e-legacy-{'dry' if dry_run else 'real'}"
    obj = pod(name, "kube-system", annotations={CRITICAL_POD: ""})
    result = kubectl_create(cluster, obj, dry_run=dry_run)
    try:
        assert result.returncode == 0, result.stderr
        assert LEGACY_WARNING in result.stderr.splitlines()
        assert priority_fields(json.loads(result.stdout)) == (
            "system-cluster-critical",
            2000000000,
            "PreemptLowerPriority",
        )
    finally:
        if not dry_run:
            cluster.kubectl(
                "delete", "pod", name, "-n", "kube-system", "--grace-period=0", "--wait=false", check=False
            )


@pytest.mark.parametrize(
    ("namespace", "annotations", "class_name", "expected"),
    [
        ("kube-system", {CRITICAL_POD: "true"}, None, (None, 0)),  # only the empty value counts
        (NS, {CRITICAL_POD: ""}, None, (None, 0)),  # only in kube-system
        ("kube-system", {CRITICAL_POD: ""}, NEVER, (NEVER, 500)),  # a named class wins
    ],
    ids=["value-not-empty", "other-namespace", "class-named"],
)
def test_the_legacy_annotation_is_mapped_only_where_upstream_mapped_it(
    cluster, namespace, annotations, class_name, expected
) -> None:
    result = kubectl_create(cluster, pod("e2e-not-legacy", namespace, class_name, annotations=annotations))
    assert result.returncode == 0, result.stderr
    assert LEGACY_WARNING not in result.stderr
    assert priority_fields(json.loads(result.stdout))[:2] == expected


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "real"])
def test_a_put_that_drops_priority_and_policy_gets_them_copied_back(cluster, hook, dry_run) -> None:
    name = f"update-{'dry' if dry_run else 'real'}"
    stored(cluster, pod(name, NS, NEVER), dry_run=False)
    current = cluster.get_json("pod", name, "-n", NS)
    del current["spec"]["priority"], current["spec"]["preemptionPolicy"]
    current["metadata"].setdefault("labels", {})["edited"] = "yes"
    mutations = hook.requests("mutate")
    flags = ["--dry-run=server"] if dry_run else []
    out = cluster.kubectl("replace", *flags, "-o", "json", "-f", "-", input=json.dumps(current))
    replaced = json.loads(out.stdout)
    assert priority_fields(replaced) == (NEVER, 500, "Never")
    assert replaced["metadata"]["labels"] == {"edited": "yes"}
    assert hook.requests("mutate") == mutations + 1  # an UPDATE is mutated, not validated
    after = cluster.get_json("pod", name, "-n", NS)
    assert priority_fields(after) == (NEVER, 500, "Never")
    assert after["metadata"].get("labels", {}).get("edited") == (None if dry_run else "yes")


def test_without_the_copy_back_the_api_server_refuses_such_a_put(cluster, hook) -> None:
    """The release namespace is not served: there the same PUT meets the API's pod-update validation."""
    name = "update-unserved"
    cluster.apply(pod(name, RELEASE_NAMESPACE, priority=5))
    try:
        current = cluster.get_json("pod", name, "-n", RELEASE_NAMESPACE)
        del current["spec"]["priority"]
        result = cluster.kubectl(
            "replace", "--dry-run=server", "-f", "-", input=json.dumps(current), check=False
        )
        assert result.returncode == 1
        assert (
            f'The Pod "{name}" is invalid: spec: Forbidden: pod updates may not change fields'
            in result.stderr
        )
    finally:
        cluster.kubectl("delete", "pod", name, "-n", RELEASE_NAMESPACE, "--grace-period=0", "--wait=false")


def test_the_release_namespace_is_never_sent_to_the_webhook(cluster, hook) -> None:
    before = hook.requests()
    obj = pod("unserved", RELEASE_NAMESPACE, "e2e-nope", priority=12345)
    assert priority_fields(stored(cluster, obj, dry_run=True)) == ("e2e-nope", 12345, None)
    assert hook.requests() == before


def test_subresources_and_eviction_never_reach_the_webhook(cluster, hook) -> None:
    """`pods/status`, `pods/binding`, `pods/resize` (in-place resize, 1.33+: the chart's rules name `pods`
    alone) and eviction are not sent. A metadata UPDATE of the pod itself is an UPDATE of `pods`: where the
    chart renders its matchConditions (1.28+) the API server's CEL keeps it from the webhook too (it drops
    no priority field); on older versions it is sent, to the mutating entry only."""
    name = "subresources"
    obj = pod(name, NS, HIGH)
    obj["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}
    stored(cluster, obj, dry_run=False)
    before = {endpoint: hook.requests(endpoint) for endpoint in ("mutate", "validate")}
    base = f"/api/v1/namespaces/{NS}/pods/{name}"
    with cluster.session() as session:
        if cluster.minor >= (1, 33):
            resize = session.patch(
                cluster.url + base + "/resize",
                timeout=10,
                headers={"Content-Type": "application/strategic-merge-patch+json"},
                json={"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "150m"}}}]}},
            )
            assert resize.status_code == 200, resize.text
            assert resize.json()["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "150m"
            assert priority_fields(resize.json()) == (HIGH, 1000000, "PreemptLowerPriority")
        status = session.patch(
            cluster.url + base + "/status",
            timeout=10,
            headers={"Content-Type": "application/merge-patch+json"},
            json={"status": {"conditions": [{"type": "e2e", "status": "True"}]}},
        )
        assert status.status_code == 200, status.text
        binding = session.post(
            cluster.url + base + "/binding",
            timeout=10,
            json={
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "e2e-node"},
            },
        )
        assert binding.status_code == 201, binding.text
        assert {e: hook.requests(e) for e in before} == before
        bound = cluster.get_json("pod", name, "-n", NS)
        assert bound["spec"]["nodeName"] == "e2e-node"
        assert priority_fields(bound) == (HIGH, 1000000, "PreemptLowerPriority")
        eviction = session.post(
            cluster.url + base + "/eviction",
            timeout=10,
            json={"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": NS}},
        )
        assert eviction.status_code == 201, eviction.text
    assert {e: hook.requests(e) for e in before} == before
    cluster.kubectl("label", "pod", name, "-n", NS, "--dry-run=server", "e2e=yes")
    sent = 0 if cluster.minor >= (1, 28) else 1
    assert hook.requests("mutate") == before["mutate"] + sent
    assert hook.requests("validate") == before["validate"]


def test_the_rest_api_outcome_matches_kubectl(cluster) -> None:
    """`create()` (used by the oracle) sees what kubectl sees, prefix split off."""
    obj, message = DENIALS[0]
    with cluster.session() as session:
        outcome = create(session, cluster, obj)
    assert (outcome.code, outcome.reason, outcome.webhook, outcome.message) == (
        403,
        "Forbidden",
        POD_WEBHOOK,
        message,
    )
