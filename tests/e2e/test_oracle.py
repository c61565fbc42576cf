"""The in-tree Priority plugin as the oracle: one corpus, three real API servers, compared case by case.

- (a) `cluster`: kube-apiserver with its own Priority plugin and no webhook: the oracle;
- (b) `no_priority_plane`: `--disable-admission-plugins=Priority` plus our webhook (the chart's
  configurations): the stored `spec.priority`, `priorityClassName`, `preemptionPolicy` and every denial
  (status code, reason, message less the `admission webhook "..." denied the request: ` prefix) must equal
  (a)'s;
- (c) the same API server as (a), with our webhook registered too, as in a normal cluster: ours must never
  deny what the plugin alone admits, nor store other fields.

The one documented difference is the legacy critical-pod annotation (a pod in kube-system annotated
`scheduler.alpha.kubernetes.io/critical-pod: ""` that names no class): there (b) must equal what (a) stores
for the same pod naming `system-cluster-critical`, and so must (c) where the plugin left the no-default
values (docs/admission.md).

The corpus: upstream's TestPodAdmission pods (tests/admission/fixtures.py) under every class set of
upstream's tables, the files in examples/, seeded random scenarios (`ORACLE_SEED` to vary; the seed is in
the test ids), and sequences of PriorityClass operations (upstream's TestPriorityClassAdmission and
TestDefaultPriority, then seeded random ones). Pods go through server-side dry-run (the API server answers
with the object it would store); one scenario also creates them for real and PUTs them back without their
priority (UPDATE copy-back). Requests go straight to the REST API: kubectl would cost a process per case.
"""

from __future__ import annotations

import copy
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from testkit.cluster_webhook import (
    CRITICAL_POD,
    IMAGE,
    Outcome,
    RegisteredWebhook,
    create,
    ensure_namespace,
    pod,
    priority_class,
    registered_webhook,
    wait_until_resolved,
)
from testkit.envtest import ControlPlane
from tests.admission import fixtures

SEED = int(os.environ.get("ORACLE_SEED", "20240611"))
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GEN_NS = "oracle-gen"
NAMESPACES = ("namespace", "non-system-namespace", GEN_NS)
PROBE_NS = GEN_NS
MIRROR = {"kubernetes.io/config.mirror": ""}


# -- the corpus ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    id: str
    pod: dict[str, Any]

    @property
    def legacy(self) -> bool:
        """The documented difference: our webhook maps the annotation, the plugin (since 1.16) does not."""
        meta, spec = self.pod["metadata"], self.pod["spec"]
        return (
            meta["namespace"] == "kube-system"
            and (meta.get("annotations") or {}).get(CRITICAL_POD) == ""
            and not spec.get("priorityClassName")
        )

    def as_named_critical(self, *, bare: bool = False) -> Case:
        """The same pod naming `system-cluster-critical` (`bare`: without a client-set priority or policy):
        what the plugin does with it is what we must do with the annotated pod."""
        named = copy.deepcopy(self.pod)
        named["spec"]["priorityClassName"] = "system-cluster-critical"
        if bare:
            named["spec"].pop("priority", None)
            named["spec"].pop("preemptionPolicy", None)
        return Case(self.id + ("~named-bare" if bare else "~named"), named)


@dataclass(frozen=True)
class Scenario:
    name: str
    classes: tuple[dict[str, Any], ...]
    cases: tuple[Case, ...]
    real: bool = False  # also create the allowed pods for real, then PUT them back without their priority

    def expected_classes(self) -> tuple[dict[str, int], int]:
        values = {c["metadata"]["name"]: c["value"] for c in self.classes}
        defaults = [c["value"] for c in self.classes if c.get("globalDefault")]
        return values, min(defaults) if defaults else 0


def _as_a_cluster_takes_it(obj: dict[str, Any]) -> dict[str, Any]:
    """Upstream's fixture pods lack what API validation requires: an image; a node for a mirror pod."""
    obj = copy.deepcopy(obj)
    for container in obj["spec"]["containers"]:
        container.setdefault("image", IMAGE)
    if "kubernetes.io/config.mirror" in (obj["metadata"].get("annotations") or {}):
        obj["spec"]["nodeName"] = "oracle-node"
    return obj


def _fixture_class(pc: fixtures.PriorityClass) -> dict[str, Any]:
    return pc.to_object()  # an un-defaulted policy is omitted: the API defaults it, as in any real cluster


# Upstream's class sets (TestPodAdmission), as a real API server can hold them: the system classes always
# exist and can never be a default, and every class has a preemptionPolicy after defaulting.
TABLE_CLASS_SETS = {
    "none": (),
    "default1": (fixtures.default1,),
    "default1+nondefault1": (fixtures.default1, fixtures.nondefault1),
    "nondefault1": (fixtures.nondefault1,),
    "default2": (fixtures.default2,),
    "preemptionPolicyClass": (fixtures.preemption_policy_class,),
}


def table_scenarios() -> list[Scenario]:
    """Every upstream TestPodAdmission pod under every class set of the table: 6 x 14 cases."""
    return [
        Scenario(
            f"table:{name}",
            tuple(_fixture_class(pc) for pc in classes),
            tuple(
                Case(f"table:{name}/{key}", _as_a_cluster_takes_it(obj)) for key, obj in fixtures.PODS.items()
            ),
            real=name == "default1+nondefault1",
        )
        for name, classes in TABLE_CLASS_SETS.items()
    ]


def example_scenario() -> Scenario:
    classes = tuple(doc for doc in yaml.safe_load_all((EXAMPLES / "priorityclasses.yaml").read_text()) if doc)
    example = yaml.safe_load((EXAMPLES / "pod.yaml").read_text())
    cases = [Case("examples:pod.yaml", example)]
    for pc in classes:
        name, value = pc["metadata"]["name"], pc["value"]
        cases += [
            Case(f"examples:names-{name}", pod(f"ex-{name}", "default", name)),
            Case(f"examples:names-{name}-same-value", pod(f"ex-{name}-v", "default", name, value)),
            Case(f"examples:names-{name}-other-value", pod(f"ex-{name}-o", "default", name, value + 1)),
            Case(f"examples:names-{name}-never", pod(f"ex-{name}-n", "default", name, policy="Never")),
        ]
    cases += [
        Case("examples:names-none", pod("ex-none", "default")),
        Case("examples:names-none-legacy", pod("ex-legacy", "kube-system", annotations={CRITICAL_POD: ""})),
    ]
    return Scenario("examples", classes, tuple(cases))


def _with_shape(obj: dict[str, Any], shape: str) -> dict[str, Any]:
    """The pod with sidecar containers (init containers with `restartPolicy: Always`, KEP-753) and/or the
    in-place resize fields (`resizePolicy`, requests and limits that a resize may change): fields the
    current API server validates and stores, and that priority admission must not care about."""
    spec = obj["spec"]
    resources = {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}}
    resize_policy = [
        {"resourceName": "cpu", "restartPolicy": "NotRequired"},
        {"resourceName": "memory", "restartPolicy": "RestartContainer"},
    ]
    sidecar = {
        "name": "proxy",
        "image": IMAGE,
        "restartPolicy": "Always",
        "resources": copy.deepcopy(resources),
    }
    if shape in ("sidecar", "init-then-sidecar", "sidecar-resize"):
        spec["initContainers"] = [sidecar]
    if shape == "init-then-sidecar":
        spec["initContainers"].insert(0, {"name": "setup", "image": IMAGE})
    if shape in ("resize", "sidecar-resize"):
        spec["containers"][0]["resources"] = copy.deepcopy(resources)
        spec["containers"][0]["resizePolicy"] = resize_policy
    if shape == "sidecar-resize":
        spec["initContainers"][0]["resizePolicy"] = resize_policy
    if shape == "sidecar-bad-restart-policy":  # refused by API validation: both sides must say the same
        spec["initContainers"] = [{**sidecar, "restartPolicy": "OnFailure"}]
    return obj


SHAPES = ("sidecar", "init-then-sidecar", "resize", "sidecar-resize", "sidecar-bad-restart-policy")


def sidecar_and_resize_scenario() -> Scenario:
    """Pods with sidecar containers and resize fields under a class set with a default, created for real
    too (then PUT back without their priority, and resized through the `resize` subresource)."""
    classes = (
        priority_class("sr-high", 5000),
        priority_class("sr-never", 100, policy="Never"),
        priority_class("sr-default", 10, default=True),
    )
    cases = []
    for shape in SHAPES:
        for namespace in (GEN_NS, "kube-system"):
            for label, class_name, priority, policy in (
                ("high", "sr-high", None, None),
                ("never", "sr-never", None, None),
                ("default", None, None, None),
                ("critical", "system-node-critical", None, None),
                ("missing", "sr-missing", None, None),
                ("same-priority", "sr-high", 5000, None),
                ("other-priority", "sr-high", 4999, None),
                ("other-policy", "sr-never", None, "PreemptLowerPriority"),
            ):
                name = f"sr-{shape}-{label}"
                obj = _with_shape(pod(name, namespace, class_name, priority, policy), shape)
                cases.append(Case(f"sidecar-resize:{namespace}/{name}", obj))
    return Scenario("sidecar-resize", classes, tuple(cases), real=True)


def generated_scenarios(seed: int, count: int = 6, pods: int = 30) -> list[Scenario]:
    """Random class sets (at most one default: a second is refused) and random pods over them."""
    rng = random.Random(seed)
    scenarios = []
    for i in range(count):
        classes = []
        n = rng.randint(0, 4)
        default_at = rng.choice([None, *range(n)])
        for j in range(n):
            value = rng.choice([rng.randint(-1000, 1000), rng.randint(0, 10**9), 10**9, -(2**31), 0])
            classes.append(
                priority_class(
                    f"gen{i}-{j}",
                    value,
                    default=j == default_at,
                    policy=rng.choice([None, "Never", "PreemptLowerPriority"]),
                )
            )
        values = {c["metadata"]["name"]: c["value"] for c in classes}
        values |= {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
        default_value = next((c["value"] for c in classes if c.get("globalDefault")), 0)
        cases = []
        for k in range(pods):
            namespace = rng.choice([GEN_NS, GEN_NS, "kube-system"])
            class_name = rng.choice([*values, "gen-missing", None, None])
            resolved = values.get(class_name, default_value) if class_name else default_value
            priority = rng.choice([None, None, resolved, 0, rng.randint(-5, 5), 2000000000])
            policy = rng.choice([None, None, "Never", "PreemptLowerPriority"])
            annotations = rng.choice([None, None, {CRITICAL_POD: ""}, {CRITICAL_POD: "true"}, MIRROR])
            obj = pod(
                f"gen{i}-{k}" + ("-" if rng.random() < 0.2 else ""),
                namespace,
                class_name,
                priority,
                policy,
                annotations=annotations,
            )
            if obj["metadata"]["name"].endswith("-"):
                obj["metadata"]["generateName"] = obj["metadata"].pop("name")
            if annotations == MIRROR and rng.random() < 0.7:
                obj["spec"]["nodeName"] = "oracle-node"
            cases.append(Case(f"seed{seed}/{i}/{k}", obj))
        for k, (priority, policy) in enumerate(
            [
                (None, None),
                (0, None),
                (2000000000, None),
                (None, "Never"),
                (0, "PreemptLowerPriority"),
                (default_value, None),
            ]
        ):
            obj = pod(
                f"gen{i}-legacy{k}", "kube-system", None, priority, policy, annotations={CRITICAL_POD: ""}
            )
            cases.append(Case(f"seed{seed}/{i}/legacy{k}", obj))
        scenarios.append(Scenario(f"generated:seed{seed}/{i}", tuple(classes), tuple(cases)))
    return scenarios


# PriorityClass operations: (op, object or name, merge patch). Upstream's TestPriorityClassAdmission and
# TestDefaultPriority in one sequence, as a real cluster runs them one after another.
def _pc(obj: fixtures.PriorityClass, **changes: Any) -> dict[str, Any]:
    out = obj.to_object()
    out.update(changes)
    return out


TABLE_CLASS_OPS: list[tuple[str, Any, dict[str, Any] | None]] = [
    ("create", _pc(fixtures.default1), None),  # create with default class
    ("create", _pc(fixtures.default2), None),  # ... one existing default
    ("create", _pc(fixtures.system_test), None),  # system name and value
    ("update", "default1", {"description": "updated"}),  # update operator with default
    ("create", _pc(fixtures.default2, globalDefault=False), None),
    ("update", "default2", {"globalDefault": True}),  # ... different default classes
    ("update", "default1", {"value": 5}),  # value immutable
    ("update", "default1", {"preemptionPolicy": "Never"}),  # preemptionPolicy immutable
    ("create", _pc(fixtures.nondefault1), None),  # add a non-default class
    ("delete", "default1", None),  # delete the default
    ("update", "default2", {"globalDefault": True}),  # now it may become the default
    ("update", "default2", {"globalDefault": False}),  # and give it up
    ("delete", "system-cluster-critical", None),  # system classes stay
    ("delete", "system-node-critical", None),
    ("create", priority_class("system-node-critical", 2000001000), None),  # exists already
    ("create", priority_class("system-node-critical", 2000001000, default=True), None),
    ("delete", "default2", None),
    ("delete", "nondefault1", None),
    ("delete", "default2", None),  # gone already
]


# What an update of a generated class changes (one of these, each time).
CLASS_UPDATES: list[dict[str, Any]] = [
    {"globalDefault": True},
    {"globalDefault": False},
    {"description": "x"},
    {"value": 3},
    {"preemptionPolicy": "Never"},
]


def generated_class_ops(seed: int, count: int = 16) -> list[tuple[str, Any, dict[str, Any] | None]]:
    rng = random.Random(seed * 7 + 1)
    names = ["gpc-a", "gpc-b", "gpc-c", "system-gpc"]
    ops: list[tuple[str, Any, dict[str, Any] | None]] = []
    for _ in range(count):
        name = rng.choice(names)
        kind = rng.choice(["create", "create", "update", "delete"])
        if kind == "create":
            ops.append(
                (
                    "create",
                    priority_class(
                        name,
                        rng.choice([rng.randint(-100, 100), 10**9, 10**9 + 1]),
                        default=rng.random() < 0.4,
                        policy=rng.choice([None, "Never"]),
                    ),
                    None,
                )
            )
        elif kind == "update":
            ops.append(
                (
                    "update",
                    name,
                    dict(rng.choice(CLASS_UPDATES)),
                )
            )
        else:
            ops.append(("delete", name, None))
    ops += [("delete", name, None) for name in names]
    return ops


# -- running it against one API server -------------------------------------------------------------------
class Runner:
    """Drives one API server: class sets in, outcomes out (threads share nothing but the cluster)."""

    def __init__(self, cluster: ControlPlane, label: str) -> None:
        self.cluster, self.label = cluster, label
        self._local = threading.local()
        self._created: list[str] = []

    @property
    def session(self) -> requests.Session:
        if not hasattr(self._local, "session"):
            self._local.session = self.cluster.session()
        return self._local.session

    def use_classes(self, classes: Iterable[dict[str, Any]], values: dict[str, int], default: int) -> None:
        """Replace the previous scenario's classes with these, and wait until admission sees them."""
        gone = {name: None for name in self._created}
        for name in self._created:
            self.session.delete(
                f"{self.cluster.url}/apis/scheduling.k8s.io/v1/priorityclasses/{name}", timeout=30
            )
        if gone:
            wait_until_resolved(self.cluster, self.session, PROBE_NS, gone, 0)
        self._created = []
        for obj in classes:
            outcome = create(self.session, self.cluster, obj, dry_run=False)
            assert outcome.allowed, f"{self.label}: class {obj['metadata']['name']}: {outcome.message}"
            self._created.append(obj["metadata"]["name"])
        wait_until_resolved(self.cluster, self.session, PROBE_NS, values, default)

    def outcomes(self, cases: Iterable[Case], *, dry_run: bool = True) -> dict[str, Outcome]:
        cases = list(cases)
        with ThreadPoolExecutor(4) as pool:
            results = pool.map(
                lambda case: create(self.session, self.cluster, case.pod, dry_run=dry_run), cases
            )
            return dict(zip((case.id for case in cases), results, strict=True))

    def put_back_without_priority(self, cases: Iterable[Case]) -> dict[str, Outcome]:
        """GET each stored pod, drop priority and preemptionPolicy, PUT it: the UPDATE copy-back."""
        results = {}
        for case in cases:
            meta = case.pod["metadata"]
            url = f"{self.cluster.url}/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
            current = self.session.get(url, timeout=30).json()
            current["spec"].pop("priority", None)
            current["spec"].pop("preemptionPolicy", None)
            results[case.id] = Outcome.of(self.session.put(url, json=current, timeout=30))
        return results

    def resize(self, cases: Iterable[Case]) -> dict[str, Outcome]:
        """Double the cpu of the first container that has requests through the `resize` subresource (in-place
        resize): it never reaches admission by priority, and the stored priority fields stay."""
        results = {}
        for case in cases:
            meta, spec = case.pod["metadata"], case.pod["spec"]
            if "resources" not in spec["containers"][0]:
                continue
            url = f"{self.cluster.url}/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/resize"
            patch: dict[str, Any] = {
                "spec": {
                    "containers": [
                        {"name": "c", "resources": {"requests": {"cpu": "150m"}, "limits": {"cpu": "300m"}}}
                    ]
                }
            }
            response = self.session.patch(
                url,
                json=patch,
                headers={"Content-Type": "application/strategic-merge-patch+json"},
                timeout=30,
            )
            outcome = Outcome.of(response)
            if outcome.allowed:
                cpu = response.json()["spec"]["containers"][0]["resources"]["requests"]["cpu"]
                assert cpu == "150m", f"{self.label}: {case.id} resized to {cpu}"
            results[case.id] = outcome
        return results

    def delete_pods(self, cases: Iterable[Case]) -> None:
        for case in cases:
            meta = case.pod["metadata"]
            self.session.delete(
                f"{self.cluster.url}/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                params={"gracePeriodSeconds": "0"},
                timeout=30,
            )

    def class_ops(self, ops: list[tuple[str, Any, dict[str, Any] | None]]) -> list[Outcome]:
        """Run PriorityClass operations one by one, each seen by admission before the next."""
        base = f"{self.cluster.url}/apis/scheduling.k8s.io/v1/priorityclasses"
        results, touched = [], set()
        for op, target, patch in ops:
            if op == "create":
                touched.add(target["metadata"]["name"])
                outcome = create(self.session, self.cluster, target, dry_run=False)
            elif op == "update":
                response = self.session.patch(
                    f"{base}/{target}",
                    json=patch,
                    timeout=30,
                    headers={"Content-Type": "application/merge-patch+json"},
                )
                outcome = Outcome.of(response)
            else:
                outcome = Outcome.of(self.session.delete(f"{base}/{target}", timeout=30))
            results.append(outcome)
            self._sync_classes(touched)
        return results

    def _sync_classes(self, touched: set[str]) -> None:
        items = self.session.get(
            f"{self.cluster.url}/apis/scheduling.k8s.io/v1/priorityclasses", timeout=30
        ).json()["items"]
        values: dict[str, int | None] = {name: None for name in touched if not name.startswith("system-")}
        defaults = []
        for item in items:
            values[item["metadata"]["name"]] = item["value"]
            if item.get("globalDefault"):
                defaults.append(item["value"])
        wait_until_resolved(self.cluster, self.session, PROBE_NS, values, min(defaults, default=0))

    def close(self) -> None:
        self.use_classes((), {}, 0)


@dataclass
class Results:
    """Every outcome, by API server (`a`, `b`, `c`) and case id."""

    pods: dict[str, dict[str, Outcome]] = field(default_factory=lambda: {"a": {}, "b": {}, "c": {}})
    real: dict[str, dict[str, Outcome]] = field(default_factory=lambda: {"a": {}, "b": {}, "c": {}})
    updates: dict[str, dict[str, Outcome]] = field(default_factory=lambda: {"a": {}, "b": {}, "c": {}})
    resizes: dict[str, dict[str, Outcome]] = field(default_factory=lambda: {"a": {}, "b": {}, "c": {}})
    class_ops: dict[str, list[Outcome]] = field(default_factory=dict)
    cases: dict[str, Case] = field(default_factory=dict)
    scenario_of: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase, for docs/end-to-end.md


SCENARIOS = [
    *table_scenarios(),
    example_scenario(),
    *generated_scenarios(SEED),
    sidecar_and_resize_scenario(),
]
CLASS_OPS = {"table": TABLE_CLASS_OPS, f"generated:seed{SEED}": generated_class_ops(SEED)}


def run_corpus(runner: Runner, label: str, results: Results) -> None:
    clock = time.monotonic()

    def lap(what: str) -> None:
        nonlocal clock
        now = time.monotonic()
        results.timings[f"{label}:{what}"] = results.timings.get(f"{label}:{what}", 0.0) + now - clock
        clock = now

    for scenario in SCENARIOS:
        values, default = scenario.expected_classes()
        runner.use_classes(scenario.classes, values, default)
        lap("classes")
        cases = list(scenario.cases)
        if label == "a":  # the oracle for the documented difference
            cases += [
                named
                for case in scenario.cases
                if case.legacy
                for named in (case.as_named_critical(), case.as_named_critical(bare=True))
            ]
        results.pods[label].update(runner.outcomes(cases))
        lap("dry-run")
        if scenario.real:
            stored = runner.outcomes(scenario.cases, dry_run=False)
            results.real[label].update(stored)
            created = [case for case in scenario.cases if stored[case.id].allowed]
            results.resizes[label].update(runner.resize(created))
            results.updates[label].update(runner.put_back_without_priority(created))
            runner.delete_pods(created)
            lap("real")
    runner.close()
    for name, ops in CLASS_OPS.items():
        results.class_ops[f"{label}:{name}"] = runner.class_ops(ops)
    lap("class-ops")


@pytest.fixture(scope="module")
def results(
    control_plane: ControlPlane,
    no_priority_plane: ControlPlane,
    no_priority_webhook: RegisteredWebhook,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Results]:
    out = Results()
    for scenario in SCENARIOS:
        for case in scenario.cases:
            out.cases[case.id] = case
            out.scenario_of[case.id] = scenario.name
    planes = {"a": control_plane, "b": no_priority_plane}
    for plane in planes.values():
        for namespace in NAMESPACES:
            ensure_namespace(plane, namespace)
    try:
        with ThreadPoolExecutor(2) as pool:  # (a) and (b) side by side
            for future in [
                pool.submit(run_corpus, Runner(planes[label], label), label, out) for label in ("a", "b")
            ]:
                future.result()
        with registered_webhook(control_plane, tmp_path_factory.mktemp("oracle-c"), workers=1):
            run_corpus(Runner(control_plane, "c"), "c", out)
        print("oracle timings:", {k: round(v, 1) for k, v in sorted(out.timings.items())})
        yield out
    finally:
        for plane in planes.values():
            for namespace in NAMESPACES:
                plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


@pytest.fixture
def both(cluster: ControlPlane, no_priority_cluster: ControlPlane) -> None:
    """Attach both API servers' logs to a failing test's report."""


# -- comparisons -----------------------------------------------------------------------------------------
def _expected_b(results: Results, case_id: str, table: dict[str, dict[str, Outcome]]) -> Outcome:
    case = results.cases[case_id]
    if not case.legacy:
        return table["a"][case_id]
    oracle, spec = table["a"][case_id], case.pod["spec"]
    if (
        oracle.allowed
        and oracle.class_name is None
        and (spec.get("priority"), spec.get("preemptionPolicy")) == (0, "PreemptLowerPriority")
    ):
        # Exactly what the plugin leaves when no default exists: we cannot tell that the client set it, and
        # replace it as the plugin's (documented).
        return table["a"][case.as_named_critical(bare=True).id]
    return table["a"][case.as_named_critical().id]


def _expected_c(results: Results, case_id: str, table: dict[str, dict[str, Outcome]]) -> Outcome:
    case, oracle = results.cases[case_id], table["a"][case_id]
    if case.legacy and oracle.allowed and oracle.class_name is None:
        # The plugin gave the no-default values (0, PreemptLowerPriority); we replace them (documented).
        return table["a"][case.as_named_critical(bare=True).id]
    return oracle


def _comparable(outcome: Outcome, case: Case) -> tuple[Any, ...]:
    """The fields to compare; a name generated from `generateName` (random) is masked."""
    prefix = case.pod["metadata"].get("generateName")
    if not prefix or outcome.allowed:
        return outcome.fields()
    return (*outcome.fields()[:-1], re.sub(re.escape(prefix) + "[a-z0-9]{5}", prefix + "*", outcome.message))


def _differences(
    results: Results,
    ids: Iterable[str],
    table: dict[str, dict[str, Outcome]],
    label: str,
    expect: Callable[[Results, str, dict[str, dict[str, Outcome]]], Outcome],
) -> list[str]:
    lines = []
    for case_id in ids:
        case = results.cases[case_id]
        want, got = (
            _comparable(expect(results, case_id, table), case),
            _comparable(table[label][case_id], case),
        )
        if want != got:
            lines.append(
                f"{results.scenario_of.get(case_id)} {case_id}: {case.pod}\n"
                f"    plugin: {want}\n    ours:   {got}"
            )
    return lines


def _ids(results: Results, prefix: str) -> list[str]:
    return [case_id for case_id, scenario in results.scenario_of.items() if scenario.startswith(prefix)]


PARTS = ["table", "examples", "generated", "sidecar-resize"]


@pytest.mark.parametrize("part", PARTS)
def test_our_webhook_alone_stores_and_denies_exactly_as_the_plugin(results, both, part) -> None:
    ids = _ids(results, part)
    assert ids
    differences = _differences(results, ids, results.pods, "b", _expected_b)
    assert not differences, f"{len(differences)} of {len(ids)} cases differ:\n" + "\n".join(differences)
    # With the plugin off, every Forbidden came from one of our webhooks (API validation answers 422).
    forbidden = [results.pods["b"][case_id] for case_id in ids if results.pods["b"][case_id].code == 403]
    assert forbidden and {o.webhook for o in forbidden} <= {
        "pods.priority-webhook.io",
        "system-pods.priority-webhook.io",
    }


def test_real_creates_and_puts_without_priority_agree(results, both) -> None:
    table = [case_id for case_id in results.real["a"] if case_id.startswith("table:")]
    assert len(table) == len(fixtures.PODS)
    assert sum(results.real["a"][case_id].allowed for case_id in table) >= 8
    assert not _differences(results, results.real["a"], results.real, "b", _expected_b)
    # The PUT copies priority and preemptionPolicy back in both: each update succeeds with the same fields.
    assert results.updates["a"] and all(o.allowed for o in results.updates["a"].values())
    assert not _differences(results, results.updates["a"], results.updates, "b", _expected_b)
    # Server-side dry-run stored what the real create stored.
    for case_id, real in results.real["a"].items():
        assert real.fields() == results.pods["a"][case_id].fields(), case_id


def test_sidecar_and_resize_pods_agree_created_resized_and_put_back(results, both) -> None:
    """Sidecar containers and resize fields change nothing in priority admission: real creates, resizes
    through the `resize` subresource (which neither the plugin nor our webhook sees) and PUTs without
    the priority give the same answers with our webhook alone as with the plugin."""
    ids = _ids(results, "sidecar-resize")
    real = {case_id: results.real["a"][case_id] for case_id in ids}
    assert sum(o.allowed for o in real.values()) >= 20
    assert any(o.code == 422 for o in real.values()), "API validation refuses a sidecar's bad restartPolicy"
    assert not _differences(results, ids, results.real, "b", _expected_b)
    assert not _differences(results, ids, results.real, "c", _expected_c)
    resized = [case_id for case_id in ids if case_id in results.resizes["a"]]
    assert sum(results.resizes["a"][case_id].allowed for case_id in resized) >= 8
    for label in ("b", "c"):
        assert set(results.resizes[label]) >= set(resized)
        assert not _differences(results, resized, results.resizes, label, _expected_b)
    updated = [case_id for case_id in ids if case_id in results.updates["a"]]
    assert updated and all(results.updates["a"][case_id].allowed for case_id in updated)
    for label, expect in (("b", _expected_b), ("c", _expected_c)):
        assert not _differences(results, updated, results.updates, label, expect)


@pytest.mark.parametrize("sequence", list(CLASS_OPS))
def test_priority_class_operations_agree(results, both, sequence) -> None:
    oracle, ours = results.class_ops[f"a:{sequence}"], results.class_ops[f"b:{sequence}"]
    ops = CLASS_OPS[sequence]
    lines = [
        f"#{i} {op[0]} {op[1] if isinstance(op[1], str) else op[1]['metadata']['name']} {op[2] or ''}:"
        f"\n    plugin: {want.fields()}\n    ours:   {got.fields()}"
        for i, (op, want, got) in enumerate(zip(ops, oracle, ours, strict=True))
        if want.fields() != got.fields()
    ]
    assert not lines, "\n".join(lines)
    assert any(not o.allowed for o in oracle) and any(o.allowed for o in oracle)


@pytest.mark.parametrize("part", PARTS)
def test_with_both_active_our_webhook_never_conflicts_with_the_plugin(results, both, part) -> None:
    ids = _ids(results, part)
    differences = _differences(results, ids, results.pods, "c", _expected_c)
    assert not differences, f"{len(differences)} of {len(ids)} cases differ:\n" + "\n".join(differences)
    # Every denial is the plugin's own (it runs first): none carries our webhook's prefix.
    assert not [case_id for case_id in ids if results.pods["c"][case_id].webhook]


def test_with_both_active_class_operations_and_real_creates_agree(results, both) -> None:
    for sequence in CLASS_OPS:
        oracle, ours = results.class_ops[f"a:{sequence}"], results.class_ops[f"c:{sequence}"]
        assert [o.fields() for o in ours] == [o.fields() for o in oracle]
        assert not [o for o in ours if o.webhook]
    assert not _differences(results, results.real["a"], results.real, "c", _expected_c)
    assert not _differences(results, results.updates["a"], results.updates, "c", _expected_c)


def test_the_corpus_is_not_trivial(results) -> None:
    """Enough admissions and denials of each kind that agreement means something."""
    oracle = [results.pods["a"][case_id] for case_id in results.cases]
    messages = " ".join(o.message for o in oracle)
    assert len(oracle) >= 250
    assert sum(o.allowed for o in oracle) >= 80
    for text in (
        "no PriorityClass with name",
        "the integer value of priority",
        "the string value of PreemptionPolicy",
    ):
        assert messages.count(text) >= 5, text
    assert sum(case.legacy for case in results.cases.values()) >= 5
    assert len({o.priority for o in oracle if o.allowed}) >= 8


def test_the_legacy_annotation_is_the_one_documented_difference(results) -> None:
    legacy = [case_id for case_id, case in results.cases.items() if case.legacy]
    mapped = [
        case_id for case_id in legacy if results.pods["b"][case_id].class_name == "system-cluster-critical"
    ]
    assert mapped  # the mapping happened where the plugin would not have done it
    for case_id in mapped:
        assert results.pods["a"][case_id].class_name != "system-cluster-critical"
