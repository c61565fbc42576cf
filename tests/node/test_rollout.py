"""Rolling the chart under load, and losing every replica at once, on a real node (both plugin modes).

- `helm upgrade` that rolls the webhook Deployment and the sidecar DaemonSet (a pod annotation changes),
  then `helm rollback` to the revision before, each under a creation loop (server-side dry runs and real
  creations through the API server, tests/node/release.py::CreationLoop), three times: no creation fails
  and every one gets its class's priority.
- Every webhook pod force-deleted at once: what docs/operations.md says happens, happens. Pod creation
  in the namespaces the webhook guards is refused (failurePolicy Fail), kube-system's is admitted
  (failurePolicy Ignore) and so is the release namespace's (never sent to the webhook), and once the
  Deployment's new replicas are Ready creations succeed again with the class's priority.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from testkit.cluster_webhook import priority_class
from testkit.node import Node
from testkit.wait import wait_for
from tests.node.release import CreationLoop, Release, node_values, pod

CLASS = "node-roll"
VALUE = 4242
ROUNDS = 3
ROUND = "priority-webhook.io/test-round"


@pytest.fixture(scope="module")
def release(node: Node) -> Iterator[Release]:
    installed = Release(node)
    installed.ensure_installed()
    node.kubectl("apply", "-f", "-", input=json.dumps(priority_class(CLASS, VALUE)))
    yield installed
    node.kubectl("delete", "priorityclass", CLASS, "--ignore-not-found")


@pytest.fixture
def ns(real_node: Node) -> Iterator[str]:
    name = real_node.control.new_namespace("roll")
    yield name
    real_node.kubectl("delete", "namespace", name, "--wait=false", check=False)


def rolled(image: str, round_: int) -> dict[str, object]:
    """The node's values with a pod annotation on both workloads: each upgrade rolls both."""
    marker = {ROUND: str(round_)}
    return node_values(image, webhook={"podAnnotations": marker}, sidecar={"podAnnotations": marker})


def test_upgrade_and_rollback_under_a_creation_loop_lose_nothing(
    real_node: Node, release: Release, ns: str
) -> None:
    for round_ in range(1, ROUNDS + 1):
        before = release.history()[-1]["revision"]
        with CreationLoop(real_node, ns, CLASS, VALUE) as loop:
            upgraded = release.upgrade(rolled(real_node.project_image, round_))
            release.wait_ready()
        assert upgraded["status"] == "deployed"
        assert loop.created > 0 and loop.failures == [] and loop.wrong == [], (
            round_,
            "upgrade",
            loop.failures[:5],
            loop.wrong[:5],
        )
        deployment = release.get("deployment", release.fullname)
        assert deployment["spec"]["template"]["metadata"]["annotations"][
            "priority-webhook.io/test-round"
        ] == str(round_)

        with CreationLoop(real_node, ns, CLASS, VALUE) as loop:
            release.rollback(before)
            release.wait_ready()
        assert loop.created > 0 and loop.failures == [] and loop.wrong == [], (
            round_,
            "rollback",
            loop.failures[:5],
            loop.wrong[:5],
        )
        assert release.history()[-1]["status"] == "deployed"


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
    real_node: Node, release: Release, ns: str
) -> None:
    assert dry_run(real_node, ns, "before") == (True, "", VALUE)
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
    refusals: list[str] = []
    exempt: list[tuple[bool, str, int | None]] = []

    def refused() -> bool:
        # kube-system (its entries fail open) and the release's own namespace (never sent) stay open.
        exempt.append(dry_run(real_node, "kube-system", "system"))
        exempt.append(dry_run(real_node, release.namespace, "own"))
        admitted, err, _ = dry_run(real_node, ns, "during")
        if not admitted:
            refusals.append(err)
        return not admitted

    wait_for(refused, timeout=30, interval=0.05, what="a creation refused while no replica answers")
    assert (
        'failed calling webhook "pods.priority-webhook.io"' in refusals[0]
        or "no endpoints available" in refusals[0]
    ), refusals[0]
    assert all(admitted for admitted, _, _ in exempt), [err for ok, err, _ in exempt if not ok]

    release.wait_ready()
    wait_for(
        lambda: dry_run(real_node, ns, "after") == (True, "", VALUE),
        timeout=60,
        interval=0.2,
        what="creations admitted with the class's priority again",
    )
