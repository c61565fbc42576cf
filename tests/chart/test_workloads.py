"""The webhook Deployment and the sidecar DaemonSet: availability, probes, wiring and hardening."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import helm_python as helm
import pytest

from benchmarks.admission_overhead import CHART_SERVER_ARGS
from testkit.chart_rendering import FULLNAME, NAMESPACE, Rendered, render
from tests.chart.scenarios import SCENARIOS
from tests.chart.selectors import matches
from webhook import __version__

Render = Callable[[dict[str, Any]], Rendered]
SIDECAR = f"{FULLNAME}-sidecar"


def pod_templates(r: Rendered) -> list[tuple[str, dict[str, Any]]]:
    return [(o["kind"], o["spec"]["template"]) for o in r.objects if o["kind"] in ("Deployment", "DaemonSet")]


def container(workload: dict[str, Any]) -> dict[str, Any]:
    containers = workload["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def port_number(c: dict[str, Any], name: str) -> int:
    return next(p["containerPort"] for p in c["ports"] if p["name"] == name)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_pod_is_hardened(scenario: str, rendered: Render) -> None:
    templates = pod_templates(rendered(SCENARIOS[scenario]))
    assert templates
    for kind, template in templates:
        spec = template["spec"]
        pod_sc = spec["securityContext"]
        assert pod_sc["runAsNonRoot"] is True
        assert isinstance(pod_sc["runAsUser"], int) and pod_sc["runAsUser"] > 0
        assert pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}
        assert not any(spec.get(k) for k in ("hostPID", "hostIPC")), kind
        # hostNetwork only where asked for: the webhook on clusters whose control plane cannot reach pods
        asked = kind == "Deployment" and SCENARIOS[scenario].get("webhook", {}).get("hostNetwork", False)
        assert spec.get("hostNetwork", False) is asked, kind
        assert all("hostPath" not in v for v in spec.get("volumes", [])), kind
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["runAsNonRoot"] is True and sc["runAsUser"] > 0
            assert sc["allowPrivilegeEscalation"] is False
            assert sc["privileged"] is False
            assert sc["readOnlyRootFilesystem"] is True
            assert sc["capabilities"] == {"drop": ["ALL"]}
            assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
            assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"]
            assert c["resources"]["limits"]["memory"]
            # A read-only root needs a writable temp dir (multiprocess metrics live there).
            tmp = next(m for m in c["volumeMounts"] if m["mountPath"] == "/tmp")
            volume = next(v for v in spec["volumes"] if v["name"] == tmp["name"])
            assert "emptyDir" in volume and not tmp.get("readOnly")
            assert {"name": "TMPDIR", "value": "/tmp"} in c["env"]


def test_webhook_deployment_is_highly_available(rendered: Render) -> None:
    r = rendered({})
    deployment = r.one("Deployment", FULLNAME)
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    pod = spec["template"]
    assert pod["spec"]["priorityClassName"] == "system-cluster-critical"
    pod_labels = pod["metadata"]["labels"]
    assert matches(spec["selector"], pod_labels)
    term = pod["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert matches(term["podAffinityTerm"]["labelSelector"], pod_labels)
    pdb = r.one("PodDisruptionBudget", FULLNAME)
    assert pdb["spec"]["minAvailable"] == 1 < spec["replicas"], "a drain must be able to proceed"
    assert matches(pdb["spec"]["selector"], pod_labels)


def test_tuned_deployment_requires_spreading_and_pins_the_image(rendered: Render) -> None:
    deployment = rendered(SCENARIOS["fail-open-and-tuned"]).one("Deployment", FULLNAME)
    pod = deployment["spec"]["template"]
    assert deployment["spec"]["replicas"] == 3
    assert pod["metadata"]["labels"]["team"] == "platform"
    assert matches(deployment["spec"]["selector"], pod["metadata"]["labels"]), (
        "extra labels never break selection"
    )
    required = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required[0]["topologyKey"] == "kubernetes.io/hostname"
    assert matches(required[0]["labelSelector"], pod["metadata"]["labels"])
    c = container(deployment)
    assert c["image"] == "registry.example/priority-webhook@sha256:" + "ab" * 32
    assert "--no-legacy-critical-annotation" in c["args"]
    assert "lifecycle" not in c


def test_pdb_and_sidecar_select_disjoint_pods(rendered: Render) -> None:
    r = rendered(SCENARIOS["sidecar"])
    sidecar_labels = r.one("DaemonSet", SIDECAR)["spec"]["template"]["metadata"]["labels"]
    webhook_labels = r.one("Deployment", FULLNAME)["spec"]["template"]["metadata"]["labels"]
    assert not matches(r.one("PodDisruptionBudget", FULLNAME)["spec"]["selector"], sidecar_labels)
    assert not matches({"matchLabels": r.one("Service", FULLNAME)["spec"]["selector"]}, sidecar_labels)
    assert not matches(r.one("DaemonSet", SIDECAR)["spec"]["selector"], webhook_labels)


def test_webhook_container_serves_the_contract(rendered: Render) -> None:
    r = rendered(
        SCENARIOS["generated"]
    )  # the webhook mode's own flags: tests/chart/test_certificates_webhook.py
    deployment = r.one("Deployment", FULLNAME)
    c = container(deployment)
    assert c["image"] == f"priority-webhook:{__version__}"
    tls_mount = next(m for m in c["volumeMounts"] if m["name"] == "tls")
    assert tls_mount["readOnly"] is True and "subPath" not in tls_mount, "subPath mounts never see rotation"
    assert c["args"] == [
        "serve",
        "--bind=0.0.0.0:8443",
        f"--cert-dir={tls_mount['mountPath']}",
        "--in-cluster",
        "--workers=1",
        "--threads=4",
        "--graceful-timeout=20",
        "--shutdown-delay=5",
        "--log-level=info",
        "--system-namespace=kube-system",
    ]
    # The admission benchmark serves "as the chart does" with these settings.
    assert [f"{CHART_SERVER_ARGS[i]}={CHART_SERVER_ARGS[i + 1]}" for i in (0, 2)] == c["args"][4:6]
    assert port_number(c, "https") == 8443
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "https", "scheme": "HTTPS"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "https", "scheme": "HTTPS"}
    assert c["lifecycle"]["preStop"] == {"sleep": {"seconds": 5}}
    grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace == 30 == c["lifecycle"]["preStop"]["sleep"]["seconds"] + 20 + 5, "drain ends before SIGKILL"
    service = r.one("Service", FULLNAME)
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}
    ]
    assert matches(
        {"matchLabels": service["spec"]["selector"]}, deployment["spec"]["template"]["metadata"]["labels"]
    )


def test_the_webhook_s_temporary_files_are_in_memory(rendered: Render) -> None:
    """TMPDIR holds the metrics files written on every review and the workers' heartbeat files: in memory,
    so serving writes nothing to the node's disk, within a small limit."""
    spec = rendered(SCENARIOS["generated"]).one("Deployment", FULLNAME)["spec"]["template"]["spec"]
    c = spec["containers"][0]
    tmpdir = next(e["value"] for e in c["env"] if e["name"] == "TMPDIR")
    mount = next(m for m in c["volumeMounts"] if m["mountPath"] == tmpdir)
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    assert volume["emptyDir"] == {"medium": "Memory", "sizeLimit": "64Mi"}


@pytest.mark.parametrize(
    "scenario, secret",
    [("generated", f"{FULLNAME}-tls"), ("cert-manager", f"{FULLNAME}-tls"), ("provided", "my-webhook-tls")],
)
def test_webhook_mounts_the_secret_of_its_certificate_mode(
    scenario: str, secret: str, rendered: Render
) -> None:
    volumes = rendered(SCENARIOS[scenario]).one("Deployment", FULLNAME)["spec"]["template"]["spec"]["volumes"]
    assert next(v for v in volumes if v["name"] == "tls")["secret"]["secretName"] == secret


def test_sidecar_is_on_by_default_and_can_be_turned_off(rendered: Render) -> None:
    """The sidecar is the node half of priority: every node runs it unless the operator says otherwise."""
    r = rendered({})
    daemonset = r.one("DaemonSet", SIDECAR)
    assert "--dry-run" not in container(daemonset)["args"]
    off = rendered({"sidecar": {"enabled": False}})
    assert off.of_kind("DaemonSet") == []
    assert SIDECAR not in {sa["metadata"]["name"] for sa in off.of_kind("ServiceAccount")}
    assert SIDECAR not in {role["metadata"]["name"] for role in off.of_kind("ClusterRole")}


def test_sidecar_daemonset_runs_on_every_node(rendered: Render) -> None:
    r = rendered(SCENARIOS["sidecar"])
    daemonset = r.one("DaemonSet", SIDECAR)
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["tolerations"] == [
        {"operator": "Exists", "effect": "NoSchedule"},
        {"operator": "Exists", "effect": "PreferNoSchedule"},
    ], "every taint that keeps pods off a node, none that tells them to leave"
    assert pod["priorityClassName"] == "system-node-critical"
    assert (
        pod["serviceAccountName"]
        == SIDECAR
        != r.one("Deployment", FULLNAME)["spec"]["template"]["spec"]["serviceAccountName"]
    )
    r.one("ServiceAccount", SIDECAR)
    c = container(daemonset)
    assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in c["env"]
    assert c["args"][:3] == ["sidecar", "--node=$(NODE_NAME)", "--in-cluster"]
    assert "--bind=0.0.0.0:9090" in c["args"] and port_number(c, "metrics") == 9090
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}


SIDECAR_FLAGS = [
    ("sidecar", {"--order=priority", "--log-level=info"}),
    (
        "sidecar-ignore-pdb",
        {
            "--order=priority",
            "--dry-run",
            "--critical-priority=1000000",
            "--max-evictions-per-minute=5",
            "--ignore-pdb",
            "--log-level=debug",
        },
    ),
    ("sidecar-recreate-rejected", {"--order=priority", "--recreate-rejected", "--log-level=info"}),
]


@pytest.mark.parametrize("scenario, flags", SIDECAR_FLAGS)
def test_sidecar_values_map_to_flags(scenario: str, flags: set[str], rendered: Render) -> None:
    args = container(rendered(SCENARIOS[scenario]).one("DaemonSet", SIDECAR))["args"]
    fixed = {"sidecar", "--node=$(NODE_NAME)", "--in-cluster", "--bind=0.0.0.0:9090"}
    assert set(args) == fixed | flags
    assert len(args) == len(set(args))


def test_everything_lands_in_the_release_namespace(rendered: Render) -> None:
    r = rendered(SCENARIOS["observability"])
    cluster_scoped = {
        "ClusterRole",
        "ClusterRoleBinding",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    for obj in r.objects:
        if obj["kind"] in cluster_scoped:
            assert "namespace" not in obj["metadata"]
        elif obj["kind"] == "ConfigMap" and obj["metadata"]["name"].endswith("-dashboard"):
            assert obj["metadata"]["namespace"] == "monitoring"
        elif obj["kind"] in ("Role", "RoleBinding") and obj["metadata"]["name"].endswith("-test"):
            # `helm test` creates its dry-run pod there
            assert obj["metadata"]["namespace"] == "default"
        else:
            assert obj["metadata"]["namespace"] == NAMESPACE, obj["kind"]


@pytest.mark.parametrize(
    "grace, sleep, delay",
    [(10, 5, 0), (15, 5, 5), (30, 5, 20)],
)
def test_a_stop_budget_without_drain_time_is_refused(
    chart: helm.Chart, grace: int, sleep: int, delay: int
) -> None:
    values = {
        "webhook": {
            "terminationGracePeriodSeconds": grace,
            "preStopSleepSeconds": sleep,
            "shutdownDelaySeconds": delay,
        }
    }
    with pytest.raises(
        helm.HelmRenderError,
        match=r"must exceed webhook\.preStopSleepSeconds \(\d+\) plus webhook\.shutdownDelaySeconds \(\d+\) by",
    ):
        render(chart, values)


def test_a_stopping_replica_answers_for_its_shutdown_delay_within_its_stop_budget(rendered: Render) -> None:
    """SIGTERM after the preStop sleep; the server's graceful timeout holds its shutdown delay."""
    r = rendered(
        {
            "webhook": {
                "terminationGracePeriodSeconds": 40,
                "preStopSleepSeconds": 5,
                "shutdownDelaySeconds": 8,
            }
        }
    )
    pod = r.one("Deployment", FULLNAME)["spec"]["template"]["spec"]
    args = container(r.one("Deployment", FULLNAME))["args"]
    assert pod["terminationGracePeriodSeconds"] == 40
    assert "--graceful-timeout=30" in args and "--shutdown-delay=8" in args
    assert container(rendered({}).one("Deployment", FULLNAME))["args"].count("--shutdown-delay=5") == 1


def test_a_stalled_replica_leaves_the_service_before_the_webhook_timeout(rendered: Render) -> None:
    probe = container(rendered({}).one("Deployment", FULLNAME))["readinessProbe"]
    worst = probe["periodSeconds"] + probe["failureThreshold"] * max(
        probe["periodSeconds"], probe["timeoutSeconds"]
    )
    assert (
        worst < 5 and probe["failureThreshold"] >= 2
    )  # admission.timeoutSeconds; one slow probe is no stall


def test_a_pdb_that_blocks_every_drain_is_refused(chart: helm.Chart) -> None:
    values = {"webhook": {"replicas": 2, "podDisruptionBudget": {"minAvailable": 2}}}
    with pytest.raises(helm.HelmRenderError, match="or no node could ever be drained"):
        render(chart, values)
