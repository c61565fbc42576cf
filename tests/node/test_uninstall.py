"""`helm uninstall` on a real node, after a good install (both plugin modes) and after a failed one: nothing
of the release is left but what docs/operations.md names (the CA Secret the webhook made itself, in the
`webhook` certificate mode), and no webhook configuration (a leftover one would refuse every pod creation
it covers). The failed install is a real failure of the install gate: the webhook's container exits at
start (an unknown flag), the gate's Job gives up after its timeout, and Helm reports the install failed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import helm_python as helm
import pytest

from testkit.node import Node
from tests.node.release import CA_SECRET, Release, node_values, pod

DOCUMENTED = {f"secret/{CA_SECRET}"}
GATE_SECONDS = 30


def failing_values(image: str) -> dict[str, object]:
    """An install whose webhook exits at start (an unknown flag): the gate gives up after GATE_SECONDS."""
    return node_values(
        image,
        webhook={"extraArgs": ["--no-such-flag"]},
        admission={"installGate": {"enabled": True, "timeoutSeconds": GATE_SECONDS}},
    )


@pytest.fixture
def release(real_node: Node) -> Iterator[Release]:
    """A release that this test installs itself; the session's is reinstalled by whichever module needs it."""
    installed = Release(real_node)
    installed.ensure_absent()
    yield installed
    real_node.kubectl(
        "delete", "secret", CA_SECRET, "-n", installed.namespace, "--ignore-not-found", check=False
    )


def created(node: Node, prefix: str) -> None:
    """A pod is created for real in a new ordinary namespace: no webhook configuration is left in the way."""
    ns = node.control.new_namespace(prefix)
    body = pod("after", ns, node.project_image)
    done = node.kubectl("create", "-f", "-", input=json.dumps(body), check=False)
    node.kubectl("delete", "namespace", ns, "--wait=false", check=False)
    assert done.returncode == 0, done.stderr


def test_uninstall_after_a_good_install_leaves_only_what_the_docs_name(
    real_node: Node, release: Release
) -> None:
    release.install()
    release.wait_ready()
    release.uninstall()
    left = set(release.left_behind())
    assert left <= DOCUMENTED, left - DOCUMENTED
    created(real_node, "after-good")


# The webhook never starts and no configuration is ever applied: nothing here meets the in-tree plugin, so
# one mode shows it (the one where nothing else would give a pod its priority), and saves the other's 100 s.
@pytest.mark.node_modes("in-tree-off")
def test_uninstall_after_a_failed_install_leaves_only_what_the_docs_name(
    real_node: Node, release: Release
) -> None:
    values = failing_values(real_node.project_image)
    with pytest.raises(helm.HelmError) as failed:
        # Helm waits on the hooks alone, as a user's install without --wait: the gate is what gives up (a
        # wait on the Deployment would fail first, and the gate would never run).
        release.install(values, timeout=240, wait="hookOnly")
    assert "failed" in str(failed.value).lower(), str(failed.value)
    logs = release.hook_job_logs()
    release.uninstall()
    left = set(release.left_behind())
    assert left <= DOCUMENTED, (left - DOCUMENTED, logs)
    created(real_node, "after-failed")
