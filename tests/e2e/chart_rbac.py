"""The chart's own RBAC, rendered by the Helm engine and applied to a real API server.

    installed = install_rbac(cluster, tmp_path, {"sidecar": {"enabled": True}}, release="s1")
    installed.kubeconfig("sidecar")   # a kubeconfig with a token of the sidecar's ServiceAccount

Only the RBAC objects (ServiceAccounts, ClusterRoles, Roles and their bindings) are created; the
workloads are not (no kubelet would run them). Each release name gives its own cluster-scoped names, so
several values combinations live side by side in one cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python as helm

from testkit.chart_rendering import CHART, Rendered, render
from testkit.envtest import ControlPlane

RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


def render_chart(values: dict[str, Any] | None, *, release: str, namespace: str) -> Rendered:
    with helm.Chart.load(CHART) as chart:
        return render(chart, values, namespace=namespace, release=release)


def component_of(obj: dict[str, Any]) -> str:
    return str(obj["metadata"].get("labels", {}).get("app.kubernetes.io/component", ""))


@dataclass
class InstalledRbac:
    cluster: ControlPlane
    rendered: Rendered
    namespace: str
    workdir: Path

    def service_account(self, component: str) -> str:
        found = [
            o["metadata"]["name"]
            for o in self.rendered.of_kind("ServiceAccount")
            if component_of(o) == component
        ]
        assert len(found) == 1, f"one ServiceAccount for {component}, got {found}"
        return found[0]

    def user(self, component: str) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.service_account(component)}"

    def kubeconfig(self, component: str) -> Path:
        name = self.service_account(component)
        return self.cluster.service_account_kubeconfig(
            self.workdir / f"{name}.kubeconfig", self.namespace, name
        )


def install_rbac(
    cluster: ControlPlane, workdir: Path, values: dict[str, Any] | None, *, release: str, namespace: str
) -> InstalledRbac:
    rendered = render_chart(values, release=release, namespace=namespace)
    if cluster.kubectl("get", "namespace", namespace, check=False).returncode != 0:
        cluster.kubectl("create", "namespace", namespace)
    cluster.apply(*[obj for obj in rendered.objects if obj["kind"] in RBAC_KINDS])
    workdir.mkdir(parents=True, exist_ok=True)
    return InstalledRbac(cluster, rendered, namespace, workdir)


def uninstall_rbac(installed: InstalledRbac) -> None:
    for obj in installed.rendered.objects:
        if obj["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            installed.cluster.kubectl(
                "delete", obj["kind"].lower(), obj["metadata"]["name"], "--ignore-not-found", check=False
            )
