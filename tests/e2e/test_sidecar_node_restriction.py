"""The sidecar's node restriction, enforced by a real kube-apiserver 1.33.

The chart's sidecar RBAC, its ValidatingAdmissionPolicy and the webhook's configurations are rendered by
the Helm engine and applied (the webhook served by the real server, registered by url). A
sidecar pod is bound to node A, and a token of the sidecar's ServiceAccount is requested for that pod
(TokenRequest with a Pod boundObjectRef, as the kubelet does for the projected token): the API server adds
the pod's node to the token, and to the user's extra `authentication.kubernetes.io/node-name`. With that
identity the sidecar may patch and delete pods on node A, not on node B; a token bound to no pod may
change no pod at all. RBAC alone grants all of it cluster-wide: the refusals are the policy's.

Evictions name no node (the API server admits the Eviction, and the deletion that follows is not admitted
again), so the policy cannot check them: the webhook's entry `evictions.priority-webhook.io` does, looking
the pod up. While the webhook is down, the sidecar's evictions wait (failurePolicy Fail).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests

from testkit.cluster_webhook import RegisteredWebhook, ensure_namespace, pod, registered_webhook
from testkit.envtest import ControlPlane
from testkit.wait import wait_for
from tests.e2e.chart_rbac import InstalledRbac, install_rbac, uninstall_rbac

RELEASE = "nr"
NS = "e2e-nr-system"
VICTIMS = "e2e-nr-victims"
NODE_A, NODE_B = "e2e-nr-node-a", "e2e-nr-node-b"
POLICY_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
NOT_ON_NODE = "the sidecar of node {node} may not change pod {ns}/{name}, which is not on its node"
NO_NODE = "the sidecar's token names no node"
EVICTIONS = "evictions.priority-webhook.io"


@dataclass
class Identity:
    cluster: ControlPlane
    token: str

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> requests.Response:
        headers = {"Authorization": f"Bearer {self.token}"}
        if method == "PATCH":
            headers["Content-Type"] = "application/merge-patch+json"
        with requests.Session() as session:
            session.trust_env = False
            return session.request(
                method,
                self.cluster.url + path,
                json=body,
                headers=headers,
                verify=str(self.cluster.ca_file),
                timeout=30,
            )

    def patch(self, name: str) -> requests.Response:
        body = {"metadata": {"annotations": {"e2e.priority-webhook.io/touched": "yes"}}}
        return self.call("PATCH", f"/api/v1/namespaces/{VICTIMS}/pods/{name}", body)

    def delete(self, name: str) -> requests.Response:
        return self.call("DELETE", f"/api/v1/namespaces/{VICTIMS}/pods/{name}", {"gracePeriodSeconds": 0})

    def evict(self, name: str) -> requests.Response:
        eviction = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": VICTIMS},
            "deleteOptions": {"gracePeriodSeconds": 0},
        }
        return self.call("POST", f"/api/v1/namespaces/{VICTIMS}/pods/{name}/eviction", eviction)


@dataclass
class Setup:
    installed: InstalledRbac
    on_node_a: Identity
    unbound: Identity
    webhook: RegisteredWebhook


def bound_pod(name: str, namespace: str, node: str, service_account: str | None = None) -> dict[str, Any]:
    obj = pod(name, namespace)
    obj["spec"]["nodeName"] = node
    if service_account:
        obj["spec"]["serviceAccountName"] = service_account
    return obj


def refused(response: requests.Response, message: str) -> bool:
    return response.status_code == 403 and message in response.json().get("message", "")


@pytest.fixture(scope="module")
def setup(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    cluster = control_plane
    values = {"kubeVersionOverride": cluster.version, "sidecar": {"ignorePdb": True}}
    installed = install_rbac(
        cluster, tmp_path_factory.mktemp("node-restriction"), values, release=RELEASE, namespace=NS
    )
    policy = [o for o in installed.rendered.objects if o["kind"] in POLICY_KINDS]
    try:
        assert sorted(o["kind"] for o in policy) == sorted(POLICY_KINDS)
        account = installed.service_account("sidecar")
        for node in (NODE_A, NODE_B):
            cluster.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
        ensure_namespace(cluster, NS)
        ensure_namespace(cluster, VICTIMS)
        cluster.apply(bound_pod("sidecar", NS, NODE_A, account))
        victims = [
            bound_pod(f"{verb}-{side}", VICTIMS, node)
            for verb in ("patch", "delete", "evict")
            for side, node in (("a", NODE_A), ("b", NODE_B))
        ]
        cluster.apply(*victims)
        bound = cluster.kubectl(
            "create",
            "token",
            account,
            "-n",
            NS,
            "--bound-object-kind=Pod",
            "--bound-object-name=sidecar",
            "--duration=3600s",
        ).stdout.strip()
        unbound = cluster.kubectl("create", "token", account, "-n", NS, "--duration=3600s").stdout.strip()
        on_node_a = Identity(cluster, bound)
        # RBAC lets the sidecar patch any pod: node B's pod is patched until the policy is in force.
        cluster.apply(*policy)
        wait_for(
            lambda: refused(on_node_a.patch("patch-b"), f"the sidecar of node {NODE_A} may not"),
            timeout=60,
            interval=0.5,
            what="the node restriction policy to be enforced",
        )
        with registered_webhook(
            cluster,
            tmp_path_factory.mktemp("node-restriction-webhook"),
            values={"sidecar": {"ignorePdb": True}},
            release=RELEASE,
            namespace=NS,
            workers=1,
        ) as webhook:
            hooks = [h["name"] for c in webhook.configurations for h in c["webhooks"]]
            assert EVICTIONS in hooks
            yield Setup(installed, on_node_a, Identity(cluster, unbound), webhook)
    finally:
        for obj in policy:
            cluster.kubectl(
                "delete", obj["kind"].lower(), obj["metadata"]["name"], "--ignore-not-found", check=False
            )
        for namespace in (VICTIMS, NS):
            cluster.kubectl(
                "delete", "pods", "--all", "-n", namespace, "--grace-period=0", "--force", check=False
            )
            cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
        cluster.kubectl("delete", "node", NODE_A, NODE_B, "--ignore-not-found", check=False)
        uninstall_rbac(installed)


def test_the_token_of_a_pod_names_its_node(setup: Setup) -> None:
    review = setup.on_node_a.call(
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    assert review.status_code == 201, review.text
    user = review.json()["status"]["userInfo"]
    assert user["username"] == setup.installed.user("sidecar")
    assert user["extra"]["authentication.kubernetes.io/node-name"] == [NODE_A]


@pytest.mark.parametrize(
    "action, victim, allowed",
    [
        ("patch", "patch-b", False),
        ("patch", "patch-a", True),
        ("delete", "delete-b", False),
        ("delete", "delete-a", True),
        ("evict", "evict-a", True),
        # An Eviction names no node for the policy: the webhook looks the pod up and refuses.
        ("evict", "evict-b", False),
    ],
)
def test_the_sidecar_of_node_a_changes_only_pods_on_node_a(
    setup: Setup, action: str, victim: str, allowed: bool
) -> None:
    before = setup.webhook.requests("validate")
    response = getattr(setup.on_node_a, action)(victim)
    if action == "evict":  # decided by the webhook, and only evictions are sent to it
        assert setup.webhook.requests("validate") > before
    if allowed:
        assert response.status_code in (200, 201), response.text
    else:
        message = NOT_ON_NODE.format(node=NODE_A, ns=VICTIMS, name=victim)
        assert refused(response, message), response.text


@pytest.mark.parametrize("action", ["patch", "delete", "evict"])
def test_a_token_bound_to_no_pod_changes_no_pod(setup: Setup, action: str) -> None:
    # The pods on node A that the other test may have removed are gone either way: ask for node B's.
    victim = {"patch": "patch-b", "delete": "delete-b", "evict": "patch-b"}[action]
    response = getattr(setup.unbound, action)(victim)
    assert refused(response, NO_NODE), response.text


def test_evictions_of_other_identities_are_not_sent_to_the_webhook(
    setup: Setup, control_plane: ControlPlane
) -> None:
    """The entry matches the sidecar's user only: anyone else's evictions cost no webhook call."""
    control_plane.apply(bound_pod("admin-evict", VICTIMS, NODE_B))
    before = setup.webhook.requests("validate")
    path = f"/api/v1/namespaces/{VICTIMS}/pods/admin-evict/eviction"
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "admin-evict"},
        "deleteOptions": {"gracePeriodSeconds": 0},
    }
    control_plane.kubectl("create", "--raw", path, "-f", "-", input=json.dumps(eviction))
    wait_for(
        lambda: (
            control_plane.kubectl("get", "pod", "admin-evict", "-n", VICTIMS, check=False).returncode != 0
        ),
        timeout=60,
        interval=0.5,
        what="the evicted pod to go",
    )
    assert setup.webhook.requests("validate") == before


def test_while_the_webhook_is_down_the_sidecars_evictions_wait(
    setup: Setup, control_plane: ControlPlane
) -> None:
    control_plane.apply(bound_pod("wait-a", VICTIMS, NODE_A))
    with setup.webhook.down():
        response = setup.on_node_a.evict("wait-a")
        assert response.status_code >= 400 and EVICTIONS in response.text, response.text
    wait_for(
        lambda: setup.on_node_a.evict("wait-a").status_code == 201,
        timeout=60,
        interval=0.5,
        what="the eviction to go through once the webhook is back",
    )
