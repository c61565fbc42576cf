"""The webhook down behind a real API server: `kube-system` still admits (the chart's `Ignore` entries),
other namespaces and PriorityClass changes are refused (`Fail`), the release namespace is not affected.

The server process is stopped for real (its port refuses connections), then started again on the same
port; the registration stays as the chart made it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from testkit.cluster_webhook import (
    RELEASE_NAMESPACE,
    RegisteredWebhook,
    ensure_namespace,
    kubectl_create,
    pod,
    priority_class,
)
from testkit.envtest import ControlPlane

NS = "e2e-outage"


@pytest.fixture(scope="module")
def hook(
    no_priority_plane: ControlPlane, no_priority_webhook: RegisteredWebhook
) -> Iterator[RegisteredWebhook]:
    ensure_namespace(no_priority_plane, NS)
    try:
        yield no_priority_webhook
    finally:
        no_priority_plane.kubectl("delete", "namespace", NS, "--wait=false", check=False)
        no_priority_plane.kubectl("delete", "priorityclass", "e2e-outage", "--ignore-not-found", check=False)


@pytest.fixture
def cluster(no_priority_cluster: ControlPlane, hook: RegisteredWebhook) -> ControlPlane:
    return no_priority_cluster


def refused(webhook: str, path: str, port: int, object_kind: str = "creating") -> str:
    return (
        f'Error from server (InternalError): error when {object_kind} "STDIN": Internal error occurred: '
        f'failed calling webhook "{webhook}": failed to call webhook: Post '
        f'"https://127.0.0.1:{port}{path}?timeout=5s": dial tcp 127.0.0.1:{port}: connect: connection refused'
    )


def test_while_the_webhook_is_down_only_the_fail_closed_namespaces_refuse(cluster, hook) -> None:
    port = hook.server.port
    with hook.down():
        for dry_run in (True, False):
            result = kubectl_create(cluster, pod("refused", NS, "system-node-critical"), dry_run=dry_run)
            assert result.returncode == 1
            assert result.stderr.strip() == refused("pods.priority-webhook.io", "/mutate", port)

        # kube-system fails open: admitted, and (with the in-tree plugin off) nobody resolves the priority.
        result = kubectl_create(
            cluster, pod("e2e-outage-admitted", "kube-system", "system-node-critical"), dry_run=False
        )
        try:
            assert result.returncode == 0, result.stderr
            spec = json.loads(result.stdout)["spec"]
            assert spec["priorityClassName"] == "system-node-critical"
            assert "priority" not in spec and "preemptionPolicy" not in spec
        finally:
            cluster.kubectl(
                "delete",
                "pod",
                "e2e-outage-admitted",
                "-n",
                "kube-system",
                "--grace-period=0",
                "--wait=false",
                check=False,
            )

        # The release namespace is never sent to the webhook: its own pods can start while it is down.
        assert kubectl_create(cluster, pod("own", RELEASE_NAMESPACE), dry_run=True).returncode == 0

        result = kubectl_create(cluster, priority_class("e2e-outage", 10), dry_run=True)
        assert result.returncode == 1
        assert result.stderr.strip() == refused("priorityclasses.priority-webhook.io", "/validate", port)

    # Served again (same port, same registration): admitted and resolved.
    before = hook.requests()
    result = kubectl_create(cluster, pod("back", NS, "system-node-critical"))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["spec"]["priority"] == 2000001000
    assert hook.requests() == before + 2
