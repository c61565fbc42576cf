"""Metrics an operator alerts on: the serving certificate's expiry (through a rotation), build info, and
failure counters that exist before the first failure. Real server (gunicorn, 2 workers, TLS)."""

from __future__ import annotations

import re
import time
from pathlib import Path

from cryptography import x509
from prometheus_client import CollectorRegistry, Gauge

from testkit.server import webhook_server
from testkit.wait import wait_for
from webhook import __version__
from webhook.files import tls
from webhook.server import metrics

SAMPLE = re.compile(r"^(?P<name>[a-z_]+)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$", re.M)


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    found = []
    for m in SAMPLE.finditer(text):
        if m["name"] == name:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m["labels"] or ""))
            found.append((labels, float(m["value"])))
    return found


def not_after(cert_dir: Path) -> float:
    cert = x509.load_pem_x509_certificate((cert_dir / tls.TLS_CERT).read_bytes())
    return cert.not_valid_after_utc.timestamp()


def test_certificate_expiry_follows_the_served_certificate_through_a_rotation(tmp_path: Path) -> None:
    cert_dir = tmp_path / "certs"
    ca = tls.write_certificates(cert_dir, days=30)
    ca_dir = tmp_path / "ca"
    ca_dir.mkdir()
    (ca_dir / tls.CA_CERT).write_bytes((cert_dir / tls.CA_CERT).read_bytes())
    (ca_dir / tls.CA_KEY).write_bytes((cert_dir / tls.CA_KEY).read_bytes())
    assert ca is not None
    with webhook_server(tmp_path, cert_dir=cert_dir) as server:
        text = server.session.get(server.url + "/metrics", timeout=5).text
        expiry_file = tls.TLS_CERT  # the file's name: no path of the machine in a label
        ((labels, left),) = samples(text, "priority_webhook_serving_certificate_expiry_seconds")
        assert labels == {"file": expiry_file}
        assert abs(left - (not_after(cert_dir) - time.time())) < 120
        assert 29 * 86400 < left <= 30 * 86400 + 600
        ((_, stamp),) = samples(text, "priority_webhook_serving_certificate_not_after_timestamp_seconds")
        assert abs(stamp - not_after(cert_dir)) < 1

        tls.write_certificates(cert_dir, days=90, ca_dir=ca_dir)  # rotated under the same CA

        def rotated() -> bool:
            # every worker re-checks its files on its own (the metric is the earliest of them), even with
            # no new connection: this session keeps its one connection open
            text = server.session.get(server.url + "/metrics", timeout=5).text
            values = samples(text, "priority_webhook_serving_certificate_expiry_seconds")
            return bool(values) and values[0][1] > 80 * 86400

        wait_for(
            rotated, timeout=30, interval=0.5, what="the expiry metric to follow the rotated certificate"
        )


def test_build_info_and_failure_counters_are_there_from_the_start(tmp_path: Path) -> None:
    with webhook_server(tmp_path) as server:
        text = server.session.get(server.url + "/metrics", timeout=5).text
    ((labels, value),) = samples(text, "priority_webhook_build_info")
    assert value == 1 and labels["version"] == __version__ and labels["python_version"]
    counted = {
        (lab["webhook"], lab["operation"], lab["resource"], lab["result"]): v
        for lab, v in samples(text, "priority_webhook_admission_requests_total")
    }
    for webhook, operation, resource in metrics.ROUTES:
        for result in ("error", "unavailable"):
            assert counted[(webhook, operation, resource, result)] == 0


def test_no_expiry_is_invented_before_a_certificate_is_loaded() -> None:
    registry = CollectorRegistry()
    gauge = Gauge(metrics.CERTIFICATE_NOT_AFTER._name, "test", ["file"], registry=registry)
    derived = metrics._WithCertificateExpiry(registry, clock=lambda: 1000.0)
    # a labelled gauge has no sample until set, and no expiry is derived from nothing
    assert [f.samples for f in derived.collect()] == [[]]
    gauge.labels("/tls/tls.crt").set(4600.0)
    families = {f.name: f for f in derived.collect()}
    (sample,) = families[metrics.CERTIFICATE_EXPIRY].samples
    assert sample.value == 3600.0 and sample.labels == {"file": "/tls/tls.crt"}


def test_sidecar_metrics_carry_no_node_names_and_start_at_zero() -> None:
    from prometheus_client import REGISTRY

    from webhook.sidecar import metrics as sidecar_metrics
    from webhook.sidecar.actions import Settings
    from webhook.sidecar.agent import Sidecar

    agent = Sidecar(None, Settings(node_name="node-a.example.internal"))  # type: ignore[arg-type]
    assert [r.name for r in agent.reflectors] == ["node", "pods"]
    for reason in sidecar_metrics.KNOWN_FAILURE_REASONS:
        value = REGISTRY.get_sample_value(
            "priority_webhook_sidecar_eviction_failures_total", {"reason": reason}
        )
        assert value is not None
    assert (
        REGISTRY.get_sample_value(
            "priority_webhook_sidecar_build_info",
            {"version": __version__, "python_version": __import__("platform").python_version()},
        )
        == 1
    )
