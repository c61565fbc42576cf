"""Installing the chart with the real Helm engine on a real API server whose webhook can never run.

The harness has no kubelet, so the webhook's pods stay Pending forever: exactly the fresh install that
must not block the cluster. The chart creates its fail-closed webhook configurations only as post-install
hooks after a Job that waits for the webhook to answer; here that Job never finishes, the install fails,
and pod creation in the cluster's ordinary namespaces goes on. The contrast shows what the same
configurations do when applied up front.

The chart requires Kubernetes 1.30 (Chart.yaml `kubeVersion`); this API server is the current version, so
Helm installs the chart as it is, rendered for the version the cluster reports. On the oldest version we
prove (1.24), Helm refuses the chart, and the API server drops the matchConditions it does not know.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest

from testkit.chart_rendering import CHART, render
from testkit.cluster_webhook import registered_webhook
from testkit.envtest import ControlPlane
from testkit.wait import wait_for

CONFIG_KINDS = ("mutatingwebhookconfiguration", "validatingwebhookconfiguration")
SCRIPTS = CHART / "files" / "hooks"


def pod(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]},
    }


def create_pod(cluster: ControlPlane, namespace: str, *flags: str) -> subprocess.CompletedProcess[str]:
    body = json.dumps(pod(f"p-{uuid.uuid4().hex[:6]}", namespace))
    return cluster.kubectl("create", *flags, "-o", "json", "-f", "-", input=body, check=False)


@pytest.fixture
def release(cluster: ControlPlane) -> Iterator[dict[str, str]]:
    """A release name and namespace of this test; everything it leaves behind is removed afterwards."""
    names = {"release": f"gate{uuid.uuid4().hex[:5]}", "namespace": f"pw-install-{uuid.uuid4().hex[:6]}"}
    yield names
    instance = f"app.kubernetes.io/instance={names['release']}"
    cluster.kubectl(
        "delete",
        ",".join(
            (
                *CONFIG_KINDS,
                "clusterrole",
                "clusterrolebinding",
                "validatingadmissionpolicy",
                "validatingadmissionpolicybinding",
            )
        ),
        "-l",
        instance,
        "--ignore-not-found",
        check=False,
    )
    cluster.kubectl(
        "delete", "namespace", names["namespace"], "--wait=false", "--ignore-not-found", check=False
    )


def test_a_fresh_install_whose_webhook_never_starts_blocks_no_pod(
    cluster: ControlPlane, release: dict[str, str]
) -> None:
    name, namespace = release["release"], release["namespace"]
    fullname = f"{name}-priority-webhook"
    with (
        helm.Config(kubeconfig_path=str(cluster.kubeconfig), namespace=namespace) as config,
        helm.Chart.load(CHART) as chart,
        pytest.raises(helm.HelmError) as failed,
    ):
        config.install(
            chart,
            name,
            {},
            namespace=namespace,
            create_namespace=True,
            timeout=8,
        )
    assert "post-install" in str(failed.value) and f"{fullname}-hooks-wait" in str(failed.value)

    # Helm applied the release (the webhook's pods are Pending: no kubelet), then stopped at the gate.
    deployment = cluster.get_json("deployment", fullname, "-n", namespace)
    assert deployment["spec"]["replicas"] == 2 and not deployment["status"].get("readyReplicas")
    for kind in CONFIG_KINDS:
        assert "NotFound" in cluster.kubectl("get", kind, fullname, check=False).stderr, kind
    # The failed gate deleted itself (hook-failed): `helm uninstall` never deletes hooks, so nothing else would.
    wait_for(
        lambda: (
            "NotFound"
            in cluster.kubectl("get", "job", f"{fullname}-hooks-wait", "-n", namespace, check=False).stderr
        ),
        timeout=30,
        what="the failed wait Job deleted",
    )

    # So pod creation everywhere the webhook would serve goes on (for real, not a dry run).
    served = cluster.new_namespace("team")
    created = create_pod(cluster, served)
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["spec"]["priority"] == 0, "the in-tree plugin still resolves priority"
    cluster.kubectl("delete", "namespace", served, "--wait=false")


def test_without_the_gate_the_same_install_refuses_pods_until_the_webhook_answers(
    cluster: ControlPlane, release: dict[str, str]
) -> None:
    """The contrast: the configurations applied with the release (installGate off) block pod creation at
    once, because the API server cannot reach a webhook that never started."""
    name, namespace = release["release"], release["namespace"]
    with helm.Chart.load(CHART) as chart:
        rendered = render(
            chart,
            {"kubeVersionOverride": cluster.version, "admission": {"installGate": {"enabled": False}}},
            namespace=namespace,
            release=name,
        )
    configs = [o for o in rendered.installed() if o["kind"].lower() in CONFIG_KINDS]
    assert len(configs) == 2
    served = cluster.new_namespace("team")
    try:
        cluster.apply(*configs)
        wait_for(
            lambda: "failed calling webhook" in create_pod(cluster, served, "--dry-run=server").stderr,
            timeout=30,
            interval=0.2,
            what="the fail-closed configuration to refuse pods",
        )
    finally:
        for config in configs:
            cluster.kubectl(
                "delete", config["kind"].lower(), config["metadata"]["name"], "--ignore-not-found"
            )
    wait_for(
        lambda: create_pod(cluster, served, "--dry-run=server").returncode == 0,
        timeout=30,
        interval=0.2,
        what="pods to be admitted again",
    )
    cluster.kubectl("delete", "namespace", served, "--wait=false")


def test_helm_refuses_the_chart_on_the_oldest_version(
    oldest_plane: ControlPlane, attach_logs: Callable[[ControlPlane], ControlPlane]
) -> None:
    """The chart's `kubeVersion: >=1.30.0-0` is what the docs say we support: Helm checks it against the
    version the cluster reports, and a 1.24 cluster gets nothing installed."""
    cluster = attach_logs(oldest_plane)
    namespace = f"pw-old-{uuid.uuid4().hex[:6]}"
    with (
        helm.Config(kubeconfig_path=str(cluster.kubeconfig), namespace=namespace) as config,
        helm.Chart.load(CHART) as chart,
        pytest.raises(helm.HelmError) as refused,
    ):
        config.install(chart, "old", {}, namespace=namespace, create_namespace=True, timeout=30)
    assert f"incompatible with Kubernetes {cluster.version}" in str(refused.value)
    assert ">=1.30.0-0" in str(refused.value)
    assert "NotFound" in cluster.kubectl("get", "namespace", namespace, check=False).stderr


def test_an_old_api_server_drops_match_conditions(
    oldest_plane: ControlPlane, attach_logs: Callable[[ControlPlane], ControlPlane]
) -> None:
    """Why the chart gates matchConditions on the version: 1.24 does not know them. kubectl refuses the
    field outright, and a server that takes it (no client validation) silently drops it. (On the current
    version the API server keeps them and evaluates them: test_version_gates.py.)"""
    cluster = attach_logs(oldest_plane)
    assert cluster.minor < (1, 28)
    release = f"old{uuid.uuid4().hex[:5]}"
    with helm.Chart.load(CHART) as chart:
        rendered = render(
            chart,
            {"kubeVersionOverride": "1.30.0", "admission": {"failurePolicy": "Ignore"}},
            namespace="pw-old",
            release=release,
        )
    (mutating,) = rendered.of_kind("MutatingWebhookConfiguration")
    assert all("matchConditions" in hook for hook in mutating["webhooks"])
    refused = cluster.apply(mutating, check=False)
    assert refused.returncode != 0 and 'unknown field "matchConditions"' in refused.stderr
    cluster.kubectl("create", "--validate=false", "-f", "-", input=json.dumps(mutating))
    try:
        stored = cluster.get_json("mutatingwebhookconfiguration", mutating["metadata"]["name"])
        assert not any("matchConditions" in hook for hook in stored["webhooks"])
    finally:
        cluster.kubectl("delete", "mutatingwebhookconfiguration", mutating["metadata"]["name"])


def test_the_helm_test_script_checks_a_dry_run_pod_through_the_webhook(
    cluster: ControlPlane, tmp_path: Path
) -> None:
    """`helm test` runs check_priority.py in a pod; here it runs with a kubeconfig against the real API
    server with our webhook registered, and the dry-run pod it sends is admitted by the webhook."""
    with registered_webhook(cluster, tmp_path, "--workers", "1") as hook:
        before = hook.requests()
        env = {"KUBECONFIG": str(cluster.kubeconfig), "PATH": str(Path(sys.executable).parent)}
        for args, expected in (
            (["default", "system-node-critical"], "gets priority 2000001000"),
            (["default"], "gets priority 0"),
        ):
            result = subprocess.run(
                [sys.executable, str(SCRIPTS / "check_priority.py"), *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert result.returncode == 0, result.stderr
            assert expected in result.stdout
        assert hook.requests() >= before + 4  # mutate and validate, per pod
        missing = subprocess.run(
            [sys.executable, str(SCRIPTS / "check_priority.py"), "default", "no-such-class"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert missing.returncode == 1 and "no-such-class does not exist" in missing.stderr


def test_an_upgrade_keeps_the_generated_certificate(cluster: ControlPlane, release: dict[str, str]) -> None:
    """Generated mode on a real cluster: `helm upgrade` finds the Secret with `lookup` and keeps it, so the
    CA and the caBundle do not change at every upgrade. (Without the gate, and fail-open, so that this test
    neither waits for a webhook that cannot start nor blocks the shared cluster's other namespaces.)"""
    name, namespace = release["release"], release["namespace"]
    secret_name = f"{name}-priority-webhook-tls"
    values = {
        "certificates": {"mode": "generated"},
        "sidecar": {"enabled": False},
        "admission": {
            "installGate": {"enabled": False},
            "failurePolicy": "Ignore",
            "priorityClassFailurePolicy": "Ignore",
        },
    }
    with (
        helm.Config(kubeconfig_path=str(cluster.kubeconfig), namespace=namespace) as config,
        helm.Chart.load(CHART) as chart,
    ):
        config.install(chart, name, values, namespace=namespace, create_namespace=True, timeout=60)
        first = cluster.get_json("secret", secret_name, "-n", namespace)["data"]
        bundle = cluster.get_json("mutatingwebhookconfiguration", f"{name}-priority-webhook")
        config.upgrade(
            chart, name, {**values, "webhook": {"logLevel": "debug"}}, namespace=namespace, timeout=60
        )
        second = cluster.get_json("secret", secret_name, "-n", namespace)["data"]
        assert second == first, "the upgrade reused the certificate and CA"
        after = cluster.get_json("mutatingwebhookconfiguration", f"{name}-priority-webhook")
        assert [h["clientConfig"]["caBundle"] for h in after["webhooks"]] == [
            h["clientConfig"]["caBundle"] for h in bundle["webhooks"]
        ]
        deployment = cluster.get_json("deployment", f"{name}-priority-webhook", "-n", namespace)
        assert "--log-level=debug" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        config.uninstall(name, timeout=60)
    assert (
        "NotFound"
        in cluster.kubectl(
            "get", "mutatingwebhookconfiguration", f"{name}-priority-webhook", check=False
        ).stderr
    )


def test_a_class_of_the_users_own_gives_the_chart_s_pods_its_value(
    cluster: ControlPlane, release: dict[str, str]
) -> None:
    """The chart's pods carry their class's value as spec.priority (the release namespace is never sent to
    the webhook): for a class of the user's own, read with `lookup` at install. (Without the gate and
    fail-open, as above.)"""
    name, namespace = release["release"], release["namespace"]
    class_name = f"platform-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("create", "priorityclass", class_name, "--value=1000000")
    values = {
        "webhook": {"priorityClassName": class_name},
        "sidecar": {"enabled": False},
        "admission": {
            "installGate": {"enabled": False},
            "failurePolicy": "Ignore",
            "priorityClassFailurePolicy": "Ignore",
        },
    }
    try:
        with (
            helm.Config(kubeconfig_path=str(cluster.kubeconfig), namespace=namespace) as config,
            helm.Chart.load(CHART) as chart,
        ):
            config.install(chart, name, values, namespace=namespace, create_namespace=True, timeout=60)
            spec = cluster.get_json("deployment", f"{name}-priority-webhook", "-n", namespace)["spec"]
            assert spec["template"]["spec"]["priorityClassName"] == class_name
            assert spec["template"]["spec"]["priority"] == 1000000
            config.uninstall(name, timeout=60)
    finally:
        cluster.kubectl("delete", "priorityclass", class_name, "--ignore-not-found", check=False)
