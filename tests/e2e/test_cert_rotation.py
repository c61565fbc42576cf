"""Run-time certificate rotation on a real API server, with pods being created through the webhook all along.

The webhook runs as the chart deploys it in `certificates.mode: webhook` (`serve --ca-secret ...
--webhook-configuration ...`), under the chart's own ServiceAccount and RBAC (a token of it, so the API
server's authorizer decides what it may do), with lifetimes short enough to see a whole CA rotation: a CA
lives 60 s (its successor is made at 40 s, signs after a settle time of 6 s, the old one leaves the bundle
when it expires at 60 s) and a serving certificate 20 s (renewed every 13 s). The chart's webhook configurations
are registered without a caBundle, as the chart renders them in that mode: the webhook writes it.

Meanwhile one client creates pods (for real, failurePolicy Fail) through the API server, and a prober
opens fresh TLS connections to the webhook trusting only the caBundle the API server has right then (the
API server keeps its connections open for long: the prober is what its next new connection would see).
Not one creation and not one handshake may fail, and the caBundle and the served certificate must change.
"""

from __future__ import annotations

import base64
import datetime
import socket
import ssl
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import requests
import yaml
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes

from testkit.chart_rendering import CHART
from testkit.cluster_webhook import (
    Outcome,
    admission_requests,
    chart_webhook_configurations,
    create,
    ensure_namespace,
    pod,
    unregister,
)
from testkit.envtest import ControlPlane
from testkit.server import WebhookServer, free_port, webhook_server
from testkit.wait import wait_for
from tests.e2e.chart_rbac import InstalledRbac, install_rbac, uninstall_rbac
from webhook.kube.ca_secret import RotationSettings
from webhook.kube.config import api_client
from webhook.kube.rotator import Rotator

CA_VALIDITY, CERT_VALIDITY = "60s", "20s"


CONFIG_PATHS = (
    "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
)


def bundles_of(session: requests.Session, cluster: ControlPlane, name: str) -> list[bytes]:
    """The caBundle of every entry of both live configurations, decoded."""
    found = []
    for path in CONFIG_PATHS:
        response = session.get(f"{cluster.url}{path}/{name}", timeout=30)
        response.raise_for_status()
        found += [
            base64.b64decode(h["clientConfig"].get("caBundle", "")) for h in response.json()["webhooks"]
        ]
    return found


def fingerprint(cert: x509.Certificate) -> str:
    return cert.fingerprint(hashes.SHA256()).hex()


def fingerprints(pem: bytes) -> tuple[str, ...]:
    return tuple(fingerprint(c) for c in x509.load_pem_x509_certificates(pem))


def issuer_in(cert: x509.Certificate, bundle_pem: bytes) -> str:
    """The fingerprint of the CA in the bundle that signed `cert` (every CA has the same name)."""
    for ca in x509.load_pem_x509_certificates(bundle_pem):
        try:
            cert.verify_directly_issued_by(ca)
        except (InvalidSignature, ValueError, TypeError):
            continue
        return fingerprint(ca)
    raise AssertionError("the served certificate chains to no CA of the bundle it was verified with")


@dataclass
class Observed:
    """What the clients saw while the certificates rotated."""

    created: int = 0
    failed: list[str] = field(default_factory=list)
    handshakes: int = 0
    served: list[str] = field(default_factory=list)  # fingerprints of the served certificates, in order
    issuers: list[str] = field(default_factory=list)  # fingerprints of the CAs that signed them, in order
    bundles: list[tuple[str, ...]] = field(default_factory=list)  # the caBundles seen, in order


def served_certificate(port: int, bundle_pem: bytes) -> x509.Certificate:
    """One fresh TLS connection trusting only `bundle_pem`, as the API server makes one."""
    context = ssl.create_default_context(cadata=bundle_pem.decode())
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as conn,
    ):
        der = conn.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


@pytest.fixture
def installed(cluster: ControlPlane, tmp_path: Path) -> Iterator[InstalledRbac]:
    release = f"rot{uuid.uuid4().hex[:5]}"
    rbac = install_rbac(
        cluster,
        tmp_path / "rbac",
        {"certificates": {"mode": "webhook"}, "sidecar": {"enabled": False}},
        release=release,
        namespace=f"pw-rotation-{uuid.uuid4().hex[:6]}",
    )
    yield rbac
    uninstall_rbac(rbac)
    cluster.kubectl("delete", "namespace", rbac.namespace, "--wait=false", "--ignore-not-found", check=False)


def test_a_ca_rotation_and_serving_renewals_fail_no_admission(
    cluster: ControlPlane, tmp_path: Path, installed: InstalledRbac
) -> None:
    namespace = installed.namespace
    fullname = installed.service_account("webhook")
    secret = f"{fullname}-webhook-ca"
    served_ns = f"rotation-team-{uuid.uuid4().hex[:6]}"
    ensure_namespace(cluster, served_ns)
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    configs = chart_webhook_configurations(
        url,
        "",
        {"kubeVersionOverride": cluster.version, "certificates": {"mode": "webhook"}},
        release=fullname.removesuffix("-priority-webhook"),
        namespace=namespace,
    )
    for config in configs:
        for hook in config["webhooks"]:
            del hook["clientConfig"]["caBundle"]  # as the chart renders it in this mode
    cluster.apply(*configs)
    cert_dir = tmp_path / "tls"
    args = [
        "--kubeconfig",
        str(installed.kubeconfig("webhook")),
        "--workers",
        "1",
        f"--ca-secret={namespace}/{secret}",
        f"--webhook-configuration={fullname}",
        f"--service={fullname}",
        f"--ca-validity={CA_VALIDITY}",
        f"--cert-validity={CERT_VALIDITY}",
        "--rotation-interval=1s",
    ]
    try:
        with webhook_server(tmp_path, *args, cert_dir=cert_dir, port=port, startup_timeout=120) as server:
            _rotate_under_load(cluster, server, fullname, served_ns, port)
    finally:
        unregister(cluster, configs)
        cluster.kubectl("delete", "namespace", served_ns, "--wait=false", check=False)
    log = (tmp_path / f"server-{port}.log").read_text()
    assert "CA Secret: add-next" in log and "CA Secret: promote" in log, log[-3000:]
    # The chart's RBAC allowed every request of the rotation (the configuration watches retry quietly).
    assert "forbidden" not in log and "HTTP 403" not in log, log[-3000:]


def _rotate_under_load(
    cluster: ControlPlane, server: WebhookServer, fullname: str, served_ns: str, port: int
) -> None:
    # Ready means: the caBundle the API server has trusts the certificate the webhook serves.
    admin, probe = cluster.session(), cluster.session()
    first = bundles_of(probe, cluster, fullname)
    assert all(first) and len(set(first)) == 1, "the webhook wrote the caBundle before it served"
    served_certificate(port, first[0])

    seen = Observed()
    stop = threading.Event()
    before = admission_requests(server)

    def creating() -> None:
        while not stop.is_set():
            name = f"p-{uuid.uuid4().hex[:8]}"
            outcome = create(admin, cluster, pod(name, served_ns), dry_run=False)
            if outcome.allowed or stored_by_its_own_retry(outcome, name):
                seen.created += 1
            else:
                seen.failed.append(f"create: {outcome.code} {outcome.message}")

    def stored_by_its_own_retry(outcome: Outcome, name: str) -> bool:
        """409 AlreadyExists for a name only this loop uses: the API server has stored this very pod yet
        answered 409 (seen once on a loaded machine; most likely a write retried inside the API server after
        a transient etcd error). The pod was admitted: it counts as created if it is really there."""
        if outcome.code != 409 or outcome.reason != "AlreadyExists":
            return False
        return admin.get(f"{cluster.url}/api/v1/namespaces/{served_ns}/pods/{name}", timeout=30).ok

    def probing() -> None:
        while not stop.is_set():
            try:
                for bundle in set(bundles_of(probe, cluster, fullname)):
                    cert = served_certificate(port, bundle)
                    seen.handshakes += 1
                    if not seen.served or seen.served[-1] != fingerprint(cert):
                        seen.served.append(fingerprint(cert))
                        seen.issuers.append(issuer_in(cert, bundle))
                    fps = fingerprints(bundle)
                    if not seen.bundles or seen.bundles[-1] != fps:
                        seen.bundles.append(fps)
            except (ssl.SSLError, OSError, requests.RequestException) as err:
                seen.failed.append(f"handshake: {err}")
            stop.wait(0.05)

    threads = [threading.Thread(target=creating), threading.Thread(target=probing)]
    for thread in threads:
        thread.start()
    try:
        # A whole CA rotation: a successor joins the bundle, signs, and the first CA leaves the bundle.
        first_cas = set(fingerprints(first[0]))

        def rotated() -> bool:
            if seen.failed:
                return True  # stop early: the assertion below reports it
            latest = seen.bundles[-1] if seen.bundles else ()
            return bool(latest) and not first_cas & set(latest) and len(seen.served) >= 4

        wait_for(rotated, timeout=180, interval=0.5, what="a whole CA rotation")
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
        admin.close()
        probe.close()
    print(
        f"rotation under load: {seen.created} pods created, {seen.handshakes} fresh handshakes, "
        f"{len(seen.served)} served certificates, {len(seen.bundles)} caBundles, {len(seen.failed)} failures"
    )
    assert seen.failed == [], seen.failed[:5]
    assert seen.created >= 20 and seen.handshakes >= 20, seen
    # Both webhooks were called for every pod (and more for retries would be fine): they were in the path.
    assert admission_requests(server) - before >= 2 * seen.created
    # The bundle grew (successor trusted), then lost the first CA; the served certificate changed issuer.
    assert 2 in [len(b) for b in seen.bundles], seen.bundles
    assert len(set(seen.issuers)) >= 2 and seen.issuers[-1] in seen.bundles[-1], seen.issuers


def test_helm_keeps_the_ca_bundle_the_webhook_wrote(cluster: ControlPlane, tmp_path: Path) -> None:
    """Real Helm on the real API server: the chart renders no caBundle, the webhook (one pass of its loop,
    as its own ServiceAccount) writes it, an upgrade leaves it alone, and the install gate's hooks, which
    re-create the configurations at every upgrade, are rendered already carrying it (`lookup` of the CA
    Secret). Fail-open and without the gate, so that nothing waits for a webhook that cannot run here."""
    name, namespace = f"own{uuid.uuid4().hex[:5]}", f"pw-own-{uuid.uuid4().hex[:6]}"
    fullname = f"{name}-priority-webhook"
    values: dict[str, Any] = {
        "kubeVersionOverride": cluster.version,
        "sidecar": {"enabled": False},
        "admission": {
            "installGate": {"enabled": False},
            "failurePolicy": "Ignore",
            "priorityClassFailurePolicy": "Ignore",
        },
    }
    probe = cluster.session()
    try:
        with (
            helm.Config(kubeconfig_path=str(cluster.kubeconfig), namespace=namespace) as config,
            helm.Chart.load(CHART) as chart,
        ):
            config.install(chart, name, values, namespace=namespace, create_namespace=True, timeout=60)
            assert set(bundles_of(probe, cluster, fullname)) == {b""}, "installed without a caBundle"

            token = cluster.service_account_kubeconfig(tmp_path / "webhook.kubeconfig", namespace, fullname)
            rotator = Rotator(
                api_client(str(token), False),
                RotationSettings(
                    namespace=namespace,
                    secret=f"{fullname}-webhook-ca",
                    configuration=fullname,
                    service=fullname,
                    cert_dir=tmp_path / "tls",
                    ca_lifetime=datetime.timedelta(days=365),
                    cert_lifetime=datetime.timedelta(days=90),
                ),
            )
            assert rotator.reconcile().ready
            secret = cluster.get_json("secret", f"{fullname}-webhook-ca", "-n", namespace)
            bundle = base64.b64decode(secret["data"]["ca-bundle.crt"])
            assert set(bundles_of(probe, cluster, fullname)) == {bundle}

            config.upgrade(
                chart, name, {**values, "webhook": {"logLevel": "debug"}}, namespace=namespace, timeout=60
            )
            assert set(bundles_of(probe, cluster, fullname)) == {bundle}, "the upgrade left it alone"
            assert rotator.reconcile().actions == [], "nothing for the webhook to repair"

            # What `helm upgrade` with the install gate renders (lookup answered by this cluster): the hook
            # configurations it deletes and re-creates already trust the webhook. Offline: no caBundle.
            gated = {**values, "admission": {**values["admission"], "installGate": {"enabled": True}}}
            live = config.render(chart, gated, name=name, namespace=namespace, is_upgrade=True)
            offline = chart.render(gated, name=name, namespace=namespace, is_upgrade=True)
            for rendered, expected in ((live, {base64.b64encode(bundle).decode()}), (offline, {None})):
                configs = [
                    doc
                    for path, text in rendered.items()
                    if path.endswith("webhookconfiguration.yaml")
                    for doc in yaml.safe_load_all(text)
                    if doc and doc["kind"].endswith("WebhookConfiguration")
                ]
                assert len(configs) == 2
                for doc in configs:
                    assert "helm.sh/hook" in doc["metadata"]["annotations"]
                    assert {h["clientConfig"].get("caBundle") for h in doc["webhooks"]} == expected
            config.uninstall(name, timeout=60)
    finally:
        probe.close()
        cluster.kubectl(
            "delete",
            "clusterrole,clusterrolebinding",
            "-l",
            f"app.kubernetes.io/instance={name}",
            "--ignore-not-found",
            check=False,
        )
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", "--ignore-not-found", check=False)


def test_replicas_racing_agree_on_one_ca(
    cluster: ControlPlane, tmp_path: Path, installed: InstalledRbac
) -> None:
    """Four replicas start at once with no CA Secret: one create wins, the others get 409 and read the
    winner's, and every replica serves a certificate of that one CA. A later pass by each changes nothing."""
    namespace, fullname = installed.namespace, installed.service_account("webhook")
    kubeconfig = str(installed.kubeconfig("webhook"))
    replicas = [
        Rotator(
            api_client(kubeconfig, False),
            RotationSettings(
                namespace=namespace,
                secret=f"{fullname}-webhook-ca",
                configuration=None,
                service=fullname,
                cert_dir=tmp_path / f"replica{i}",
                ca_lifetime=datetime.timedelta(days=365),
                cert_lifetime=datetime.timedelta(days=90),
            ),
        )
        for i in range(4)
    ]
    start = threading.Barrier(len(replicas))
    results: dict[int, list[str]] = {}

    def first_pass(i: int) -> None:
        start.wait()
        results[i] = replicas[i].reconcile().actions

    threads = [threading.Thread(target=first_pass, args=(i,)) for i in range(len(replicas))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    creations = [
        a for actions in results.values() for a in actions if a == "CA Secret: create (generation 1)"
    ]
    assert len(results) == 4 and len(creations) == 1, results
    secret = cluster.get_json("secret", f"{fullname}-webhook-ca", "-n", namespace)
    (ca,) = x509.load_pem_x509_certificates(base64.b64decode(secret["data"]["ca.crt"]))
    for replica in replicas:
        (served,) = x509.load_pem_x509_certificates((replica.settings.cert_dir / "tls.crt").read_bytes())
        served.verify_directly_issued_by(ca)
        assert replica.reconcile().actions == []
    assert secret["metadata"]["annotations"]["priority-webhook.io/ca-generation"] == "1"


def test_an_operator_forces_a_ca_rotation_with_overlap(
    cluster: ControlPlane, tmp_path: Path, installed: InstalledRbac
) -> None:
    """`kubectl annotate secret ... priority-webhook.io/renew-ca=now` (as docs/operations.md says): the
    next pass trusts a successor next to the CA, a pass after the settle time lets it sign, and the old CA
    stays trusted (it has not expired)."""
    namespace, fullname = installed.namespace, installed.service_account("webhook")
    name = f"{fullname}-webhook-ca"
    now = [datetime.datetime.now(datetime.UTC)]
    replica = Rotator(
        api_client(str(installed.kubeconfig("webhook")), False),
        RotationSettings(
            namespace=namespace,
            secret=name,
            configuration=None,
            service=fullname,
            cert_dir=tmp_path / "tls",
            ca_lifetime=datetime.timedelta(days=365),
            cert_lifetime=datetime.timedelta(days=90),
        ),
        clock=lambda: now[0],
    )
    replica.reconcile()
    assert replica.reconcile().actions == []
    first = cluster.get_json("secret", name, "-n", namespace)["data"]["ca.crt"]
    cluster.kubectl("annotate", "secret", name, "-n", namespace, "priority-webhook.io/renew-ca=now")

    assert replica.reconcile().actions == ["CA Secret: add-next (generation 2)"]
    secret = cluster.get_json("secret", name, "-n", namespace)
    assert "priority-webhook.io/renew-ca" not in secret["metadata"]["annotations"]
    assert secret["data"]["ca.crt"] == first and len(fingerprints(b64(secret, "ca-bundle.crt"))) == 2

    now[0] += datetime.timedelta(minutes=2)  # past the settle time
    actions = replica.reconcile().actions
    assert actions[0] == "CA Secret: promote (generation 3)" and "signed by another CA" in actions[1], actions
    secret = cluster.get_json("secret", name, "-n", namespace)
    (new_ca,) = x509.load_pem_x509_certificates(b64(secret, "ca.crt"))
    (old_ca,) = x509.load_pem_x509_certificates(base64.b64decode(first))
    assert fingerprints(b64(secret, "ca-bundle.crt")) == (fingerprint(old_ca), fingerprint(new_ca))
    (served,) = x509.load_pem_x509_certificates((tmp_path / "tls" / "tls.crt").read_bytes())
    served.verify_directly_issued_by(new_ca)


def b64(secret: dict[str, Any], key: str) -> bytes:
    return base64.b64decode(secret["data"][key])
