"""Generate a large cluster snapshot (what `kubectl get nodes,pods,pdb -A -o json` prints) for `plan`.

    python benchmarks/plan_snapshot.py --out DIR [--nodes 5000] [--pods 150000] [--pdbs 500] [--seed 1]

Writes DIR/cluster.json and DIR/pod.yaml (a high-priority pod that fits no node as it stands, so every
node that passes the static filters is dry-run). Deterministic for a seed. Nodes are nearly full, a few are
tainted or cordoned, pods come from Deployments (shared labels) across namespaces with a mix of
priorities, some with host ports and some nominated but unbound, and PDBs cover some of the apps.
"""

from __future__ import annotations

import argparse
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

PRIORITIES = (0, 0, 0, 100, 1000, 10000, 100000)
CPU_CHOICES = ("100m", "200m", "250m", "500m", "750m", "1")
MEMORY_CHOICES = ("128Mi", "256Mi", "512Mi", "1Gi", "2Gi")
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def node(i: int, rng: random.Random) -> dict[str, Any]:
    name = f"node-{i:05d}"
    spec: dict[str, Any] = {"podCIDR": f"10.{i // 256 % 256}.{i % 256}.0/24"}
    roll = rng.random()
    if roll < 0.03:
        spec["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    elif roll < 0.04:
        spec["unschedulable"] = True
        spec["taints"] = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
    capacity = {"cpu": "16", "memory": "65536Mi", "pods": "110", "ephemeral-storage": "100Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"node-uid-{i}",
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "topology.kubernetes.io/zone": f"zone-{i % 3}",
                "node.kubernetes.io/instance-type": "m5.4xlarge",
            },
            "creationTimestamp": "2025-12-01T00:00:00Z",
        },
        "spec": spec,
        "status": {
            "capacity": dict(capacity),
            "allocatable": {"cpu": "15800m", "memory": "63000Mi", "pods": "110", "ephemeral-storage": "95Gi"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "nodeInfo": {"kubeletVersion": "v1.33.0", "osImage": "Linux"},
        },
    }


def pod(
    i: int, node_name: str, app: int, namespace: str, rng: random.Random, *, nominated: str = ""
) -> dict[str, Any]:
    priority = rng.choice(PRIORITIES)
    container: dict[str, Any] = {
        "name": "app",
        "image": f"registry.example/app-{app}:1.0",
        "resources": {
            "requests": {"cpu": rng.choice(CPU_CHOICES), "memory": rng.choice(MEMORY_CHOICES)},
            "limits": {"memory": "4Gi"},
        },
        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
    }
    if app % 50 == 0:
        container["ports"].append({"containerPort": 9100, "hostPort": 9100, "protocol": "TCP"})
    start = (EPOCH + timedelta(seconds=rng.randrange(30 * 86400))).strftime("%Y-%m-%dT%H:%M:%SZ")
    spec: dict[str, Any] = {
        "containers": [container],
        "priority": priority,
        "preemptionPolicy": "PreemptLowerPriority",
        "schedulerName": "default-scheduler",
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
    }
    if priority:
        spec["priorityClassName"] = f"tier-{priority}"
    status: dict[str, Any] = {"phase": "Running", "qosClass": "Burstable"}
    if node_name:
        spec["nodeName"] = node_name
        status["startTime"] = start
        status["conditions"] = [{"type": "Ready", "status": "True"}]
    else:
        status = {"phase": "Pending", "nominatedNodeName": nominated}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"app-{app}-{i:06d}",
            "namespace": namespace,
            "uid": f"pod-uid-{i}",
            "labels": {"app": f"app-{app}", "pod-template-hash": f"{app:08x}"},
            "creationTimestamp": start,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"app-{app}-rs",
                    "uid": f"rs-{app}",
                    "controller": True,
                }
            ],
        },
        "spec": spec,
        "status": status,
    }


def pdb(i: int, app: int, namespace: str, rng: random.Random) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": f"app-{app}-pdb", "namespace": namespace, "uid": f"pdb-uid-{i}"},
        "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": f"app-{app}"}}},
        "status": {
            "disruptionsAllowed": rng.choice((0, 0, 1, 2, 5)),
            "currentHealthy": 10,
            "desiredHealthy": 5,
            "expectedPods": 10,
            "observedGeneration": 1,
        },
    }


def generate(nodes: int, pods: int, pdbs: int, seed: int = 1) -> dict[str, Any]:
    rng = random.Random(seed)
    apps = max(1, pods // 30)
    namespaces = [f"team-{k:02d}" for k in range(40)]
    items: list[dict[str, Any]] = [node(i, rng) for i in range(nodes)]
    nominated = pods // 1000  # a few pending pods nominated to nodes
    for i in range(pods):
        app = rng.randrange(apps)
        if i < nominated:
            target = f"node-{rng.randrange(nodes):05d}"
            items.append(pod(i, "", app, namespaces[app % 40], rng, nominated=target))
        else:
            items.append(pod(i, f"node-{i % nodes:05d}", app, namespaces[app % 40], rng))
    for i, app in enumerate(rng.sample(range(apps), min(pdbs, apps))):
        items.append(pdb(i, app, namespaces[app % 40], rng))
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


PREEMPTOR = """apiVersion: v1
kind: Pod
metadata:
  name: batch-critical
  namespace: team-00
spec:
  priority: 1000000
  containers:
  - name: main
    image: registry.example/batch:1.0
    resources:
      requests: {cpu: "10", memory: 8Gi}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=150_000)
    parser.add_argument("--pdbs", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "cluster.json", "w") as f:
        json.dump(generate(args.nodes, args.pods, args.pdbs, args.seed), f)
    (args.out / "pod.yaml").write_text(PREEMPTOR)


if __name__ == "__main__":
    main()
