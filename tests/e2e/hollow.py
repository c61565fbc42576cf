"""End-to-end helpers around a real kubelet (testkit/hollow_node.py): one control plane and one hollow
node per Kubernetes version, pods as the kubelet runs them, and what the kubelet decided, read back from
the API as it writes it on each version.

What the kubelet writes (seen on both versions, see tests/e2e/test_kubelet_victims.py):
* a rejected pod: phase Failed, the predicate's reason (`OutOfcpu`, `NodeAffinity`,
  `UnexpectedAdmissionError`, ...) and its message, prefixed `Pod ` on 1.24 and `Pod was rejected: ` on
  1.33; 1.33 also keeps `qosClass` on it, 1.24 does not.
* a pod preempted for a critical pod: on 1.24 phase Failed, reason `Preempting`, message `Preempted in
  order to admit critical pod`; on 1.33 a `DisruptionTarget` condition (reason `TerminationByKubelet`,
  that message) and, its containers having exited 0 under the fake runtime, phase Succeeded. The object
  stays in the API on both.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from testkit.command_line import victims_answer
from testkit.envtest import ASSETS_ENV, OLDEST_ASSETS_ENV, ControlPlane
from testkit.hollow_node import HollowNode, unavailable
from testkit.wait import wait_for
from tests.e2e.conftest import OLDEST, _require_assets, _track, e2e_required

# The versions every kubelet test runs on, as fixture params: the assets variable of each.
VERSIONS = {"1.33": ASSETS_ENV, "1.24": OLDEST_ASSETS_ENV}
# The same as fixture params: the oldest one marked, so that it is left out where its folder is missing.
VERSION_PARAMS = ["1.33", pytest.param("1.24", marks=OLDEST)]
PREEMPTED_MESSAGE = "Preempted in order to admit critical pod"
WAIT = 60.0


@dataclass
class KubeletEnv:
    """A control plane and the hollow node running against it, of one Kubernetes version."""

    version: str
    plane: ControlPlane
    node: HollowNode

    @property
    def name(self) -> str:
        return self.node.name

    def newer(self) -> bool:
        return self.version != "1.24"

    def rejection_message(self, message: str) -> str:
        """The message the kubelet writes on a pod it rejects, for the predicate's `message`."""
        return f"Pod was rejected: {message}" if self.newer() else f"Pod {message}"


@contextlib.contextmanager
def start_kubelet_env(
    workdir: Path,
    version: str,
    *,
    node_name: str = "hollow-1",
    max_pods: int = 110,
    controller_manager: bool = True,
) -> Iterator[KubeletEnv]:
    """A generator for a module-scoped fixture: the plane and the hollow node of `version`, stopped at the
    end. Missing binaries or a missing kubemark skip the tests (fail them under E2E_REQUIRED=1)."""
    assets = _require_assets(VERSIONS[version])
    with ControlPlane.start(workdir / "plane", assets=assets, controller_manager=controller_manager) as plane:
        reason = unavailable(plane)
        if reason:
            if e2e_required():
                pytest.fail(f"end-to-end tests are required (E2E_REQUIRED=1): {reason}", pytrace=False)
            pytest.skip(f"end-to-end tests need a kubelet: {reason}")
        node = HollowNode.create(plane, workdir / "node", node_name, max_pods=max_pods)
        try:
            yield KubeletEnv(version, plane, node)
        finally:
            node.close()


def track(request: pytest.FixtureRequest, env: KubeletEnv) -> None:
    """The plane's and the kubelet's logs go into this test's report if it fails."""
    _track(request, env.plane)


def pod(
    name: str,
    namespace: str,
    node: str | None,
    *,
    cpu: str | None = None,
    memory: str | None = None,
    guaranteed: bool = False,
    priority: tuple[str, int] | None = None,
    node_selector: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    security_context: Mapping[str, Any] | None = None,
    sidecar_cpu: str | None = None,
) -> dict[str, Any]:
    """One container; requests as given (limits equal to them when `guaranteed`); `priority` is
    (class, value): both are set, as the Priority admission plugin would, so the manifest reads offline."""
    requests_ = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    resources: dict[str, Any] = {"requests": requests_} if requests_ else {}
    if guaranteed:
        resources["limits"] = dict(requests_)
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9", "resources": resources}],
        "terminationGracePeriodSeconds": 0,
        "automountServiceAccountToken": False,
    }
    if node:
        spec["nodeName"] = node
    if priority:
        spec["priorityClassName"], spec["priority"] = priority
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if security_context:
        spec["securityContext"] = dict(security_context)
    if sidecar_cpu:  # a sidecar container (an init container that keeps running: 1.28+)
        spec["initContainers"] = [
            {
                "name": "sidecar",
                "image": "registry.k8s.io/pause:3.9",
                "restartPolicy": "Always",
                "resources": {"requests": {"cpu": sidecar_cpu}},
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": spec,
    }


def victims_live(env: KubeletEnv, manifest: Mapping[str, Any], workdir: Path, *extra: str) -> dict[str, Any]:
    """`priority-webhook victims --node NAME --kubeconfig F --pod FILE`: the node and its pods read live."""
    path = workdir / f"{manifest['metadata']['name']}.json"
    path.write_text(json.dumps(manifest))
    return victims_answer(
        "--node", env.name, "--kubeconfig", str(env.plane.kubeconfig), "--pod", str(path), *extra
    )


def victims_from_kubectl(
    env: KubeletEnv, manifest: Mapping[str, Any], workdir: Path, *extra: str
) -> dict[str, Any]:
    """The same question from `kubectl get -o json` files (the offline form)."""
    (workdir / "node.json").write_text(env.plane.kubectl("get", "node", env.name, "-o", "json").stdout)
    (workdir / "pods.json").write_text(
        env.plane.kubectl(
            "get", "pods", "-A", "--field-selector", f"spec.nodeName={env.name}", "-o", "json"
        ).stdout
    )
    path = workdir / "pod.json"
    path.write_text(json.dumps(manifest))
    return victims_answer(
        "--node", str(workdir / "node.json"), "--pods", str(workdir / "pods.json"), "--pod", str(path), *extra
    )


def pods(env: KubeletEnv, namespace: str) -> dict[str, dict[str, Any]]:
    """The namespace's pods (a plain GET: polled often, where a kubectl process each time would be slow)."""
    response = env.plane.get(f"/api/v1/namespaces/{namespace}/pods")
    response.raise_for_status()
    return {p["metadata"]["name"]: p for p in response.json()["items"]}


def status(p: Mapping[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = p.get("status") or {}
    return found


def was_preempted(p: Mapping[str, Any]) -> bool:
    """The kubelet preempted this pod, as each version writes it (see the module docstring)."""
    st = status(p)
    if st.get("phase") == "Failed" and st.get("reason") == "Preempting":
        return True
    return any(
        c.get("type") == "DisruptionTarget" and c.get("reason") == "TerminationByKubelet"
        for c in st.get("conditions") or ()
    )


def is_running(p: Mapping[str, Any]) -> bool:
    st = status(p)
    return st.get("phase") == "Running" and all(
        "running" in (c.get("state") or {}) for c in st.get("containerStatuses") or ()
    )


def wait_running(env: KubeletEnv, namespace: str, *names: str) -> None:
    """Every named pod Running with its containers running (the kubelet admitted and started it)."""
    wait_for(
        lambda: all(is_running(pods(env, namespace).get(n) or {}) for n in names),
        timeout=WAIT,
        interval=0.2,
        what=f"{', '.join(names)} Running on {env.name}",
    )


def wait_admitted(env: KubeletEnv, namespace: str, name: str) -> None:
    """The kubelet admitted the pod (it wrote its container statuses), whether or not it ever runs."""

    def admitted() -> bool:
        st = status(pods(env, namespace).get(name) or {})
        if st.get("phase") == "Failed":
            raise AssertionError(f"{name} rejected: {st.get('reason')}: {st.get('message')}")
        return bool(st.get("initContainerStatuses") or st.get("containerStatuses"))

    wait_for(admitted, timeout=WAIT, interval=0.2, what=f"{namespace}/{name} admitted on {env.name}")


def wait_decided(env: KubeletEnv, namespace: str, name: str) -> dict[str, Any]:
    """The pod once the kubelet has decided: Running (admitted) or Failed (rejected)."""

    def decided() -> dict[str, Any] | None:
        found = pods(env, namespace).get(name)
        if found and (is_running(found) or status(found).get("phase") == "Failed"):
            return found
        return None

    return wait_for(decided, timeout=WAIT, interval=0.2, what=f"the kubelet's decision on {namespace}/{name}")


def clear_namespace(env: KubeletEnv, namespace: str) -> None:
    """Delete the namespace's pods and wait until the kubelet has let them go, so the next scenario finds
    the node as it was; then the namespace (not waited for)."""
    env.plane.kubectl("delete", "pods", "--all", "-n", namespace, "--wait=false", check=False)
    wait_for(
        lambda: not pods(env, namespace),
        timeout=WAIT,
        interval=0.2,
        what=f"the pods of {namespace} to be gone",
    )
    env.plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
