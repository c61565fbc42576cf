"""Playing the kubelet through the API, since no kubelet runs in the end-to-end clusters.

    kubelet = FakeKubelet(cluster)          # one per module; heartbeats every node it registered
    kubelet.register_node("n1", cpu="2", memory="4Gi")
    kubelet.run(pod)                        # create bound to its node, then status Running and Ready
    kubelet.reject(pod, "cpu", ...)         # the kubelet's admission failure: Failed / OutOfcpu
    kubelet.finish_terminating("ns")        # what the kubelet does once a deleted pod's containers stop

Node status (capacity, allocatable, a `Ready` condition, the kubelet's version) and pod status go through the `status`
subresource, as the kubelet writes them. A background thread renews every node's `Ready` heartbeat so the
controller manager's node lifecycle controller never marks a node `Unknown` (after 40 s) and taints it.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import threading
from collections.abc import Mapping
from typing import Any

import requests

from testkit.envtest import ControlPlane

HEARTBEAT_SECONDS = 10.0


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakeKubelet:
    def __init__(self, cluster: ControlPlane) -> None:
        self.cluster = cluster
        self.session: requests.Session = cluster.session()
        self.nodes: dict[str, dict[str, str]] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._heartbeats, name="fake-kubelet", daemon=True)
        self._thread.start()

    # -- plumbing ------------------------------------------------------------------------------------
    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        ok: tuple[int, ...] = (200, 201),
    ) -> Any:
        with self._lock:  # requests.Session is not thread-safe; the heartbeat thread shares it
            response = self.session.request(
                method,
                self.cluster.url + path,
                data=json.dumps(body) if body is not None else None,
                headers={"Content-Type": content_type},
                timeout=10,
            )
        if response.status_code not in ok:
            raise AssertionError(f"{method} {path}: {response.status_code} {response.text[:300]}")
        return response.json() if response.content else None

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for name in list(self.nodes):
            self.call("DELETE", f"/api/v1/nodes/{name}", ok=(200, 404))
        self.session.close()

    # -- nodes ---------------------------------------------------------------------------------------
    def register_node(
        self,
        name: str,
        *,
        cpu: str = "2",
        memory: str = "4Gi",
        pods: str = "110",
        labels: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Create the Node and write its status (capacity = allocatable, Ready)."""
        allocatable = {"cpu": cpu, "memory": memory, "pods": pods}
        self.call(
            "POST",
            "/api/v1/nodes",
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            },
        )
        self.nodes[name] = allocatable
        return self._heartbeat(name)

    def _node_status(self, name: str) -> dict[str, Any]:
        stamp = now()
        return {
            "status": {
                "capacity": self.nodes[name],
                "allocatable": self.nodes[name],
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "kubelet is posting ready status",
                        "lastHeartbeatTime": stamp,
                        "lastTransitionTime": stamp,
                    }
                ],
                "addresses": [
                    {"type": "InternalIP", "address": "127.0.0.1"},
                    {"type": "Hostname", "address": name},
                ],
                # A kubelet reports its version, the control plane's here: `victims`, the sidecar and
                # `plan --cluster` follow it (an unstated version is taken as the newest we follow).
                "nodeInfo": {"kubeletVersion": self.cluster.version},
            }
        }

    def _heartbeat(self, name: str) -> dict[str, Any]:
        return self.call(
            "PATCH",
            f"/api/v1/nodes/{name}/status",
            self._node_status(name),
            content_type="application/merge-patch+json",
        )

    def _heartbeats(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            for name in list(self.nodes):
                # A node just deleted, or the API server restarting: the next beat tries again.
                with contextlib.suppress(AssertionError, requests.RequestException):
                    self._heartbeat(name)

    def node(self, name: str) -> dict[str, Any]:
        return self.call("GET", f"/api/v1/nodes/{name}")

    # -- pods ----------------------------------------------------------------------------------------
    def create(self, pod: Mapping[str, Any]) -> dict[str, Any]:
        namespace = pod["metadata"]["namespace"]
        return self.call("POST", f"/api/v1/namespaces/{namespace}/pods", dict(pod))

    def set_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> dict[str, Any]:
        return self.call(
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/{name}/status",
            {"status": status},
            content_type="application/merge-patch+json",
        )

    def run(self, pod: Mapping[str, Any]) -> dict[str, Any]:
        """Create the pod (bound by `spec.nodeName`) and report it Running and Ready, as the kubelet would."""
        created = self.create(pod)
        meta = created["metadata"]
        stamp = now()
        return self.set_status(
            meta["namespace"],
            meta["name"],
            {
                "phase": "Running",
                "startTime": stamp,
                "hostIP": "127.0.0.1",
                "podIP": "10.1.0.1",
                "conditions": [
                    {"type": t, "status": "True", "lastTransitionTime": stamp}
                    for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
                ],
                "containerStatuses": [
                    {
                        "name": c["name"],
                        "image": c["image"],
                        "imageID": "",
                        "ready": True,
                        "restartCount": 0,
                        "started": True,
                        "state": {"running": {"startedAt": stamp}},
                    }
                    for c in created["spec"]["containers"]
                ],
            },
        )

    def succeed(self, namespace: str, name: str) -> dict[str, Any]:
        """Every container exited 0: phase Succeeded (a terminal pod holds no resources)."""
        pod = self.call("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        stamp = now()
        return self.set_status(
            namespace,
            name,
            {
                "phase": "Succeeded",
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "False",
                        "reason": "PodCompleted",
                        "lastTransitionTime": stamp,
                    }
                ],
                "containerStatuses": [
                    {
                        "name": c["name"],
                        "image": c["image"],
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": {
                            "terminated": {
                                "exitCode": 0,
                                "reason": "Completed",
                                "startedAt": stamp,
                                "finishedAt": stamp,
                            }
                        },
                    }
                    for c in pod["spec"]["containers"]
                ],
            },
        )

    def reject(
        self, pod: Mapping[str, Any], resource: str, *, requested: int, used: int, capacity: int
    ) -> dict[str, Any]:
        """Create the pod and fail its admission as a 1.33 kubelet does (seen with the hollow-node kubelet,
        tests/e2e/test_kubelet_victims.py): status phase Failed, reason `OutOf<resource>`, message "Pod was
        rejected: Node didn't have enough resource: ...", startTime; `qosClass` stays (1.24 drops it and
        writes "Pod Node didn't ..."); and a Warning event with the predicate's message."""
        created = self.create(pod)
        meta = created["metadata"]
        reason = (
            f"Node didn't have enough resource: {resource}, requested: {requested}, "
            f"used: {used}, capacity: {capacity}"
        )
        message = f"Pod was rejected: {reason}"
        stamp = now()
        self.call(
            "POST",
            f"/api/v1/namespaces/{meta['namespace']}/events",
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
                "involvedObject": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta["name"],
                    "namespace": meta["namespace"],
                    "uid": meta["uid"],
                },
                "reason": f"OutOf{resource}",
                "message": reason,
                "type": "Warning",
                "source": {"component": "kubelet", "host": pod["spec"].get("nodeName", "")},
                "firstTimestamp": stamp,
                "lastTimestamp": stamp,
                "count": 1,
            },
        )
        return self.set_status(
            meta["namespace"],
            meta["name"],
            {
                "phase": "Failed",
                "reason": f"OutOf{resource}",
                "message": message,
                "startTime": stamp,
            },
        )

    def pods(self, namespace: str) -> list[dict[str, Any]]:
        return self.call("GET", f"/api/v1/namespaces/{namespace}/pods")["items"]

    def finish_terminating(self, namespace: str) -> list[str]:
        """Delete with grace period 0 every pod being deleted (its containers have stopped); returns names.
        Pods held by a finalizer stay (Terminating), as in a real cluster."""
        done = []
        for pod in self.pods(namespace):
            meta = pod["metadata"]
            if meta.get("deletionTimestamp") and not meta.get("finalizers"):
                self.call(
                    "DELETE",
                    f"/api/v1/namespaces/{namespace}/pods/{meta['name']}",
                    {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
                    ok=(200, 404),
                )
                done.append(meta["name"])
        return done

    def drop_finalizers(self, namespace: str) -> None:
        for pod in self.pods(namespace):
            if pod["metadata"].get("finalizers"):
                self.call(
                    "PATCH",
                    f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}",
                    {"metadata": {"finalizers": None}},
                    content_type="application/merge-patch+json",
                )


def pod(
    name: str,
    namespace: str,
    node: str | None,
    *,
    cpu: str | None = None,
    memory: str | None = None,
    priority_class: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    limits: bool = False,
    finalizers: list[str] | None = None,
    owner: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A pod manifest with one container; bound to `node` when given."""
    requests_ = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    resources: dict[str, Any] = {"requests": requests_} if requests_ else {}
    if limits and requests_:
        resources["limits"] = dict(requests_)
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if annotations:
        meta["annotations"] = dict(annotations)
    if finalizers:
        meta["finalizers"] = list(finalizers)
    if owner:
        meta["ownerReferences"] = [dict(owner)]
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9", "resources": resources}],
        "terminationGracePeriodSeconds": 30,
    }
    if node:
        spec["nodeName"] = node
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
