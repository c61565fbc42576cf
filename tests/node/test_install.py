"""`helm install` of the chart on a real node, the install gate on: the webhook's and the sidecar's pods run
from the project's image, the gate's Job reaches the webhook through its Service, the webhook configurations
exist only after it, and `helm test` passes (its pod sends a dry-run pod through the API server, which calls
the webhook at the Service's endpoints). Values: the chart's defaults but the image (tests/node/release.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from testkit.node import Node
from tests.node.release import CONFIG_KINDS, Release


def test_install_to_ready_with_the_gate_then_helm_test_passes(
    real_node: Node, figure: Callable[[str, str], None]
) -> None:
    release = Release(real_node)
    release.ensure_absent()
    started = time.monotonic()
    installed = release.install()
    release.wait_ready()
    took = time.monotonic() - started
    assert installed["status"] == "deployed" and installed["revision"] == 1, installed["status"]

    # The gate ran before the configurations (hooks in weight order), and they exist now.
    for kind in CONFIG_KINDS:
        config = real_node.kubectl("get", kind, release.fullname, "-o", "json").stdout
        assert '"service"' in config and release.namespace in config, kind

    # Every pod of the release runs the project's image on this node.
    pods = release.pods()
    assert {p["metadata"]["labels"]["app.kubernetes.io/component"] for p in pods} >= {"webhook", "sidecar"}
    for p in pods:
        assert p["spec"]["nodeName"] == real_node.name
        assert all(c["image"] == real_node.project_image for c in p["spec"]["containers"])
        assert p["status"]["phase"] == "Running"

    tested = release.test()
    assert tested["release"]["status"] == "deployed"
    # The test pod's dry-run pod names no class and there is no default: 0, as the docs say.
    assert "a pod with no class in default gets priority 0 (PreemptLowerPriority)" in tested["logs"], tested
    assert [(h["revision"], h["status"]) for h in release.history()] == [(1, "deployed")]
    figure("helm install to Ready, the gate on", f"{took:.1f} s")
