"""The harness itself: a real control plane starts, answers kubectl, restarts, compacts and stops cleanly."""

from __future__ import annotations

import functools
import json
import os

import pytest
import requests

from testkit.envtest import ControlPlane
from testkit.wait import wait_for


def test_the_cluster_answers_kubectl_with_the_builtin_priority_classes(cluster: ControlPlane) -> None:
    classes = cluster.get_json("priorityclasses")
    values = {item["metadata"]["name"]: item["value"] for item in classes["items"]}
    assert values["system-node-critical"] == 2000001000
    assert values["system-cluster-critical"] == 2000000000
    assert cluster.version.startswith("v1.")


def test_a_pod_is_created_with_the_in_tree_priority_plugin_resolving_its_class(cluster: ControlPlane) -> None:
    cluster.kubectl("create", "namespace", "envtest-smoke")
    try:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "envtest-smoke"},
            "spec": {
                "priorityClassName": "system-cluster-critical",
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}],
            },
        }
        cluster.apply(pod)
        stored = cluster.get_json("pod", "p", "-n", "envtest-smoke")
        assert stored["spec"]["priority"] == 2000000000
        assert stored["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    finally:
        cluster.kubectl("delete", "namespace", "envtest-smoke", "--wait=false")


def test_extra_flags_restart_compaction_and_a_clean_stop(start_control_plane) -> None:
    plane = start_control_plane(
        apiserver_args=["--disable-admission-plugins=Priority", "--watch-cache=false"]
    )
    created = plane.kubectl("create", "configmap", "before", "-n", "default", "-o", "json")
    old_rv = json.loads(created.stdout)["metadata"]["resourceVersion"]
    plane.kubectl("create", "configmap", "after", "-n", "default")
    plane.kubectl("create", "configmap", "later", "-n", "default")
    plane.compact_etcd()
    with plane.session() as session:
        gone = session.get(
            f"{plane.url}/api/v1/namespaces/default/configmaps",
            params={"watch": "1", "resourceVersion": old_rv, "timeoutSeconds": "1"},
            timeout=10,
        )
    assert '"code":410' in gone.text.replace(" ", "")

    plane.restart_apiserver()
    assert plane.get_json("configmap", "after", "-n", "default")["metadata"]["name"] == "after"

    pids = [p.popen.pid for p in plane.processes.values() if p.popen is not None]
    plane.stop()
    for pid in pids:
        wait_for(
            functools.partial(_exited, pid),
            timeout=30,
            what=f"process {pid} to exit",
        )
    with pytest.raises(requests.ConnectionError):
        requests.get(plane.url + "/readyz", verify=str(plane.ca_file), timeout=2)


def _exited(pid: int) -> bool:
    return not os.path.exists(f"/proc/{pid}") or _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True
