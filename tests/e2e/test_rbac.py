"""The chart's RBAC judged by the real authorizer, with the permissions the code needs taken from the code.

For every values combination that changes RBAC, the chart's rendered ServiceAccounts, roles and bindings
are applied to a real kube-apiserver, and each component's own code runs with its ServiceAccount's token:
`priority-webhook serve --kubeconfig` until its class cache is ready, the sidecar agent through a whole
preemption (record, events, eviction or delete, the rejected pod's recreation) with the options of that
combination. The API server's audit log then tells exactly which requests the code made: that list, not
one written here, is what the chart must allow. So a grant removed by mistake fails here as a 403 of
the code itself, and a SubjectAccessReview per request confirms it; a list of things no component may
ever do (read Secrets, write Nodes or PriorityClasses, delete pods unless an option needs it, ...) is
checked with SubjectAccessReviews too.

Everything else the chart renders, for every named values set of the chart tests (each rendered for this
API server's version unless the set names its own), is applied with `kubectl apply --dry-run=server`,
except the kinds kube-apiserver does not serve without their CustomResourceDefinitions
(prometheus-operator's ServiceMonitor and PodMonitor, cert-manager's Certificate and Issuer): those are
listed, not silently skipped. Rendered for the current version this includes every field the chart gates
by version (matchConditions, unhealthyPodEvictionPolicy, the preStop `sleep`); the oldest version's
refusal of the one it cannot take when rendered for a newer one is asserted on that version.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from testkit.cluster_webhook import priority_class
from testkit.envtest import ControlPlane
from testkit.reviews import eviction_review
from testkit.server import webhook_server
from testkit.wait import wait_for
from tests.chart.scenarios import SCENARIOS
from tests.e2e.chart_rbac import InstalledRbac, component_of, install_rbac, render_chart
from tests.e2e.conftest import _require_assets, _track
from tests.e2e.kubelet import FakeKubelet, pod
from webhook.kube.config import api_client
from webhook.sidecar import record as rec
from webhook.sidecar.actions import Settings
from webhook.sidecar.agent import Sidecar

NAMESPACE = "rbac-system"
CRITICAL = 1000000
WAIT = 30.0
# Every combination of the values that change RBAC (templates/rbac.yaml, templates/sidecar.yaml,
# templates/certificate-webhook.yaml): the sidecar on or off, dryRun (no pods patch), ignorePdb and
# recreateRejected (pods delete), the certificate mode (the webhook's own CA Secret and caBundle).
COMBINATIONS: dict[str, dict[str, Any]] = {
    "webhook-only": {"sidecar": {"enabled": False}},
    "sidecar": {"sidecar": {"enabled": True}},
    "sidecar-dry-run": {"sidecar": {"enabled": True, "dryRun": True}},
    "sidecar-ignore-pdb": {"sidecar": {"enabled": True, "ignorePdb": True}},
    "sidecar-recreate-rejected": {"sidecar": {"enabled": True, "recreateRejected": True}},
    "sidecar-dry-run-ignore-pdb": {"sidecar": {"enabled": True, "dryRun": True, "ignorePdb": True}},
    # No node restriction (also any Kubernetes before 1.30): the webhook checks no eviction, reads no pod.
    "sidecar-unrestricted": {"sidecar": {"enabled": True, "nodeRestriction": False}},
    "no-install-gate": {"sidecar": {"enabled": False}, "admission": {"installGate": {"enabled": False}}},
    # Certificates made by the chart: no Role for the webhook's CA Secret, no caBundle rights.
    "generated-certificates": {"certificates": {"mode": "generated"}},
}
# Components whose requests come from our Python code (exercised and audited here); the chart's install
# gate hooks and `helm test` pod run short shell scripts, for which only the must-not list is checked.
CODE_COMPONENTS = {"webhook", "sidecar"}
# What no component, script or code, may ever do.
NEVER = {"secrets", "nodes", "priorityclasses", "clusterroles", "roles", "configmaps"}
# Kinds kube-apiserver 1.24 serves only once a CRD defines them (none is installed here).
CRD_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule", "Certificate", "Issuer", "ClusterIssuer"}

AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts"]
  - level: None
"""


@dataclass(frozen=True, order=True)
class Access:
    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str = ""  # "" = cluster-wide (or all namespaces)

    def __str__(self) -> str:
        what = self.resource + (f"/{self.subresource}" if self.subresource else "")
        where = f" in {self.namespace}" if self.namespace else " cluster-wide"
        return f"{self.verb} {self.group or 'core'}/{what}{where}"


@dataclass
class Exercised:
    installed: InstalledRbac
    namespace: str  # where the component's code acted
    calls: dict[str, set[Access]]  # component -> requests it made (from the audit log)
    denied: dict[str, list[dict[str, Any]]]  # component -> audit events answered 403


def sidecar_enabled(values: dict[str, Any]) -> bool:
    """The chart runs the sidecar unless told not to (values.yaml: sidecar.enabled)."""
    return bool(values.get("sidecar", {}).get("enabled", True))


def checks_evictions(values: dict[str, Any]) -> bool:
    """The webhook checks the sidecar's evictions (and may read pods): the chart's evictionCheck gate."""
    sidecar = values.get("sidecar", {})
    version = values.get("kubeVersionOverride")
    recent = version is None or tuple(int(x) for x in version.lstrip("v").split(".")[:2]) >= (1, 30)
    return (
        sidecar_enabled(values)
        and sidecar.get("nodeRestriction", True)
        and not sidecar.get("dryRun")
        and recent
    )


def rbac_signature(values: dict[str, Any]) -> frozenset[tuple[str, str, str, str, str]]:
    """(kind, component, group, resource, verb) of every rule the chart renders with `values`."""
    rendered = render_chart(values, release="sig", namespace=NAMESPACE)
    found = set()
    for role in rendered.objects:
        if role["kind"] not in ("ClusterRole", "Role"):
            continue
        for rule in role["rules"]:
            for group in rule.get("apiGroups", []):
                for resource in rule.get("resources", []):
                    for verb in rule["verbs"]:
                        found.add((role["kind"], component_of(role), group, resource, verb))
    return frozenset(found)


def test_the_combinations_cover_every_rbac_the_chart_can_render() -> None:
    """Every named values set of the chart tests renders the RBAC of one of the combinations checked here."""
    # ignorePdb and recreateRejected render the same grants but make the code delete different pods (the
    # victim, the rejected pod): both are exercised.
    known = {rbac_signature(values) for values in COMBINATIONS.values()}
    for name, values in SCENARIOS.items():
        assert rbac_signature(values) in known, f"values set {name!r} renders RBAC no combination covers"


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, Path]]:
    _require_assets()
    workdir = tmp_path_factory.mktemp("rbac-envtest")
    policy = workdir / "audit-policy.yaml"
    policy.write_text(AUDIT_POLICY)
    audit_log = workdir / "audit.log"
    with ControlPlane.start(
        workdir / "plane",
        apiserver_args=[
            f"--audit-policy-file={policy}",
            f"--audit-log-path={audit_log}",
            "--audit-log-mode=blocking",
            "--audit-log-format=json",
        ],
    ) as cluster:
        cluster.apply(priority_class("rbac-critical", CRITICAL), priority_class("rbac-low", 10))
        yield cluster, audit_log


@pytest.fixture(autouse=True)
def _logs_on_failure(request: pytest.FixtureRequest) -> None:
    """A failing test that used the cluster gets its control-plane logs in its report."""
    if "audited" in request.fixturenames:
        _track(request, request.getfixturevalue("audited")[0])


def audit_events(audit_log: Path, user: str) -> list[dict[str, Any]]:
    events = []
    for line in audit_log.read_text().splitlines():
        event = json.loads(line)
        if event.get("user", {}).get("username") == user and event.get("objectRef"):
            events.append(event)
    return events


def access_of(event: dict[str, Any]) -> Access:
    ref = event["objectRef"]
    return Access(
        event["verb"],
        ref.get("apiGroup", ""),
        ref["resource"],
        ref.get("subresource", ""),
        ref.get("namespace", ""),
    )


class Refused(Exception):
    """The code got a 403: its exercise stops there, and the test names the refused request."""


def progress(audit_log: Path, user: str, condition: Any, **kwargs: Any) -> None:
    """Wait for `condition`, but stop early (Refused) once the audit log shows a request of `user` refused."""

    def done() -> bool:
        if any(e.get("responseStatus", {}).get("code") == 403 for e in audit_events(audit_log, user)):
            raise Refused
        return bool(condition())

    wait_for(done, **kwargs)


def exercise_webhook(
    cluster: ControlPlane, installed: InstalledRbac, tmp_path: Path, audit_log: Path, *, evict: bool = False
) -> None:
    """`priority-webhook serve --kubeconfig` with the webhook's token, until its class cache has synced;
    with `evict`, a sidecar's eviction review too (the webhook reads the pod: an absent one, allowed)."""
    kubeconfig = installed.kubeconfig("webhook")
    with webhook_server(tmp_path, "--kubeconfig", str(kubeconfig), "--workers", "1") as server:
        progress(
            audit_log,
            installed.user("webhook"),
            lambda: server.session.get(server.url + "/readyz", timeout=5).status_code == 200,
            timeout=60,
            interval=0.1,
            what="the webhook's class cache to sync",
        )
        if evict:
            answer = server.session.post(
                server.url + "/validate", json=eviction_review("n1", NAMESPACE, "absent"), timeout=30
            )
            assert answer.status_code == 200 and answer.json()["response"]["allowed"], answer.text


def exercise_sidecar(
    cluster: ControlPlane, installed: InstalledRbac, values: dict[str, Any], namespace: str, audit_log: Path
) -> None:
    """One whole preemption by the sidecar agent with the sidecar's token and this combination's options."""
    user = installed.user("sidecar")

    def until(condition: Any, **kwargs: Any) -> None:
        progress(audit_log, user, condition, **kwargs)

    options = values.get("sidecar", {})
    dry_run, ignore_pdb = bool(options.get("dryRun")), bool(options.get("ignorePdb"))
    recreate = bool(options.get("recreateRejected"))
    kubelet = FakeKubelet(cluster)
    node = namespace
    try:
        cluster.kubectl("create", "namespace", namespace)
        cluster.kubectl("create", "serviceaccount", "default", "-n", namespace)  # no controller manager here
        cluster.kubectl("create", "configmap", "owner", "-n", namespace)
        owner = cluster.get_json("configmap", "owner", "-n", namespace)
        kubelet.register_node(node, cpu="2")
        kubelet.run(pod("victim", namespace, node, cpu="2", priority_class="rbac-low"))
        kubelet.reject(
            pod(
                "critical",
                namespace,
                node,
                cpu="1",
                priority_class="rbac-critical",
                owner={
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": "owner",
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                },
            ),
            "cpu",
            requested=1000,
            used=2000,
            capacity=2000,
        )
        agent = Sidecar(
            api_client(str(installed.kubeconfig("sidecar")), False),
            Settings(node_name=node, critical_priority=CRITICAL, dry_run=dry_run, recreate_rejected=recreate),
            ignore_pdb=ignore_pdb,
        )
        agent.start()
        try:
            assert agent.wait_ready(WAIT)
            if dry_run:
                until(
                    lambda: any(
                        e["reason"] == "PreemptionDryRun"
                        for e in cluster.get_json("events", "-n", namespace)["items"]
                    ),
                    timeout=WAIT,
                    interval=0.2,
                    what="the dry run's event",
                )
                return
            until(
                lambda: (
                    "victim"
                    in {
                        p["metadata"]["name"]
                        for p in kubelet.pods(namespace)
                        if p["metadata"].get("deletionTimestamp")
                    }
                ),
                timeout=WAIT,
                interval=0.2,
                what="the victim's eviction",
            )
            kubelet.finish_terminating(namespace)
            if recreate:
                until(
                    lambda: not kubelet.pods(namespace),
                    timeout=WAIT,
                    interval=0.2,
                    what="the rejected pod's deletion for its controller",
                )
            else:

                def done() -> bool:
                    [critical] = [p for p in kubelet.pods(namespace) if p["metadata"]["name"] == "critical"]
                    return (rec.read(critical) or rec.Record("none")).state == rec.DONE

                until(done, timeout=WAIT, interval=0.2, what="the record done")
        finally:
            agent.stop()
    finally:
        kubelet.close()


@pytest.fixture(scope="module")
def exercised(
    audited: tuple[ControlPlane, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Exercised]:
    cluster, audit_log = audited
    out = {}
    for index, (name, values) in enumerate(COMBINATIONS.items()):
        workdir = tmp_path_factory.mktemp(f"rbac-{name}")
        installed = install_rbac(cluster, workdir, values, release=f"r{index}", namespace=NAMESPACE)
        namespace = f"rbac-{name}"
        # The webhook's RBAC is the same in every combination but for the pod reads of the eviction check
        # (the sidecar on, not a dry run): exercised without, and with it.
        if name in ("webhook-only", "sidecar"):
            with contextlib.suppress(Refused):
                exercise_webhook(cluster, installed, workdir, audit_log, evict=name == "sidecar")
        if sidecar_enabled(values):
            with contextlib.suppress(Refused):
                exercise_sidecar(cluster, installed, values, namespace, audit_log)
        calls, denied = {}, {}
        components = {component_of(sa) for sa in installed.rendered.of_kind("ServiceAccount")}
        for component in components:
            events = audit_events(audit_log, installed.user(component))
            calls[component] = {access_of(e) for e in events}
            denied[component] = [e for e in events if e.get("responseStatus", {}).get("code") == 403]
        out[name] = Exercised(installed, namespace, calls, denied)
    return out


def review(
    cluster: ControlPlane, installed: InstalledRbac, component: str, accesses: list[Access]
) -> dict[Access, bool]:
    """One SubjectAccessReview per access, created in one batch; access -> allowed."""
    user = installed.user(component)
    reviews = [
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "groups": [
                    "system:serviceaccounts",
                    f"system:serviceaccounts:{installed.namespace}",
                    "system:authenticated",
                ],
                "resourceAttributes": {
                    "verb": a.verb,
                    "group": a.group,
                    "resource": a.resource,
                    "subresource": a.subresource,
                    "namespace": a.namespace,
                },
            },
        }
        for a in accesses
    ]
    out = cluster.kubectl(
        "create",
        "-o",
        "json",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": reviews}),
    )
    items, text, decoder = [], out.stdout.strip(), json.JSONDecoder()
    while text:  # kubectl prints one JSON document per created object
        item, end = decoder.raw_decode(text)
        items.append(item)
        text = text[end:].strip()
    return {a: bool(item["status"].get("allowed")) for a, item in zip(accesses, items, strict=True)}


def forbidden(component: str, values: dict[str, Any], namespace: str) -> list[Access]:
    """What the component must never be able to do, in its working namespace and cluster-wide."""
    out = []
    for ns in (namespace, "kube-system", ""):
        out += [Access(verb, "", "secrets", "", ns) for verb in ("get", "list", "watch")]
        out += [Access(verb, "", "configmaps", "", ns) for verb in ("get", "list", "create", "update")]
        out += [
            Access("create", "", "pods", "", ns),
            Access("update", "", "pods", "", ns),
            Access("create", "", "pods", "exec", ns),
            Access("update", "", "pods", "status", ns),
            Access("create", "", "serviceaccounts", "token", ns),
            Access("delete", "", "events", "", ns),
            Access("delete", "", "persistentvolumeclaims", "", ns),
        ]
    out += [Access(verb, "", "nodes") for verb in ("create", "update", "patch", "delete")]
    out += [Access("patch", "", "nodes", "status"), Access("update", "", "nodes", "status")]
    out += [
        Access(verb, "scheduling.k8s.io", "priorityclasses")
        for verb in ("create", "update", "patch", "delete")
    ]
    out += [
        Access(verb, "rbac.authorization.k8s.io", resource)
        for resource in ("clusterroles", "roles")
        for verb in ("create", "escalate", "bind")
    ]
    out += [
        Access("create", "admissionregistration.k8s.io", r)
        for r in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
    ]
    options = values.get("sidecar", {})
    may_delete = component == "sidecar" and (options.get("ignorePdb") or options.get("recreateRejected"))
    may_patch = component == "sidecar" and not options.get("dryRun")
    if not may_delete:
        out += [
            Access("delete", "", "pods", "", namespace),
            Access("deletecollection", "", "pods", "", namespace),
        ]
    if not may_patch:
        out += [Access("patch", "", "pods", "", namespace)]
    if component == "webhook" and not checks_evictions(values):
        out += [Access("get", "", "pods", "", namespace)]  # no sidecar evictions to check
    if component == "webhook":  # reads PriorityClasses (and, checking evictions, single pods) only
        out += [
            Access("list", "", "pods"),
            Access("watch", "", "nodes"),
            Access("create", "", "events", "", namespace),
            Access("create", "", "pods", "eviction", namespace),
        ]
    return out


@pytest.mark.parametrize("combination", list(COMBINATIONS))
def test_each_component_may_do_what_its_code_does_and_nothing_it_must_not(
    combination: str, exercised: dict[str, Exercised], audited: tuple[ControlPlane, Path]
) -> None:
    cluster = audited[0]
    done = exercised[combination]
    values = COMBINATIONS[combination]
    assert set(done.calls) & CODE_COMPONENTS == (
        {"webhook", "sidecar"} if sidecar_enabled(values) else {"webhook"}
    )
    for component, calls in done.calls.items():
        if component not in CODE_COMPONENTS:
            never = [a for a in forbidden(component, values, done.namespace) if a.resource in NEVER]
            answers = review(cluster, done.installed, component, never)
            allowed = [str(a) for a in never if answers[a]]
            assert not allowed, f"{component} ({combination}) may do what it must not: {allowed}"
            continue
        assert not done.denied[component], f"{component}: the code was refused: " + "; ".join(
            sorted({str(access_of(e)) for e in done.denied[component]})
        )
        if component == "sidecar" or combination in ("webhook-only", "sidecar"):
            assert calls, f"{component} made no request: the exercise did not run"
        must = sorted(calls)
        must_not = forbidden(component, values, done.namespace)
        answers = review(cluster, done.installed, component, must + must_not)
        refused = [str(a) for a in must if not answers[a]]
        allowed = [str(a) for a in must_not if answers[a]]
        assert not refused, f"{component} ({combination}) may not do what its code does: {refused}"
        assert not allowed, f"{component} ({combination}) may do what it must not: {allowed}"


def test_the_code_calls_what_each_option_needs(exercised: dict[str, Exercised]) -> None:
    """The exercise reached every kind of request the options add (so the checks above are not vacuous)."""

    def verbs(name: str) -> set[tuple[str, str, str]]:
        return {(a.verb, a.resource, a.subresource) for a in exercised[name].calls["sidecar"]}

    assert {
        ("list", "nodes", ""),
        ("watch", "nodes", ""),
        ("list", "pods", ""),
        ("watch", "pods", ""),
        ("create", "events", ""),
        ("patch", "pods", ""),
        ("create", "pods", "eviction"),
    } <= verbs("sidecar")
    assert ("patch", "pods", "") not in verbs("sidecar-dry-run")
    assert ("create", "pods", "eviction") not in verbs("sidecar-dry-run")
    assert ("delete", "pods", "") in verbs("sidecar-ignore-pdb")
    assert ("create", "pods", "eviction") not in verbs("sidecar-ignore-pdb")
    assert ("delete", "pods", "") in verbs("sidecar-recreate-rejected")
    assert {(a.verb, a.resource) for a in exercised["webhook-only"].calls["webhook"]} == {
        ("list", "priorityclasses"),
        ("watch", "priorityclasses"),
        ("list", "namespaces"),
        ("watch", "namespaces"),
    }
    assert {(a.verb, a.resource) for a in exercised["sidecar"].calls["webhook"]} == {
        ("list", "priorityclasses"),
        ("watch", "priorityclasses"),
        ("list", "namespaces"),
        ("watch", "namespaces"),
        ("get", "pods"),
    }


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = (
            deep_merge(out[key], value)
            if isinstance(value, dict) and isinstance(out.get(key), dict)
            else value
        )
    return out


def dropped_fields(sent: Any, stored: Any, path: str = "") -> list[str]:
    """Paths of `sent` that the API server did not keep (fields it does not know are dropped silently)."""
    if isinstance(sent, dict) and isinstance(stored, dict):
        return [
            p
            for key, value in sent.items()
            for p in (
                dropped_fields(value, stored[key], f"{path}.{key}")
                if key in stored
                else []
                if value in ("", {}, [], None)  # empty values are omitted, not unknown
                else [f"{path}.{key}"]
            )
        ]
    if isinstance(sent, list) and isinstance(stored, list) and len(sent) == len(stored):
        return [
            p
            for i, (a, b) in enumerate(zip(sent, stored, strict=True))
            for p in dropped_fields(a, b, f"{path}[{i}]")
        ]
    return []


def dry_run_apply(cluster: ControlPlane, objects: list[dict[str, Any]]) -> Any:
    return cluster.kubectl(
        "apply",
        "--dry-run=server",
        "--validate=false",
        "-o",
        "json",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}),
        check=False,
    )


@pytest.mark.timeout(900)  # a kubectl apply per values set: past 300 s on a loaded 2-core machine
def test_everything_the_chart_renders_is_accepted_by_the_api_server(
    audited: tuple[ControlPlane, Path],
) -> None:
    cluster = audited[0]
    served = set(cluster.kubectl("api-versions").stdout.split())
    skipped: set[str] = set()
    for name, values in SCENARIOS.items():
        rendered = render_chart(
            deep_merge({"kubeVersionOverride": cluster.version}, values),
            release="dry",
            namespace="dry-run-system",
        )
        objects = []
        for obj in rendered.objects:
            if obj["apiVersion"] not in served:
                skipped.add(obj["kind"])
                continue
            objects.append(obj)
        for namespace in {o["metadata"].get("namespace") for o in objects} - {None}:
            if cluster.kubectl("get", "namespace", namespace, check=False).returncode != 0:
                cluster.kubectl("create", "namespace", namespace)
        # A Pod (the `helm test` hook) is checked against its ServiceAccount even in a dry run: those are
        # created for real first.
        accounts = [o for o in objects if o["kind"] == "ServiceAccount"]
        if accounts:
            cluster.apply(*accounts)
        result = dry_run_apply(cluster, objects)
        assert result.returncode == 0, f"values set {name!r}: {result.stderr}"
        stored = json.loads(result.stdout)
        stored = stored["items"] if stored.get("kind") == "List" else [stored]
        assert [(o["kind"], o["metadata"]["name"]) for o in stored] == [
            (o["kind"], o["metadata"]["name"]) for o in objects
        ]
        dropped = [
            f"{o['kind']}/{o['metadata']['name']}{p}"
            for o, s in zip(objects, stored, strict=True)
            for p in dropped_fields(o, s)
        ]
        assert dropped == [], f"values set {name!r}: fields kube-apiserver {cluster.version} does not know"
    # Said, not silently skipped: prometheus-operator's and cert-manager's kinds need their CRDs.
    assert skipped and skipped <= CRD_KINDS, skipped


def test_the_preStop_sleep_is_what_kubernetes_1_24_refuses_of_a_chart_rendered_for_1_30(
    oldest_plane: ControlPlane, attach_logs: Callable[[ControlPlane], ControlPlane]
) -> None:
    """A known difference, asserted rather than skipped, on the oldest version: 1.24 drops the unknown
    `sleep` handler, leaving a preStop hook without one, which it refuses. Rendered for 1.24 the chart
    leaves it out (above: the `kubernetes-1.24` set); the chart declares kubeVersion >= 1.30."""
    cluster = attach_logs(oldest_plane)
    assert cluster.minor < (1, 29)
    cluster.kubectl("create", "namespace", "dry-run-system", check=False)
    deployment = render_chart(
        {"kubeVersionOverride": "1.30.0"}, release="dry", namespace="dry-run-system"
    ).one("Deployment")
    assert "sleep" in deployment["spec"]["template"]["spec"]["containers"][0]["lifecycle"]["preStop"]
    result = dry_run_apply(cluster, [deployment])
    assert result.returncode != 0
    assert "lifecycle.preStop: Required value: must specify a handler type" in result.stderr
