"""Decided once, on the real API server: a class change between /mutate and /validate denies no pod.

The API server calls our /mutate, the other mutating webhooks, then our /validate with the mutated pod. A
second mutating webhook of our own (`Racer`, registered under a name that sorts after the chart's, so it is
called between the two) changes the class state while the pod is in admission, and answers only once our
webhook's cache has seen the change. That is the race, made deterministic: the pod reaches /validate with
what /mutate decided under the old state, and /validate sees the new one. The in-tree Priority plugin
(off here) decides once; so must we. A later change of the priority fields is still caught.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from testkit.cluster_webhook import (
    RegisteredWebhook,
    create,
    ensure_namespace,
    pod,
    priority_class,
    second_webhook_configuration,
    serve_mutating,
)
from testkit.envtest import ControlPlane
from testkit.wait import wait_for

NS = "e2e-decide-once"
NAMED = "e2e-once-named"
LATE_DEFAULT = "e2e-once-late-default"
RACE = "racer.e2e.priority-webhook.io/race"  # annotation: which class change to make mid-admission
DROP = "racer.e2e.priority-webhook.io/drop-priority"  # annotation: also drop the priority fields


@dataclass
class Racer:
    """A mutating webhook over TLS in this process; `races[name]` changes the classes, then waits."""

    url: str
    ca_bundle: str
    races: dict[str, Callable[[], None]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)

    def configuration(self) -> dict[str, Any]:
        return second_webhook_configuration(self.url, self.ca_bundle, "zz-e2e-racer", NS, timeout=30)

    def answer(self, obj: dict[str, Any]) -> list[dict[str, Any]]:
        meta = obj.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        self.calls.append(meta.get("name", ""))
        race = annotations.get(RACE)
        if race and race in self.races:
            self.races.pop(race)()  # once per pod: the reinvocation must not race again
        spec = obj.get("spec") or {}
        if DROP in annotations:
            return [
                {"op": "remove", "path": f"/spec/{k}"} for k in ("priority", "preemptionPolicy") if k in spec
            ]
        return []


@contextmanager
def racer(tmp_path: Path) -> Iterator[Racer]:
    state = Racer("", "")
    with serve_mutating(tmp_path, "racer", state.answer) as (state.url, state.ca_bundle):
        yield state


def resolves(hook: RegisteredWebhook, class_name: str | None) -> tuple[int, str | None]:
    """What our webhook's /mutate gives a pod naming `class_name`, asked directly: (priority, class)."""
    obj = pod(f"ask-{uuid.uuid4().hex[:8]}", NS, class_name)
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE",
            "namespace": NS,
            "object": obj,
        },
    }
    answer = hook.server.review("/mutate", review).json()["response"]
    spec = dict(obj["spec"])
    for op in json.loads(base64.b64decode(answer.get("patch", "") or "W10=")):
        spec[op["path"].rsplit("/", 1)[1]] = op["value"]
    return spec.get("priority", -1), spec.get("priorityClassName")


@pytest.fixture(scope="module")
def chain(
    no_priority_plane: ControlPlane, no_priority_webhook: RegisteredWebhook, tmp_path_factory
) -> Iterator[tuple[ControlPlane, RegisteredWebhook, Racer]]:
    cluster, hook = no_priority_plane, no_priority_webhook
    ensure_namespace(cluster, NS)
    try:
        with racer(tmp_path_factory.mktemp("racer")) as second:
            cluster.apply(second.configuration())
            with cluster.session() as session:
                wait_for(
                    lambda: (
                        create(session, cluster, pod(f"probe-{uuid.uuid4().hex[:6]}", NS)).allowed
                        and bool(second.calls)
                    ),
                    timeout=60,
                    interval=0.2,
                    what="the racer webhook to be called",
                )
            try:
                yield cluster, hook, second
            finally:
                cluster.kubectl("delete", "mutatingwebhookconfiguration", "zz-e2e-racer", check=False)
    finally:
        for name in (NAMED, LATE_DEFAULT):
            cluster.kubectl("delete", "priorityclass", name, "--ignore-not-found", check=False)
        cluster.kubectl("delete", "namespace", NS, "--wait=false", check=False)


def a_default_appears(cluster: ControlPlane, hook: RegisteredWebhook) -> Callable[[], None]:
    def change() -> None:
        cluster.apply(priority_class(LATE_DEFAULT, 5000, default=True))
        wait_for(lambda: resolves(hook, None) == (5000, LATE_DEFAULT), timeout=20, interval=0.02)

    return change


def the_class_is_recreated(cluster: ControlPlane, hook: RegisteredWebhook) -> Callable[[], None]:
    def change() -> None:
        cluster.kubectl("delete", "priorityclass", NAMED)
        cluster.apply(priority_class(NAMED, 2000))
        wait_for(lambda: resolves(hook, NAMED) == (2000, NAMED), timeout=20, interval=0.02)

    return change


def start_state(cluster: ControlPlane, hook: RegisteredWebhook) -> None:
    """No default class; NAMED at 1000; our webhook has seen exactly that."""
    cluster.kubectl("delete", "priorityclass", LATE_DEFAULT, "--ignore-not-found")
    cluster.kubectl("delete", "priorityclass", NAMED, "--ignore-not-found")
    cluster.apply(priority_class(NAMED, 1000))
    wait_for(
        lambda: resolves(hook, None) == (0, None) and resolves(hook, NAMED) == (1000, NAMED),
        timeout=30,
        interval=0.05,
        what="the webhook to see the start state",
    )


# (id, race, pod's class, the stored (priority, class, policy) or the denial's message)
CASES = [
    ("a default class appears", a_default_appears, None, (0, None, "PreemptLowerPriority")),
    ("the named class is re-created", the_class_is_recreated, NAMED, (1000, NAMED, "PreemptLowerPriority")),
]


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "real"])
@pytest.mark.parametrize(
    "race, class_name, stored", [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_a_class_change_between_mutate_and_validate_admits_what_mutate_decided(
    chain, race, class_name, stored, dry_run
) -> None:
    cluster, hook, second = chain
    start_state(cluster, hook)
    name = f"race-{uuid.uuid4().hex[:8]}"
    second.races[name] = race(cluster, hook)
    with cluster.session() as session:
        outcome = create(
            session, cluster, pod(name, NS, class_name, annotations={RACE: name}), dry_run=dry_run
        )
    assert name not in second.races, "the racer changed the classes during the admission"
    assert outcome.allowed, outcome.message
    assert (outcome.priority, outcome.class_name, outcome.policy) == stored
    if not dry_run:
        cluster.kubectl("delete", "pod", name, "-n", NS, "--wait=false")


@pytest.mark.parametrize("race", [a_default_appears, the_class_is_recreated], ids=["default", "recreated"])
def test_a_later_webhook_that_drops_the_priority_is_still_denied_after_a_class_change(chain, race) -> None:
    """Our reinvoked /mutate restores the fields (with the new state); the racer drops them again; /validate
    must still deny: no class state ever gave a pod without priority."""
    cluster, hook, second = chain
    start_state(cluster, hook)
    name = f"drop-{uuid.uuid4().hex[:8]}"
    second.races[name] = race(cluster, hook)
    with cluster.session() as session:
        outcome = create(session, cluster, pod(name, NS, NAMED, annotations={RACE: name, DROP: ""}))
    assert name not in second.races
    assert not outcome.allowed
    assert outcome.webhook == "pods.priority-webhook.io"
    assert outcome.message.startswith(f'pods "{name}" is forbidden: spec.priority is not set')
    assert second.calls.count(name) == 2  # after our first call and after our reinvocation
