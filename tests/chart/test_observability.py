"""ServiceMonitor/PodMonitor, NetworkPolicy and the Grafana dashboard point at what really exists."""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from testkit.chart_rendering import FULLNAME, NAMESPACE, Rendered
from tests.chart.scenarios import SCENARIOS
from tests.chart.selectors import matches

Render = Callable[[dict[str, Any]], Rendered]
SIDECAR = f"{FULLNAME}-sidecar"
OBSERVABILITY = SCENARIOS["observability"]

# Where the webhook, its watch caches and the sidecar define their metrics.
METRIC_MODULES = ("webhook.server.metrics", "webhook.kube.metrics", "webhook.sidecar.metrics")
SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_created")


def family(sample_name: str) -> str:
    for suffix in SUFFIXES:
        if sample_name.endswith(suffix):
            return sample_name[: -len(suffix)]
    return sample_name


def exported_families() -> set[str]:
    """Family names of every prometheus_client metric the metrics modules define."""
    from prometheus_client import Counter, Gauge, Histogram, Summary

    found: set[str] = set()
    for name in METRIC_MODULES:
        module = importlib.import_module(name)
        for value in vars(module).values():
            if isinstance(value, Counter | Gauge | Histogram | Summary):
                found.add(value._name)
    from webhook.server.metrics import CERTIFICATE_EXPIRY

    return found | {CERTIFICATE_EXPIRY}  # derived from the expiry timestamp at scrape time


def test_service_monitor_scrapes_the_https_port_verifying_the_certificate(rendered: Render) -> None:
    r = rendered({**OBSERVABILITY, **SCENARIOS["generated"]})  # a Secret the chart renders, to check it
    monitor = r.one("ServiceMonitor", FULLNAME)
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    service = r.one("Service", FULLNAME)
    assert matches(monitor["spec"]["selector"], service["metadata"]["labels"])
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert (endpoint["scheme"], endpoint["path"]) == ("https", "/metrics")
    tls = endpoint["tlsConfig"]
    assert "insecureSkipVerify" not in tls
    secret = r.one("Secret", tls["ca"]["secret"]["name"])
    assert tls["ca"]["secret"]["key"] in secret["data"]
    assert tls["serverName"] in secret["metadata"]["annotations"]["priority-webhook.io/dns-names"].split(",")


def test_service_monitor_uses_the_ca_key_of_cert_manager(rendered: Render) -> None:
    values = {**SCENARIOS["cert-manager"], "serviceMonitor": {"enabled": True}}
    tls = rendered(values).one("ServiceMonitor", FULLNAME)["spec"]["endpoints"][0]["tlsConfig"]
    assert tls["ca"]["secret"] == {"name": f"{FULLNAME}-tls", "key": "ca.crt"}


def test_pod_monitor_scrapes_the_sidecar_metrics_port(rendered: Render) -> None:
    r = rendered(OBSERVABILITY)
    monitor = r.one("PodMonitor", SIDECAR)
    daemonset = r.one("DaemonSet", SIDECAR)
    assert matches(monitor["spec"]["selector"], daemonset["spec"]["template"]["metadata"]["labels"])
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    ports = daemonset["spec"]["template"]["spec"]["containers"][0]["ports"]
    assert endpoint["port"] in {p["name"] for p in ports}


def test_no_pod_monitor_without_the_sidecar(rendered: Render) -> None:
    r = rendered({"serviceMonitor": {"enabled": True}, "sidecar": {"enabled": False}})
    assert r.of_kind("PodMonitor") == [] and len(r.of_kind("ServiceMonitor")) == 1


@pytest.mark.parametrize(
    "name, component, port", [(FULLNAME, "Deployment", "https"), (SIDECAR, "DaemonSet", "metrics")]
)
def test_network_policies_allow_one_port_in_and_the_api_server_out(
    name: str, component: str, port: str, rendered: Render
) -> None:
    r = rendered(OBSERVABILITY)
    policy = r.one("NetworkPolicy", name)["spec"]
    workload = r.one(component, name)
    assert matches(policy["podSelector"], workload["spec"]["template"]["metadata"]["labels"])
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    (ingress,) = policy["ingress"]
    assert ingress["ports"] == [{"protocol": "TCP", "port": port}]
    if component == "Deployment":
        # the operator's sources, and the install gate's Job (it checks /readyz through the Service)
        wait_job = r.one("Job", f"{FULLNAME}-hooks-wait")["spec"]["template"]["metadata"]["labels"]
        assert ingress["from"][0] == {"ipBlock": {"cidr": "10.0.0.0/24"}}
        assert matches(ingress["from"][1]["podSelector"], wait_job) and len(ingress["from"]) == 2
    else:
        assert "from" not in ingress
    assert policy["egress"] == [
        {"ports": [{"protocol": "TCP", "port": 6443}], "to": [{"ipBlock": {"cidr": "10.0.0.1/32"}}]}
    ]


def test_dashboard_config_map_is_found_by_the_grafana_sidecar(rendered: Render) -> None:
    config_map = rendered(OBSERVABILITY).one("ConfigMap", f"{FULLNAME}-dashboard")
    assert config_map["metadata"]["namespace"] == "monitoring"
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    (text,) = config_map["data"].values()
    dashboard = json.loads(text)
    assert dashboard["uid"] == "priority-webhook"
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    assert all(p["targets"] for p in panels)


def test_dashboard_queries_only_metrics_that_are_exported(rendered: Render) -> None:
    config_map = rendered(OBSERVABILITY).one("ConfigMap", f"{FULLNAME}-dashboard")
    dashboard = json.loads(next(iter(config_map["data"].values())))
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    used = {family(name) for expr in exprs for name in re.findall(r"\bpriority_webhook_[a-z_]+", expr)}
    exported = exported_families()
    unknown = used - exported
    assert not unknown, f"the dashboard queries metrics nobody exports: {sorted(unknown)}"
    for prefix in ("priority_webhook_admission_", "priority_webhook_cache_", "priority_webhook_sidecar_"):
        assert any(name.startswith(prefix) for name in used), f"no panel for {prefix}*"


def test_dashboard_is_off_by_default(rendered: Render) -> None:
    assert [c["metadata"]["name"] for c in rendered({}).of_kind("ConfigMap")] == [f"{FULLNAME}-hooks"]
