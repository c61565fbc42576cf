"""Every PriorityClass rule through a real API server whose in-tree Priority plugin is off.

The one-default rule is ours alone there (the plugin is what enforces it upstream); the reserved `system-`
names, the value range and immutability are the API's own validation, which runs before any validating
webhook, and the refusal to delete a system class is the registry's, before admission. The tests assert
the exact text kubectl prints and which of them reached our webhook.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from testkit.cluster_webhook import (
    RegisteredWebhook,
    kubectl_create,
    kubectl_denial,
    priority_class,
    wait_until_resolved,
)
from testkit.envtest import ControlPlane

D1, D2, PLAIN = "e2e-pc-default1", "e2e-pc-default2", "e2e-pc-plain"
PC_WEBHOOK = "priorityclasses.priority-webhook.io"
ONE_DEFAULT = (
    f'priorityclasses.scheduling.k8s.io "{{name}}" is forbidden: PriorityClass {D1} is already '
    "marked as default. Only one default can exist"
)


@pytest.fixture(scope="module")
def hook(
    no_priority_plane: ControlPlane, no_priority_webhook: RegisteredWebhook
) -> Iterator[RegisteredWebhook]:
    try:
        yield no_priority_webhook
    finally:
        no_priority_plane.kubectl(
            "delete",
            "priorityclass",
            D1,
            D2,
            PLAIN,
            "e2e-pc-max",
            "e2e-pc-min",
            "--ignore-not-found",
            check=False,
        )


@pytest.fixture
def cluster(no_priority_cluster: ControlPlane, hook: RegisteredWebhook) -> ControlPlane:
    return no_priority_cluster


def validations(hook: RegisteredWebhook) -> float:
    return hook.requests("validate")


def test_only_one_global_default(cluster, hook) -> None:
    assert kubectl_create(cluster, priority_class(D1, 1000, default=True), dry_run=False).returncode == 0
    try:
        with cluster.session() as session:
            wait_until_resolved(cluster, session, "default", {D1: 1000}, default=1000)
        for dry_run in (True, False):
            result = kubectl_create(cluster, priority_class(D2, 2000, default=True), dry_run=dry_run)
            assert result.returncode == 1
            assert result.stderr.strip() == kubectl_denial(PC_WEBHOOK, ONE_DEFAULT.format(name=D2))

        # Making another class the default is refused the same way; editing the default itself is not.
        cluster.apply(priority_class(PLAIN, 10))
        result = cluster.kubectl(
            "patch", "priorityclass", PLAIN, "-p", '{"globalDefault": true}', check=False
        )
        assert result.returncode == 1
        assert result.stderr.strip() == (
            "Error from server (Forbidden): admission webhook "
            f'"{PC_WEBHOOK}" denied the request: ' + ONE_DEFAULT.format(name=PLAIN)
        )
        cluster.kubectl("patch", "priorityclass", D1, "-p", '{"description": "still the default"}')

        # Once the first gives the role up, another may take it.
        cluster.kubectl("patch", "priorityclass", D1, "-p", '{"globalDefault": false}')
        with cluster.session() as session:
            wait_until_resolved(cluster, session, "default", {D1: 1000}, default=0)
        assert kubectl_create(cluster, priority_class(D2, 2000, default=True)).returncode == 0
    finally:
        cluster.kubectl("delete", "priorityclass", D1, PLAIN, "--ignore-not-found")


API_REFUSALS = [
    (
        priority_class("system-e2e", 5),
        'The PriorityClass "system-e2e" is invalid: metadata.name: Forbidden: '
        "priority class names with 'system-' prefix are reserved for system use only. error: system-e2e is not a "
        "known system priority class",
    ),
    (
        priority_class("system-cluster-critical", 5),
        'The PriorityClass "system-cluster-critical" is invalid: '
        "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. "
        "error: value of system-cluster-critical PriorityClass must be 2000000000",
    ),
    (
        priority_class("e2e-pc-big", 1000000001),
        'The PriorityClass "e2e-pc-big" is invalid: value: Forbidden: '
        "maximum allowed value of a user defined priority is 1000000000",
    ),
    (
        priority_class("e2e-pc-policy", 5, policy="Sometimes"),
        'The PriorityClass "e2e-pc-policy" is invalid: '
        'preemptionPolicy: Unsupported value: "Sometimes": supported values: "PreemptLowerPriority", "Never"',
    ),
]


@pytest.mark.parametrize(
    ("obj", "message"), API_REFUSALS, ids=["system-prefix", "system-value", "too-high", "bad-policy"]
)
def test_the_api_refuses_reserved_names_and_values_before_any_webhook(cluster, hook, obj, message) -> None:
    before = validations(hook)
    result = kubectl_create(cluster, obj)
    assert result.returncode == 1
    assert result.stderr.strip() == message
    assert validations(hook) == before


@pytest.mark.parametrize(("name", "value"), [("e2e-pc-max", 1000000000), ("e2e-pc-min", -2147483648)])
def test_the_ends_of_the_user_range_are_admitted(cluster, hook, name, value) -> None:
    before = validations(hook)
    result = kubectl_create(cluster, priority_class(name, value), dry_run=False)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["value"] == value
    assert validations(hook) == before + 1


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        (
            '{"value": 11}',
            r'The PriorityClass "e2e-pc-plain" is invalid: [Vv]alue: Forbidden: may not be changed '
            r"in an update\.",
        ),  # the field path is `Value` up to Kubernetes 1.24's first alphas, then `value`
        (
            '{"preemptionPolicy": "Never"}',
            r'The PriorityClass "e2e-pc-plain" is invalid: preemptionPolicy: '
            r'Invalid value: "Never": field is immutable',
        ),
    ],
)
def test_value_and_preemption_policy_are_immutable(cluster, hook, patch, message) -> None:
    cluster.apply(priority_class(PLAIN, 10))
    try:
        for flags in (["--dry-run=server"], []):
            result = cluster.kubectl("patch", "priorityclass", PLAIN, *flags, "-p", patch, check=False)
            assert result.returncode == 1
            assert re.fullmatch(message, result.stderr.strip()), result.stderr
        assert cluster.get_json("priorityclass", PLAIN)["value"] == 10
    finally:
        cluster.kubectl("delete", "priorityclass", PLAIN)


@pytest.mark.parametrize("name", ["system-node-critical", "system-cluster-critical"])
def test_system_classes_cannot_be_deleted(cluster, hook, name) -> None:
    before = validations(hook)
    for flags in (["--dry-run=server"], []):
        result = cluster.kubectl("delete", "priorityclass", name, *flags, check=False)
        assert result.returncode == 1
        assert result.stderr.strip() == (
            f"Error from server (Forbidden): priorityclasses.scheduling.k8s.io "
            f'"{name}" is forbidden: this is a system priority class and cannot '
            "be deleted"
        )
    assert validations(hook) == before  # the registry refuses before admission


def test_a_collection_delete_of_a_system_class_is_refused_by_our_webhook(cluster, hook) -> None:
    """The registry's refusal covers DELETE of one object only; a DELETE of the collection goes through the
    generic store, which asks the validating webhooks for each object: ours refuses the system classes."""
    with cluster.session() as session:
        response = session.delete(
            cluster.url + "/apis/scheduling.k8s.io/v1/priorityclasses",
            timeout=30,
            params={"dryRun": "All", "fieldSelector": "metadata.name=system-node-critical"},
        )
    assert response.status_code == 403, response.text
    assert response.json()["message"] == (
        f'admission webhook "{PC_WEBHOOK}" denied the request: priorityclasses.scheduling.k8s.io '
        '"system-node-critical" is forbidden: this is a system priority class and cannot be deleted'
    )
    assert cluster.get_json("priorityclass", "system-node-critical")["value"] == 2000001000
