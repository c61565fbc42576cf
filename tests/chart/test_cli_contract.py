"""The arguments the chart gives the containers are accepted by the real command-line parser."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testkit.chart_rendering import FULLNAME, Rendered
from tests.chart.scenarios import SCENARIOS
from webhook.cli import build_parser

Render = Callable[[dict[str, Any]], Rendered]


def container(r: Rendered, kind: str, name: str) -> dict[str, Any]:
    return r.one(kind, name)["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_webhook_arguments_parse(scenario: str, rendered: Render) -> None:
    r = rendered(SCENARIOS[scenario])
    c = container(r, "Deployment", FULLNAME)
    args = build_parser().parse_args(c["args"])
    assert args.command == "serve" and args.in_cluster is True and args.kubeconfig is None
    assert args.bind == f"0.0.0.0:{c['ports'][0]['containerPort']}"
    tls_mount = next(m for m in c["volumeMounts"] if m["name"] == "tls")
    assert args.cert_dir == Path(tls_mount["mountPath"])
    expected_legacy = SCENARIOS[scenario].get("webhook", {}).get("legacyCriticalAnnotation", True)
    assert args.legacy_critical_annotation is expected_legacy
    assert args.classes == [], "in a cluster the classes come from the API server"
    assert args.log_level == SCENARIOS[scenario].get("webhook", {}).get("logLevel", "info")


@pytest.mark.parametrize("scenario", ["sidecar", "sidecar-ignore-pdb", "sidecar-recreate-rejected"])
def test_sidecar_arguments_parse(scenario: str, rendered: Render) -> None:
    values = SCENARIOS[scenario]["sidecar"]
    c = container(rendered(SCENARIOS[scenario]), "DaemonSet", f"{FULLNAME}-sidecar")
    args = build_parser().parse_args(c["args"])
    assert args.command == "sidecar" and args.in_cluster is True
    assert args.node == "$(NODE_NAME)", "the kubelet expands it from the downward-API variable"
    assert args.bind == "0.0.0.0:9090"
    assert args.order == values.get("order", "priority")
    assert args.dry_run is values.get("dryRun", False)
    assert args.ignore_pdb is values.get("ignorePdb", False)
    assert args.recreate_rejected is values.get("recreateRejected", False)
    if "criticalPriority" in values:
        assert args.critical_priority == values["criticalPriority"]
    if "maxEvictionsPerMinute" in values:
        assert args.max_evictions_per_minute == values["maxEvictionsPerMinute"]
