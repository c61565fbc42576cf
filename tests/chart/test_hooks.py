"""The install gate (webhook configurations created only once the webhook answers), the uninstall cleanup,
`helm test`, and the scripts they run (shipped in the chart, run by the webhook's own image)."""

from __future__ import annotations

import base64
import importlib.util
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from cryptography import x509

from testkit.chart_rendering import CHART, FULLNAME, NAMESPACE, Rendered, hook_events, hook_weight
from testkit.server import free_port, webhook_server
from tests.chart.scenarios import SCENARIOS

Render = Callable[[dict[str, Any]], Rendered]
HOOKS = f"{FULLNAME}-hooks"
CONFIG_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
SCRIPTS = CHART / "files" / "hooks"
GATE_EVENTS = ["post-install", "post-upgrade", "post-rollback"]


def script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def container(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj["spec"]["template"]["spec"] if "template" in obj["spec"] else obj["spec"]
    (c,) = spec["containers"]
    return c


# --- the install gate ---------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", ["default", "cert-manager", "provided"])
def test_configurations_are_created_only_after_the_webhook_answered(scenario: str, rendered: Render) -> None:
    r = rendered(SCENARIOS[scenario])
    wait = r.one("Job", f"{HOOKS}-wait")
    assert hook_events(wait) == GATE_EVENTS
    for kind in CONFIG_KINDS:
        config = r.one(kind, FULLNAME)
        assert hook_events(config) == GATE_EVENTS
        assert hook_weight(config) > hook_weight(wait), "Helm runs hooks by weight and waits for each Job"
        # Helm 4 applies a hook in place unless a policy deletes it first: never deleted by an upgrade or a
        # rollback, so there is no moment without it.
        assert config["metadata"]["annotations"]["helm.sh/hook-delete-policy"] == "hook-failed"
        assert config not in r.installed()
    mutating, validating = (r.one(kind, FULLNAME) for kind in CONFIG_KINDS)
    assert r.hooks("post-install").index(mutating) < r.hooks("post-install").index(validating), (
        "the mutating configuration comes first: no moment with validation and no mutation"
    )
    spec = wait["spec"]
    assert spec["backoffLimit"] == 0
    timeout = int(container(wait)["args"][3])
    assert timeout == 300 and spec["activeDeadlineSeconds"] > timeout
    assert spec["template"]["spec"]["automountServiceAccountToken"] is False, "it never talks to the API"


@pytest.mark.parametrize("scenario", ["generated", "provided"])
def test_the_wait_job_checks_the_service_name_with_the_trusted_cas(scenario: str, rendered: Render) -> None:
    """It dials the name the API server dials and trusts exactly the caBundle the configurations carry."""
    r = rendered(SCENARIOS[scenario])
    args = container(r.one("Job", f"{HOOKS}-wait"))["args"]
    assert args[:3] == [
        "/hooks/wait_ready.py",
        f"https://{FULLNAME}.{NAMESPACE}.svc:443/readyz",
        "/hooks/ca.crt",
    ]
    ca = r.one("ConfigMap", HOOKS)["data"]["ca.crt"]
    for kind in CONFIG_KINDS:
        for hook in r.one(kind, FULLNAME)["webhooks"]:
            bundle = base64.b64decode(hook["clientConfig"]["caBundle"]).decode()
            assert x509.load_pem_x509_certificates(bundle.encode()) == x509.load_pem_x509_certificates(
                ca.encode()
            )
    # The address comes from the variable the kubelet sets for the Service (its name upper-cased, - as _).
    service = r.one("Service", FULLNAME)["metadata"]["name"]
    assert args[4] == service.upper().replace("-", "_") + "_SERVICE_HOST"
    assert r.one("Job", f"{HOOKS}-wait")["spec"]["template"]["spec"]["enableServiceLinks"] is True
    if scenario == "generated":
        secret = r.one("Secret", f"{FULLNAME}-tls")
        (cert,) = x509.load_pem_x509_certificates(base64.b64decode(secret["data"]["tls.crt"]))
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert f"{FULLNAME}.{NAMESPACE}.svc" in names.get_values_for_type(x509.DNSName)


@pytest.mark.parametrize("job", ["wait", "cleanup"])
def test_a_failed_hook_leaves_nothing_behind_and_shows_its_cause(job: str, rendered: Render) -> None:
    """`helm uninstall` never deletes hooks: a failed Job (and its pod) would outlive the release. Helm prints
    the log of a failed one before deleting it, and the pod's status keeps the log's last line."""
    obj = rendered({}).one("Job", f"{HOOKS}-{job}")
    annotations = obj["metadata"]["annotations"]
    assert set(annotations["helm.sh/hook-delete-policy"].split(",")) == {
        "before-hook-creation",
        "hook-succeeded",
        "hook-failed",
    }
    assert annotations["helm.sh/hook-output-log-policy"] == "hook-failed"
    assert container(obj)["terminationMessagePolicy"] == "FallbackToLogsOnError"


def test_in_cert_manager_mode_the_wait_job_reads_the_ca_from_the_secret(rendered: Render) -> None:
    r = rendered(SCENARIOS["cert-manager"])
    assert "ca.crt" not in r.one("ConfigMap", HOOKS)["data"]
    sources = r.one("Job", f"{HOOKS}-wait")["spec"]["template"]["spec"]["volumes"][0]["projected"]["sources"]
    assert sources[1]["secret"] == {"name": f"{FULLNAME}-tls", "items": [{"key": "ca.crt", "path": "ca.crt"}]}


def test_uninstall_removes_the_configurations_first(rendered: Render) -> None:
    r = rendered({})
    cleanup = r.one("Job", f"{HOOKS}-cleanup")
    assert hook_events(cleanup) == ["pre-delete"]
    assert container(cleanup)["args"] == ["/hooks/cleanup.py", FULLNAME]
    spec = cleanup["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == HOOKS and spec["automountServiceAccountToken"] is True


def test_without_the_gate_the_configurations_are_plain_resources(rendered: Render) -> None:
    r = rendered(SCENARIOS["no-install-gate"])
    assert r.of_kind("Job") == []
    for kind in CONFIG_KINDS:
        config = r.one(kind, FULLNAME)
        assert config in r.installed()
        assert not [k for k in config["metadata"].get("annotations", {}) if k.startswith("helm.sh/")]


def test_the_config_map_ships_the_scripts_as_they_are(rendered: Render) -> None:
    data = rendered({}).one("ConfigMap", HOOKS)["data"]
    for path in sorted(SCRIPTS.glob("*.py")):
        assert data[path.name] == path.read_text().rstrip("\n")


@pytest.mark.parametrize(
    "kind, name", [("Job", f"{HOOKS}-wait"), ("Job", f"{HOOKS}-cleanup"), ("Pod", f"{FULLNAME}-test")]
)
def test_hook_pods_are_hardened_and_run_the_webhook_image(kind: str, name: str, rendered: Render) -> None:
    r = rendered({})
    obj = r.one(kind, name)
    c = container(obj)
    assert c["image"] == container(r.one("Deployment", FULLNAME))["image"]
    assert c["command"] == ["python", "-I"] and c["args"][0].startswith("/hooks/")
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert c["resources"]["limits"]["memory"]


# --- the wait script against the real server ---------------------------------------------------------------


def test_wait_ready_passes_once_the_server_answers(tmp_path: Path) -> None:
    with webhook_server(tmp_path) as server:
        ca = server.session.verify
        result = subprocess.run(
            [sys.executable, "-I", str(SCRIPTS / "wait_ready.py"), server.url + "/readyz", ca, "30"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip().endswith(": ready")


SERVICE_URL = "https://priority-webhook.default.svc:{port}/readyz"


def run_wait_ready(url: str, ca: Path | str, address: str | None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin"} | ({"PRIORITY_WEBHOOK_SERVICE_HOST": address} if address else {})
    return subprocess.run(
        [
            sys.executable,
            "-I",
            str(SCRIPTS / "wait_ready.py"),
            url,
            str(ca),
            "300",
            "PRIORITY_WEBHOOK_SERVICE_HOST",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_wait_ready_needs_no_dns_the_service_address_is_in_the_environment(tmp_path: Path) -> None:
    """The name is never resolved (nothing here could): the address comes from NAME_SERVICE_HOST, and the
    certificate is still checked against the Service's DNS name."""
    with webhook_server(tmp_path) as server:
        url = SERVICE_URL.format(port=server.port)
        result = run_wait_ready(url, server.ca_file, server.host)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == f"{url} (through {server.host}): ready"


@pytest.mark.parametrize(
    "certificate_for, other_ca, cause",
    [
        (
            "another-service",
            False,
            "the certificate is not trusted for priority-webhook.default.svc: Hostname mismatch",
        ),
        (
            "priority-webhook",
            True,
            "the certificate is not trusted for priority-webhook.default.svc: unable to get local issuer certificate",
        ),
    ],
)
def test_wait_ready_fails_at_once_on_a_certificate_waiting_cannot_fix(
    certificate_for: str, other_ca: bool, cause: str, tmp_path: Path
) -> None:
    from webhook.files import tls

    tls.write_certificates(tmp_path / "certs", service=certificate_for)
    tls.write_certificates(tmp_path / "other")
    with webhook_server(tmp_path, cert_dir=tmp_path / "certs") as server:
        url = SERVICE_URL.format(port=server.port)
        ca = (tmp_path / "other" if other_ca else tmp_path / "certs") / tls.CA_CERT
        result = run_wait_ready(url, ca, server.host)
    assert result.returncode == 1
    # At once: not "not ready within 300s", the message of a timeout.
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"{url} (through {server.host}): {cause}"), line


def test_wait_ready_gives_up_with_a_reason(tmp_path: Path) -> None:
    wait_ready = script("wait_ready")
    from webhook.files import tls

    tls.write_certificates(tmp_path)
    started = time.monotonic()
    ok, message = wait_ready.wait_ready(
        f"https://127.0.0.1:{free_port()}/readyz", str(tmp_path / tls.CA_CERT), timeout=1.0, interval=0.2
    )
    assert not ok and "not ready within 1s" in message and re.search(r"refused|Errno", message)
    assert time.monotonic() - started < 10


# --- helm test -------------------------------------------------------------------------------------------

CLASSES = [
    {"metadata": {"name": "high"}, "value": 1000},
    {"metadata": {"name": "never"}, "value": 50, "preemptionPolicy": "Never"},
    {"metadata": {"name": "default-b"}, "value": 7, "globalDefault": True},
]


@pytest.mark.parametrize(
    "classes, name, expected",
    [
        (CLASSES, "high", (1000, "PreemptLowerPriority")),
        (CLASSES, "never", (50, "Never")),
        (CLASSES, "", (7, "PreemptLowerPriority")),
        (CLASSES[:2], "", (0, "PreemptLowerPriority")),
    ],
)
def test_the_test_expects_what_the_priority_plugin_computes(
    classes: list[dict[str, Any]], name: str, expected: tuple[int, str]
) -> None:
    assert script("check_priority").expected(classes, name) == expected


def test_the_test_refuses_a_missing_class() -> None:
    with pytest.raises(LookupError, match="nope"):
        script("check_priority").expected(CLASSES, "nope")


def test_the_test_pod_sends_a_dry_run_pod_in_a_served_namespace(rendered: Render) -> None:
    r = rendered({"tests": {"namespace": "team-a", "priorityClassName": "high"}})
    pod = r.one("Pod", f"{FULLNAME}-test")
    assert hook_events(pod) == ["test"]
    assert container(pod)["args"] == ["/hooks/check_priority.py", "team-a", "high"]
    assert r.one("Role", f"{FULLNAME}-test")["metadata"]["namespace"] == "team-a"
    probe = script("check_priority").probe_pod("team-a", "high")
    assert probe["spec"]["priorityClassName"] == "high" and "priority" not in probe["spec"]
    assert probe["spec"]["securityContext"]["runAsNonRoot"] is True, "admitted under Pod Security restricted"


# --- PrometheusRule --------------------------------------------------------------------------------------


def test_alerts_query_exported_metrics_with_the_configured_thresholds(rendered: Render) -> None:
    from tests.chart.test_observability import exported_families, family

    (rule,) = rendered(SCENARIOS["alerts"]).of_kind("PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    alerts = {a["alert"]: a for group in rule["spec"]["groups"] for a in group["rules"]}
    used = {family(n) for a in alerts.values() for n in re.findall(r"\bpriority_webhook_[a-z_]+", a["expr"])}
    assert used <= exported_families()
    soon = alerts["PriorityWebhookCertificateExpiresSoon"]
    assert soon["expr"].endswith(f"< {30 * 86400}") and soon["labels"]["severity"] == "warning"
    assert alerts["PriorityWebhookCertificateExpiresVerySoon"]["expr"].endswith(f"< {10 * 86400}")
    # the API server's series carry its own namespace: they are selected by webhook name instead
    ours = [a for a in alerts.values() if "apiserver_admission" not in a["expr"]]
    assert ours and all(f'namespace="{NAMESPACE}"' in a["expr"] for a in ours)
    assert rendered({}).of_kind("PrometheusRule") == []
