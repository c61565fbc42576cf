"""Evictions by the sidecar: only of pods on the sidecar's own node (the kubelet's NodeRestriction, for us).

The chart's ValidatingAdmissionPolicy limits the sidecar's patches and deletions to pods on its node, but
it cannot check an eviction: the API server admits the Eviction (which names no node), and the deletion
that follows is not admitted again. The webhook can look the pod up, so it decides evictions here, in the
same words as that policy, from the node named in the requester's token (a pod-bound service-account
token carries it, Kubernetes 1.30+) and the node the evicted pod runs on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from webhook.policy.decision import ALLOW, Decision

# The claim the API server adds to the user of a pod-bound service-account token (the pod's node).
NODE_CLAIM = "authentication.kubernetes.io/node-name"
EVICTION = "eviction"


class PodLookupError(RuntimeError):
    """The pod could not be read (API server unreachable, slow, or refusing): the check cannot decide."""


class PodNodes(Protocol):
    """Where a pod runs, read from the cluster at review time."""

    def node_of(self, namespace: str, name: str) -> str | None:
        """The pod's spec.nodeName ("" if not scheduled), None if there is no such pod; raises
        PodLookupError when that cannot be known."""
        ...


def node_claim(extra: Any) -> str:
    """The node in `request.userInfo.extra` (a list of one string); "" for none or anything else."""
    if not isinstance(extra, Mapping):
        return ""
    values = extra.get(NODE_CLAIM)
    if isinstance(values, list) and len(values) == 1 and isinstance(values[0], str):
        return values[0]
    return ""


def _forbidden(message: str) -> Decision:
    return Decision(allowed=False, code=403, reason="Forbidden", message=message)


NO_CLAIM = "the sidecar's token names no node; only the token of a pod bound to a node may change pods"
NO_CLUSTER = (
    "evictions are checked only by a webhook connected to a cluster (--kubeconfig or --in-cluster): "
    "without one the evicted pod's node cannot be known"
)


def decide_eviction(claim: str, namespace: str, name: str, pod_node: str | None) -> Decision:
    """Allow iff the requester's node claim names the node of the evicted pod.

    No claim (a legacy Secret token, a token not bound to a pod) may evict nothing, as the policy says. A
    pod that does not exist is allowed: the eviction itself then fails with 404 NotFound, which is the
    truthful answer, and there is nothing on another node to protect. An unscheduled pod ("") is on no
    node, so on not the sidecar's.
    """
    if not claim:
        return _forbidden(NO_CLAIM)
    if pod_node is None or pod_node == claim:
        return ALLOW
    return _forbidden(
        f"the sidecar of node {claim} may not change pod {namespace}/{name}, which is not on its node"
    )
