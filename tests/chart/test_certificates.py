"""The three certificate modes, and the generated mode's keep / renew / overlap decision."""

from __future__ import annotations

import base64
import datetime
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from testkit.chart_rendering import CHART, FULLNAME, NAMESPACE, RELEASE, Rendered
from tests.chart.scenarios import PROVIDED_BUNDLE, SCENARIOS

Render = Callable[[dict[str, Any]], Rendered]
SECRET = f"{FULLNAME}-tls"
DNS_NAMES = [
    FULLNAME,
    f"{FULLNAME}.{NAMESPACE}",
    f"{FULLNAME}.{NAMESPACE}.svc",
    f"{FULLNAME}.{NAMESPACE}.svc.cluster.local",
]
RENEW_BEFORE_DAYS = 90
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
GENERATED = SCENARIOS["generated"]


def certs(pem: str | bytes) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(pem.encode() if isinstance(pem, str) else pem)


def signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def trusted(cert_pem: str, bundle_pem: str) -> bool:
    """What the API server checks: the serving certificate chains to a CA in the caBundle."""
    (cert,) = certs(cert_pem)
    return any(signed_by(cert, ca) for ca in certs(bundle_pem))


def secret_text(secret: dict[str, Any], key: str) -> str:
    return base64.b64decode(secret["data"][key]).decode()


def ca_bundles(r: Rendered) -> set[str]:
    return {
        hook["clientConfig"].get("caBundle", "")
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for hook in r.one(kind, FULLNAME)["webhooks"]
    }


# --- generated mode, first install (no Secret in the cluster) -------------------------------------------


def test_generated_certificate_serves_the_service_name(rendered: Render) -> None:
    secret = rendered(GENERATED).one("Secret", SECRET)
    assert secret["type"] == "kubernetes.io/tls"
    (cert,) = certs(secret_text(secret, "tls.crt"))
    (ca,) = certs(secret_text(secret, "ca.crt"))
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == DNS_NAMES
    assert (
        ExtendedKeyUsageOID.SERVER_AUTH
        in cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    )
    assert signed_by(cert, ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
    assert cert.public_key().curve.name == "secp256r1", "same key type as `priority-webhook certs`"


def test_generated_key_matches_the_certificate(rendered: Render) -> None:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat, load_pem_private_key

    secret = rendered(GENERATED).one("Secret", SECRET)
    key = load_pem_private_key(secret_text(secret, "tls.key").encode(), password=None)
    (cert,) = certs(secret_text(secret, "tls.crt"))
    spki = (Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    assert key.public_key().public_bytes(*spki) == cert.public_key().public_bytes(*spki)


def test_expiry_annotation_records_the_certificate_not_after(rendered: Render) -> None:
    secret = rendered(GENERATED).one("Secret", SECRET)
    (cert,) = certs(secret_text(secret, "tls.crt"))
    recorded = datetime.datetime.strptime(
        secret["metadata"]["annotations"]["priority-webhook.io/not-after"], TIME_FORMAT
    ).replace(tzinfo=datetime.UTC)
    assert abs(recorded - cert.not_valid_after_utc) < datetime.timedelta(minutes=1)
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert abs(lifetime - datetime.timedelta(days=730)) < datetime.timedelta(hours=1)
    assert secret["metadata"]["annotations"]["priority-webhook.io/dns-names"] == ",".join(DNS_NAMES)


def test_every_webhook_entry_trusts_the_secret_that_is_mounted(rendered: Render) -> None:
    """One certificate per render, though several templates ask for it."""
    r = rendered(GENERATED)
    secret = r.one("Secret", SECRET)
    (bundle,) = ca_bundles(r)
    assert base64.b64decode(bundle).decode() == secret_text(secret, "ca-bundle.crt")
    assert trusted(secret_text(secret, "tls.crt"), base64.b64decode(bundle).decode())


# --- cert-manager and provided modes ---------------------------------------------------------------------


def test_cert_manager_mode_issues_through_a_private_ca(rendered: Render) -> None:
    r = rendered(SCENARIOS["cert-manager"])
    assert r.of_kind("Secret") == []
    serving = r.one("Certificate", SECRET)["spec"]
    assert serving["secretName"] == SECRET and serving["dnsNames"] == DNS_NAMES
    assert serving["privateKey"]["rotationPolicy"] == "Always"
    issuer = r.one("Issuer", serving["issuerRef"]["name"])
    ca_certificate = r.one("Certificate", f"{FULLNAME}-ca")["spec"]
    assert ca_certificate["isCA"] is True
    assert issuer["spec"] == {"ca": {"secretName": ca_certificate["secretName"]}}
    assert r.one("Issuer", ca_certificate["issuerRef"]["name"])["spec"] == {"selfSigned": {}}


@pytest.mark.parametrize("scenario", ["cert-manager", "cert-manager-issuer"])
def test_cert_manager_injects_the_ca_into_both_configurations(scenario: str, rendered: Render) -> None:
    r = rendered(SCENARIOS[scenario])
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        config = r.one(kind, FULLNAME)
        annotations = config["metadata"]["annotations"]
        assert annotations["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/{SECRET}"
        assert {k for k in annotations if not k.startswith("helm.sh/")} == {"cert-manager.io/inject-ca-from"}
    r.one("Certificate", SECRET)
    assert ca_bundles(r) == {""}, "cainjector owns the caBundle"


def test_cert_manager_with_an_issuer_of_the_operator(rendered: Render) -> None:
    r = rendered(SCENARIOS["cert-manager-issuer"])
    assert r.of_kind("Issuer") == []
    assert r.one("Certificate")["spec"]["issuerRef"] == {
        "name": "corporate-ca",
        "kind": "ClusterIssuer",
        "group": "cert-manager.io",
    }


def test_provided_mode_uses_the_operators_secret_and_bundle(rendered: Render) -> None:
    r = rendered(SCENARIOS["provided"])
    assert r.of_kind("Secret") == [] and r.of_kind("Certificate") == []
    assert ca_bundles(r) == {PROVIDED_BUNDLE}
    assert len(certs(base64.b64decode(PROVIDED_BUNDLE))) == 2, "old and new CA both trusted"
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        annotations = r.one(kind, FULLNAME)["metadata"].get("annotations", {})
        assert not [k for k in annotations if k.startswith("cert-manager.io/")]


# --- generated mode on upgrade: the keep / renew decision -------------------------------------------------
# `helm upgrade` finds the Secret with `lookup`, which offline rendering cannot answer; the decision itself
# is the chart's named template priority-webhook.generatedTLS, called here with the Secret and the time
# given, through a probe template added to a copy of the chart and rendered by the real engine.

PROBE = """{{- $cases := .Files.Get "probe/cases.json" | fromJson }}
{{- range $name, $case := $cases }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ $name }}
data:
  result: {{ include "priority-webhook.generatedTLS" (dict "root" $ "existing" $case.existing
      "now" (toDate "2006-01-02T15:04:05Z07:00" $case.now)) | quote }}
{{- end }}
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Callable[[dict[str, Any]], dict[str, dict[str, Any]]]:
    base = tmp_path_factory.mktemp("probe")
    runs = iter(range(1000))

    def run(cases: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        copy = Path(shutil.copytree(CHART, base / f"run{next(runs)}" / "priority-webhook"))
        (copy / "templates" / "zz-probe.yaml").write_text(PROBE)
        (copy / "probe").mkdir()
        (copy / "probe" / "cases.json").write_text(json.dumps(cases))
        with helm.Chart.load(copy) as chart:
            text = chart.render(GENERATED, name=RELEASE, namespace=NAMESPACE)[
                "priority-webhook/templates/zz-probe.yaml"
            ]
        return {
            doc["metadata"]["name"]: yaml.safe_load(doc["data"]["result"])
            for doc in yaml.safe_load_all(text)
            if doc
        }

    return run


def as_secret(material: dict[str, Any], **annotation_overrides: str | None) -> dict[str, Any]:
    """The Secret the chart would have stored for `material` (as `lookup` returns it)."""
    annotations = {
        "priority-webhook.io/not-after": material["notAfter"],
        "priority-webhook.io/dns-names": material["dnsNames"],
    }
    annotations.update(annotation_overrides)
    data = {
        "tls.crt": material["crt"],
        "tls.key": material["key"],
        "ca.crt": material["ca"],
        "ca-bundle.crt": material["bundle"],
    }
    return {
        "metadata": {"annotations": {k: v for k, v in annotations.items() if v is not None}},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def at(material: dict[str, Any], days_before_expiry: float) -> str:
    expiry = datetime.datetime.strptime(material["notAfter"], TIME_FORMAT)
    return (expiry - datetime.timedelta(days=days_before_expiry)).strftime(TIME_FORMAT)


@pytest.fixture(scope="module")
def installed(probe: Callable[[dict[str, Any]], dict[str, dict[str, Any]]]) -> dict[str, Any]:
    now = datetime.datetime.now(datetime.UTC).strftime(TIME_FORMAT)
    material = probe({"install": {"existing": {}, "now": now}})["install"]
    assert material["renewed"] is True
    return material


def test_first_install_trusts_a_single_fresh_ca(installed: dict[str, Any]) -> None:
    assert installed["bundle"] == installed["ca"] and len(certs(installed["bundle"])) == 1
    assert trusted(installed["crt"], installed["bundle"])


# case -> (Secret found by lookup, days before expiry at upgrade time, renewed?)
def upgrade_cases(installed: dict[str, Any]) -> dict[str, tuple[dict[str, Any], float, bool]]:
    secret = as_secret(installed)
    incomplete = as_secret(installed)
    del incomplete["data"]["ca-bundle.crt"]
    return {
        "fresh-upgrade": (secret, 700, False),
        "one-day-before-the-window": (secret, RENEW_BEFORE_DAYS + 1, False),
        "inside-the-window": (secret, RENEW_BEFORE_DAYS - 1, True),
        "already-expired": (secret, -3, True),
        "service-renamed": (
            as_secret(installed, **{"priority-webhook.io/dns-names": "other.svc"}),
            700,
            True,
        ),
        "no-expiry-recorded": (as_secret(installed, **{"priority-webhook.io/not-after": None}), 700, True),
        "garbled-expiry": (as_secret(installed, **{"priority-webhook.io/not-after": "soon"}), 700, True),
        "incomplete-secret": (incomplete, 700, True),
    }


@pytest.fixture(scope="module")
def upgrades(probe: Callable[..., dict[str, dict[str, Any]]], installed: dict[str, Any]) -> dict[str, Any]:
    cases = upgrade_cases(installed)
    return probe({name: {"existing": s, "now": at(installed, days)} for name, (s, days, _) in cases.items()})


@pytest.mark.parametrize(
    "case",
    [
        "fresh-upgrade",
        "one-day-before-the-window",
        "inside-the-window",
        "already-expired",
        "service-renamed",
        "no-expiry-recorded",
        "garbled-expiry",
        "incomplete-secret",
    ],
)
def test_upgrade_keeps_or_renews(case: str, installed: dict[str, Any], upgrades: dict[str, Any]) -> None:
    _, _, renew = upgrade_cases(installed)[case]
    result = upgrades[case]
    assert result["renewed"] is renew
    if not renew:
        assert {k: result[k] for k in ("crt", "key", "ca", "bundle")} == {
            k: installed[k] for k in ("crt", "key", "ca", "bundle")
        }
        return
    assert result["crt"] != installed["crt"] and result["key"] != installed["key"]
    assert result["ca"] != installed["ca"]
    assert result["dnsNames"] == ",".join(DNS_NAMES)
    # Both the new certificate and the one replicas still serve until their Secret volume updates verify.
    assert trusted(result["crt"], result["bundle"])
    assert trusted(installed["crt"], result["bundle"])
    assert certs(result["bundle"]) == certs(result["ca"]) + certs(installed["ca"])


def test_a_second_rotation_drops_the_oldest_ca(
    probe: Callable[..., dict[str, dict[str, Any]]], installed: dict[str, Any], upgrades: dict[str, Any]
) -> None:
    first = upgrades["inside-the-window"]
    second = probe({"again": {"existing": as_secret(first), "now": at(first, 1)}})["again"]
    bundle = certs(second["bundle"])
    assert len(bundle) == 2
    assert bundle[0] == certs(second["ca"])[0] and bundle[1] == certs(first["ca"])[0]
    assert not trusted(installed["crt"], second["bundle"])
    assert trusted(first["crt"], second["bundle"]) and trusted(second["crt"], second["bundle"])
