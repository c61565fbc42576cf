"""Changing the chart under load, and losing every replica at once, on a real node (both plugin modes).

- One creation loop (server-side dry runs and real creations through the API server, two threads,
  tests/node/release.py::CreationLoop) across `helm install` with the install gate, `helm upgrade` with a
  changed value (the configurations' `timeoutSeconds`, and a pod annotation that rolls the webhook and the
  sidecar), `helm rollback` to the install's revision and a second upgrade: nothing is refused, nothing
  fails, and every pod created once the install returned carries its class's priority. The webhook
  configurations are applied in place (their uid never changes: no moment without them) and carry each
  revision's value.
- Every webhook pod force-deleted at once: what docs/operations.md says happens, happens. Pod creation
  in the namespaces the webhook guards is refused (failurePolicy Fail), kube-system's is admitted
  (failurePolicy Ignore) and so is the release namespace's (never sent to the webhook), and once the
  Deployment's new replicas are Ready creations succeed again with the class's priority. The outage is
  measured by loops in each namespace (several requests in flight, not one kubectl at a time).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator

import pytest

from testkit.cluster_webhook import priority_class
from testkit.node import Node
from testkit.wait import wait_for
from tests.node.release import CONFIG_KINDS, CreationLoop, Release, node_values, pod

CLASS = "node-roll"
VALUE = 4242
ROUND = "priority-webhook.io/test-round"


@pytest.fixture
def klass(real_node: Node) -> Iterator[str]:
    real_node.kubectl("apply", "-f", "-", input=json.dumps(priority_class(CLASS, VALUE)))
    yield CLASS
    real_node.kubectl("delete", "priorityclass", CLASS, "--ignore-not-found")


@pytest.fixture
def ns(real_node: Node) -> Iterator[str]:
    name = real_node.control.new_namespace("roll")
    yield name
    real_node.kubectl("delete", "namespace", name, "--wait=false", check=False)


def changed(image: str, round_: int, timeout_seconds: int) -> dict[str, object]:
    """The node's values with the configurations' timeout changed and a pod annotation on both workloads
    (so each upgrade rolls both and rewrites both configurations)."""
    marker = {ROUND: str(round_)}
    return node_values(
        image,
        admission={"timeoutSeconds": timeout_seconds},
        webhook={"podAnnotations": marker},
        sidecar={"podAnnotations": marker},
    )


def configurations(release: Release) -> dict[str, tuple[str, set[int]]]:
    """kind -> (uid, the timeoutSeconds of its entries) of the release's two webhook configurations."""
    found = {}
    for kind in CONFIG_KINDS:
        obj = release.node.control.get_json(kind, release.fullname)
        found[kind] = (obj["metadata"]["uid"], {hook["timeoutSeconds"] for hook in obj["webhooks"]})
    return found


def test_install_upgrade_rollback_and_upgrade_refuse_and_lose_nothing(
    real_node: Node, klass: str, ns: str, figure: Callable[[str, str], None]
) -> None:
    release = Release(real_node)
    # A re-install: the CA Secret the webhook made stays after an uninstall, and Helm renders its bundle
    # into the configurations. (A first install has them without it until the webhook's watch patches them:
    # docs/operations.md.)
    release.ensure()
    release.ensure_absent()
    image = real_node.project_image
    steps: list[tuple[str, Callable[[], object], int]] = [
        ("upgrade", lambda: release.upgrade(changed(image, 1, 7)), 7),
        ("rollback", lambda: release.rollback(1), 5),
        ("second upgrade", lambda: release.upgrade(changed(image, 2, 6)), 6),
    ]
    with CreationLoop(real_node, ns, klass, VALUE, threads=2) as loop:
        release.install()
        release.wait_ready()
        installed = time.monotonic()
        uids = {kind: uid for kind, (uid, _) in configurations(release).items()}
        for step, act, timeout_seconds in steps:
            act()
            release.wait_ready()
            live = configurations(release)
            assert {kind: uid for kind, (uid, _) in live.items()} == uids, (
                f"{step} re-created a configuration"
            )
            assert all(seconds == {timeout_seconds} for _, seconds in live.values()), (step, live)
        assert release.history()[-1]["status"] == "deployed"

    after = loop.since(installed)
    assert after, "no creation after the install"
    problems = {
        "refused": loop.refused(),
        "failed": loop.failed(),
        "without the class's priority": loop.wrong(installed),
    }
    assert not any(problems.values()), {
        what: [a.message for a in found[:5]] for what, found in problems.items()
    }
    if real_node.in_tree_priority:  # the plugin gave the priority before the webhook existed too
        assert not loop.wrong(), [a.message for a in loop.wrong()[:5]]
    figure(
        "creations across install, upgrade, rollback, upgrade",
        f"{len(loop.since())} ({len(after)} after the install): "
        f"{len(loop.refused())} refused, {len(loop.failed())} failed",
    )


def dry_run(node: Node, ns: str, name: str) -> tuple[bool, str, int | None]:
    """(admitted, stderr, priority) of a server-side dry-run pod of the class in `ns`."""
    body = pod(name, ns, node.project_image, priorityClassName=CLASS)
    done = node.kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(body), check=False
    )
    if done.returncode != 0:
        return False, done.stderr, None
    return True, "", json.loads(done.stdout)["spec"].get("priority")


def test_every_webhook_pod_killed_fails_closed_but_for_the_exempt_namespaces_then_recovers(
    real_node: Node, release: Release, klass: str, ns: str, figure: Callable[[str, str], None]
) -> None:
    assert dry_run(real_node, ns, "before") == (True, "", VALUE)
    guarded = CreationLoop(real_node, ns, klass, VALUE, dry_run_only=True, threads=3)
    system = CreationLoop(real_node, "kube-system", klass, VALUE, dry_run_only=True)
    own = CreationLoop(real_node, release.namespace, None, 0, dry_run_only=True)
    with guarded, system, own:
        wait_for(lambda: len(guarded.since()) > 10, timeout=30, interval=0.05, what="the loops to run")
        real_node.kubectl(
            "delete",
            "pods",
            "-n",
            release.namespace,
            "-l",
            "app.kubernetes.io/component=webhook",
            "--force",
            "--grace-period=0",
            "--wait=false",
        )
        wait_for(
            guarded.not_created, timeout=30, interval=0.05, what="a creation refused while no replica answers"
        )
        release.wait_ready()
        back = wait_for(
            lambda: dry_run(real_node, ns, "after") == (True, "", VALUE),
            timeout=60,
            interval=0.2,
            what="creations admitted with the class's priority again",
        )
        assert back
    first = guarded.not_created()[0].message
    assert (
        'failed calling webhook "pods.priority-webhook.io"' in first or "no endpoints available" in first
    ), first
    # kube-system (its entries fail open) and the release's own namespace (never sent) stayed open.
    for exempt in (system, own):
        assert exempt.since() and not exempt.not_created(), [a.message for a in exempt.not_created()[:3]]
    # Every creation the guarded loop lost, it lost to the outage: the webhook's refusal to be called.
    assert all(
        'failed calling webhook "pods.priority-webhook.io"' in a.message
        or "no endpoints available" in a.message
        for a in guarded.not_created()
    ), [a.message for a in guarded.not_created()[:3]]
    figure(
        "every webhook pod force-deleted: refusals in a guarded namespace",
        f"{guarded.outage():.1f} s ({len(guarded.not_created())} of {len(guarded.since())} dry runs); "
        f"kube-system {len(system.since())} and the release namespace {len(own.since())}, none refused",
    )
