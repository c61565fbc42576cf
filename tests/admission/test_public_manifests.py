"""`review`, `victims` and `plan` on public manifests as published: Kubernetes addons, Helm chart templates,
book and documentation examples, kept in `../shared/public-manifests/` (its README says where each file
comes from; they are not copied into this repository).

Every file there goes through `review`, with the answer written in the table from the file and the API
rules (docs/admission.md): the class a pod names, else the legacy critical-pod annotation (`""`, in
`kube-system` only), else the global default, else 0 and `PreemptLowerPriority`; a class that is not known
is upstream's refusal; a client-set `priority` must equal the computed one; a PriorityClass with a value
over 1000000000 or a `system-` name that is not built in is the API server's refusal; other kinds pass
through unchanged. A template that is not YAML is named as one (exit 2); its `.rendered.yaml` (or
`.fixed.yaml`, `.filled.yaml`) gets the real answer.

The folder is `public-manifests` inside `$PRIORITY_WEBHOOK_SHARED` when that is set, else inside the
folder `shared` beside the checkout; where it is absent the module is skipped with one line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.cli import main

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("PRIORITY_WEBHOOK_SHARED") or ROOT.parent / "shared") / "public-manifests"
if not SHARED.is_dir():
    pytest.skip(
        f"public manifests not found at {SHARED} (set PRIORITY_WEBHOOK_SHARED to the shared folder)",
        allow_module_level=True,
    )

PLP, NEVER = "PreemptLowerPriority", "Never"
SCC = ("system-cluster-critical", 2000000000, PLP)
SNC = ("system-node-critical", 2000001000, PLP)
NO_CLASS = (None, 0, PLP)  # no class named, no global default
LEGACY = (
    "Warning: legacy annotation scheduler.alpha.kubernetes.io/critical-pod mapped to system-cluster-critical"
)
# Kinds whose pods `review` answers for (docs/review.md); every other kind passes through.
REVIEWED = {"Pod", "PriorityClass", "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "CronJob"}
REVIEWED |= {"ReplicationController", "PodTemplate"}


def unrendered(line: int, action: str) -> str:
    """A template given as a manifest: exit 2, named by its first action (`{path}`: the file)."""
    where = "priority-webhook review: error: {path}: " + f"line {line}: {action}"
    return f"{where}: an unrendered template; render it first (helm template ...)"


def forbidden(subject: str, message: str) -> str:
    """The line kubectl prints for a 403: `subject` is `pods "x"` or `priorityclasses... "x"`."""
    verb = "forbidden" if subject.endswith(" will be") else "is forbidden"
    return f"Error from server (Forbidden): {subject} {verb}: {message}"


def not_found(subject: str, name: str) -> str:
    return forbidden(subject, f"no PriorityClass with name {name} was found")


def workload(kind: str, namespace: str, name: str) -> str:
    """How `review` names the pods of a workload in a refusal (docs/review.md): `... will be forbidden`."""
    return f"pods created by {kind} {namespace}/{name} will be"


@dataclass(frozen=True)
class Case:
    """`review FILES -o json`: the exit code, the lines on stderr (`{path}`: the first file), and for the
    objects it answers for, keyed `Kind/name`: pods and workloads by (priorityClassName, priority,
    preemptionPolicy) of the pod (template) spec, PriorityClasses by (value, globalDefault,
    preemptionPolicy). Objects in `refused` are left out of the output; every other object must come out
    as it went in, and is counted in the `note:` line."""

    files: tuple[str, ...]
    code: int = 0
    pods: dict[str, tuple[str | None, int, str]] = field(default_factory=dict)
    classes: dict[str, tuple[int, bool, str]] = field(default_factory=dict)
    refused: tuple[str, ...] = ()
    stderr: tuple[str, ...] = ()


CASES: dict[str, Case] = {
    # --- kubernetes/kubernetes addons: the legacy annotation in kube-system, or a system class named
    "01 kube-dns, a Salt template": Case(
        ("01-kube-dns.yaml.in",),
        code=2,
        stderr=(unrendered(33, "{{ pillar['dns_server'] }}"),),
    ),
    "01 kube-dns rendered: the annotation in kube-system, no class": Case(
        ("01-kube-dns.yaml.in.rendered.yaml",),
        pods={"Deployment/kube-dns": SCC},
        stderr=(LEGACY,),
    ),
    "02 metrics-server: the annotation": Case(
        ("02-metrics-server-deployment.yaml",),
        pods={"Deployment/metrics-server-v0.2.0": SCC},
        stderr=(LEGACY,),
    ),
    "03 fluentd: a named class wins over the annotation": Case(
        ("03-fluentd-es-ds.yaml",), pods={"DaemonSet/fluentd-es-v2.2.0": SNC}
    ),
    "04 calico: the annotation": Case(
        ("04-calico-node-daemonset.yaml",), pods={"DaemonSet/calico-node": SCC}, stderr=(LEGACY,)
    ),
    "05 kube-state-metrics: class and annotation agree": Case(
        ("05-kube-state-metrics-deployment.yaml",), pods={"Deployment/kube-state-metrics": SCC}
    ),
    "06 rescheduler static pod: the annotation": Case(
        ("06-rescheduler.manifest",), pods={"Pod/rescheduler-v0.4.0": SCC}, stderr=(LEGACY,)
    ),
    "07 glbc static pod: the annotation": Case(
        ("07-glbc.manifest",), pods={"Pod/l7-lb-controller-v1.1.1": SCC}, stderr=(LEGACY,)
    ),
    "08 istio, as published: a YAML error in document 122": Case(
        ("08-istio-auth.yaml",),
        code=2,
        stderr=(
            "priority-webhook review: error: {path}: document 122: not valid YAML or JSON: "
            "expected <block end>, but found '<block mapping start>' (line 4082, column 3)",
        ),
    ),
    "08 istio, mended: the annotation outside kube-system is nothing": Case(
        ("08-istio-auth.yaml.fixed.yaml",),
        pods={
            f"{kind}/{name}": NO_CLASS
            for kind, name in [
                ("Job", "istio-cleanup-secrets"),
                ("Job", "istio-security-post-install"),
                ("Deployment", "istio-statsd-prom-bridge"),
                ("Deployment", "istio-galley"),
                ("Deployment", "istio-egressgateway"),
                ("Deployment", "istio-ingressgateway"),
                ("Deployment", "istio-policy"),
                ("Deployment", "istio-telemetry"),
                ("Deployment", "istio-pilot"),
                ("Deployment", "prometheus"),
                ("Deployment", "istio-citadel"),
                ("Deployment", "istio-sidecar-injector"),
            ]
        },
    ),
    "09 descheduler Job: the annotation": Case(
        ("09-job.yaml",), pods={"Job/descheduler-job": SCC}, stderr=(LEGACY,)
    ),
    "10 kops external-dns, a Go template": Case(
        ("10-k8s-1.6.yaml.template",),
        code=2,
        stderr=(unrendered(38, "{{ range $arg := ExternalDnsArgv }}"),),
    ),
    "10 kops external-dns rendered: the annotation": Case(
        ("10-k8s-1.6.yaml.template.rendered.yaml",), pods={"Deployment/external-dns": SCC}, stderr=(LEGACY,)
    ),
    "11 nvidia device plugin: a named class wins over the annotation": Case(
        ("11-nvidia-device-plugin.yml",), pods={"DaemonSet/nvidia-device-plugin-daemonset": SNC}
    ),
    # --- PriorityClasses: Helm templates, then as rendered
    "12 overprovisioner default class, a Helm template": Case(
        ("12-priorityclass-default.yaml",),
        code=2,
        stderr=(unrendered(1, '{{ template "PriorityClass.apiVersion" . }}'),),
    ),
    "12 rendered: a global default of 0": Case(
        ("12-priorityclass-default.yaml.rendered.yaml",), classes={"default": (0, True, PLP)}
    ),
    "13 overprovisioning class, a Helm template": Case(
        ("13-priorityclass-overprovision.yaml",),
        code=2,
        stderr=(unrendered(1, '{{ template "PriorityClass.apiVersion" . }}'),),
    ),
    "13 rendered: -1": Case(
        ("13-priorityclass-overprovision.yaml.rendered.yaml",), classes={"overprovisioning": (-1, False, PLP)}
    ),
    "14 a range over values, a Helm template": Case(
        ("14-priorityclass.yaml",),
        code=2,
        stderr=(unrendered(1, "{{- if .Values.PriorityClasses }}"),),
    ),
    "14 rendered: three classes": Case(
        ("14-priorityclass.yaml.rendered.yaml",),
        classes={"high": (1000, False, PLP), "medium": (100, False, PLP), "low": (10, False, PLP)},
    ),
    "15 the book's global default": Case(
        ("15-default-priority.yaml",), classes={"default-priority": (0, True, PLP)}
    ),
    "16 the book's placeholder class": Case(
        ("16-placeholder-priority.yaml",), classes={"placeholder-priority": (-10, False, NEVER)}
    ),
    "17 the book's Deployment alone: its class is not known": Case(
        ("17-placeholder-deploy.yaml",),
        code=1,
        refused=("Deployment/placeholder",),
        stderr=(not_found(workload("Deployment", "default", "placeholder"), "placeholder-priority"),),
    ),
    "15+16+17 the book's example: its classes first": Case(
        ("15-default-priority.yaml", "16-placeholder-priority.yaml", "17-placeholder-deploy.yaml"),
        classes={"default-priority": (0, True, PLP), "placeholder-priority": (-10, False, NEVER)},
        pods={"Deployment/placeholder": ("placeholder-priority", -10, NEVER)},
    ),
    "18 the book's class that does not preempt": Case(
        ("18-priorityclass.yaml",), classes={"high-priority": (1000000, False, NEVER)}
    ),
    "19 kueue's two classes, one the default": Case(
        ("19-prios.yaml",), classes={"high-prio": (1000000, False, PLP), "low-prio": (100, True, PLP)}
    ),
    "20 website placeholder class (flow-style YAML)": Case(
        ("20-low-priority-class.yaml",), classes={"placeholder": (-1000, False, PLP)}
    ),
    "21 longhorn class, a Helm template": Case(
        ("21-priorityclass.yaml",),
        code=2,
        stderr=(unrendered(5, '{{- include "longhorn.labels" . | nindent 4 }}'),),
    ),
    "21 rendered: exactly the highest user-defined value": Case(
        ("21-priorityclass.yaml.rendered.yaml",), classes={"longhorn-critical": (1000000000, False, PLP)}
    ),
    "22 gsp: the highest user-defined value": Case(
        ("22-gsp-priorityclass.yaml",), classes={"gsp-critical": (1000000000, False, PLP)}
    ),
    # --- static pods with priority already set
    "23 kube-proxy, a Salt template": Case(
        ("23-kube-proxy.manifest",),
        code=2,
        stderr=(unrendered(22, "{{pillar['kube_docker_registry']}}"),),
    ),
    "23 rendered: priority equal to its class's": Case(
        ("23-kube-proxy.manifest.rendered.yaml",), pods={"Pod/kube-proxy": SNC}
    ),
    "24 etcd, a Salt template in JSON": Case(
        ("24-etcd.manifest",),
        code=2,
        stderr=(unrendered(5, "{{ suffix }}"),),
    ),
    "24 rendered: priority equal to its class's": Case(
        ("24-etcd.manifest.rendered.yaml",), pods={"Pod/etcd-server": SNC}
    ),
    "25 kube-scheduler: valid JSON, a template only inside strings: the cpu is no quantity": Case(
        ("25-kube-scheduler.manifest",),
        code=1,
        refused=("Pod/kube-scheduler",),
        stderr=(
            'Error from server (BadRequest): Pod in version "v1" cannot be handled as a Pod: quantities must '
            "match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        ),
    ),
    "25 rendered: priority equal to its class's": Case(
        ("25-kube-scheduler.manifest.rendered.yaml",), pods={"Pod/kube-scheduler": SNC}
    ),
    "26 gpu-admission: class, equal priority and the annotation": Case(
        ("26-gpu-admission.yaml",), pods={"Pod/gpu-admission": SCC}
    ),
    "27 scheduler_perf pod: priority 10 with no class is not what admission computes": Case(
        ("27-pod-high-priority.yaml",),
        code=1,
        refused=("Pod/pod-",),
        stderr=(
            forbidden(
                'pods "pod-"',
                "the integer value of priority (10) must not be provided in pod spec; priority admission "
                "controller computed 0 from the given PriorityClass name",
            ),
        ),
    ),
    "28 scheduler_perf large pod: the same": Case(
        ("28-pod-high-priority-large-cpu.yaml",),
        code=1,
        refused=("Pod/pod-h-",),
        stderr=(
            forbidden(
                'pods "pod-h-"',
                "the integer value of priority (10) must not be provided in pod spec; priority admission "
                "controller computed 0 from the given PriorityClass name",
            ),
        ),
    ),
    # --- current addons: a system class in their own namespace (allowed since 1.17)
    "29 flannel": Case(("29-kube-flannel.yml",), pods={"DaemonSet/kube-flannel-ds": SNC}),
    "30 gatekeeper": Case(
        ("30-gatekeeper.yaml",),
        pods={"Deployment/gatekeeper-audit": SCC, "Deployment/gatekeeper-controller-manager": SCC},
    ),
    "31 node-exporter": Case(("31-nodeExporter-daemonset.yaml",), pods={"DaemonSet/node-exporter": SCC}),
    "32 gpu-operator, unfilled: its namespace is not a name": Case(
        ("32-0500_daemonset.yaml",),
        code=1,
        refused=("DaemonSet/nvidia-device-plugin-daemonset",),
        stderr=(
            'The DaemonSet "nvidia-device-plugin-daemonset" is invalid: metadata.namespace: Invalid value: '
            '"FILLED BY THE OPERATOR": a lowercase RFC 1123 label must consist of lower case alphanumeric '
            "characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
            "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        ),
    ),
    "32 filled": Case(
        ("32-0500_daemonset.yaml.filled.yaml",), pods={"DaemonSet/nvidia-device-plugin-daemonset": SNC}
    ),
    # --- no class anywhere: 0 and PreemptLowerPriority
    "33 a Deployment with a sidecar": Case(
        ("33-deployment-sidecar.yaml",), pods={"Deployment/myapp": NO_CLASS}
    ),
    "34 a pod with a sidecar": Case(("34-resources.yaml",), pods={"Pod/resources-example": NO_CLASS}),
    "35 a Job with a sidecar": Case(("35-job_with_sidecar.yaml",), pods={"Job/job": NO_CLASS}),
    "36 a RuntimeClass passes through": Case(("36-kata-runtimeclass.yaml",)),
    "37 a pod with a RuntimeClass": Case(("37-pod-burstable.yaml",), pods={"Pod/burstable-test": NO_CLASS}),
    "38 a GPU Job": Case(("38-job-1.yaml",), pods={"Job/j-e2e-1": NO_CLASS}),
    "39 an extended resource (flow-style YAML)": Case(
        ("39-extended-resource-pod.yaml",), pods={"Pod/extended-resource-demo": NO_CLASS}
    ),
    "40 pod-level resources": Case(
        ("40-pod-level-resources.yaml",), pods={"Pod/pod-resources-demo": NO_CLASS}
    ),
    # --- classes and the pods that use them, together (extra/: small variants of ours)
    "13 rendered + a pod of the overprovisioning class": Case(
        ("13-priorityclass-overprovision.yaml.rendered.yaml", "extra/13-variant-overprovision-pod.yaml"),
        classes={"overprovisioning": (-1, False, PLP)},
        pods={"Pod/overprovisioning-pause": ("overprovisioning", -1, PLP)},
    ),
    "that pod alone": Case(
        ("extra/13-variant-overprovision-pod.yaml",),
        code=1,
        refused=("Pod/overprovisioning-pause",),
        stderr=(not_found('pods "overprovisioning-pause"', "overprovisioning"),),
    ),
    "16 + the book's Deployment with a client-set preemptionPolicy": Case(
        ("16-placeholder-priority.yaml", "extra/17-variant-client-PLP.yaml"),
        code=1,
        classes={"placeholder-priority": (-10, False, NEVER)},
        refused=("Deployment/placeholder",),
        stderr=(
            forbidden(
                workload("Deployment", "default", "placeholder"),
                "the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; "
                "priority admission controller computed Never from the given PriorityClass name",
            ),
        ),
    ),
    "18 + a Deployment of that class": Case(
        ("18-priorityclass.yaml", "extra/18-deploy.yaml"),
        classes={"high-priority": (1000000, False, NEVER)},
        pods={"Deployment/timeserver": ("high-priority", 1000000, NEVER)},
    ),
    "that Deployment alone": Case(
        ("extra/18-deploy.yaml",),
        code=1,
        refused=("Deployment/timeserver",),
        stderr=(not_found(workload("Deployment", "default", "timeserver"), "high-priority"),),
    ),
    "19 + kueue's high-prio pod": Case(
        ("19-prios.yaml", "extra/19-high-prio-pod.yaml"),
        classes={"high-prio": (1000000, False, PLP), "low-prio": (100, True, PLP)},
        pods={"Pod/high-prio-1m-sleep": ("high-prio", 1000000, PLP)},
    ),
    "19 + kueue's low-prio pod": Case(
        ("19-prios.yaml", "extra/19-low-prio-pod.yaml"),
        classes={"high-prio": (1000000, False, PLP), "low-prio": (100, True, PLP)},
        pods={"Pod/low-prio-1m-sleep": ("low-prio", 100, PLP)},
    ),
    "kueue's low-prio pod alone": Case(
        ("extra/19-low-prio-pod.yaml",),
        code=1,
        refused=("Pod/low-prio-1m-sleep",),
        stderr=(not_found('pods "low-prio-1m-sleep"', "low-prio"),),
    ),
    "19's default given to a Deployment that names no class": Case(
        ("19-prios.yaml", "33-deployment-sidecar.yaml"),
        classes={"high-prio": (1000000, False, PLP), "low-prio": (100, True, PLP)},
        pods={"Deployment/myapp": ("low-prio", 100, PLP)},
    ),
    "12's default (value 0) written into a Deployment that names no class": Case(
        ("12-priorityclass-default.yaml.rendered.yaml", "33-deployment-sidecar.yaml"),
        classes={"default": (0, True, PLP)},
        pods={"Deployment/myapp": ("default", 0, PLP)},
    ),
    "two global defaults: 12's, then the book's is refused": Case(
        ("12-priorityclass-default.yaml.rendered.yaml", "15-default-priority.yaml"),
        code=1,
        classes={"default": (0, True, PLP)},
        refused=("PriorityClass/default-priority",),
        stderr=(
            forbidden(
                'priorityclasses.scheduling.k8s.io "default-priority"',
                "PriorityClass default is already marked as default. Only one default can exist",
            ),
        ),
    ),
    "two global defaults: kueue's, then the book's is refused": Case(
        ("19-prios.yaml", "15-default-priority.yaml"),
        code=1,
        classes={"high-prio": (1000000, False, PLP), "low-prio": (100, True, PLP)},
        refused=("PriorityClass/default-priority",),
        stderr=(
            forbidden(
                'priorityclasses.scheduling.k8s.io "default-priority"',
                "PriorityClass low-prio is already marked as default. Only one default can exist",
            ),
        ),
    ),
    "21 rendered + a longhorn pod": Case(
        ("21-priorityclass.yaml.rendered.yaml", "extra/21-variant-longhorn-pod.yaml"),
        classes={"longhorn-critical": (1000000000, False, PLP)},
        pods={"Pod/longhorn-manager-x": ("longhorn-critical", 1000000000, PLP)},
    ),
    "21 one past the highest user-defined value": Case(
        ("extra/21-variant-1000000001.yaml",),
        code=1,
        refused=("PriorityClass/longhorn-critical",),
        stderr=(
            'The PriorityClass "longhorn-critical" is invalid: value: Forbidden: maximum allowed value of a '
            "user defined priority is 1000000000",
        ),
    ),
    "that class refused, so its pod is too": Case(
        ("extra/21-variant-1000000001.yaml", "extra/21-variant-longhorn-pod.yaml"),
        code=1,
        refused=("PriorityClass/longhorn-critical", "Pod/longhorn-manager-x"),
        stderr=(
            'The PriorityClass "longhorn-critical" is invalid: value: Forbidden: maximum allowed value of a '
            "user defined priority is 1000000000",
            not_found('pods "longhorn-manager-x"', "longhorn-critical"),
        ),
    ),
}


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def documents(name: str) -> list[dict[str, Any]]:
    """The objects of a shared file, read here on their own (not by the code under test)."""
    return [d for d in yaml.safe_load_all((SHARED / name).read_text()) if d is not None]


def key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{obj['kind']}/{meta.get('name') or meta.get('generateName')}"


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    if obj["kind"] == "Pod":
        return obj["spec"]
    spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec


def answered(case: Case) -> Iterator[str]:
    yield from case.pods
    yield from (f"PriorityClass/{name}" for name in case.classes)
    yield from case.refused


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_review(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["review", *(str(SHARED / f) for f in case.files), "-o", "json"], capsys)
    expected_err = [line.replace("{path}", str(SHARED / case.files[0])) for line in case.stderr]
    if case.code == 2:
        assert (code, out, err.splitlines()) == (2, "", expected_err)
        return
    inputs = [doc for f in case.files for doc in documents(f)]
    keys = [key(doc) for doc in inputs]
    reviewed = sorted(k for k in keys if k.split("/")[0] in REVIEWED)
    assert sorted(answered(case)) == reviewed, "the table answers for every pod, workload and class"
    passed = [doc for doc in inputs if key(doc) not in reviewed]
    if passed:
        kinds = ", ".join(sorted({doc["kind"] for doc in passed}))
        expected_err.append(
            f"note: {len(passed)} object(s) passed through unchanged, priority admission does not apply to "
            f"their kind ({kinds})"
        )
    assert (code, err.splitlines()) == (case.code, expected_err)

    parsed = json.loads(out) if out else {"kind": "List", "items": []}  # nothing admitted: nothing printed
    outputs = parsed["items"] if parsed["kind"] == "List" else [parsed]
    assert [key(o) for o in outputs] == [k for k in keys if k not in case.refused]
    for doc, obj in zip([d for d in inputs if key(d) not in case.refused], outputs, strict=True):
        k = key(obj)
        if k in case.pods:
            spec = pod_spec(obj)
            assert (spec.get("priorityClassName"), spec["priority"], spec["preemptionPolicy"]) == case.pods[k]
        elif obj["kind"] == "PriorityClass":
            stored = (obj["value"], obj.get("globalDefault", False), obj["preemptionPolicy"])
            assert stored == case.classes[obj["metadata"]["name"]]
        else:
            assert obj == doc, f"{k} passed through changed"


def test_a_system_name_that_is_not_built_in(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """gsp's class (22) wants the standing of system-cluster-critical; named `system-...` it is refused."""
    renamed = tmp_path / "system-gsp.yaml"
    renamed.write_text(
        (SHARED / "22-gsp-priorityclass.yaml").read_text().replace("gsp-critical", "system-gsp")
    )
    code, out, err = run(["review", str(renamed)], capsys)
    assert (code, out) == (1, "")
    assert err == (
        'The PriorityClass "system-gsp" is invalid: metadata.name: Forbidden: priority class names with '
        "'system-' prefix are reserved for system use only. error: system-gsp is not a known system priority "
        "class\n"
    )


def test_a_class_after_the_pod_that_uses_it_is_a_warning(capsys: pytest.CaptureFixture[str]) -> None:
    pod, prios = str(SHARED / "extra" / "19-high-prio-pod.yaml"), str(SHARED / "19-prios.yaml")
    code, _, err = run(["review", pod, prios], capsys)
    assert code == 0
    assert err == (
        f"Warning: {pod}: document 1: PriorityClass high-prio is defined after this Pod, in {prios}: "
        "document 1; kubectl apply creates objects in file order: apply the PriorityClasses first\n"
    )


def test_a_class_in_the_input_and_in_a_classes_file_is_one_class(capsys: pytest.CaptureFixture[str]) -> None:
    """The same default class given with --classes and in the input is not its own rival default; another
    default in the input is."""
    prios = str(SHARED / "19-prios.yaml")
    code, _, err = run(["review", prios, "--classes", prios, "-o", "json"], capsys)
    assert (code, err) == (0, "")
    code, _, err = run(["review", str(SHARED / "15-default-priority.yaml"), "--classes", prios], capsys)
    assert (code, err) == (
        1,
        forbidden(
            'priorityclasses.scheduling.k8s.io "default-priority"',
            "PriorityClass low-prio is already marked as default. Only one default can exist",
        )
        + "\n",
    )


# --- victims and plan: a node full of the book's placeholders (its Deployment: 10 replicas of 200m cpu and
# 250Mi, class placeholder-priority: -10, Never), as admission stored them.


def placeholders(count: int) -> list[dict[str, Any]]:
    template = documents("17-placeholder-deploy.yaml")[0]["spec"]["template"]
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                **template["metadata"],
                "name": f"placeholder-{i}",
                "namespace": "default",
                "uid": f"u{i}",
            },
            "spec": {**template["spec"], "nodeName": "n1", "priority": -10, "preemptionPolicy": NEVER},
            "status": {"phase": "Running"},
        }
        for i in range(count)
    ]


def node(cpu: str, **extended: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {"kubernetes.io/os": "linux", "kubernetes.io/hostname": "n1"}},
        "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110", **extended}},
    }


def write_json(path: Path, obj: Any) -> str:
    path.write_text(json.dumps(obj))
    return str(path)


@dataclass(frozen=True)
class NodeCase:
    """`victims --pod FILE [--classes FILE]` on node n1 (`cpu` allocatable, `extended` resources) with 4
    placeholders running (800m cpu): the answer from the numbers and the pod's priority. `reasons`: why it
    does not fit as things are; a critical pod is admitted all the same, once `victims` are evicted."""

    pod: str
    cpu: str
    admit: bool
    reasons: tuple[str, ...] = ()
    victims: int = 0  # placeholders evicted (all alike: -10, Burstable)
    classes: str | None = None
    extended: dict[str, str] = field(default_factory=dict)


NODE_CASES: dict[str, NodeCase] = {
    "kueue's high-prio pod: 9 cpu do not fit, 1000000 is not critical": NodeCase(
        "extra/19-high-prio-pod.yaml", "8", False, ("OutOfcpu",), classes="19-prios.yaml"
    ),
    "the rescheduler (annotation: critical) fits in the 100m left": NodeCase(
        "06-rescheduler.manifest", "900m", True
    ),
    "node-exporter (system-cluster-critical) needs 112m of the 100m left: one placeholder goes": NodeCase(
        "31-nodeExporter-daemonset.yaml", "900m", True, ("OutOfcpu",), victims=1
    ),
    "a pod with a sidecar needs 300m + 50m: 350m left, it fits": NodeCase("34-resources.yaml", "1150m", True),
    "349m left: it does not, and priority 0 is not critical": NodeCase(
        "34-resources.yaml", "1149m", False, ("OutOfcpu",)
    ),
    "a GPU Job (requests from limits) on a node with 0 GPUs": NodeCase(
        "38-job-1.yaml", "4", False, ("OutOfnvidia.com/gpu",), extended={"nvidia.com/gpu": "0"}
    ),
    "on a node with one": NodeCase("38-job-1.yaml", "4", True, extended={"nvidia.com/gpu": "1"}),
    # The kubelet drops requests of extended resources its node does not list (cluster-level resources;
    # removeMissingExtendedResources in pkg/kubelet/lifecycle/predicate.go): the scheduler would not.
    "on a node that does not list GPUs at all: the kubelet admits": NodeCase("38-job-1.yaml", "4", True),
    "3 dongles on a node with 2": NodeCase(
        "39-extended-resource-pod.yaml",
        "4",
        False,
        ("OutOfexample.com/dongle",),
        extended={"example.com/dongle": "2"},
    ),
}


@pytest.mark.parametrize("case", NODE_CASES.values(), ids=NODE_CASES.keys())
def test_victims(case: NodeCase, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "victims",
        "--node",
        write_json(tmp_path / "node.json", node(case.cpu, **case.extended)),
        "--pods",
        write_json(tmp_path / "pods.json", {"apiVersion": "v1", "kind": "List", "items": placeholders(4)}),
        "--pod",
        str(SHARED / case.pod),
        *(["--classes", str(SHARED / case.classes)] if case.classes else []),
    ]
    code, out, err = run(argv, capsys)
    result = json.loads(out)
    assert (code, err) == (0 if case.admit else 1, "")
    assert (result["admit"], result["fits"]) == (case.admit, not case.reasons)
    assert [r["reason"] for r in result["reasons"]] == list(case.reasons)
    assert [(v["priority"], v["qosClass"]) for v in result["victims"]] == [(-10, "Burstable")] * case.victims


def test_victims_refuses_a_pod_whose_class_does_not_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pod = str(SHARED / "extra" / "19-low-prio-pod.yaml")
    argv = [
        "victims",
        "--node",
        write_json(tmp_path / "node.json", node("8")),
        "--pods",
        write_json(tmp_path / "pods.json", {"apiVersion": "v1", "kind": "List", "items": placeholders(4)}),
        "--pod",
        pod,
    ]
    code, _, err = run(argv, capsys)
    assert (code, err) == (
        2,
        f'priority-webhook victims: error: {pod}: pods "low-prio-1m-sleep" is forbidden: '
        "no PriorityClass with name low-prio was found\n",
    )
    code, out, _ = run([*argv, "--classes", str(SHARED / "19-prios.yaml")], capsys)
    assert (code, json.loads(out)["reasons"][0]["reason"]) == (1, "OutOfcpu")  # known now: 9 cpu do not fit


def test_victims_takes_one_pod_not_an_addon_bundle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fluentd's file starts with its ServiceAccount and RBAC: not a pod, said so."""
    pod = str(SHARED / "03-fluentd-es-ds.yaml")
    argv = [
        "victims",
        "--node",
        write_json(tmp_path / "node.json", node("8")),
        "--pods",
        write_json(tmp_path / "pods.json", {"apiVersion": "v1", "kind": "List", "items": []}),
        "--pod",
        pod,
    ]
    code, out, err = run(argv, capsys)
    assert (code, out) == (2, "")
    assert err == (
        f"priority-webhook victims: error: {pod}: document 1: expected kind Pod, got 'ServiceAccount' "
        "(or a workload: Deployment, Job, ...)\n"
    )


@dataclass(frozen=True)
class PlanCase:
    """`plan --cluster SNAPSHOT --pod FILE [--classes FILE]`: node n1 (`cpu` allocatable) with the book's
    10 placeholders (2000m cpu); the node found (or None) and how many placeholders are evicted."""

    pod: str
    cpu: str
    node: str | None
    victims: int = 0
    classes: str | None = None


PLAN_CASES: dict[str, PlanCase] = {
    "kueue's high-prio pod: 9 cpu where 8 are free: 5 placeholders go": PlanCase(
        "extra/19-high-prio-pod.yaml", "10", "n1", 5, "19-prios.yaml"
    ),
    "the low-prio one (100 > -10) too": PlanCase(
        "extra/19-low-prio-pod.yaml", "10", "n1", 5, "19-prios.yaml"
    ),
    "the book's Deployment where there is room": PlanCase(
        "17-placeholder-deploy.yaml", "10", "n1", 0, "16-placeholder-priority.yaml"
    ),
    "the book's Deployment on a full node: Never preempts": PlanCase(
        "17-placeholder-deploy.yaml", "2", None, 0, "16-placeholder-priority.yaml"
    ),
    "the book's high-priority (1000000) Deployment on a full node: Never preempts either": PlanCase(
        "extra/18-deploy.yaml", "2", None, 0, "18-priorityclass.yaml"
    ),
    "a Job whose sidecar asks 1 cpu (priority 0 > -10): 5 placeholders go": PlanCase(
        "35-job_with_sidecar.yaml", "2", "n1", 5
    ),
    "a GPU Job where there are no GPUs": PlanCase("38-job-1.yaml", "10", None),
}


@pytest.mark.parametrize("case", PLAN_CASES.values(), ids=PLAN_CASES.keys())
def test_plan(case: PlanCase, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = {"apiVersion": "v1", "kind": "List", "items": [node(case.cpu), *placeholders(10)]}
    argv = [
        "plan",
        "--cluster",
        write_json(tmp_path / "cluster.json", cluster),
        "--pod",
        str(SHARED / case.pod),
    ]
    code, out, err = run(
        [*argv, *(["--classes", str(SHARED / case.classes)] if case.classes else [])], capsys
    )
    result = json.loads(out)
    assert (code, err) == (0 if case.node else 1, "")
    assert (result["node"], [v["priority"] for v in result["victims"]]) == (case.node, [-10] * case.victims)
