"""The chart's webhook configurations reach our server through a real kube-apiserver."""

from __future__ import annotations

import json

from tests.e2e.webhook import registered_webhook


def test_a_server_side_dry_run_gets_the_priority_from_our_webhook_alone(start_control_plane, tmp_path) -> None:
    cluster = start_control_plane(apiserver_args=["--disable-admission-plugins=Priority"],
                                  controller_manager=True)
    with registered_webhook(cluster, tmp_path, "--workers", "1") as hook:
        before = hook.requests()
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
               "spec": {"priorityClassName": "system-node-critical",
                        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}
        out = cluster.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(pod))
        stored = json.loads(out.stdout)
        assert stored["spec"]["priority"] == 2000001000
        assert stored["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
        assert hook.requests() >= before + 2  # mutate and validate
